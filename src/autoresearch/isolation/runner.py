"""Run a shell command contained: its own process group, a timeout, bounded output, no leftovers.

- The command gets a new session (it leads its own process group). On timeout the group gets
  SIGTERM, then SIGKILL after a grace period; when the command exits by itself, whatever it
  left running is killed as well: an experiment must not leak processes into the next.
- The engine is a child subreaper while the command runs (`PR_SET_CHILD_SUBREAPER`, Linux):
  a daemon that called `setsid` (or double-forked) out of the group is re-parented to the
  engine instead of init, found and killed at the end of the run.
- Every process of the run carries `AUTORESEARCH_RUN_TOKEN` (a random value) in its
  environment: after an engine crash the next call finds them by it (`kill_tokened`), and no
  process without it is ever signalled.
- What the command prints after its main process exited is not its result: the engine watches
  the process itself (a pidfd, Linux 5.3+; else it polls), reads what the pipe holds at that
  moment, and from then on gives nothing more to `on_line` (a child left behind that prints a
  METRIC line later may reach the log, never the result).
- `wrap` puts a sandbox's launcher in front of the command (bubblewrap.py): the handshake and
  the process group are the same, the launcher's pid stands for the command's.
- Pipe handshake: the command starts as a shell that waits on a pipe, and only goes on once
  the engine has recorded its pid. A SIGKILL of the engine in between closes the pipe and
  the shell exits without running anything.
- `output.log` is capped: the head and the most recent tail are kept, the cut is marked in the
  file with the number of bytes left out. Lines are handed to `on_line` as they come (the
  METRIC lines are parsed streaming, see `MetricLines`), so the engine's memory stays bounded
  whatever the command prints.
"""

import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

GRACE_S = 2.0
SHELL = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
TOKEN_VAR = "AUTORESEARCH_RUN_TOKEN"
DEFAULT_CAP_MB = 32
LINE_MAX = 65536           # the longest line kept for parsing (its last bytes: METRIC ends a line)
MAX_WARNINGS = 50
PR_SET_CHILD_SUBREAPER = 36
# The command starts only once the engine has written "go" into the pipe (after recording
# the pid). `exec "$0" -c "$1"` then runs it in this very process (same pid, same group).
WAIT_THEN_RUN = 'IFS= read -r go <&{fd}; exec {fd}<&-; [ "$go" = go ] || exit 125; exec "$0" -c "$1"'


@dataclass
class Result:
    exit_code: object  # int, or None when killed by the timeout
    timed_out: bool
    duration_s: float
    output_bytes: int = 0      # what the command printed, all of it
    output_cut: int = 0        # bytes of it left out of the log (0: the log has it all)


def new_token():
    return os.urandom(16).hex()


def run(command, cwd, env, log_path, timeout_s, echo=None, on_start=None, cap_bytes=None,
        on_line=None, preexec=None, wrap=None):
    """Run `command` in `cwd`; write its output (stdout and stderr interleaved) to `log_path`.

    `echo` is a binary stream that also receives the output as it comes (or None).
    `on_start(pid)` is called once the process exists and before the command runs.
    `cap_bytes` bounds the log (None: no bound). `on_line(bytes)` gets each output line.
    `preexec` runs in the child before exec (the sandbox). `env` should carry TOKEN_VAR.
    `wrap` (a list) is the launcher to start the shell through (bwrap ... --).
    """
    start = time.monotonic()
    go_read, go_write = os.pipe()
    argv = list(wrap or []) + [SHELL, "-c", WAIT_THEN_RUN.format(fd=go_read), SHELL, command]
    log = CappedLog(log_path, cap_bytes)
    lines = LineSplitter(on_line)
    reaper = set_subreaper(True)
    proc = None
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True, pass_fds=(go_read,), preexec_fn=preexec)
        os.close(go_read)
        go_read = None
        fd = proc.stdout.fileno()
        deadline = start + timeout_s if timeout_s else None
        timed_out = False
        try:
            if on_start:
                on_start(proc.pid)
            os.write(go_write, b"go\n")
            os.close(go_write)
            go_write = None
            timed_out = _pump(proc, fd, (log, lines), echo, deadline)
        finally:
            # From here on the output is no result: the command is done (or being stopped).
            lines.ended()
            # Whatever happened (timeout, normal exit, the engine interrupted): no leftovers.
            if go_write is not None:
                os.close(go_write)
                go_write = None
            kill_group(proc.pid)
            kill_orphans(env.get(TOKEN_VAR) if env else None, exclude=(proc.pid,))
            _drain(fd, (log, lines), echo)
            proc.stdout.close()
            exit_code = proc.wait()
    finally:
        for fd_left in (go_read, go_write):
            if fd_left is not None:
                os.close(fd_left)
        if reaper:
            set_subreaper(False)
        lines.close()
        log.close()
    return Result(None if timed_out else exit_code, timed_out, time.monotonic() - start,
                  log.total, log.cut)


def _pump(proc, fd, sinks, echo, deadline):
    """Copy output until the command's main process exits, or the deadline; True on timeout.
    On exit, what the pipe holds at that moment is copied too (it was printed before)."""
    exited = _exit_watch(proc)
    watched = [fd] + ([exited] if exited is not None else [])
    try:
        while True:
            wait = 0.5 if exited is None else None
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return True
                wait = left if wait is None else min(wait, left)
            ready, _, _ = select.select(watched, [], [], wait)
            if exited is not None and exited in ready or exited is None and proc.poll() is not None:
                _read_now(fd, sinks, echo)
                return False
            if fd in ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return _wait_exit(proc, deadline)
                _tee(chunk, sinks, echo)
    finally:
        if exited is not None:
            os.close(exited)


def _exit_watch(proc):
    """A file descriptor that becomes readable when `proc` exits (pidfd), or None."""
    try:
        return os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return None


def _read_now(fd, sinks, echo):
    """Copy what the pipe holds right now (FIONREAD: a writer left behind cannot add to it)."""
    import fcntl
    import termios
    size = bytearray(4)
    try:
        fcntl.ioctl(fd, termios.FIONREAD, size)
        left = int.from_bytes(size, sys.byteorder)
    except OSError:
        left = 1 << 20
    while left > 0:
        chunk = os.read(fd, min(left, 65536))
        if not chunk:
            return
        left -= len(chunk)
        _tee(chunk, sinks, echo)


def _wait_exit(proc, deadline):
    """The output is closed; the command may still be running (it redirected its output)."""
    while proc.poll() is None:
        if deadline is not None and time.monotonic() >= deadline:
            return True
        time.sleep(0.01)
    return False


def _tee(chunk, sinks, echo):
    for sink in sinks:
        sink.write(chunk)
    if echo is not None:
        try:
            echo.write(chunk)
            echo.flush()
        except (OSError, ValueError):
            pass  # a closed terminal must not stop the experiment


def _drain(fd, sinks, echo, limit_s=1.0):
    """Read what is left in the pipe after the group is dead (bounded in time)."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if not ready:
            return
        chunk = os.read(fd, 65536)
        if not chunk:
            return
        _tee(chunk, sinks, echo)


# --- bounded output ---

class CappedLog:
    """The run's output file, at most about `cap` bytes: the first third as it came, then a
    marker with the number of bytes left out, then the most recent output (between one and
    two thirds of the cap; compacted by copying, so memory stays at one copy buffer)."""

    MARK = "\n[autoresearch: {:>16} bytes of output left out here; output.log keeps the first {} and the last {}]\n"

    def __init__(self, path, cap):
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self.pos = os.lseek(self.fd, 0, os.SEEK_END)
        self.cap = cap if cap and cap > 0 else None
        self.head = max(1, self.cap // 3) if self.cap else None
        self.window = max(1, self.cap // 3) if self.cap else None
        self.total = 0          # bytes the command printed
        self.cut = 0            # bytes left out
        self.tail_start = None  # file offset where the kept tail begins (after the marker)
        self.failed = None      # the OSError that stopped writing (disk full): output is still parsed

    def write(self, chunk):
        self.total += len(chunk)
        if self.failed is not None:
            self.cut += len(chunk)
            return
        try:
            if self.cap is None or self.tail_start is None and self.pos + len(chunk) <= self.head:
                self._put(chunk)
                return
            if self.tail_start is None:
                room = self.head - self.pos
                self._put(chunk[:room])
                chunk = chunk[room:]
                self.head_end = self.pos
                self._put(self._mark().encode())
                self.tail_start = self.pos
            self._put(chunk)
            if self.pos - self.tail_start > 2 * self.window:
                self._compact()
        except OSError as exc:
            self.failed = exc

    def _put(self, data):
        view = memoryview(data)
        while view:
            n = os.pwrite(self.fd, view, self.pos)
            self.pos += n
            view = view[n:]

    def _mark(self):
        return self.MARK.format(self.cut, _size(self.head), _size(self.window))

    def _compact(self):
        """Keep the last `window` bytes of the tail: copy them to just after the marker."""
        keep_from = self.pos - self.window
        self.cut += keep_from - self.tail_start
        marker = self._mark().encode()
        os.pwrite(self.fd, marker, self.head_end)
        dest = self.head_end + len(marker)
        src = keep_from
        while src < self.pos:
            block = os.pread(self.fd, min(1 << 20, self.pos - src), src)
            os.pwrite(self.fd, block, dest)
            src += len(block)
            dest += len(block)
        os.ftruncate(self.fd, dest)
        self.tail_start = self.head_end + len(marker)
        self.pos = dest

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _size(n):
    return f"{n / (1 << 20):g} MiB" if n >= 1 << 20 else f"{n} bytes"


class LineSplitter:
    """Split a byte stream into lines for `on_line`; a line longer than LINE_MAX keeps its end."""

    def __init__(self, on_line):
        self.on_line = on_line
        self.buf = bytearray()

    def write(self, chunk):
        if self.on_line is None:
            return
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                self.buf += chunk[start:]
                if len(self.buf) > LINE_MAX:
                    del self.buf[:len(self.buf) - LINE_MAX]
                return
            self.buf += chunk[start:end]
            line = bytes(self.buf[-LINE_MAX:])
            self.buf.clear()
            self.on_line(line)
            start = end + 1

    def ended(self):
        """The command's main process is gone: a last unfinished line still counts, nothing after."""
        self.close()
        self.on_line = None

    def close(self):
        if self.on_line is not None and self.buf:
            self.on_line(bytes(self.buf))
            self.buf.clear()


class MetricLines:
    """METRIC lines parsed as they stream by (metrics.parse on each line that mentions METRIC):
    the same result as parsing the whole output, in bounded memory."""

    def __init__(self):
        self.found = {}
        self.warnings = []
        self.more_warnings = 0

    def __call__(self, line):
        if b"METRIC" not in line:
            return
        from autoresearch import metrics
        found, warnings = metrics.parse(line.decode("utf-8", "replace"))
        self.found.update(found)
        for w in warnings:
            if len(self.warnings) < MAX_WARNINGS:
                self.warnings.append(w)
            else:
                self.more_warnings += 1

    def all_warnings(self):
        extra = [f"... and {self.more_warnings} more ignored METRIC lines"] if self.more_warnings else []
        return self.warnings + extra


# --- processes ---

def set_subreaper(on):
    """Make this process (not) a child subreaper; True when it took effect (Linux only)."""
    if not os.path.isdir("/proc"):
        return False
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


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


def _stat_fields(pid):
    """Fields of /proc/PID/stat after the command name (state is [0], ppid [1], pgid [2])."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().decode("ascii", "replace").rsplit(")", 1)[-1].split()
    except OSError:
        return None


def _pids():
    try:
        return [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return []


def _group_has_live_members(pgid):
    """True while a member of the group is running (zombies waiting to be reaped do not count)."""
    if not os.path.isdir("/proc"):
        return group_alive(pgid)
    for pid in _pids():
        fields = _stat_fields(pid)
        if fields and len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False


def has_token(pid, token):
    """True when process `pid` carries AUTORESEARCH_RUN_TOKEN=token in its environment."""
    if not token:
        return False
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read()
    except OSError:
        return False
    return f"{TOKEN_VAR}={token}".encode() in env.split(b"\0")


def kill_orphans(token, exclude=(), grace_s=GRACE_S):
    """Kill what the run left outside its process group: processes re-parented to this engine
    (it is their subreaper) and any process carrying the run's token. Returns how many.
    `exclude`: the command itself (its exit status is the caller's to collect)."""
    me = os.getpid()
    killed = set()
    end = time.monotonic() + grace_s
    give_up = end + grace_s
    sig = signal.SIGTERM
    while True:
        found = []
        for pid in _pids():
            if pid == me or pid in exclude:
                continue
            fields = _stat_fields(pid)
            if not fields or fields[0] == "Z" and fields[1] != str(me):
                continue
            if fields[1] == str(me) or has_token(pid, token):
                found.append((pid, fields))
        live = []
        for pid, fields in found:
            if fields[0] == "Z":
                _reap(pid)
                continue
            live.append(pid)
            try:
                os.kill(pid, sig)
                killed.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
        if not live or time.monotonic() >= give_up:
            return len(killed)
        if time.monotonic() >= end:
            sig = signal.SIGKILL
        time.sleep(0.02)
        for pid in live:
            _reap(pid)


def _reap(pid):
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
