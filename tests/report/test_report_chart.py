"""The progress chart shows every run (headless Chromium): in-range runs as points of their
status, off-scale runs as edge markers with their value, runs without a value as crosses in a
lane above the plot (apart from the value axis); no
failure in green; runs per hour only over a span where it means something."""

import html
import json

import pytest
from conftest import run_cli
from report_browser import dump_dom, root_attributes, screenshot

START = 1_795_986_000_000


def _night(root, spread_s=600):
    """A night near 0.182 with one 10x outlier (a discard at 2.07), a crash and a timeout
    without values, and a failed check whose value is below the best."""
    lines = [{"type": "config", "name": "outlier night", "metricName": "val_bpb", "metricUnit": "bpb",
              "bestDirection": "lower"}]
    plan = [("keep", 0.1820), ("discard", 0.1825), ("keep", 0.1810), ("discard", 2.07), ("crash", None),
            ("discard", 0.1818), ("timeout", None), ("checks_failed", 0.0900), ("keep", 0.1801),
            ("discard", 0.1830), ("discard", 0.1812), ("keep", 0.1795)]
    for n, (status, metric) in enumerate(plan, start=1):
        lines.append({"run": n, "commit": f"{n:07x}", "metric": metric,
                      "metrics": {"val_bpb": metric} if metric is not None else {}, "status": status,
                      "description": f"idea {n}", "timestamp": START + n * spread_s * 1000, "segment": 0,
                      "confidence": None, "asi": {}})
    (root / "autoresearch.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (root / ".autoresearch").mkdir(exist_ok=True)
    return plan


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    root = tmp_path_factory.mktemp("chart")
    plan = _night(root)
    proc = run_cli(["report", "-o", "page.html"], cwd=root)
    assert proc.returncode == 0, proc.stderr
    return root, plan


def test_every_run_is_drawn_and_the_outlier_sits_on_the_edge(page, tmp_path):
    root, plan = page
    dom, console = dump_dom((root / "page.html").as_uri(), tmp_path / "profile")
    attrs = root_attributes(dom)
    assert json.loads(html.unescape(attrs["data-errors"])) == [] and console == []
    marks = json.loads(html.unescape(attrs["data-progress-marks"]))
    assert [m[0] for m in marks] == list(range(1, len(plan) + 1)), "a run is missing from the chart"
    kinds = {m[0]: m[2] for m in marks}
    assert kinds[4] == "above"                       # 2.07, off the scale: a marker on the top edge
    assert kinds[5] == kinds[7] == "failed lane"     # crash and timeout: crosses in the lane above the plot
    assert kinds[8] == "below"                       # a failed check's 0.09 is not a result: not in the range
    assert all(kinds[n] == "point" for n in kinds if n not in (4, 5, 7, 8))
    assert int(attrs["data-progress-points"]) == sum(1 for k in kinds.values() if k == "point")
    assert attrs["data-progress-drawn"] == str(len(plan))
    # the legend names each status with its count
    for label in ("kept (4)", "discarded (5)", "crash (1)", "timeout (1)", "checks failed (1)"):
        assert label in dom, label


def test_a_failed_run_is_never_green_and_a_short_night_has_no_rate(page, tmp_path):
    root, _ = page
    dom, _ = dump_dom((root / "page.html").as_uri(), tmp_path / "profile")
    row = dom[dom.index('<tr data-run="8"'):]
    row = row[:row.index("</tr>")]
    assert "checks_failed" in row and 'class="better"' not in row   # 0.09 is lower, but not a result
    # 12 runs 10 minutes apart span 1.8 h: a rate; the same runs 1 s apart do not
    assert "over 1.8 h" in dom
    short = tmp_path / "short"
    short.mkdir()
    _night(short, spread_s=1)
    assert run_cli(["report", "-o", "page.html"], cwd=short).returncode == 0
    dom, _ = dump_dom((short / "page.html").as_uri(), tmp_path / "profile2")
    assert "too short for a rate" in dom and "over 0.0 h" not in dom


def test_screenshot_at_1400_px(page, tmp_path):
    root, _ = page
    width, height, console = screenshot((root / "page.html").as_uri(), tmp_path / "profile",
                                        tmp_path / "chart.png", size=(1400, 1100))
    assert (width, height) == (1400, 1100) and console == []
