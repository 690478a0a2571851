"""Drive Debian's headless Chromium for the report tests: load a page, dump its DOM or screenshot it.

The page reports on itself through attributes on <html>: data-ready="1" once drawn,
data-errors (JSON list of window errors, rejections, console.error calls and CSP violations),
data-charts (uPlot charts made), data-progress-drawn (runs drawn by the progress chart).
Chromium's own console log (--enable-logging=stderr) is returned too, so a test can assert
the console stayed silent.
"""

import re
import struct
import subprocess

from conftest import require_tool

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--enable-logging=stderr", "--v=0"]


def chromium():
    return require_tool("chromium", "install it with `bash scripts/install-test-tools.sh` (Debian: apt-get install chromium)")


def _run(url, profile, extra, budget_ms):
    cmd = [chromium(), *FLAGS, f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}", *extra, url]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return proc, console


def dump_dom(url, profile, budget_ms=8000):
    """Return (dom_text, console_lines) after the page ran for budget_ms of virtual time."""
    proc, console = _run(url, profile, ["--dump-dom"], budget_ms)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, console


def screenshot(url, profile, path, size=(1400, 2400), budget_ms=8000):
    """Write a PNG of the page; return (width, height, console_lines)."""
    proc, console = _run(url, profile, [f"--window-size={size[0]},{size[1]}", f"--screenshot={path}"], budget_ms)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return (*png_size(path), console)


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", head[16:24])


def root_attributes(dom):
    """The attributes of the <html> element, as a dict."""
    tag = re.search(r"<html\b([^>]*)>", dom).group(1)
    return dict(re.findall(r'([\w-]+)="([^"]*)"', tag))


class Page:
    """A live headless Chromium tab driven over the DevTools protocol on a pipe (stdlib only).

    Chromium reads NUL-terminated JSON commands on fd 3 and writes replies and events on fd 4
    (--remote-debugging-pipe). Used where a test must change things while the page is open.
    """

    def __init__(self, url, profile):
        import os
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def wire_fds():   # in the child: our pipe ends become fds 3 and 4 (moved high first, as
            import fcntl  # they may already sit on 3 or 4, where dup2 would keep close-on-exec)
            high_r = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        # stderr goes to a file: Chromium's log could fill a pipe nobody reads and stall it
        self._err = open(os.path.join(str(profile) + ".log"), "w+")
        # close_fds=False: the dup2'd fds 3 and 4 must survive; our other fds are close-on-exec anyway
        self.proc = subprocess.Popen(
            [chromium(), *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"],
            close_fds=False, preexec_fn=wire_fds, stdout=subprocess.DEVNULL, stderr=self._err)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf, self._next_id = b"", 0
        target = self._call("Target.createTarget", {"url": url})["targetId"]
        self._session = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]

    def _call(self, method, params=None, session=None):
        import json
        import os
        self._next_id += 1
        msg = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        while True:
            while b"\0" not in self._buf:
                chunk = os.read(self._from_chrome, 1 << 16)
                assert chunk, "chromium closed the DevTools pipe"
                self._buf += chunk
            raw, self._buf = self._buf.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._next_id:
                assert "error" not in reply, reply["error"]
                return reply["result"]

    def evaluate(self, expression):
        result = self._call("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                            session=self._session)
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"].get("value")

    def wait_for(self, expression, timeout=20):
        """Poll a JS expression until it is truthy; return its value."""
        import time
        deadline = time.monotonic() + timeout
        # The tab may still be between about:blank and the page (no documentElement yet):
        # an exception then just means "not yet".
        guarded = f"(function () {{ try {{ return ({expression}); }} catch (e) {{ return null; }} }})()"
        while True:
            value = self.evaluate(guarded)
            if value:
                return value
            assert time.monotonic() < deadline, f"page never satisfied: {expression}"
            time.sleep(0.2)

    def close(self):
        """Stop Chromium; return its console lines."""
        import os
        os.close(self._to_chrome)   # Chromium exits when its pipe closes
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._from_chrome)
        self._err.seek(0)
        err = self._err.read()
        self._err.close()
        return [line for line in err.splitlines() if ":CONSOLE" in line]
