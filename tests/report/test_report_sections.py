"""A section of the page with nothing to show is left out; with something to show it is there.

The "Waves" section shows a pool's waves and the holdout section the hidden holdout of the kept
runs. A night that used neither (one GPU, a benchmark without a holdout) showed both as empty
boxes. Checked in real headless Chromium, in the report file and on serve's live page.
"""

import json
import re

import pytest
import report_fixture
from conftest import run_cli
from report_browser import dump_dom, root_attributes
from report_fixture import serving

SECTIONS = ("holdout-box", "waves-box")


def visible(dom, section):
    tag = re.search(rf'<section id="{section}"[^>]*>', dom).group(0)
    return "hidden" not in tag


def drawn(url, profile):
    dom, console = dump_dom(url, profile)
    attrs = root_attributes(dom)
    assert attrs["data-ready"] == "1" and attrs["data-errors"] == "[]" and console == [], (attrs, console)
    return dom


def report_page(root, tmp_path):
    proc = run_cli(["report", "--holdout", "-o", "page.html"], cwd=root)
    assert proc.returncode == 0, proc.stderr
    return drawn((root / "page.html").as_uri(), tmp_path / "profile-file")


def served_page(root, tmp_path):
    with serving(root, tmp_path / "serve.err") as port:
        return drawn(f"http://127.0.0.1:{port}/", tmp_path / "profile-live")


@pytest.fixture
def plain(tmp_path):
    """12 runs on one GPU (no pool), no holdout value in any run folder."""
    root = tmp_path / "plain"
    facts = report_fixture.make_repo(root, n_runs=12, steps=20, malformed=False, hostile=False)
    return root, facts


def use_pool_and_holdout(root):
    """What a pool and the ML harness leave behind: runs 1-6 ran in two waves of three (a control
    and two candidates each, as pool_runner records them), and every kept run's folder holds the
    harness's holdout.json."""
    lines = (root / "autoresearch.jsonl").read_text(encoding="utf-8").splitlines()
    out, kept = [], []
    for line in lines:
        record = json.loads(line)
        n = record.get("run")
        if isinstance(n, int) and n <= 6:
            wave, first = (n - 1) // 3 + 1, (n - 1) // 3 * 3 + 1
            started = 1_795_986_000_000 + wave * 600_000
            record.update(wave=wave, role="control" if n == first else "candidate", control=n == first,
                          gpu_s=280.0, wave_gpus=3, wave_started=started, wave_ended=started + 300_000)
        if record.get("status") == "keep":
            kept.append(n)
        out.append(json.dumps(record))
    (root / "autoresearch.jsonl").write_text("\n".join(out) + "\n", encoding="utf-8")
    for i, n in enumerate(kept):
        (root / ".autoresearch" / "runs" / str(n) / "holdout.json").write_text(
            json.dumps({"holdout_bpb": 1.01 - i * 0.002, "tokens": 4096}))
    return kept


def test_a_night_without_pool_or_holdout_shows_neither_section(plain, tmp_path):
    root, _ = plain
    for dom in (report_page(root, tmp_path), served_page(root, tmp_path)):
        assert [visible(dom, s) for s in SECTIONS] == [False, False]


def test_a_night_with_waves_and_a_holdout_shows_both(plain, tmp_path):
    root, facts = plain
    kept = use_pool_and_holdout(root)
    assert len(kept) >= 2
    dom = report_page(root, tmp_path)
    assert [visible(dom, s) for s in SECTIONS] == [True, True]
    holdout = dom[dom.index('id="holdout-box"'):dom.index('id="waves-box"')]
    segment_kept = [n for n in kept if n >= facts["segment_at"]]   # the holdout table is the current segment's
    assert holdout.count("<tr>") == 1 + len(segment_kept) >= 2   # a header and one row per kept code
    waves = dom[dom.index('id="waves-box"'):dom.index('id="cost-panel"')]
    assert waves.count("<tr>") == 3   # a header and two waves
    live = served_page(root, tmp_path)   # the live page: the waves, never the hidden holdout
    assert [visible(live, s) for s in SECTIONS] == [False, True]
