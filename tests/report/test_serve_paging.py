"""`serve` pages the per-run data: api/model carries every run in the chart's columns and the
full rows of the first page plus the runs that matter (kept, baselines, latest); api/runs and
api/run/N give the rest. The pages put together are the report's model, row for row, and the
page in Chromium draws every run, shows the loaded rows, loads more, and opens a paged run."""

import json
import random
import time
import urllib.error
import urllib.request

import pytest
import report_fixture
from report_browser import Page

from autoresearch.views import report, serve

TOTAL = 1400   # more than serve.PAGE_ROWS: the runs past the first page come in pages


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("paged")
    report_fixture.make_repo(root, n_runs=20, steps=30, malformed=False)
    rng = random.Random(11)
    lines = []
    for n in range(21, TOTAL + 1):
        status = "keep" if rng.random() < 0.03 else rng.choice(["discard"] * 6 + ["crash"])
        lines.append(json.dumps({"run": n, "commit": f"{n:07x}", "status": status, "segment": 1,
                                 "metric": None if status == "crash" else round(1.5 - n / 1e4 + rng.random() / 50, 6),
                                 "description": f"paged idea {n} <b>bold</b>", "timestamp": 1.7e12 + n * 1000}))
    with open(root / "autoresearch.jsonl", "a", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    err_path = root / "serve.err"
    with report_fixture.serving(root, err_path) as port:
        yield root, f"http://127.0.0.1:{port}/"


def get(url):
    with urllib.request.urlopen(url, timeout=30) as res:
        return json.loads(res.read())


def test_the_pages_put_together_are_the_reports_model(served):
    root, base = served
    truth = report.build_model(root, root / "autoresearch.jsonl", warn=lambda m: None)["runs"]
    model = get(base + "api/model")["model"]
    assert model["runTotal"] == TOTAL == len(truth)
    assert model["chart"]["run"] == [r["run"] for r in truth]
    for key in serve.CHART_KEYS:
        assert model["chart"][key] == [r[key] for r in truth], key
    assert model["chart"]["description"] == [r["description"] if r["status"] == "keep" else None for r in truth]
    # the first page, every kept run, the baselines and the latest come in full, each at its place
    index = model["runIndex"]
    assert set(range(serve.PAGE_ROWS)) <= set(index) and TOTAL - 1 in index
    assert {i for i, r in enumerate(truth) if r["status"] == "keep"} <= set(index)
    assert model["runs"] == [truth[i] for i in index]
    assert len(index) < TOTAL
    paged = []
    while len(paged) < TOTAL:
        page = get(base + f"api/runs?offset={len(paged)}&limit=300")
        assert page["total"] == TOTAL and page["offset"] == len(paged) and page["runs"]
        paged += page["runs"]
    assert paged == truth
    assert get(base + f"api/runs?offset={TOTAL}")["runs"] == []
    one = get(base + "api/run/1000")
    assert one["row"] == truth[999]


@pytest.mark.parametrize("query", ["offset=-1", "offset=x", "limit=0", f"limit={serve.PAGE_ROWS_MAX + 1}",
                                   "offset=1e3", "limit=9999999999"])
def test_a_bad_page_is_a_clear_400(served, query):
    _, base = served
    with pytest.raises(urllib.error.HTTPError) as err:
        get(base + "api/runs?" + query)
    assert err.value.code == 400
    assert "offset" in json.loads(err.value.read())["error"]


def test_the_page_draws_every_run_shows_loaded_rows_loads_more_and_opens_a_paged_run(served, tmp_path):
    _, base = served
    model = get(base + "api/model")["model"]
    first = len(model["runIndex"])
    unloaded = next(r for r in range(1, TOTAL + 1) if r - 1 not in set(model["runIndex"]))
    page = Page(base + f"#run={unloaded}", tmp_path / "profile")
    attr = "document.documentElement.getAttribute"
    try:
        page.wait_for(f"{attr}('data-ready') === '1' && {attr}('data-detail') === '{unloaded}'")
        assert page.evaluate(f"{attr}('data-progress-drawn')") == str(TOTAL)   # every run on the chart
        # the opened run's row came with its details: its description, not a blank
        desc = page.evaluate("document.querySelector('#detail .desc').textContent")
        assert desc == f"paged idea {unloaded} <b>bold</b>"
        rows = page.evaluate("document.querySelectorAll('#runs tbody tr').length")
        assert rows == first + 1
        count = page.evaluate("document.getElementById('row-count').textContent")
        assert count == f"{rows} of {rows} runs loaded ({TOTAL} in the log)"
        page.evaluate("document.getElementById('more-runs').click()")
        page.wait_for(f"document.querySelectorAll('#runs tbody tr').length > {rows}")
        while not page.evaluate("document.getElementById('more-runs').hidden"):
            before = page.evaluate("document.querySelectorAll('#runs tbody tr').length")
            page.evaluate("document.getElementById('more-runs').click()")
            page.wait_for(f"document.querySelectorAll('#runs tbody tr').length > {before}")
        assert page.evaluate("document.querySelectorAll('#runs tbody tr').length") == TOTAL
        assert page.evaluate("document.getElementById('row-count').textContent") == f"{TOTAL} of {TOTAL} runs"
        assert page.evaluate("document.querySelectorAll('#runs b, #runs script').length") == 0
        assert page.evaluate(f"{attr}('data-errors')") in (None, "[]")
    finally:
        console = page.close()
    assert console == []


def test_a_slow_rebuild_runs_in_the_background_and_the_phase_never_rebuilds(tmp_path):
    """A long night's model takes seconds to build: pages keep the one they have meanwhile, then
    get the new one; current.json changing (the running run's phase) refreshes only `current`."""
    report_fixture.make_repo(tmp_path, n_runs=12, steps=10, malformed=False)
    live = serve.LiveState(tmp_path, "autoresearch.jsonl", 0.3)
    model, version = live.current_model()
    assert len(model["runs"]) == 12
    builds = []
    build = live._build
    live._build = lambda: (builds.append(1), build())[1]
    (tmp_path / ".autoresearch" / "current.json").write_text(json.dumps({"run": 13, "description": "going"}))
    model, phased = live.current_model()
    assert phased != version and model["current"]["run"] == 13 and not builds and len(model["runs"]) == 12
    live.build_s = serve.BACKGROUND_BUILD_S + 1   # as if the last build was slow
    with open(tmp_path / "autoresearch.jsonl", "a") as f:
        f.write(json.dumps({"run": 13, "commit": "d00d13", "status": "discard", "metric": 1.7, "segment": 1}) + "\n")
    model, same = live.current_model()   # answered at once, with the model the page has
    assert len(model["runs"]) == 12 and same == phased
    deadline = time.monotonic() + 20
    while len(live.current_model()[0]["runs"]) == 12:
        assert time.monotonic() < deadline, "the background rebuild never came"
        time.sleep(0.05)
    model, rebuilt = live.current_model()
    assert builds == [1] and model["runs"][-1]["run"] == 13 and rebuilt != same
