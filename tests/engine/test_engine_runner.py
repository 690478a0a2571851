"""The process runner: process groups, timeouts, output capture."""

import io
import os
import time

from autoresearch.isolation import runner
from helpers_engine import process_gone


def _run(tmp_path, command, timeout=5, echo=None):
    log = tmp_path / "out.log"
    result = runner.run(command, str(tmp_path), dict(os.environ), str(log), timeout, echo=echo)
    return result, log.read_text()


def test_exit_code_and_interleaved_output(tmp_path):
    echo = io.BytesIO()
    result, text = _run(tmp_path, "echo out; echo err >&2; exit 7", echo=echo)
    assert result.exit_code == 7 and not result.timed_out
    assert text == "out\nerr\n" and echo.getvalue() == b"out\nerr\n"


def test_a_command_that_closes_its_output_is_waited_for(tmp_path):
    result, _ = _run(tmp_path, "exec >/dev/null 2>&1; sleep 0.3; exit 3")
    assert result.exit_code == 3 and result.duration_s >= 0.3


def test_background_leftovers_are_killed_after_a_normal_exit(tmp_path):
    result, _ = _run(tmp_path, "sleep 1000 & echo $! > bg.pid; echo done")
    assert result.exit_code == 0
    pid = int((tmp_path / "bg.pid").read_text())
    deadline = time.monotonic() + 5
    while not process_gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process_gone(pid)


def test_timeout_kills_a_process_that_ignores_sigterm(tmp_path):
    started = time.monotonic()
    result, text = _run(tmp_path, "trap '' TERM; echo stubborn; sleep 1000 & wait", timeout=0.5)
    assert result.timed_out and result.exit_code is None
    assert time.monotonic() - started < 0.5 + runner.GRACE_S + 2  # SIGKILL after the grace period
    assert "stubborn" in text
