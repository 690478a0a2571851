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
