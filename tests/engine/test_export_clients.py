"""`export --pi` and `export --tsv` read by the rules of the clients they feed (tests/engine/client_rules.py):
pi-autoresearch's dashboard page and session reader, and karpathy's analysis notebook, on a real
night with every status, a re-measured baseline, a second segment, ASI and a torn line."""

import json
import math

import pytest

from client_rules import NotebookError, PiPageError, notebook, pi_confidence, pi_page, pi_session
from export_night import make_night, tear
from helpers_engine import make  # noqa: F401 (a fixture)

# What each of our statuses must be in pi's four and in karpathy's three.
PI = {"keep": "keep", "discard": "discard", "crash": "crash", "timeout": "crash", "checks_failed": "checks_failed",
      "tampered": "crash"}
TSV = {"keep": "KEEP", "discard": "DISCARD", "crash": "CRASH", "timeout": "DISCARD", "checks_failed": "CRASH",
       "tampered": "CRASH"}


@pytest.fixture(scope="module")
def night(tmp_path_factory):
    repo = make_night(tmp_path_factory.mktemp("night") / "research")
    tear(repo)
    return repo


def _runs(repo):
    """The log's run records, the torn line skipped."""
    out = []
    for line in repo.log_lines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if "run" in record:
            out.append(record)
    return out


def _segment(repo, k):
    return [r for r in _runs(repo) if r.get("segment") == k]


def _code_value(runs, record):
    """A kept run's value as `status` defines it: the median of its code's measurements."""
    values = sorted(r["metric"] for r in runs if r.get("scope_hash") == record.get("scope_hash")
                    and r["metric"] is not None and r["status"] in ("keep", "discard"))
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


def test_the_night_has_every_status_and_a_torn_line(night):
    statuses = {r["status"] for r in _runs(night)}
    assert statuses == {"keep", "discard", "crash", "timeout", "checks_failed"}
    assert any(r.get("repeat_of") for r in _runs(night))
    assert not night.log_lines()[-1].endswith("}")


def test_pi_page_blanks_on_our_raw_log_with_a_torn_line_but_reads_the_export(night):
    raw = (night.root / "autoresearch.jsonl").read_text()
    with pytest.raises(PiPageError):
        pi_page(raw)   # why the README sends pi to the export, never to the log itself
    proc = night.ok("export", "--pi", "-", "--segment", "0")
    assert "skipped malformed line" in proc.stderr
    page = pi_page(proc.stdout)
    assert [r["run"] for r in page["runs"]] == [r["run"] for r in _segment(night, 0)]


@pytest.mark.parametrize("segment", [0, 1])
def test_pi_page_shows_every_run_under_the_right_status(night, segment):
    page = pi_page(night.ok("export", "--pi", "-", "--segment", str(segment)).stdout)
    ours = _segment(night, segment)
    assert page["name"] == "research: lower loss" and page["metricName"] == "loss"
    assert [r["status"] for r in page["runs"]] == [PI[r["status"]] for r in ours]
    for mine, shown in zip(ours, page["runs"]):
        assert shown["drawn"], f"run {mine['run']} is not on pi's chart"
        if mine["metric"] is None:
            assert shown["shown"] == "crash", f"run {mine['run']} without a value shows {shown['shown']}"
        elif mine["status"] == "keep":   # a kept run at its code's value, as status has it
            assert shown["shown"] == f"{_code_value(ours, mine):.2f}"
        else:
            assert shown["shown"] == f"{mine['metric']:.2f}"
        conf = shown["confidence"]
        assert conf is None or conf >= 0, "pi's confidence is never negative"


def test_pi_baseline_is_the_baseline_code_value_not_its_first_measurement(night):
    """pi takes the first run's value as the baseline: the export puts the baseline's value there
    (the median of its three measurements, 1.00), as the TSV and `status` have it, not the first
    measurement (1.02). Its page's best is the best value of any run, so the failed check's 0.50
    shows there; the export says so, and pi's widget (kept runs only) has the best, 0.90."""
    ours = _segment(night, 0)
    assert [r["metric"] for r in ours[:3]] == [1.02, 1.00, 0.99]
    proc = night.ok("export", "--pi", "-", "--segment", "0")
    page, session = pi_page(proc.stdout), pi_session(proc.stdout)
    nb = notebook(night.ok("export", "--tsv", "-", "--as-val-bpb", "--segment", "0").stdout)
    assert page["baseline"] == nb["baseline"] == 1.00
    kept = [r["metric"] for r in session["results"] if r["status"] == "keep"]
    assert min(kept) == nb["best"] == 0.90 and page["best"] == 0.50
    failed = next(r for r in ours if r["status"] == "checks_failed")
    assert f"it will show run {failed['run']} (0.5, which failed its checks), where the best is run" in proc.stderr


def test_pi_confidence_is_best_over_baseline_in_segment_mads(night):
    """The last run's confidence is |best - baseline| / MAD of the segment's values, with the
    baseline and best of `status`; pi's own widget computes the same from the export."""
    text = night.ok("export", "--pi", "-").stdout
    status = night.status()
    values = [r["metric"] for r in _segment(night, 1) if r["metric"] is not None]
    centre = sorted(values)[len(values) // 2]
    mad = sorted(abs(v - centre) for v in values)[len(values) // 2]
    expected = abs(status["best"]["metric"] - status["baseline"]["metric"]) / mad
    last = pi_page(text)["runs"][-1]
    assert last["confidence"] == pytest.approx(expected, abs=1e-3) and last["confidence_shown"] == f"{expected:.1f}×"
    assert pi_confidence(pi_session(text)) == pytest.approx(expected, abs=1e-3)
    seg0 = night.ok("export", "--pi", "-", "--segment", "0").stdout
    # segment 0: baseline median(1.00, 1.02, 0.99) = 1.00, best 0.90, MAD of all seven values 0.05
    assert pi_page(seg0)["runs"][-1]["confidence"] == pytest.approx(2.0)
    assert pi_confidence(pi_session(seg0)) == pytest.approx(2.0)


def test_pi_session_reader_sees_our_statuses_and_only_secondary_metrics(night):
    text = night.ok("export", "--pi", "-", "--segment", "0").stdout
    session = pi_session(text)
    ours = _segment(night, 0)
    assert [r["status"] for r in session["results"]] == [PI[r["status"]] for r in ours]
    assert session["secondary"] == ["peak_vram_mb", "tok_per_s"], "the primary metric is not a secondary one"
    # our raw log, read as pi would: a timeout reads as a keep (jsonl.ts's default), which is why we export
    raw = pi_session((night.root / "autoresearch.jsonl").read_text())
    timeout = next(r for r in ours if r["status"] == "timeout")
    assert next(r for r in raw["results"] if r["run"] == timeout["run"])["status"] == "keep"


def test_pi_asi_columns_carry_the_reason_and_the_hypothesis(night):
    page = pi_page(night.ok("export", "--pi", "-", "--segment", "0").stdout)
    by_run = {r["run"]: r for r in page["runs"]}
    ours = {r["run"]: r for r in _segment(night, 0)}
    crash = next(n for n, r in ours.items() if r["status"] == "crash")
    assert by_run[crash]["asi"]["hypothesis"] == "a 3x MLP" and by_run[crash]["asi"]["rollback_reason"]
    keep = next(n for n, r in ours.items() if r["description"] == "halve the batch")
    assert by_run[keep]["asi"] == {"hypothesis": "more optimizer steps in the budget", "next_action_hint": "try 4x"}


def test_pi_export_to_a_file_where_pi_looks(night):
    rc, data = night.json("export", "--pi", ".auto/log.jsonl")
    target = night.root / ".auto" / "log.jsonl"
    assert rc == 0 and data["path"] == str(target) and data["format"] == "pi"
    assert pi_page(target.read_text())["runs"]
    assert "warnings" in data and any("skipped malformed line" in w for w in data["warnings"])


@pytest.mark.parametrize("segment", [0, 1])
def test_notebook_gives_the_best_and_keep_rate_of_status(night, segment):
    text = night.ok("export", "--tsv", "-", "--as-val-bpb", "--segment", str(segment)).stdout
    nb = notebook(text)
    ours = _segment(night, segment)
    assert [r["status"] for r in nb["rows"]] == [TSV[r["status"]] for r in ours]
    if segment == 1:
        status = night.status()
        assert nb["best"] == pytest.approx(status["best"]["metric"])
        assert nb["baseline"] == pytest.approx(status["baseline"]["metric"])
        assert nb["keep_rate"] == pytest.approx(status["keep_rate"])
    else:   # segment 0 as `status` had it before the second init: baseline 1.00 (median of 3), best 0.90
        assert (nb["baseline"], nb["best"]) == (pytest.approx(1.0), pytest.approx(0.9))
        assert nb["keep_rate"] == pytest.approx(2 / 7)   # 2 kept; 4 discarded and 1 timeout
    best = nb["best"]
    for mine, row in zip(ours, nb["rows"]):
        if mine["status"] not in ("keep", "discard"):   # a failed run never shows as a better value
            assert row["status"] == "CRASH" or math.isnan(row["val_bpb"]), row
            assert row not in nb["plotted"]
    assert all(r["val_bpb"] >= best for r in nb["rows"] if not math.isnan(r["val_bpb"]) and r["status"] != "CRASH")


def test_notebook_needs_val_bpb_and_the_export_says_so(night):
    proc = night.ok("export", "--tsv", "-")
    with pytest.raises(NotebookError, match="val_bpb"):
        notebook(proc.stdout)
    assert "--as-val-bpb" in proc.stderr and "KeyError" in proc.stderr
    rc, data = night.json("export", "--tsv", "-")
    assert rc == 0 and any("--as-val-bpb" in w for w in data["warnings"])


def test_higher_is_better_is_refused_as_val_bpb_and_warned_otherwise(make):
    repo = make("--direction", "higher")
    repo.experiment("1.0", "baseline")
    repo.experiment("2.0", "better")
    rc, data = repo.json("export", "--tsv", "-", "--as-val-bpb")
    assert rc == 3 and "lowest value as the best" in data["message"]
    proc = repo.ok("export", "--tsv", "-")
    assert "higher-is-better" in proc.stderr


def test_export_refuses_a_folder_and_a_missing_folder_and_leaves_nothing(night):
    before = sorted(p.name for p in night.root.iterdir())
    for target in ("no/such/dir/out.tsv", "."):
        rc, data = night.json("export", "--tsv", target)
        assert rc == 2 and data["error"] == "usage", data
    assert sorted(p.name for p in night.root.iterdir()) == before


def test_a_tampered_run_and_an_unknown_status_are_crashes_for_both_clients():
    """The engine's `tampered` (a harness changed under the run) and any status a later version
    adds: never `keep` for pi's reader, never a value in the notebook."""
    from autoresearch.views import export
    config = {"type": "config", "name": "x", "metricName": "val_bpb", "bestDirection": "lower"}
    runs = [{"run": 1, "status": "keep", "metric": 1.0, "commit": "a" * 40, "scope_hash": "a"},
            {"run": 2, "status": "tampered", "metric": 0.2, "commit": "b" * 40, "scope_hash": "b",
             "reason": "prepare.py changed during the run"},
            {"run": 3, "status": "something_new", "metric": 0.3, "commit": "c" * 40, "scope_hash": "c"}]
    from autoresearch.store import log
    config, runs = log.Config.from_json(config), [log.Run.from_json(r) for r in runs]
    text = export.pi_log(config, runs)
    page, session = pi_page(text), pi_session(text)
    assert [r["status"] for r in page["runs"]] == ["keep", "crash", "crash"]
    assert [r["status"] for r in session["results"]] == ["keep", "crash", "crash"]
    assert [r["shown"] for r in page["runs"]] == ["1.00", "crash", "crash"]
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[2]["autoresearch_status"] == "tampered" and lines[2]["asi"]["rollback_reason"]
    nb = notebook(export.tsv(config, runs))
    assert [r["status"] for r in nb["rows"]] == ["KEEP", "CRASH", "CRASH"] and nb["best"] == 1.0


def test_pi_confidence_matches_a_direct_computation_on_a_long_night():
    """The incremental MAD (selection in two sorted runs) equals the median of the deviations."""
    import random
    from statistics import median
    from autoresearch.views import export
    rng = random.Random(7)
    runs, best = [], 1.0
    for n in range(1, 400):
        value = round(rng.gauss(best, 0.01), 4)
        status = "keep" if value < best - 0.015 or n == 1 else rng.choice(["discard", "discard", "crash"])
        best = value if status == "keep" else best
        runs.append({"run": n, "status": status, "metric": None if status == "crash" else value,
                     "scope_hash": f"h{n}"})
    from autoresearch.store import log
    got = export.pi_confidences([log.Run.from_json(r) for r in runs])
    for i in (10, 57, 200, 398):
        values = [r["metric"] for r in runs[:i + 1] if r["metric"] is not None]
        mad = median(abs(v - median(values)) for v in values)
        kept = [r["metric"] for r in runs[:i + 1] if r["status"] == "keep"]
        expected = None if len(kept) < 2 else round(abs(kept[-1] - kept[0]) / mad, 3)
        assert got[i] == expected


def test_pi_export_warns_when_pi_will_read_another_baseline():
    """pi's baseline is the first run line: a crash before the baseline makes it 0 there (its page
    then shows no improvement), and a segment without a keep has none; the export says both."""
    from autoresearch.store import log
    from autoresearch.views import export
    config = log.Config.from_json({"type": "config", "name": "x", "metricName": "loss", "bestDirection": "lower"})
    runs = [log.Run.from_json(r) for r in (
        {"run": 1, "status": "crash", "metric": None, "commit": "a" * 40, "scope_hash": "a"},
        {"run": 2, "status": "keep", "metric": 1.0, "commit": "b" * 40, "scope_hash": "b"},
        {"run": 3, "status": "keep", "metric": 0.9, "commit": "c" * 40, "scope_hash": "c"})]
    notes = []
    page = pi_page(export.pi_log(config, runs, notes=notes))
    assert page["baseline"] == 0 and page["best"] == 0.9
    assert notes == ["pi takes the first run's value as the baseline, but the first 1 run(s) come before the "
                     "baseline (run 2): pi's baseline will read 0 and its improvement nothing"]
    notes = []
    export.pi_log(config, runs[:1], notes=notes)
    assert notes == ["no run of this segment was kept yet: pi takes the first run's value as the baseline"]
