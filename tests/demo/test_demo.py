"""The README's first command, end to end: `autoresearch demo` on this machine's CPU.

One real run of the demo (template, offline data, baseline, three scripted experiments
through the real engine, report), then checks of what a newcomer would look at.
"""

import json
import subprocess
import sys
from pathlib import Path

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
    statuses = [r["status"] for r in runs]
    # baseline, the halved batch (a large, reliable gain), the starved learning rates, the crash
    assert statuses == ["keep", "keep", "discard", "crash"], [(r["status"], r.get("reason")) for r in runs]
    crash = [r for r in runs if r["status"] == "crash"]
    assert len(crash) == 1
    diagnosis = crash[0]["diagnosis"]
    assert diagnosis["family"] == "CONFIG_INVALID" and diagnosis["fix"]
    # The fix is valid for the smoke config: the device batch divides the total batch.
    fixed_batch = diagnosis["fix"]["DEVICE_BATCH_SIZE"]
    assert (target / ".autoresearch" / "runs" / str(crash[0]["run"]) / "diagnosis.json").is_file()
    assert 2048 % (fixed_batch * 256) == 0
    # Every run's commit is kept under its ref; HEAD is back at the best (the baseline or a win).
    for r in runs:
        ref = subprocess.run(["git", "rev-parse", "--short=7", f"refs/autoresearch/runs/{r['run']}"], cwd=target,
                             capture_output=True, text=True)
        assert ref.stdout.strip() == r["commit"]
    kept = [r for r in runs if r["status"] == "keep"]
    head = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], cwd=target, capture_output=True, text=True)
    assert head.stdout.strip() == kept[-1]["commit"]


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
    assert int(attrs.get("data-progress-drawn", "0")) == 4
    assert not [line for line in console if "Uncaught" in line or "Error" in line]


def test_demo_refuses_to_overwrite_a_folder_without_force(tmp_path):
    target = tmp_path / "busy"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    proc = run_cli(["demo", "--dir", str(target), "--profile", "smoke"], cwd=tmp_path)
    assert proc.returncode == 3
    assert "--force" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert (target / "notes.txt").read_text() == "mine"
