"""The README's first command, end to end: `autoresearch demo` on this machine's CPU.

One real run of the demo (template, offline data, baseline, three scripted experiments
through the real engine, report), then checks of what a newcomer would look at.
"""

import json
import re
import subprocess
import sys

import pytest

from conftest import ROOT, engine_env, run_cli

sys.path.insert(0, str(ROOT / "tests" / "report"))
from report_browser import dump_dom, root_attributes  # noqa: E402


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    target = tmp_path_factory.mktemp("demo") / "autoresearch-demo"
    proc = subprocess.run([sys.executable, "-m", "autoresearch", "demo", "--dir", str(target), "--profile", "smoke"],
                          cwd=target.parent, env=engine_env(), capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return target, proc


def runs_of(target):
    lines = (target / "autoresearch.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if "run" in r]


def test_demo_log_holds_a_keep_a_discard_and_a_diagnosed_crash(demo):
    target, _ = demo
    runs = runs_of(target)
    by_description = {r["description"]: r for r in runs if not r.get("repeat_of")}
    # the poor baseline, measured twice (noise), then the three scripted experiments
    assert len(runs) == 5 and runs[0]["status"] == "keep" and runs[1]["repeat_of"] == runs[0]["run"]
    assert runs[0]["description"] == "baseline with every learning rate 100x too small"
    # The repair of the poor setting is a real keep on any machine: it wins by many noise widths.
    win = by_description["repair the learning rates (back to the template's)"]
    assert win["status"] == "keep" and win["threshold"] is not None
    assert win["best_before"] - win["metric"] > 10 * win["threshold"]
    assert by_description["cut every learning rate 10x"]["status"] == "discard"
    crash = [r for r in runs if r["status"] == "crash"]
    assert len(crash) == 1
    diagnosis = crash[0]["diagnosis"]
    assert diagnosis["family"] == "CONFIG_INVALID" and diagnosis["fix"]
    # The fix is valid for the smoke config: the device batch divides the total batch.
    fixed_batch = diagnosis["fix"]["DEVICE_BATCH_SIZE"]
    assert (target / ".autoresearch" / "runs" / str(crash[0]["run"]) / "diagnosis.json").is_file()
    assert 4096 % (fixed_batch * 256) == 0 and fixed_batch < 7
    # Every run's commit is kept under its ref; HEAD is back at the best (the repair).
    for r in runs:
        ref = subprocess.run(["git", "rev-parse", "--short=7", f"refs/autoresearch/runs/{r['run']}"], cwd=target,
                             capture_output=True, text=True)
        assert ref.stdout.strip() == r["commit"]
    head = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], cwd=target, capture_output=True, text=True)
    assert head.stdout.strip() == win["commit"]


def test_diagnose_by_number_equals_the_recorded_diagnosis_for_every_crash(demo):
    target, _ = demo
    crashes = [r for r in runs_of(target) if r["status"] == "crash"]
    assert crashes
    for r in crashes:
        proc = run_cli(["diagnose", str(r["run"]), "--json"], cwd=target,
                       env={"AUTORESEARCH_CACHE": str(target / ".cache")})
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout) == r["diagnosis"]


def test_demo_prints_each_verdict_right_after_its_run_in_under_80_lines(demo):
    _, proc = demo
    lines = proc.stderr.splitlines()
    after_setup = lines[next(i for i, line in enumerate(lines) if line.startswith("== demo 3/")):]
    assert len(after_setup) < 80, proc.stderr
    assert "uv " not in proc.stderr and "step 0" not in proc.stderr   # no uv hint, no per-step lines
    verdicts = [m.group(1) for m in map(re.compile(r"^  (run \d+): [A-Z]").match, after_setup) if m]
    assert verdicts == ["run 1", "run 2", "run 3", "run 4", "run 5"]
    keep = next(line for line in after_setup if line.startswith("  run 3: KEEP"))
    assert "better than the best" in keep and "confidence" in keep


def test_demo_says_where_the_report_is_and_that_numbers_are_a_smoke_run(demo):
    target, proc = demo
    assert f"report: {target / 'report.html'}" in proc.stderr
    assert "smoke" in proc.stderr


def test_demo_report_opens_in_headless_chromium(demo, tmp_path):
    target, _ = demo
    dom, console = dump_dom((target / "report.html").as_uri(), tmp_path / "profile")
    attrs = root_attributes(dom)
    assert attrs.get("data-ready") == "1"
    assert json.loads(attrs.get("data-errors", "[]").replace("&quot;", '"')) == []
    assert int(attrs.get("data-progress-drawn", "0")) == 5
    assert not [line for line in console if "Uncaught" in line or "Error" in line]
    # what a newcomer must be able to read off the page: the baseline is the median of its two
    # measurements (so run 1's dot sits off the line), and one real experiment was discarded
    text = " ".join(re.sub(r"<[^>]+>", " ", dom).split())
    assert "baseline = median of 2 measurements (runs 1, 2)" in text
    assert "2 kept, 1 discarded, 1 failed of 4 experiments · 1 re-measurement of kept code not counted" in text


def test_demo_refuses_to_overwrite_a_folder_without_force(tmp_path):
    target = tmp_path / "busy"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    proc = run_cli(["demo", "--dir", str(target), "--profile", "smoke"], cwd=tmp_path)
    assert proc.returncode == 3
    assert "--force" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert (target / "notes.txt").read_text() == "mine"
