"""Huge finite metric values through a real engine night: nothing overflows to inf/NaN, nothing
breaks, nothing measured is dropped.

A real benchmark prints 2e306, 1e308, 1e-300 and -1e308 (measured twice as the baseline, so
the median of two -1e308 is taken) next to ordinary values; run, status (text and --json),
brief, report (page and --json), serve on loopback and both exports must all work, every JSON
they produce must be strict (no NaN/Infinity), and the progress chart must draw 2e306 next to
0.18 as an off-scale marker on its edge.
"""

import html
import json
import re
import subprocess
import sys
import urllib.request

import pytest
from conftest import require_tool, run_cli
from report_browser import dump_dom, root_attributes
from report_fixture import serving
from gitrepo import git_repo

BENCH = "#!/bin/bash\necho \"training with $(cat value.txt)\"\necho \"METRIC loss=$(cat value.txt)\"\n"
FLOAT_MAX = sys.float_info.max
SEGMENT_0 = [("-1e308", ()), ("-1e308", ("--baseline",)), ("2e306", ()), ("1e-300", ()), ("0.18", ()),
             ("1e308", ())]
ORDINARY = [("0.182", ()), ("0.181", ()), ("2e306", ()), ("0.1795", ()), ("0.18", ())]
SEGMENT_1 = [("0.182", ()), ("0.181", ()), ("2e306", ()), ("1e-300", ()), ("0.1795", ())]


def strict(text):
    """json.loads that refuses NaN, Infinity and -Infinity (what browsers and jq refuse)."""
    def refuse(token):
        raise ValueError(f"non-finite JSON token {token}")
    return json.loads(text, parse_constant=refuse)


def cli(root, *args):
    proc = run_cli(list(args), cwd=root)
    assert proc.returncode == 0, f"{args}: rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def git(root, *args):
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def make_repo(root):
    git_repo(root, {"bench.sh": BENCH, "value.txt": "1.0\n"})
    cli(root, *INIT)


INIT = ("init", "--metric", "loss", "--command", "bash bench.sh", "--scope", "value.txt", "--fixed", "bench.sh")


def measure(root, plan):
    for value, extra in plan:
        (root / "value.txt").write_text(value + "\n")
        data = strict(cli(root, "run", "-q", "-m", f"value {value}", *extra, "--json").stdout)
        assert data["record"]["metric"] == float(value)


@pytest.fixture(scope="module")
def night(tmp_path_factory):
    root = tmp_path_factory.mktemp("huge")
    make_repo(root)
    measure(root, SEGMENT_0)
    first = strict(cli(root, "status", "--json").stdout)
    cli(root, *INIT)       # a second segment: ordinary values with huge ones among them
    measure(root, SEGMENT_1)
    return root, first


def test_the_log_stays_strict_json_and_keeps_every_measurement(night):
    root, _ = night
    runs = [r for r in map(strict, (root / "autoresearch.jsonl").read_text().splitlines()) if "run" in r]
    assert [r["metric"] for r in runs] == [float(v) for v, _ in SEGMENT_0 + SEGMENT_1]
    for r in runs:   # what the rule computed and wrote is finite too
        for key in ("confidence", "best_before", "threshold", "gain"):
            value = r.get(key, r.get("asi", {}).get(key))
            assert value is None or isinstance(value, (int, float)) and abs(value) <= FLOAT_MAX
        assert "inf" not in json.dumps(r.get("asi", {})).lower()


def test_the_median_of_two_minus_1e308_is_minus_1e308(night):
    _, first = night
    assert first["baseline"]["metric"] == first["best"]["metric"] == -1e308
    assert first["noise_measured"] and first["noise"]["mad"] == 0 and first["counts"]["keep"] == 1
    # 1e308 is worse than -1e308 by more than the largest float: the gap is clamped, still "worse"
    assert first["runs"] == len(SEGMENT_0)


def test_status_brief_and_report_json(night):
    root, _ = night
    status = strict(cli(root, "status", "--json").stdout)
    assert status["best"]["metric"] == 1e-300 and status["baseline"]["metric"] == 0.182
    change = status["change"]
    # 0.182 -> 1e-300 is a finite change of 100%; nothing in the object is non-finite
    assert change["word"] == "better" and change["percent"] == pytest.approx(100.0)
    for args in (("status",), ("brief",)):
        out = cli(root, *args).stdout
        assert "2e+306" in out and not re.search(r"\b(inf|nan)\b", out, re.I), out
    report = strict(cli(root, "report", "--json").stdout)
    assert report["runs"] == len(SEGMENT_0) + len(SEGMENT_1)


def chart_marks(page, tmp_path):
    """{run: how the progress chart drew it} from headless Chromium, with no page error."""
    require_tool("/usr/bin/chromium", "apt-get install chromium")
    dom, console = dump_dom(page.as_uri(), tmp_path / "profile")
    attrs = root_attributes(dom)
    assert json.loads(html.unescape(attrs["data-errors"])) == [] and console == []
    marks = {m[0]: m[2] for m in json.loads(html.unescape(attrs["data-progress-marks"]))}
    assert attrs["data-progress-drawn"] == str(len(marks))
    return marks


def test_2e306_next_to_0_18_is_drawn_on_the_chart_edge(tmp_path):
    root = tmp_path / "ordinary"
    root.mkdir()
    make_repo(root)
    measure(root, ORDINARY)
    cli(root, "report", "-o", "page.html")
    marks = chart_marks(root / "page.html", tmp_path)
    assert marks == {1: "point", 2: "point", 3: "above", 4: "point", 5: "point"}


def test_the_report_page_embeds_strict_json_and_the_chart_draws_every_run(night, tmp_path):
    root, _ = night
    cli(root, "report", "-o", "page.html")
    text = (root / "page.html").read_text()
    data = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', text, re.S).group(1)
    model = strict(data)["model"]
    metrics = [r["metric"] for r in model["runs"]]
    assert metrics == [float(v) for v, _ in SEGMENT_0 + SEGMENT_1]
    assert all(r["delta_pct"] is None or abs(r["delta_pct"]) <= FLOAT_MAX for r in model["runs"])
    lo, hi = model["yRange"]
    assert hi - lo <= FLOAT_MAX          # a span JavaScript can divide by (not Infinity)
    marks = chart_marks(root / "page.html", tmp_path)
    assert sorted(marks) == [r["run"] for r in model["runs"]], "a run is missing from the chart"
    assert marks[6] == "above"           # 1e308 above a range that holds the kept -1e308


def test_serve_sends_strict_json(night, tmp_path):
    root, _ = night
    err_path = tmp_path / "serve.err"
    with serving(root, err_path) as port:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/model", timeout=10) as res:
            model = strict(res.read().decode("utf-8"))["model"]
        assert [r["metric"] for r in model["runs"]][-len(SEGMENT_1):] == [float(v) for v, _ in SEGMENT_1]


def test_exports_keep_every_value_exactly(night):
    root, _ = night
    for index, plan in ((0, SEGMENT_0), (1, SEGMENT_1)):
        tsv = cli(root, "export", "--tsv", "-", "--segment", str(index)).stdout
        rows = [line.split("\t") for line in tsv.splitlines()[1:]]
        shown = [float(r[1]) for r in rows]
        # a discard shows its own value; a kept row its code's value (the median of its measurements)
        assert [v for v, r in zip(shown, rows) if r[3] == "discard"] == \
            [float(v) for (v, _), r in zip(plan, rows) if r[3] == "discard"]
        assert float("1e-300") in shown and 2e306 in shown
        pi = cli(root, "export", "--pi", "-", "--segment", str(index)).stdout
        records = [strict(line) for line in pi.splitlines()]
        assert [r["metric"] for r in records if "run" in r] == [float(v) for v, _ in plan]


def test_the_rule_arithmetic_never_leaves_the_finite_floats():
    from autoresearch.decision import decide
    assert decide.median([-1e308, -1e308]) == -1e308 and decide.median([1e308, 1.7e308]) == 1.35e308
    assert decide.median([5e-324, 5e-324]) == 5e-324          # tiny values keep their value too
    stats = decide.noise_of([[-1e308, 1e308], [1.0, 1.0]], decide.Rules(z=2.0))
    assert all(abs(stats[k]) <= FLOAT_MAX for k in ("threshold", "mad", "sigma"))
    assert decide.gain("lower", -1e308, 1e308) == -FLOAT_MAX   # worse, by more than a float holds
    assert decide.gain("higher", -1e308, 1e308) == FLOAT_MAX
    assert decide.confidence(1.0, 5e-324) == FLOAT_MAX
    assert decide.percent(1e10, 1e-300) is None and decide.percent(1.0, 0) is None
    assert decide.percent(-0.5, 2.0) == -25.0


def test_early_abort_reads_huge_training_losses_without_overflow():
    from autoresearch.pipeline import earlyabort
    high, low = earlyabort.Curve(), earlyabort.Curve()
    for i in range(1, 11):
        high.add({"progress": i / 10, "loss": 1.7e308})
        low.add({"progress": i / 10, "loss": -1.7e308})
    assert high.smoothed(0.5) == 1.7e308                      # a mean of huge losses is finite
    assert earlyabort.spread([[high, low]]) == FLOAT_MAX     # statistics.stdev alone overflows
    assert earlyabort.spread([[high, high], [low, low]]) == 0.0
    reference = earlyabort.Reference(1, low, earlyabort.spread([[high, low]]))
    assert earlyabort.replay(high, reference) is None         # behind by more than a float: no verdict
