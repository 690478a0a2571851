"""The report and `serve` show only what the engine wrote: links, FIFOs and hard links in a run
folder are not followed; headers forbid framing and sniffing; a stalled connection is closed;
bidi controls are shown, not obeyed; long descriptions wrap (real server, real Chromium)."""

import html
import json
import os
import socket
import time

import pytest
from conftest import run_cli
from report_browser import Page, dump_dom, root_attributes
from test_serve import get, served  # noqa: F401 - the fixture

from autoresearch.views import report, serve

SECRET = "s3cret-token-from-outside-the-run"
RLO = "\u202e"


def write_log(root, records):
    with open(root / "autoresearch.jsonl", "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


def small_repo(root, description="baseline"):
    write_log(root, [{"type": "config", "metricName": "loss", "bestDirection": "lower", "name": "t"},
                     {"run": 1, "status": "keep", "metric": 1.0, "description": description,
                      "run_dir": ".autoresearch/runs/1"},
                     {"run": 2, "status": "discard", "metric": 1.1, "description": "two",
                      "run_dir": ".autoresearch/runs/2"},
                     {"run": 3, "status": "crash", "metric": None, "description": "three"}])
    runs = root / ".autoresearch" / "runs"
    for n in (1, 2, 3):
        (runs / str(n)).mkdir(parents=True)
        (runs / str(n) / "output.log").write_text(f"the engine's output of run {n}\n")
    return runs


@pytest.fixture
def hostile(tmp_path):
    """Run 1: output.log and steps.jsonl are links out; run 2's folder is a link; run 3: a FIFO
    and a hard link."""
    root = tmp_path / "repo"
    root.mkdir()
    runs = small_repo(root)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "output.log").write_text(SECRET + "\n")
    (outside / "steps.jsonl").write_text(json.dumps({"step": 1, "loss": 123.0, "note": SECRET}) + "\n")
    (outside / "summary.json").write_text(json.dumps({"secret": SECRET}))
    for name in ("output.log", "steps.jsonl"):
        (runs / "1" / name).unlink(missing_ok=True)
        (runs / "1" / name).symlink_to(outside / name)
    (runs / "1" / "summary.json").symlink_to(outside / "summary.json")
    (runs / "2" / "output.log").unlink()
    os.rmdir(runs / "2")
    (runs / "2").symlink_to(outside, target_is_directory=True)
    (runs / "3" / "output.log").unlink()
    os.mkfifo(runs / "3" / "output.log")
    os.link(outside / "summary.json", runs / "3" / "summary.json")
    return root


def test_report_reads_no_link_fifo_or_hard_link(hostile):
    out = run_cli(["report", "-o", "r.html"], cwd=hostile, timeout=60)   # a FIFO read would hang here
    assert out.returncode == 0, out.stderr
    page = (hostile / "r.html").read_text(encoding="utf-8")
    assert SECRET not in page
    model = report.build_model(hostile, hostile / "autoresearch.jsonl", warn=lambda m: None)
    details = report.all_details(hostile, model, 100)
    assert [details[n]["tail"] for n in "123"] == [None, None, None]
    assert details["1"]["steps"] is None and details["1"]["summary"] is None
    assert details["3"]["summary"] is None


def test_a_real_run_folder_still_reads(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    small_repo(root)
    model = report.build_model(root, root / "autoresearch.jsonl", warn=lambda m: None)
    details = report.all_details(root, model, 100)
    assert details["2"]["tail"] == "the engine's output of run 2\n"
    # a repo reached through a link (macOS /tmp, a symlinked home) is still read
    (tmp_path / "alias").symlink_to(root, target_is_directory=True)
    model = report.build_model(tmp_path / "alias", root / "autoresearch.jsonl", warn=lambda m: None)
    assert report.all_details(tmp_path / "alias", model, 100)["1"]["tail"].startswith("the engine's output")


def test_serve_gives_no_linked_content_and_sends_the_protective_headers(served):  # noqa: F811
    root, base, _, _ = served
    folder = root / ".autoresearch" / "runs" / "1"
    (tmp := root.parent / "outside-serve").mkdir()
    (tmp / "secret.txt").write_text(SECRET + "\n")
    (folder / "output.log").unlink()
    (folder / "output.log").symlink_to(tmp / "secret.txt")
    body = json.dumps(get(base + "api/run/1"))
    assert SECRET not in body
    import urllib.request
    for path in ("", "api/model", "api/run/1", "api/nothing"):
        try:
            res = urllib.request.urlopen(base + path, timeout=10)
        except urllib.error.HTTPError as err:
            res = err
        headers = res.headers
        assert "frame-ancestors 'none'" in headers["Content-Security-Policy"], path
        assert headers["X-Frame-Options"] == "DENY"
        assert headers["X-Content-Type-Options"] == "nosniff"
    page = urllib.request.urlopen(base, timeout=10)
    assert "script-src 'sha256-" in page.headers["Content-Security-Policy"]


def test_a_stalled_connection_is_closed_and_others_are_served(served):  # noqa: F811
    root, base, _, _ = served
    port = int(base.rsplit(":", 1)[1].strip("/"))
    stalled = [socket.create_connection(("127.0.0.1", port)) for _ in range(20)]
    stalled[0].sendall(b"GET /api/model HTTP/1.1\r\nHost: 127.0.0.1\r\n")   # never ends the headers
    assert get(base + "api/current") == {"run": None}   # served meanwhile
    start = time.monotonic()
    for s in stalled:
        s.settimeout(serve.CONNECTION_TIMEOUT_S + 20)   # without the server's timeout: socket.timeout here
        assert s.recv(1024) == b""                       # the server closed it
        s.close()
    took = time.monotonic() - start
    assert took < serve.CONNECTION_TIMEOUT_S + 15, took


def test_bidi_controls_are_shown_and_long_descriptions_wrap(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    spoof = f"lr 0.04 {RLO}peek{chr(0x202C)} status"
    long = "x" * 3000
    small_repo(root, description=spoof)
    with open(root / "autoresearch.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({"run": 4, "status": "discard", "metric": 1.2, "description": long}) + "\n")
        f.write(json.dumps({"run": 5, "status": "discard", "metric": 1.3,
                            "description": " ".join(["word"] * 800)}) + "\n")
    (root / ".autoresearch" / "runs" / "1" / "output.log").write_text(f"tail {RLO}txet\n")
    out = run_cli(["report", "-o", "r.html"], cwd=root)
    assert out.returncode == 0, out.stderr
    page = (root / "r.html").read_text(encoding="utf-8")
    assert RLO not in page and "[U+202E]" in page
    dom, _ = dump_dom((root / "r.html").as_uri(), tmp_path / "profile")
    assert RLO not in html.unescape(dom) and "[U+202E]peek[U+202C]" in html.unescape(dom)
    assert root_attributes(dom)["data-ready"] == "1"
    browser = Page((root / "r.html").as_uri(), tmp_path / "profile2")
    try:
        browser.wait_for("document.documentElement.dataset.ready === '1'")
        widths = browser.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        cell = browser.evaluate("Math.max.apply(null, Array.from(document.querySelectorAll('td.desc'))"
                                ".map(function (td) { return td.getBoundingClientRect().width; }))")
    finally:
        browser.close()
    assert widths[0] <= widths[1] + 1, widths      # nothing pushes the page wider than the window
    assert cell <= 480, cell                        # the description column keeps its width
