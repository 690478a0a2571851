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

from autoresearch import decide, gitops, log, runner
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
    os.makedirs(repo.state, exist_ok=True)
    write_json_atomic(repo.current, data)


def clear_current(repo):
    try:
        os.unlink(repo.current)
    except FileNotFoundError:
        pass


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
    current = read_current(repo)
    if current is None:
        if os.path.exists(repo.current):  # unreadable: torn by a crash before the rename
            clear_current(repo)
        return None
    run = current.get("run")
    child = current.get("child_pid")
    if child and current.get("child_start") and process_start_time(child) == current.get("child_start"):
        runner.kill_group(child)
    recorded = {r.get("run") for r in records if log.is_run(r)}
    target = _restore_target(repo, runs, current)
    crash = None
    if run not in recorded:
        head = gitops.head(repo.root)
        commit = current.get("commit") or (head if head and head != current.get("base") else None)
        if commit:
            gitops.set_run_ref(repo.root, run, commit)
        pending = current.get("pending")
        if pending and pending.get("run") not in recorded:
            log.append(repo.log, pending)
        crash = {
            "run": run,
            "commit": gitops.short(commit) if commit else None,
            "metric": None,
            "metrics": {},
            "status": "crash",
            "description": current.get("description", ""),
            "timestamp": now_ms(),
            "segment": segment,
            "confidence": None,
            "asi": current.get("asi") or {},
            "duration_s": round(max(0.0, time.time() - current.get("started", now_ms()) / 1000), 3),
            "reason": f"engine stopped mid-run (pid {current.get('pid')}, during {current.get('phase')}); "
                      "recorded as a crash by the next engine call",
            "best_before": None,
            "threshold": None,
            "diagnosis": None,
            "run_dir": repo.rel(repo.run_dir(run)),
            "ref": f"{gitops.RUNS_REF}/{run}" if commit else None,
            "scope_hash": current.get("scope_hash"),
            "scope_lines": current.get("scope_lines"),
            "repeat_of": current.get("repeat_of"),
        }
        log.append(repo.log, crash)
        warn(f"run {run} was interrupted ({crash['reason']}); recorded it as a crash")
    _restore(repo, target, warn)
    clear_current(repo)
    return crash


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
        full = gitops.run_ref(repo.root, best.get("run"))
        if full:
            return full
        if best.get("commit"):
            return gitops.git(repo.root, "rev-parse", "--verify", "-q", best["commit"] + "^{commit}",
                              check=False)
    return current.get("base")
