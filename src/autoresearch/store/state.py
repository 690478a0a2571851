"""The engine's state beside the log: the run lock, the session file, the unfinished run.

- `.autoresearch/lock`: `fcntl.flock`, held for a whole `run`. The kernel drops it when the
  process dies, so a lock is never stale.
- `.autoresearch/session.json`: {active, owner_session, segment, ...}; `stop`/`resume` flip it.
- `.autoresearch/current.json`: written before a run touches git and removed after its record
  is appended. Found with the lock free, it means the engine died mid-run: recovery.py records
  the run as a crash, kills what the benchmark left running, and restores the best commit.
"""

import fcntl
import json
import os
import time

from autoresearch.store import chain
from autoresearch.store.files import read_json, write_atomic, write_json_atomic
from autoresearch.store.research import now_ms


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
    write_atomic(repo.current, json.dumps(data, indent=1, sort_keys=True) + "\n", durable=copy is None)


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
    from autoresearch.store import pending
    copy = current_copy(repo)
    return os.path.exists(repo.current) or bool(copy and os.path.exists(copy)) or pending.waiting(repo)


def trusted_current(repo, warn):
    """The run-state the engine wrote, or None. A current.json that the engine's copy does not
    back (written by a tool, or changed since) is reported and ignored: nothing is appended
    from it and no process it names is signalled."""
    copy = current_copy(repo)
    shown = read_json(repo.current)
    if copy is None:
        return shown
    mine = read_json(copy)
    if os.path.exists(repo.current) and shown != mine:
        warn(f"{repo.rel(repo.current)} was not written by the engine (it differs from the engine's copy); "
             "ignored it" + ("" if mine else " and removed it"))
        if mine is None:
            clear_current(repo)
    return mine


def process_start_time(pid):
    """The kernel's start time of `pid` (to tell our benchmark from a recycled pid), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().decode("ascii", "replace").rsplit(")", 1)[-1].split()[19]
    except (OSError, IndexError):
        return None
