"""Run a shell command in its own process group, with a timeout, teeing its output.

The command gets a new session (so it leads its own process group). On timeout the whole
group gets SIGTERM, then SIGKILL after a grace period, so grandchildren (a data loader, a
`sleep &` in a script) die with it. When the command exits by itself, whatever it left
running in its group is killed as well: an experiment must not leak processes into the next.
"""

import os
import select
import signal
import subprocess
import time
from dataclasses import dataclass

GRACE_S = 2.0
SHELL = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"


@dataclass
class Result:
    exit_code: object  # int, or None when killed by the timeout
    timed_out: bool
    duration_s: float


def run(command, cwd, env, log_path, timeout_s, echo=None, on_start=None):
    """Run `command`; write its output (stdout and stderr interleaved) to `log_path`.

    `echo` is a binary stream that also receives the output as it comes (or None).
    `on_start(pid)` is called once the process exists (the engine records the pid).
    """
    start = time.monotonic()
    with open(log_path, "ab", buffering=0) as log:
        proc = subprocess.Popen([SHELL, "-c", command], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        fd = proc.stdout.fileno()
        deadline = start + timeout_s if timeout_s else None
        timed_out = False
        try:
            if on_start:
                on_start(proc.pid)
            timed_out = _pump(proc, fd, log, echo, deadline)
        finally:
            # Whatever happened (timeout, normal exit, the engine interrupted): no leftovers.
            kill_group(proc.pid)
            _drain(fd, log, echo)
            proc.stdout.close()
            exit_code = proc.wait()
    return Result(None if timed_out else exit_code, timed_out, time.monotonic() - start)


def _pump(proc, fd, log, echo, deadline):
    """Copy output until EOF or the deadline; return True on timeout."""
    while True:
        wait = 0.5
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            wait = min(wait, left)
        ready, _, _ = select.select([fd], [], [], wait)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                return _wait_exit(proc, deadline)
            _tee(chunk, log, echo)
        elif proc.poll() is not None:
            # The command is done but something it started still holds the pipe open.
            return False


def _wait_exit(proc, deadline):
    """The output is closed; the command may still be running (it redirected its output)."""
    while proc.poll() is None:
        if deadline is not None and time.monotonic() >= deadline:
            return True
        time.sleep(0.01)
    return False


def _tee(chunk, log, echo):
    log.write(chunk)
    if echo is not None:
        try:
            echo.write(chunk)
            echo.flush()
        except (OSError, ValueError):
            pass  # a closed terminal must not stop the experiment


def _drain(fd, log, echo, limit_s=1.0):
    """Read what is left in the pipe after the group is dead (bounded in time)."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if not ready:
            return
        chunk = os.read(fd, 65536)
        if not chunk:
            return
        _tee(chunk, log, echo)


def group_alive(pgid):
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_group(pgid, grace_s=GRACE_S):
    """SIGTERM the process group, then SIGKILL what is still there after `grace_s`."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    end = time.monotonic() + grace_s
    while time.monotonic() < end:
        if not _group_has_live_members(pgid):
            return
        time.sleep(0.02)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _group_has_live_members(pgid):
    """True while a member of the group is running (zombies waiting to be reaped do not count)."""
    if not os.path.isdir("/proc"):
        return group_alive(pgid)
    # Zombies (our own child included, until Popen reaps it) are dead: state Z.
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode("ascii", "replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False
