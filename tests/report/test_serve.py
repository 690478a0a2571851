"""`autoresearch serve`: loopback only, new runs appear, the running run's curves grow, bad lines warn."""

import json
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
import report_fixture
from conftest import engine_env, run_cli
from report_browser import Page



def append_record(root, record):
    """One whole JSON line, as the engine appends it (autoresearch.store.log.append, minus fsync)."""
    with open(root / "autoresearch.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


@pytest.fixture
def served(tmp_path):
    """A 20-run repo served on a free port; yields (root, base_url, stderr_path, process)."""
    report_fixture.make_repo(tmp_path, n_runs=20, steps=40, malformed=False)
    err_path = tmp_path / "serve.err"
    with open(err_path, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "autoresearch", "serve", "--port", "0"], cwd=tmp_path,
                                env=engine_env(), stdout=subprocess.DEVNULL, stderr=err)
    try:
        port = None
        deadline = time.monotonic() + 20
        while port is None and time.monotonic() < deadline:
            found = re.search(r"http://127\.0\.0\.1:(\d+)/", err_path.read_text())
            port = int(found.group(1)) if found else None
            if port is None:
                assert proc.poll() is None, err_path.read_text()
                time.sleep(0.05)
        assert port, "serve did not print its address"
        yield tmp_path, f"http://127.0.0.1:{port}/", err_path, proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def get(url, host=None):
    req = urllib.request.Request(url, headers={"Host": host} if host else {})
    with urllib.request.urlopen(req, timeout=10) as res:
        return json.loads(res.read()) if "json" in res.headers["Content-Type"] else res.read()


def wait_for(predicate, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def listening_addresses(port):
    """Local addresses of listening TCP sockets on `port`, from /proc/net/tcp{,6}."""
    found = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = open(name).read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            local, state = row.split()[1], row.split()[3]
            addr, hex_port = local.split(":")
            if int(hex_port, 16) == port and state == "0A":   # 0A = LISTEN
                found.append(addr)
    return found


def test_listens_on_loopback_only(served):
    _, base, _, _ = served
    port = int(base.rsplit(":", 1)[1].strip("/"))
    assert listening_addresses(port) == ["0100007F"]   # 127.0.0.1, little-endian hex
    with pytest.raises(urllib.error.HTTPError) as err:   # a page on another origin cannot rebind to it
        get(base + "api/model", host="attacker.example:80")
    assert err.value.code == 403


def test_new_run_appears_and_a_malformed_line_warns_without_crashing(served):
    root, base, err_path, proc = served
    first = get(base + "api/model")
    assert len(first["model"]["runs"]) == 20
    assert get(base + f"api/model?since={first['version']}")["unchanged"] is True
    append_record(root, {
        "run": 21, "commit": "abc1234", "status": "keep", "metric": 0.9, "segment": 1,
        "description": "appended while serving <i>live</i>", "timestamp": int(time.time() * 1000)})
    model = wait_for(lambda: get(base + "api/model")["model"])
    assert model["runs"][-1]["run"] == 21 and model["runs"][-1]["description"] == "appended while serving <i>live</i>"
    with open(root / "autoresearch.jsonl", "a") as f:
        f.write("{this is not json\n")
    after = get(base + "api/model")["model"]
    assert len(after["runs"]) == 21 and after["warningCount"] == 1
    assert proc.poll() is None
    wait_for(lambda: "skipped malformed line" in err_path.read_text())
    details = get(base + "api/run/3")
    assert details["steps"]["total"] == 40 and "diff --git" in details["diff"]
    with pytest.raises(urllib.error.HTTPError) as err:
        get(base + "api/run/999")
    assert err.value.code == 404


def test_running_experiment_curves_grow(served):
    root, base, _, _ = served
    assert get(base + "api/current") == {"run": None}
    run_dir = root / ".autoresearch" / "runs" / "21"
    run_dir.mkdir()
    steps = run_dir / "steps.jsonl"
    steps.write_text("".join(json.dumps({"step": i, "elapsed_s": i, "loss": 9 - i / 10}) + "\n" for i in range(5)))
    (root / ".autoresearch" / "current.json").write_text(json.dumps({"run": 21, "description": "growing"}))
    cur = get(base + "api/current")
    assert cur["run"] == 21 and cur["steps"]["total"] == 5
    with open(steps, "a") as f:
        f.write("".join(json.dumps({"step": i, "elapsed_s": i, "loss": 9 - i / 10}) + "\n" for i in range(5, 12)))
    assert get(base + "api/current")["steps"]["cols"]["loss"][-1] == pytest.approx(7.9)
    append_record(root, {"run": 21, "status": "discard", "metric": 1.2})
    assert get(base + "api/current") == {"run": None}   # logged: no longer running


def test_live_page_in_chromium_grows_while_runs_are_logged(served, tmp_path):
    """An open page picks up a new run, the running run's growing steps, and a malformed line."""
    root, base, _, proc = served
    page = Page(base, tmp_path / "profile")
    try:
        attr = "document.documentElement.getAttribute"
        page.wait_for(f"{attr}('data-ready') === '1' && {attr}('data-progress-drawn') === '20'")
        append_record(root, {"run": 21, "status": "discard", "metric": 0.99, "segment": 1,
                             "description": "appended <img src=x onerror=alert(1)> idea"})
        page.wait_for(f"{attr}('data-progress-drawn') === '21'")
        row = page.evaluate("document.querySelector('#runs tr[data-run=\"21\"] td.desc').textContent")
        assert row == "appended <img src=x onerror=alert(1)> idea"
        assert page.evaluate("document.querySelectorAll('img, #runs script').length") == 0

        run_dir = root / ".autoresearch" / "runs" / "22"
        run_dir.mkdir()
        steps = run_dir / "steps.jsonl"
        steps.write_text("".join(json.dumps({"step": i, "elapsed_s": i, "loss": 9 - i / 10, "mfu": 40.0}) + "\n"
                                 for i in range(5)))
        (root / ".autoresearch" / "current.json").write_text(json.dumps({"run": 22, "description": "in flight"}))
        page.wait_for(f"{attr}('data-current-steps') === '5'")
        with open(steps, "a") as f:
            f.write("".join(json.dumps({"step": i, "elapsed_s": i, "loss": 9 - i / 10, "mfu": 40.0}) + "\n"
                            for i in range(5, 12)))
        page.wait_for(f"{attr}('data-current-steps') === '12'")
        title = page.evaluate("document.getElementById('current-title').textContent")
        assert title.startswith("Running now: #22 · in flight · 12 steps logged")

        with open(root / "autoresearch.jsonl", "a") as f:
            f.write('{"run": 23, "status": \n')
        page.wait_for("document.getElementById('warnings').textContent.indexOf('1 log line(s) skipped') === 0")
        assert proc.poll() is None
        assert page.evaluate(f"{attr}('data-errors')") == "[]"
    finally:
        console = page.close()
    assert console == []


def test_port_in_use_is_a_clear_usage_error(tmp_path):
    report_fixture.make_repo(tmp_path, n_runs=2, steps=5, malformed=False)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        proc = run_cli(["serve", "--port", str(busy.getsockname()[1])], cwd=tmp_path, timeout=30)
    assert proc.returncode == 2
    assert "is in use" in proc.stderr and "--port 0" in proc.stderr


def test_serve_outside_a_research_repo_is_refused(tmp_path):
    proc = run_cli(["serve", "--port", "0"], cwd=tmp_path, timeout=30)
    assert proc.returncode == 3 and "autoresearch init" in proc.stderr


def _exchange(port, method, path, host=None):
    """(status, headers without Date, body) of one request through http.client."""
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, headers={"Host": host} if host else {})
        res = conn.getresponse()
        headers = {k.lower(): v for k, v in res.getheaders() if k.lower() != "date"}
        return res.status, headers, res.read()
    finally:
        conn.close()


def _raw_head(port, path):
    """Every byte the server sends for a HEAD request, up to its closing the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(f"HEAD {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data


def test_head_answers_every_route_like_get_without_the_body(served):
    root, base, _, _ = served
    port = int(base.rsplit(":", 1)[1].strip("/"))
    version = get(base + "api/model")["version"]
    paths = ["/", "/index.html", "/api/model", f"/api/model?since={version}", "/api/runs",
             "/api/runs?offset=5&limit=3", "/api/runs?limit=0", "/api/current", "/api/run/3",
             "/api/run/999", "/api/run/x", "/no/such/page"]
    statuses = set()
    for path in paths:
        got, head = _exchange(port, "GET", path), _exchange(port, "HEAD", path)
        assert head[0] == got[0] and head[1] == got[1], path   # same status, same headers
        assert int(head[1]["content-length"]) == len(got[2]) > 0 and head[2] == b"", path
        statuses.add(got[0])
        raw = _raw_head(port, path)
        assert raw.endswith(b"\r\n\r\n") and raw.count(b"\r\n\r\n") == 1, f"{path}: HEAD sent a body"
    assert statuses == {200, 400, 404}
    forbidden = _exchange(port, "HEAD", "/", host="evil.example:80")
    assert forbidden[0] == 403 and forbidden[2] == b"" and int(forbidden[1]["content-length"]) > 0
