"""The engine's state beside the log: the run lock, the session file, the unfinished run.

- `.autoresearch/lock`: `fcntl.flock`, held for a whole `run`. The kernel drops it when the
  process dies, so a lock is never stale.
- `.autoresearch/session.json`: {active, owner_session, segment, ...}; `stop`/`resume` flip it.
- `.autoresearch/current.json`: written before a run touches git and removed after its record
  is appended. Found with the lock free, it means the engine died mid-run: `recover()` records
  the run as a crash, kills what the benchmark left running, and restores the best commit.
"""

import fcntl
import os
import time

from autoresearch import chain, decide, gitops, log, pending, runner, workspace
from autoresearch.research import now_ms, read_json, write_json_atomic


class Lock:
    def __init__(self, path):
        self.path = path
        self.fd = None

    def acquire(self, wait_s=0.0):
        """Take the lock; wait up to `wait_s` for it. Return False if another process holds it."""
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        end = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() >= end:
                    os.close(self.fd)
                    self.fd = None
                    return False
                time.sleep(0.05)

    def release(self):
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def is_locked(path):
    if not os.path.exists(path):
        return False
    lock = Lock(path)
    if lock.acquire():
        lock.release()
        return False
    return True


# --- session.json ---

def read_session(repo):
    return read_json(repo.session)


def is_active(session):
    """The one rule for "is the session active", used by run, status, brief and the hooks:
    only a session.json that says so. A missing or unreadable file reads as stopped, and
    `autoresearch resume` writes it again."""
    return bool(session) and session.get("active") is True


def write_session(repo, **fields):
    session = read_session(repo) or {}
    session.update(fields)
    session["updated"] = now_ms()
    os.makedirs(repo.state, exist_ok=True)
    write_json_atomic(repo.session, session)
    return session


# --- current.json: the run in progress ---

def read_current(repo):
    return read_json(repo.current)


def write_current(repo, data):
    """current.json for every reader, and the engine's own copy in the git directory (the one
    recovery trusts: a tool may write .autoresearch/current.json, not the engine's copy)."""
    os.makedirs(repo.state, exist_ok=True)
    copy = current_copy(repo)
    if copy:
        os.makedirs(os.path.dirname(copy), exist_ok=True)
        write_json_atomic(copy, data)
    write_json_atomic(repo.current, data, durable=copy is None)


def current_copy(repo):
    """Path of the engine's copy of current.json (None outside a git work tree)."""
    folder = chain.state_dir(repo.log)
    return os.path.join(folder, "current.json") if folder else None


def clear_current(repo):
    for path in (current_copy(repo), repo.current):
        if path:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass


def needs_recovery(repo):
    """True when a run may be unfinished or a result waits to be appended."""
    copy = current_copy(repo)
    return os.path.exists(repo.current) or bool(copy and os.path.exists(copy)) or pending.waiting(repo)


def _trusted_current(repo, warn):
    """The run-state the engine wrote, or None. current.json that the engine's copy does not
    back (written by a tool, or changed since) is reported and ignored: it is never appended
    from and no process it names is signalled."""
    copy = current_copy(repo)
    shown = read_json(repo.current)
    if copy is None:
        return shown
    mine = read_json(copy)
    if os.path.exists(repo.current) and shown != mine:
        warn(f"{repo.rel(repo.current)} was not written by the engine (it differs from the engine's copy); "
             "ignored it" + ("" if mine else " and removed it"))
        if mine is None:
            try:
                os.unlink(repo.current)
            except FileNotFoundError:
                pass
    return mine


def process_start_time(pid):
    """The kernel's start time of `pid` (to tell our benchmark from a recycled pid), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().decode("ascii", "replace").rsplit(")", 1)[-1].split()[19]
    except (OSError, IndexError):
        return None


def recover(repo, records, config, runs, segment, warn):
    """Record an unfinished run (engine killed mid-run) as a crash and restore the best commit.

    Must be called with the lock held. Returns the crash record, or None if there was nothing
    to recover. Idempotent: a run whose record made it into the log is only cleaned up.
    """
    workspace.sweep(repo)
    flushed = pending.flush(repo, warn)
    if flushed:
        records = log.read(repo.log, warn=lambda m: None)
        segs = log.segments(records)
        runs = segs[-1][1] if segs else []
    current = _trusted_current(repo, warn)
    if current is None:
        if os.path.exists(repo.current) or (current_copy(repo) and os.path.exists(current_copy(repo))):
            clear_current(repo)  # unreadable: torn by a crash before the rename
        return flushed or None
    run = current.get("run")
    if not isinstance(run, int) or isinstance(run, bool) or run < 1:
        warn(f"{repo.rel(repo.current)} names no valid run ({run!r}); removed it")
        clear_current(repo)
        return None
    _stop_the_run(current)
    recorded = {r.get("run") for r in records if log.is_run(r)}
    target = _restore_target(repo, runs, current)
    crash = None
    if run not in recorded:
        head = gitops.head(repo.root)
        commit = current.get("commit") or (head if head and head != current.get("base") else None)
        if commit:
            try:
                gitops.set_run_ref(repo.root, run, str(commit))
            except gitops.GitError as exc:  # the commit is gone: record the crash without it
                warn(f"run {run}: could not keep its commit {str(commit)[:7]} ({exc})")
                commit = None
        waiting = current.get("pending")
        if isinstance(waiting, dict) and waiting.get("run") not in recorded:
            # A borderline win waiting for its confirmation: never confirmed, so never a keep.
            log.append(repo.log, dict(waiting, status="discard"), warn=warn)
        started = current.get("started")
        started = started if isinstance(started, (int, float)) and not isinstance(started, bool) else now_ms()
        crash = {
            "run": run,
            "commit": gitops.short(str(commit)) if commit else None,
            "metric": None,
            "metrics": {},
            "status": "crash",
            "description": current.get("description", ""),
            "timestamp": now_ms(),
            "segment": segment,
            "confidence": None,
            "asi": current.get("asi") or {},
            "duration_s": round(max(0.0, time.time() - started / 1000), 3),
            "reason": f"engine stopped mid-run (pid {current.get('pid')}, during {current.get('phase')}); "
                      "recorded as a crash by the next engine call",
            "best_before": None,
            "threshold": None,
            "diagnosis": None,
            "run_dir": repo.rel(repo.run_dir(run)),
            "ref": f"{gitops.runs_ref(repo.root)}/{run}" if commit else None,
            "scope_hash": current.get("scope_hash"),
            "scope_lines": current.get("scope_lines"),
            "repeat_of": current.get("repeat_of"),
        }
        # Sanitised if need be (an --asi from an older engine): a record that cannot be written
        # would leave current.json behind and every later call failing here.
        log.append(repo.log, crash, warn=warn)
        warn(f"run {run} was interrupted ({crash['reason']}); recorded it as a crash")
    try:
        _restore(repo, target, warn)
    except gitops.GitError as exc:
        warn(f"could not put HEAD back at the best commit ({exc}); check `git status`")
    clear_current(repo)
    return crash or flushed or None


def _stop_the_run(current):
    """Kill what the dead run left running, and nothing else: the recorded child only when it is
    the process the engine started (same kernel start time, leading its own process group,
    carrying the run's token), and any process carrying the run's token (setsid daemons)."""
    child = current.get("child_pid")
    token = current.get("token")
    if isinstance(child, int) and not isinstance(child, bool) and child > 1 and current.get("child_start") \
            and process_start_time(child) == current.get("child_start") and _leads_group(child) \
            and (not token or runner.has_token(child, token)):
        runner.kill_group(child)
    if isinstance(token, str) and len(token) >= 16:
        runner.kill_orphans(token)


def _leads_group(pid):
    try:
        return os.getpgid(pid) == pid
    except OSError:
        return False


def _restore(repo, target, warn):
    """Put HEAD back at `target`; keep edits made after the crash instead of wiping them."""
    head = gitops.head(repo.root)
    if not target or head == target:
        return
    if gitops.changed_tracked(repo.root, "HEAD"):
        # The work tree moved on since the interrupted run (the agent kept editing): move HEAD
        # and the index only, so those edits become the next run's change.
        gitops.git(repo.root, "reset", "-q", "--mixed", target)
        warn("HEAD is back at the best commit; your uncommitted edits are kept in the work tree")
    else:
        gitops.reset_hard(repo.root, target)


def _restore_target(repo, runs, current):
    best = decide.incumbent(runs)
    if best is not None:
        full = gitops.run_ref(repo.root, best.get("run"), best.get("ref"))
        if full:
            return full
        if best.get("commit"):
            return gitops.git(repo.root, "rev-parse", "--verify", "-q", best["commit"] + "^{commit}",
                              check=False)
    return current.get("base")
