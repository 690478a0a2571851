"""One night, one story: every view tells the same baseline, best, change, counts and streaks.

A real night made by the real engine (real git, real benchmark and checks processes): a first
segment, then a second one whose baseline is measured three times, then a keep, worse runs, a
crash, a failed check and a timeout. `status --json` is the truth; `status`, `brief`,
`report --json`'s "status", the page's header read in headless Chromium, serve's data and the
TSV must all say the same.
"""

import json
import re
import sys
import urllib.request

import pytest
from conftest import ROOT, run_cli
from report_browser import Page
from report_fixture import serving
from gitrepo import git_repo

BENCH = r"""#!/bin/bash
read -r v mode < value.txt
case "$v" in
  crash) echo "Traceback (most recent call last):" >&2; echo "RuntimeError: boom" >&2; exit 1 ;;
  hang) sleep 60 ;;
esac
# measurement noise: a few thousandths, different from run to run (the night's baseline, runs
# 4 to 6, measures 1.502, 1.500, 1.501: its value, the median, is not its first measurement)
off=$(( (AUTORESEARCH_RUN + 1) % 3 ))
awk -v v="$v" -v o="$off" 'BEGIN { printf "METRIC loss=%.4f\n", v + o * 0.001 }'
"""
CHECK = """#!/bin/bash
read -r v mode < value.txt
[ "$mode" != "badcheck" ] || { echo "check failed: $mode" >&2; exit 1; }
"""


def cli(root, *args, timeout=120):
    proc = run_cli(list(args), cwd=root, timeout=timeout)
    assert proc.returncode == 0, f"{args}: {proc.stdout}\n{proc.stderr}"
    return proc


def experiment(root, value, message, *extra):
    (root / "value.txt").write_text(f"{value}\n")
    return json.loads(cli(root, "run", "-q", "--json", "-m", message, *extra).stdout)


@pytest.fixture(scope="module")
def night(tmp_path_factory):
    root = tmp_path_factory.mktemp("story")
    git_repo(root, {"bench.sh": BENCH, "check.sh": CHECK, "value.txt": "2.0\n"})
    init = ["init", "--metric", "loss", "--command", "bash bench.sh", "--scope", "value.txt",
            "--fixed", "bench.sh", "check.sh", "--checks", "bash check.sh", "--timeout", "3"]
    # segment 0: a short first attempt
    cli(root, *init, "--name", "first attempt")
    experiment(root, "2.0", "first baseline")
    experiment(root, "1.5", "first win")
    experiment(root, "1.7", "first loss")
    # segment 1: the night itself, its baseline measured three times
    cli(root, *init, "--name", "the night", "--noise-runs", "3")
    experiment(root, "1.5", "baseline")
    experiment(root, "1.2", "a real win")
    experiment(root, "1.3", "worse")
    experiment(root, "1.6", "much worse")
    experiment(root, "crash", "break it")
    experiment(root, "1.1 badcheck", "wins but fails its check")
    last = experiment(root, "hang", "hangs")
    (root.parent / f"{root.name}-last-run.json").write_text(json.dumps(last))   # run --json, kept aside
    status = json.loads(cli(root, "status", "--json").stdout)
    return root, status


def test_the_night_is_what_the_engine_did(night):
    _, s = night
    assert s["segment"] == 1 and s["runs"] == 9 and s["total_runs"] == 12
    assert s["counts"] == {"keep": 2, "discard": 4, "crash": 1, "timeout": 1, "checks_failed": 1, "tampered": 0}
    assert s["remeasurements"] == 2 and s["noise"]["samples"] == 3
    # the baseline is the median of its three measurements, the best the incumbent's value
    assert s["baseline"]["metric"] == pytest.approx(1.501) and s["best"]["description"] == "a real win"
    assert s["change"]["word"] == "better"
    assert s["change"]["percent"] == pytest.approx((s["baseline"]["metric"] - s["best"]["metric"])
                                                   / s["baseline"]["metric"] * 100)
    assert s["change"]["text"] == f"{s['change']['percent']:.2f}% better than the baseline"
    assert s["confidence"] > 10
    # five ideas since the keep; the two re-measurements of the baseline are not ideas
    assert (s["consecutive_non_keeps"], s["longest_non_keeps"]) == (5, 5)


def test_status_text_says_the_same(night):
    root, s = night
    text = cli(root, "status").stdout
    b, best = s["baseline"], s["best"]
    assert f"baseline: run {b['run']} ({b['commit']}) {b['metric']:.6g}" in text
    assert f"best: run {best['run']} ({best['commit']}) {best['metric']:.6g} ({s['change']['text']}, " \
           f"confidence {s['confidence']:.2f} sigma)" in text
    c = s["counts"]
    assert f"keep {c['keep']}, discard {c['discard']}, crash {c['crash']}, timeout {c['timeout']}, " \
           f"checks_failed {c['checks_failed']}" in text
    assert f"consecutive non-keeps: {s['consecutive_non_keeps']} (longest {s['longest_non_keeps']})" in text


def test_brief_says_the_same(night):
    root, s = night
    text = cli(root, "brief").stdout
    b, best = s["baseline"], s["best"]
    assert f"Best: run {best['run']} {best['metric']:.6g} ({s['change']['text']}, " in text
    assert f"Baseline: run {b['run']} {b['metric']:.6g}." in text
    assert f"Consecutive non-keeps: {s['consecutive_non_keeps']}." in text
    assert json.loads(cli(root, "brief", "--json").stdout)["state"] == s


def test_report_json_carries_the_very_status_object(night):
    root, s = night
    out = json.loads(cli(root, "report", "-o", "night.html", "--json").stdout)
    assert out["status"] == s
    seg = out["segments"][-1]
    assert (seg["baseline"], seg["best"], seg["baselineRun"], seg["bestRun"], seg["kept"]) == (
        s["baseline"]["metric"], s["best"]["metric"], s["baseline"]["run"], s["best"]["run"], s["counts"]["keep"])
    assert seg["change"] == s["change"] and seg["gainPct"] == s["change"]["percent"]
    assert (out["summary"]["currentNoKeep"], out["summary"]["longestNoKeep"]) == (
        s["consecutive_non_keeps"], s["longest_non_keeps"])
    # the running best: the baseline's value (one value per code) until the keep, then the incumbent's
    night_runs = [r for r in report_model(root)["runs"] if r["segment"] == 1]
    assert [r["running_best"] for r in night_runs] == pytest.approx([1.501] * 3 + [1.202] * 6)
    assert s["best"]["metric"] == pytest.approx(1.202)


def report_model(root):
    page = (root / "night.html").read_text(encoding="utf-8")
    data = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S).group(1)
    return json.loads(data)["model"]


def header_cards(page):
    return page.evaluate("Array.from(document.querySelectorAll('#summary .card[data-key]')).reduce("
                         "function (o, c) { o[c.getAttribute('data-key')] = [c.querySelector('.v').textContent,"
                         " (c.querySelector('.s') || {}).textContent || '', c.className]; return o; }, {})")


def check_header(cards, s):
    value, sub, cls = cards["baseline-best"]
    assert value == f"{s['baseline']['metric']:.6g} → {s['best']['metric']:.6g}" or \
        value == f"{_fmt(s['baseline']['metric'])} → {_fmt(s['best']['metric'])}"
    assert sub == f"{s['change']['text']} · baseline run #{s['baseline']['run']} · best run #{s['best']['run']}"
    assert "good" in cls
    c = s["counts"]
    failed = c["crash"] + c["timeout"] + c["checks_failed"]
    assert cards["counts"][1] == (f"{c['keep']} kept, {c['discard']} discarded, {failed} crashed, "
                                  "timed out or failed checks")
    assert cards["runs"][0] == str(s["runs"])
    assert cards["streaks"][0] == f"{s['longest_non_keeps']} runs"
    assert cards["streaks"][1] == f"current streak {s['consecutive_non_keeps']}"


def _fmt(value):
    """The page's own number format (report.js fmt) for these values."""
    return f"{value:.6g}"


def test_page_header_in_chromium_says_the_same(night, tmp_path):
    root, s = night
    cli(root, "report", "-o", "night.html")
    page = Page((root / "night.html").as_uri(), tmp_path / "profile")
    try:
        page.wait_for("document.documentElement.getAttribute('data-ready') === '1'")
        check_header(header_cards(page), s)
        assert page.evaluate("document.documentElement.getAttribute('data-errors')") == "[]"
    finally:
        page.close()


def test_serve_data_and_live_header_say_the_same(night, tmp_path):
    root, s = night
    err_path = tmp_path / "serve.err"
    with serving(root, err_path) as port:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/model", timeout=10) as res:
            model = json.loads(res.read())["model"]
        assert model["status"] == s
        page = Page(f"http://127.0.0.1:{port}/", tmp_path / "profile")
        try:
            page.wait_for("!!document.querySelector('#summary .card[data-key=\"baseline-best\"]')")
            check_header(header_cards(page), s)
        finally:
            page.close()


def test_the_tsv_says_the_same(night):
    root, s = night
    rows = [line.split("\t") for line in cli(root, "export", "--tsv", "-").stdout.splitlines()[1:]]
    assert len(rows) == s["runs"]
    kept = [r for r in rows if r[3] == "keep"]
    assert [r[0] for r in kept] == [s["baseline"]["commit"], s["best"]["commit"]]
    # a kept row carries its code's value: the baseline's is the median of its three measurements
    assert float(kept[0][1]) == pytest.approx(s["baseline"]["metric"])
    assert float(kept[1][1]) == pytest.approx(s["best"]["metric"])
    assert len([r for r in rows if f"(re-measurement of run {s['baseline']['run']})" in r[4]]) == s["remeasurements"]
    # no failed run reads as a value better than the best
    failed = [r for r in rows if r[4].startswith(("break it", "wins but fails its check", "hangs"))]
    assert len(failed) == s["counts"]["crash"] + s["counts"]["timeout"] + s["counts"]["checks_failed"]
    assert all(r[3] != "keep" and (r[1] in ("", "0.000000") or float(r[1]) >= s["best"]["metric"]) for r in failed)
    # the streak: the ideas after the last keep
    after = rows[rows.index(kept[-1]) + 1:]
    assert len([r for r in after if "(re-measurement of run" not in r[4]]) == s["consecutive_non_keeps"]


def _api(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as res:
        return json.loads(res.read())


def test_every_view_gives_one_baseline_best_and_counts(night, tmp_path):
    """status --json, report --json, export --pi (read by pi's page and session rules),
    export --tsv (read by karpathy's notebook rules) and serve's api/model, api/runs and
    api/run/N: one baseline (the median of its three measurements, not the first one), one
    best, one set of counts."""
    sys.path.insert(0, str(ROOT / "tests" / "engine"))
    from client_rules import notebook, pi_page, pi_session
    root, s = night
    base, best, counts = s["baseline"], s["best"], s["counts"]
    log = [json.loads(line) for line in (root / "autoresearch.jsonl").read_text().splitlines()]
    first = next(r for r in log if r.get("run") == base["run"])
    assert first["metric"] == pytest.approx(1.502) and base["metric"] == pytest.approx(1.501)
    crashed = counts["crash"] + counts["timeout"] + counts["tampered"]   # pi's crash
    assert json.loads((root.parent / f"{root.name}-last-run.json").read_text())["best"] == best   # run --json

    report = json.loads(cli(root, "report", "-o", "night.html", "--json").stdout)
    seg = report["segments"][-1]
    assert report["status"] == s
    assert (seg["baseline"], seg["best"], seg["counts"]) == (base["metric"], best["metric"], counts)

    proc = cli(root, "export", "--pi", "-")
    page, session = pi_page(proc.stdout), pi_session(proc.stdout)
    assert page["baseline"] == base["metric"] and page["kept"] == counts["keep"]
    kept = [r["metric"] for r in session["results"] if r["status"] == "keep"]
    assert (kept[0], min(kept)) == (base["metric"], best["metric"])   # pi's widget: baseline, best kept
    by_status = {k: sum(1 for r in session["results"] if r["status"] == k)
                 for k in ("keep", "discard", "crash", "checks_failed")}
    assert by_status == {"keep": counts["keep"], "discard": counts["discard"], "crash": crashed,
                         "checks_failed": counts["checks_failed"]}
    # pi's page takes the best value of any run: the failed check's 1.1 is better, and the export says so
    failed = next(r for r in log if r.get("status") == "checks_failed" and r.get("segment") == s["segment"])
    assert page["best"] == failed["metric"] and f"it will show run {failed['run']}" in proc.stderr

    nb = notebook(cli(root, "export", "--tsv", "-", "--as-val-bpb").stdout)
    assert (nb["baseline"], nb["best"], nb["keep_rate"]) == (pytest.approx(base["metric"]),
                                                             pytest.approx(best["metric"]), s["keep_rate"])
    assert nb["counts"] == {"KEEP": counts["keep"], "DISCARD": counts["discard"] + counts["timeout"],
                            "CRASH": counts["crash"] + counts["checks_failed"] + counts["tampered"]}

    with serving(root, tmp_path / "serve.err") as port:
        model = _api(port, "/api/model")["model"]
        seg = model["segments"][-1]
        assert model["status"] == s
        assert (seg["baseline"], seg["best"], seg["baselineRun"], seg["bestRun"], seg["counts"]) == (
            base["metric"], best["metric"], base["run"], best["run"], counts)
        rows = _api(port, f"/api/runs?offset=0&limit={model['runTotal']}")["runs"]
        mine = [r for r in rows if r["segment"] == s["segment"]]
        assert {k: sum(1 for r in mine if r["status"] == k) for k in counts} == counts
        assert mine[-1]["running_best"] == best["metric"]
        for point in (base, best):
            row = _api(port, f"/api/run/{point['run']}")["row"]
            assert (row["run"], row["commit"]) == (point["run"], point["commit"])
