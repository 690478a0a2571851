"""The chart and the counts say what the decision used, in real headless Chromium.

A night made by the real engine, shaped like the demo's: a baseline measured three times whose
first measurement is the lowest (so run 1's dot sits below the baseline's value, the median), an
experiment kept, one discarded, one crash, and no agent (no Claude Code tokens). A person reading
the page must see why run 1 is below the line (it is one of the baseline's measurements; the
line is their median, with the noise band), how many real experiments were discarded (the
re-measurements are shown as such and left out of the rates), the crash apart from the value axis
(not at the bottom edge, where the best values of a lower-is-better metric are), no empty cost
chart, and the baseline's label whole. The screenshot is kept (REPORT_SHOT=path) to be looked at.
"""

import json
import os
import re
import shutil
import subprocess

import pytest
from conftest import run_cli
from report_browser import dump_dom, root_attributes, screenshot

BENCH = """#!/bin/bash
read -r v < value.txt
[ "$v" != crash ] || { echo "RuntimeError: boom" >&2; exit 1; }
# the baseline's three measurements: 2.000, 2.010, 2.020 (run 1 lowest; median 2.010)
if [ "$v" = base ]; then v=$(awk -v r="$AUTORESEARCH_RUN" 'BEGIN { printf "%.3f", 2.0 + (r - 1) * 0.01 }'); fi
echo "METRIC loss=$v"
"""


def cli(root, *args):
    done = run_cli(list(args), cwd=root)
    assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def night(tmp_path_factory):
    root = tmp_path_factory.mktemp("reads-right")
    for args in (["init", "-q"], ["config", "user.name", "Test"], ["config", "user.email", "t@example.com"]):
        subprocess.run(["git", *args], cwd=root, check=True)
    (root / "bench.sh").write_text(BENCH)
    (root / "value.txt").write_text("base\n")
    subprocess.run(["git", "add", "."], cwd=root, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "start"], cwd=root, check=True)
    cli(root, "init", "--metric", "loss", "--command", "bash bench.sh", "--scope", "value.txt", "--fixed", "bench.sh",
        "--timeout", "5", "--noise-runs", "3")
    cli(root, "run", "-q", "-m", "baseline")
    for value, message in (("1.5", "a real win"), ("1.9", "worse"), ("crash", "break it")):
        (root / "value.txt").write_text(value + "\n")
        cli(root, "run", "-q", "-m", message)
    status = json.loads(cli(root, "status", "--json").stdout)
    cli(root, "report", "-o", "night.html")
    return root, status


def test_the_night_is_the_demos_shape(night):
    _, s = night
    assert s["counts"]["keep"] == 2 and s["counts"]["discard"] == 3 and s["counts"]["crash"] == 1
    assert s["remeasurements"] == 2
    assert s["baseline"]["run"] == 1 and s["baseline"]["metric"] == pytest.approx(2.01)
    # what the rates count: the experiments (the baseline's re-measurements are not ones)
    e = s["experiments"]
    assert (e["runs"], e["keep"], e["discard"], e["failed"], e["remeasurements"]) == (4, 2, 1, 1, 2)
    assert e["keep_rate"] == pytest.approx(2 / 3)
    assert s["keep_rate"] == pytest.approx(2 / 5)   # karpathy's notebook's rate (the export's contract) stays


def test_the_counts_in_every_view_come_from_the_summary(night):
    root, s = night
    text = cli(root, "status").stdout
    assert "experiments: 2 kept, 1 discarded, 1 failed; 2 re-measurements of kept code (noise samples, " \
           "not counted)" in text
    brief = cli(root, "brief").stdout
    assert "experiments: 2 kept, 1 discarded, 1 failed; 2 re-measurements of kept code" in brief


@pytest.fixture(scope="module")
def page(night, tmp_path_factory):
    root, _ = night
    profile = tmp_path_factory.mktemp("chromium")
    dom, console = dump_dom((root / "night.html").as_uri(), profile / "dom")
    shot = root / "night.png"
    screenshot((root / "night.html").as_uri(), profile / "shot", shot, size=(1300, 1400))
    if os.environ.get("REPORT_SHOT"):
        shutil.copy(shot, os.environ["REPORT_SHOT"])
    return dom, console, root_attributes(dom)


def test_the_page_ran_without_errors(page):
    dom, console, attrs = page
    assert attrs.get("data-ready") == "1" and attrs.get("data-errors") in (None, "[]")
    assert not [line for line in console if "rror" in line]


def test_the_baseline_is_drawn_as_its_measurements_and_their_median(page, night):
    _, _, attrs = page
    _, s = night
    base = json.loads(attrs["data-progress-baseline"].replace("&quot;", '"'))
    assert base["runs"] == [1, 2, 3]
    assert base["values"] == pytest.approx([2.0, 2.01, 2.02])
    assert base["median"] == pytest.approx(s["baseline"]["metric"])
    assert base["band"] == pytest.approx([2.01 - s["threshold"], 2.01 + s["threshold"]])
    marks = {m[0]: m for m in json.loads(attrs["data-progress-marks"].replace("&quot;", '"'))}
    assert marks[1][2] == "baseline measurement" and marks[2][2] == "baseline measurement"
    assert marks[3][2] == "baseline measurement"


def test_the_page_says_why_run_1_is_below_the_line(page):
    dom, _, _ = page
    legend = re.sub(r"<[^>]+>", " ", dom[dom.index('id="progress"'):dom.index('id="hover"')])
    legend = " ".join(legend.split())
    assert "baseline = median of 3 measurements (runs 1, 2, 3)" in legend
    assert "re-measurement" in legend


def test_the_rates_leave_re_measurements_out(page):
    dom, _, _ = page
    card = dom[dom.index('data-key="counts"'):]
    card = " ".join(re.sub(r"<[^>]+>", " ", card[:card.index("</div></div>") + 12]).split())
    assert "2 kept, 1 discarded, 1 failed of 4 experiments" in card, card
    assert "2 re-measurements of kept code not counted" in card, card
    assert "50% / 25% / 25%" in card, card


def test_failed_runs_are_drawn_apart_from_the_value_axis(page):
    _, _, attrs = page
    marks = {m[0]: m for m in json.loads(attrs["data-progress-marks"].replace("&quot;", '"'))}
    assert marks[6][1:] == ["crash", "failed lane"]
    lane = json.loads(attrs["data-progress-lane"].replace("&quot;", '"'))
    assert lane["y"] < lane["plotTop"]   # above the plot area, outside the value axis's range


def test_an_empty_cost_panel_is_not_drawn(page):
    dom, _, _ = page
    assert re.search(r'<section id="cost-panel"[^>]*hidden', dom)


def test_labels_are_whole(page):
    _, _, attrs = page
    labels = json.loads(attrs["data-progress-labels"].replace("&quot;", '"'))
    width, height = json.loads(attrs["data-progress-canvas"])
    assert [label[0] for label in labels] == [1, 4]   # the kept runs: the baseline and the win
    for run, x0, y0, x1, y1 in labels:
        assert 0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height, (run, x0, y0, x1, y1, width, height)
