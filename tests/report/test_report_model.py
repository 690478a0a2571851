"""What the report computes and reads, and how it refuses bad input (no browser needed)."""

import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from conftest import SRC, run_cli

from autoresearch.views import report
from gitrepo import git_repo

HOUR_MS = 3_600_000


def write_log(root, records, extra_lines=()):
    lines = [json.dumps(r) for r in records] + list(extra_lines)
    (root / "autoresearch.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def config(**kw):
    return {"type": "config", "name": "night", "metricName": "val_bpb", "metricUnit": "bpb",
            "bestDirection": "lower", **kw}


def run(n, status, metric, **kw):
    return {"run": n, "commit": f"c{n:06d}", "status": status, "metric": metric,
            "description": f"idea {n}", "timestamp": n * HOUR_MS // 2, **kw}


def model_of(root):
    return report.build_model(root, Path("autoresearch.jsonl"), warn=lambda m: None)


def test_summary_numbers_match_a_hand_computed_night(tmp_path):
    write_log(tmp_path, [
        config(),
        run(1, "keep", 1.000, duration_s=300),
        run(2, "discard", 1.010, duration_s=300),
        run(3, "keep", 0.990, duration_s=300),
        run(4, "crash", None, duration_s=60),
        run(5, "discard", 0.995, duration_s=300),
        run(6, "timeout", None, duration_s=600),
        run(7, "keep", 0.980, duration_s=300),
    ])
    m = model_of(tmp_path)
    seg = m["segments"][0]
    assert (seg["baseline"], seg["best"], seg["bestRun"], seg["kept"]) == (1.0, 0.98, 7, 3)
    assert seg["gainPct"] == pytest.approx(2.0)
    s = m["summary"]
    assert s["counts"] == {"keep": 3, "discard": 2, "crash": 1, "timeout": 1}
    assert s["failed"] == 2
    assert s["runsPerHour"] == pytest.approx(2.0)          # 7 runs, 6 gaps of half an hour
    assert s["gpuHours"] == pytest.approx(2160 / 3600)
    assert (s["longestNoKeep"], s["currentNoKeep"]) == (3, 0)
    by_run = {r["run"]: r for r in m["runs"]}
    assert by_run[2]["delta_pct"] == pytest.approx(1.0)     # 1.010 against the best then, 1.000
    assert by_run[5]["delta_pct"] == pytest.approx(0.5 / 0.99)
    assert by_run[6]["running_best"] == 0.99 and by_run[7]["running_best"] == 0.98


def test_the_best_is_the_incumbent_value_even_when_a_re_measurement_moves_it_back(tmp_path):
    # the engine keeps a re-measurement of the best code; its `value` is the median of both draws
    write_log(tmp_path, [
        config(),
        run(1, "keep", 1.000),
        run(2, "keep", 0.980, value=0.980),
        run(3, "keep", 0.990, value=0.985, repeat_of=2, best_before=0.980),
        run(4, "discard", 0.986, best_before=0.985),
    ])
    m = model_of(tmp_path)
    # one value per code: run 2's code is worth the median of both its draws from run 2 on
    assert [r["running_best"] for r in m["runs"]] == [1.0, 0.985, 0.985, 0.985]
    seg = m["segments"][0]
    # the best run is the incumbent, the run that introduced the code (as `status` says), and
    # its value is the median of that code's measurements
    assert (seg["best"], seg["bestRun"]) == (0.985, 2)
    assert seg["gainPct"] == pytest.approx(1.5)
    assert m["runs"][3]["delta_pct"] == pytest.approx(0.001 / 0.985 * 100)


def test_higher_is_better_and_a_new_segment_restarts_the_baseline(tmp_path):
    write_log(tmp_path, [
        config(bestDirection="higher"), run(1, "keep", 50.0), run(2, "keep", 55.0), run(3, "discard", 54.0),
        config(bestDirection="higher", name="after the driver update"), run(4, "keep", 60.0), run(5, "discard", 59.0),
    ])
    m = model_of(tmp_path)
    assert [s["gainPct"] for s in m["segments"]] == [pytest.approx(10.0), 0.0]
    assert m["segments"][1]["baseline"] == 60.0
    assert [r["segment"] for r in m["runs"]] == [0, 0, 0, 1, 1]
    assert m["runs"][3]["best_then"] is None and m["runs"][3]["delta_pct"] is None
    assert m["title"] == "after the driver update"
    lo, hi = m["yRange"]
    assert lo < 50.0 and hi > 60.0


def test_invalid_records_are_skipped_and_hostile_values_made_safe(tmp_path):
    # The log reader (autoresearch.store.log.read) skips records that are not valid runs, with a
    # warning, so the report counts exactly what status, brief and export count.
    write_log(tmp_path, [
        config(),
        {"run": 1},                                               # no status: skipped
        {"run": "two", "status": "keep"},                         # unusable number: skipped
        {"run": 3, "status": "keep", "metric": "NaN-ish"},        # metric not a number: skipped
        {"run": 5, "status": "keep", "metric": 1.0, "asi": {"x": [1, None]}, "description": ["a", 1]},
    ], extra_lines=['{"run": 4, "metric": NaN, "status": "keep"}'])
    warnings = []
    m = report.build_model(tmp_path, Path("autoresearch.jsonl"), warn=warnings.append)
    assert [r["run"] for r in m["runs"]] == [5]
    assert m["runs"][0]["description"] == '["a", 1]'
    assert sum("skipped" in w for w in warnings) == 4 and any("not a whole number" in w for w in warnings)
    json.dumps(m, allow_nan=False)                             # embeddable as strict JSON


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                    | st.text(alphabet=st.sampled_from("<>&/!-'\"\u2028\u2029\\ascript") | st.characters()),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=20))
def test_safe_json_cannot_break_out_of_its_script_element(value):
    text = report.safe_json(value)
    for raw in "<>&\u2028\u2029":
        assert raw not in text
    assert json.loads(text) == value


def test_steps_are_thinned_keep_first_and_last_and_survive_torn_lines(tmp_path):
    path = tmp_path / "steps.jsonl"
    rows = [json.dumps({"step": i, "elapsed_s": i * 0.3, "loss": 5 - i / 1000, "energy_j": i * 10.0})
            for i in range(1000)]
    path.write_text("\n".join(rows) + '\n{"step": 1000, "loss": 4.', encoding="utf-8")   # torn last line
    steps = report.read_steps(str(tmp_path), 120)
    assert steps["total"] == 1000
    assert len(steps["cols"]["step"]) <= 120
    assert steps["cols"]["step"][0] == 0 and steps["cols"]["step"][-1] == 999
    assert "mfu" not in steps["cols"]                          # keys nobody logged are left out
    e = report.energy(steps, kwh_price=0.5)
    assert e["joules"] == 9990.0 and e["cost"] == pytest.approx(9990 / 3.6e6 * 0.5)


def test_nan_loss_is_reported_at_its_step(tmp_path):
    path = tmp_path / "steps.jsonl"
    path.write_text('{"step": 0, "loss": 3.0}\n{"step": 1, "loss": NaN}\n', encoding="utf-8")
    steps = report.read_steps(str(tmp_path), 100)
    assert steps["lossNonFiniteAt"] == 1 and steps["cols"]["loss"] == [3.0, None]


def test_power_without_energy_counter_is_integrated(tmp_path):
    path = tmp_path / "steps.jsonl"
    path.write_text("".join(json.dumps({"step": i, "elapsed_s": float(i), "power_w": 300.0}) + "\n" for i in range(11)))
    e = report.energy(report.read_steps(str(tmp_path), 100), kwh_price=0.3)
    assert e["joules"] == pytest.approx(3000.0) and e["avgPowerW"] == 300.0


def test_output_tail_drops_the_cut_line_and_keeps_the_end(tmp_path):
    path = tmp_path / "output.log"
    path.write_text("".join(f"line {i:06d} " + "x" * 100 + "\n" for i in range(5000)) + "Traceback: boom\n")
    tail = report.read_tail(str(tmp_path))
    lines = tail.split("\n")
    assert lines[-2] == "Traceback: boom" and lines[-1] == ""
    assert len(lines) <= report.TAIL_LINES
    assert all(line.startswith(("line", "Traceback")) for line in lines[:-1])


def test_run_dir_outside_the_repo_is_ignored(tmp_path):
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "output.log").write_text("secret token\n")
    repo = tmp_path / "repo"
    (repo / ".autoresearch" / "runs" / "1").mkdir(parents=True)
    (repo / ".autoresearch" / "runs" / "1" / "output.log").write_text("the real output\n")
    write_log(repo, [config(), run(1, "keep", 1.0, run_dir="../secret")])
    m = model_of(repo)
    details = report.all_details(repo, m, 100)
    assert details["1"]["tail"].strip() == "the real output"


def git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def test_diff_comes_from_the_run_ref_when_diff_patch_is_missing(tmp_path):
    git_repo(tmp_path, {"train.py": "DEPTH = 8\nMATRIX_LR = 0.04\n"}, message="baseline")
    git(tmp_path, "update-ref", "refs/autoresearch/runs/1", "HEAD")
    (tmp_path / "train.py").write_text("DEPTH = 10\nMATRIX_LR = 0.04\n")
    git(tmp_path, "commit", "-qam", "deeper")
    git(tmp_path, "update-ref", "refs/autoresearch/runs/2", "HEAD")
    git(tmp_path, "reset", "-q", "--hard", "HEAD~1")              # discarded, but the ref keeps it
    (tmp_path / ".autoresearch" / "runs" / "3").mkdir(parents=True)
    (tmp_path / ".autoresearch" / "runs" / "3" / "diff.patch").write_text("+from diff.patch\n")
    write_log(tmp_path, [config(), run(1, "keep", 1.0), run(2, "discard", 1.01), run(3, "discard", 1.02)])
    details = report.all_details(tmp_path, model_of(tmp_path), 100)
    assert "-DEPTH = 8\n+DEPTH = 10" in details["2"]["diff"]
    assert "+DEPTH = 8" in details["1"]["diff"]                  # the root commit diffs against nothing
    assert details["3"]["diff"] == "+from diff.patch\n"
    assert report.run_details(tmp_path, model_of(tmp_path)["runs"][1], 100)["diff"] == details["2"]["diff"]


def test_missing_log_is_refused_and_nothing_is_written(tmp_path):
    proc = run_cli(["report", "-o", "r.html"], cwd=tmp_path)
    assert proc.returncode == 3
    assert "autoresearch init" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("args, message", [
    (["-o", "nope/r.html"], "folder nope does not exist"),
    (["-o", "ok.html", "--png", "nope/p.png"], "folder nope does not exist"),
    (["-o", "."], "is a folder"),
])
def test_bad_output_paths_are_usage_errors_and_nothing_is_written(tmp_path, args, message):
    write_log(tmp_path, [config(), run(1, "keep", 1.0)])
    before = sorted(p.name for p in tmp_path.iterdir())
    proc = run_cli(["report", *args], cwd=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_json_summary_for_the_agent(tmp_path):
    write_log(tmp_path, [config(), run(1, "keep", 1.0, duration_s=300), run(2, "keep", 0.95, duration_s=300)],
              extra_lines=["{torn"])
    proc = run_cli(["report", "-o", "r.html", "--json"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)   # stdout is exactly one JSON object
    assert out["output"] == "r.html" and out["runs"] == 2 and out["warnings"] == 1
    assert out["best"]["best"] == 0.95 and out["best"]["gainPct"] == pytest.approx(5.0)
    assert out["summary"]["gpuHours"] == pytest.approx(600 / 3600)


def test_default_output_sits_next_to_the_log_and_an_empty_night_is_fine(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    write_log(repo, [config()])
    proc = run_cli(["report", "--log", "repo/autoresearch.jsonl"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / ".autoresearch").exists()
    page = (repo / ".autoresearch" / "report.html").read_text(encoding="utf-8")
    assert "(0 runs" in proc.stderr and '"runs":[]' in page


def test_png_without_matplotlib_says_how_to_install_it_and_writes_nothing(tmp_path):
    write_log(tmp_path, [config(), run(1, "keep", 1.0)])
    blocker = tmp_path / "block"
    (blocker / "matplotlib").mkdir(parents=True)
    (blocker / "matplotlib" / "__init__.py").write_text("raise ImportError('blocked for the test')\n")
    env = {"PYTHONPATH": os.pathsep.join([str(blocker), str(SRC)])}
    proc = run_cli(["report", "-o", "r.html", "--png", "p.png"], cwd=tmp_path, env=env)
    assert proc.returncode == 3
    assert "pip install matplotlib" in proc.stderr
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "p.png").exists()


def test_kwh_price_must_be_a_number(tmp_path):
    write_log(tmp_path, [config(), run(1, "keep", 1.0)])
    proc = run_cli(["report", "--kwh-price", "nan"], cwd=tmp_path)
    assert proc.returncode == 2 and "--kwh-price" in proc.stderr


def test_a_huge_diff_is_cut_and_says_where_the_rest_is(tmp_path):
    folder = tmp_path / ".autoresearch" / "runs" / "1"
    folder.mkdir(parents=True)
    (folder / "diff.patch").write_text("+" + "x" * (report.DIFF_MAX_CHARS * 2))
    write_log(tmp_path, [config(), run(1, "keep", 1.0)])
    d = report.all_details(tmp_path, model_of(tmp_path), 100)["1"]
    assert len(d["diff"]) == report.DIFF_MAX_CHARS
    assert d["diffTruncated"] == "git show refs/autoresearch/runs/1"


def test_re_measurements_of_the_best_code_move_the_running_best_like_status_does(tmp_path):
    # --noise-runs 2: the baseline measured 1.0 then 1.1; the engine's value of that code is 1.05.
    # A later forced re-run of an older, non-incumbent code must not move the best.
    write_log(tmp_path, [
        config(),
        run(1, "keep", 1.0, value=1.0),
        run(2, "discard", 1.1, value=1.05, repeat_of=1),
        run(3, "discard", 1.2, value=1.2),
        run(4, "discard", 1.3, value=1.25, repeat_of=3),
    ])
    m = model_of(tmp_path)
    # one value per code, the one status reports: the baseline's line starts at 1.05, no step up
    assert [r["running_best"] for r in m["runs"]] == [1.05, 1.05, 1.05, 1.05]
    assert m["segments"][0]["best"] == 1.05


def test_report_dash_output_writes_the_page_to_stdout_and_no_file(tmp_path):
    write_log(tmp_path, [config(), run(1, "keep", 1.0)])
    proc = run_cli(["report", "-o", "-"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("<!doctype html>") and proc.stdout.rstrip().endswith("</html>")
    assert not (tmp_path / "-").exists() and not (tmp_path / ".autoresearch" / "report.html").exists()
    both = run_cli(["report", "-o", "-", "--json"], cwd=tmp_path)
    assert both.returncode == 2 and json.loads(both.stdout)["error"] == "usage"


def test_a_mistyped_log_path_is_refused_and_the_real_report_kept(tmp_path):
    write_log(tmp_path, [config(), run(1, "keep", 1.0)])
    assert run_cli(["report"], cwd=tmp_path).returncode == 0
    page = (tmp_path / ".autoresearch" / "report.html").read_bytes()
    proc = run_cli(["report", "--log", "nope.jsonl"], cwd=tmp_path)
    assert proc.returncode == 3 and "nope.jsonl" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert (tmp_path / ".autoresearch" / "report.html").read_bytes() == page


def test_a_second_header_before_the_first_run_leaves_an_empty_first_segment(tmp_path):
    """`init` twice before any run: the fixture's night with its segment change at run 1 (it
    used to stop on an unbound level there) reads as an empty segment 0, then the night."""
    import report_fixture
    facts = report_fixture.make_repo(tmp_path, n_runs=6, segment_at=1, malformed=False, hostile=False)
    model = model_of(tmp_path)
    first, night = model["segments"]
    assert (first["runs"], first["baseline"], first["best"]) == (0, None, None)
    assert night["runs"] == facts["runs"] == 6 and night["baselineRun"] == 1
