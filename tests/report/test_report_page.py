"""The 300-run report in real headless Chromium: charts draw, nothing errs, hostile text stays text."""

import html
from html.parser import HTMLParser
import json
import re

import pytest
import report_fixture
from conftest import run_cli
from report_browser import Page, dump_dom, png_size, root_attributes, screenshot


@pytest.fixture(scope="module")
def night(tmp_path_factory):
    root = tmp_path_factory.mktemp("night")
    facts = report_fixture.make_repo(root, n_runs=300, steps=150)
    proc = run_cli(["report", "-o", "night.html", "--png", "progress.png"], cwd=root)
    assert proc.returncode == 0, proc.stderr
    return root, facts, proc


def test_report_command_writes_page_and_png_and_warns_about_malformed_lines(night):
    root, facts, proc = night
    assert "wrote night.html (300 runs" in proc.stderr
    assert proc.stderr.count("skipped") == facts["malformed"] == 3
    assert png_size(root / "progress.png")[0] > 1000
    page = (root / "night.html").read_text(encoding="utf-8")
    assert not re.findall(r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)=", page), "the page must load nothing"
    for raw in ("<img src=x", "<script>document", "</script><script>alert", "<b>river</b>", "\u2028"):
        assert raw not in page, f"unescaped {raw!r} in the HTML"
    assert page.count("<script") == 2   # the JSON data and the page's own script, nothing injected


def test_page_draws_charts_without_console_errors(night, tmp_path):
    root, facts, _ = night
    dom, console = dump_dom((root / "night.html").as_uri(), tmp_path / "profile")
    attrs = root_attributes(dom)
    assert attrs["data-ready"] == "1"
    assert json.loads(html.unescape(attrs["data-errors"])) == []
    assert console == [], console
    assert attrs["data-progress-drawn"] == "300"
    assert int(attrs["data-charts"]) >= 7   # the progress chart and the best run's curves
    assert attrs["data-detail"] == str(facts["best_run"])   # the best run of the last segment opens first
    # the summary, the warnings about the malformed lines, and one table row per run
    assert "3 log line(s) skipped as malformed" in dom
    assert dom.count("<tr data-run=") == 300
    assert "nanochat on a 4090, after the driver update" in dom


def test_hostile_descriptions_show_as_text_and_run_nothing(night, tmp_path):
    root, _, _ = night
    # open run 6 itself, so its description, ASI and sample are rendered in the detail view too
    dom, console = dump_dom((root / "night.html").as_uri() + "#run=6", tmp_path / "profile")
    attrs = root_attributes(dom)
    assert attrs["data-detail"] == "6"
    assert json.loads(html.unescape(attrs["data-errors"])) == []
    assert "data-pwned" not in attrs
    assert console == []
    # shown as text (serialised escaped), never as elements
    assert "&lt;script&gt;document.documentElement.setAttribute('data-pwned','script')&lt;/script&gt;" in dom
    assert "&lt;img src=x onerror=" in dom
    assert "note=&lt;img src=x onerror=alert(2)&gt;" in dom          # ASI
    assert "&lt;b&gt;river&lt;/b&gt;" in dom                         # the text sample
    assert "<img" not in dom
    assert dom.count("<script") == 2


def test_screenshot_of_the_report(night, tmp_path):
    root, _, _ = night
    shot = tmp_path / "report.png"
    width, height, console = screenshot((root / "night.html").as_uri(), tmp_path / "profile", shot)
    assert (width, height) == (1400, 2400)
    assert console == []
    # a drawn page (charts, table) compresses far worse than a blank one (~10 KB)
    assert shot.stat().st_size > 150_000


def test_table_sorts_filters_and_opens_runs(night, tmp_path):
    root, facts, _ = night
    page = Page((root / "night.html").as_uri(), tmp_path / "profile")
    try:
        page.wait_for("document.documentElement.getAttribute('data-ready') === '1'")
        visible_runs = ("Array.from(document.querySelectorAll('#runs tbody tr')).filter(function (tr) {"
                        " return !tr.hidden; }).map(function (tr) { return Number(tr.getAttribute('data-run')); })")
        metric_of = "Number(document.querySelector('#runs tbody tr:not([hidden]) td:nth-child(3)').textContent)"
        # sort by metric: the best (lowest) first, runs without a metric last
        page.evaluate("document.querySelector('#runs th[data-key=metric]').click()")
        model = json.loads(page.evaluate("document.getElementById('report-data').textContent"))["model"]
        metrics = sorted(r["metric"] for r in model["runs"] if r["metric"] is not None)
        assert page.evaluate(metric_of) == pytest.approx(metrics[0], abs=1e-9)
        page.evaluate("document.querySelector('#runs th[data-key=metric]').click()")   # descending
        assert page.evaluate(metric_of) == pytest.approx(metrics[-1], abs=1e-9)
        # filter by status, then by text
        page.evaluate("var s = document.getElementById('status-filter'); s.value = 'crash';"
                      " s.dispatchEvent(new Event('change'))")
        crashed = page.evaluate(visible_runs)
        assert len(crashed) == facts["statuses"]["crash"]
        assert all(r["status"] == "crash" for r in model["runs"] if r["run"] in crashed)
        page.evaluate("var f = document.getElementById('filter'); f.value = 'MATRIX_LR';"
                      " f.dispatchEvent(new Event('input'))")
        both = page.evaluate(visible_runs)
        assert both and set(both) < set(crashed)
        # open a crashed run: its diagnosis and its curves against the best run
        page.evaluate(f"document.querySelector('#runs tr[data-run=\"{both[0]}\"]').click()")
        page.wait_for(f"document.documentElement.getAttribute('data-detail') === '{both[0]}'")
        detail = page.evaluate("document.getElementById('detail').textContent")
        assert "Diagnosis: " in detail and "Traceback" in detail
        segment = next(r["segment"] for r in model["runs"] if r["run"] == both[0])
        best_of_segment = model["segments"][segment]["bestRun"]   # compared with the best of its own segment
        assert page.evaluate("document.getElementById('compare').value") == str(best_of_segment)
        assert page.evaluate("document.querySelectorAll('#detail .curve canvas').length") >= 6
        # compare against nothing: one line per chart
        page.evaluate("var c = document.getElementById('compare'); c.value = '';"
                      " c.dispatchEvent(new Event('change'))")
        page.wait_for("document.querySelectorAll('#detail .curve .u-legend .u-series').length === "
                      "2 * document.querySelectorAll('#detail .curve').length")
        assert page.evaluate("document.documentElement.getAttribute('data-errors')") == "[]"
    finally:
        console = page.close()
    assert console == []


def test_a_night_with_no_runs_yet_renders_without_errors(tmp_path):
    (tmp_path / "autoresearch.jsonl").write_text(json.dumps(
        {"type": "config", "name": "fresh", "metricName": "val_bpb", "bestDirection": "lower"}) + "\n")
    proc = run_cli(["report", "-o", "empty.html"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    dom, console = dump_dom((tmp_path / "empty.html").as_uri(), tmp_path / "profile")
    attrs = root_attributes(dom)
    assert attrs["data-ready"] == "1" and attrs["data-errors"] == "[]" and console == []
    assert "No runs logged yet." in dom and "The chart appears after the first run." in dom


class _RunsTable(HTMLParser):
    """The cells of <table id="runs"> as the HTML file has them (no script run)."""

    def __init__(self):
        super().__init__()
        self.inside, self.head, self.rows, self.cell = False, [], [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table" and attrs.get("id") == "runs":
            self.inside = True
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag):
        if tag == "table":
            self.inside = False
        elif self.inside and tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append("".join(self.cell))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def test_the_runs_table_reads_without_the_script(night, tmp_path):
    """The page's runs table is in its HTML too, escaped: a mail preview, a text browser or a
    parser sees every run with its status, metric, delta, confidence, description, ASI and
    diagnosis. The script draws the same table again (sortable), with the same diagnosis column."""
    root, facts, _ = night
    page = (root / "night.html").read_text(encoding="utf-8")
    table = _RunsTable()
    table.feed(page)
    head, rows = table.rows[0], table.rows[1:]
    assert head == ["#", "status", "metric", "Δ vs best then", "confidence", "description", "ASI", "diagnosis",
                    "duration", "commit"]
    assert len(rows) == 300 and [int(r[0]) for r in rows] == list(range(1, 301))
    records = {}
    for line in (root / "autoresearch.jsonl").read_text(encoding="utf-8").split("\n"):
        try:
            r = json.loads(line)
        except ValueError:
            continue   # the fixture's malformed lines
        if isinstance(r, dict) and "run" in r:
            records[r["run"]] = r
    for row in rows:
        rec = records[int(row[0])]
        assert row[1] == rec["status"]
        assert row[5] == rec["description"]          # hostile text as text, whole
        if rec.get("metric") is not None:
            assert float(row[2]) == pytest.approx(rec["metric"], rel=1e-6)
        if rec.get("diagnosis"):
            assert row[7] == ", ".join(rec["diagnosis"]["codes"])
        else:
            assert row[7] == ""
    assert "&lt;script&gt;document.documentElement" in page and "note=&lt;img src=x onerror=alert(2)&gt;" in page
    # After the script ran: its table has the diagnosis column too, with the same codes.
    dom, _ = dump_dom((root / "night.html").as_uri(), tmp_path / "profile")
    drawn = _RunsTable()
    drawn.feed(dom)
    assert drawn.rows[0][:8] == head[:8]
    crashed = next(n for n, r in sorted(records.items()) if r.get("diagnosis"))
    row = next(r for r in drawn.rows[1:] if r[0] == str(crashed))
    assert row[7] == ", ".join(records[crashed]["diagnosis"]["codes"])
    # One renderer: every cell the script shows is the text the report wrote (views/report.py
    # table_cells), whatever order the script sorts the rows in.
    assert drawn.rows[0] == head
    assert {r[0]: r for r in drawn.rows[1:]} == {r[0]: r for r in rows}
