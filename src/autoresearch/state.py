"""The engine's state beside the log: the run lock, the session file, the unfinished run.

- `.autoresearch/lock`: `fcntl.flock`, held for a whole `run`. The kernel drops it when the
  process dies, so a lock is never stale.
- `.autoresearch/session.json`: {active, owner_session, segment, ...}; `stop`/`resume` flip it.
- `.autoresearch/current.json`: written before a run touches git and removed after its record
  is appended. Found with the lock free, it means the engine died mid-run: recovery.py records
  the run as a crash, kills what the benchmark left running, and restores the best commit.
"""

import fcntl
import os
import time

from autoresearch.files import read_json, write_json_atomic
from autoresearch.research import now_ms


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
