"""The pool's files under `.autoresearch/pool/`, read without Ray: `pool status`, and `status`
and `brief` while a pool was ever started here, read them through this module; pool/ writes them.

- `pool.json`         the runner's state: pid, Ray address, GPUs and their class (or why it refused)
- `candidates/N.json` a submitted candidate (its commit is `refs/autoresearch/candidates/N`)
- `go`                `wait` asks the runner for a wave
- `waves/W.json`      a wave: planned, running, or done with its records (`W.reported` once printed)
- `runner.log`        what the runner said
"""

import os

from autoresearch.store import state
from autoresearch.store.files import read_json


class Paths:
    def __init__(self, repo):
        self.dir = os.path.join(repo.state, "pool")
        self.info = os.path.join(self.dir, "pool.json")
        self.log = os.path.join(self.dir, "runner.log")
        self.go = os.path.join(self.dir, "go")
        self.candidates = os.path.join(self.dir, "candidates")
        self.waves_dir = os.path.join(self.dir, "waves")
        self.submit_lock = os.path.join(self.dir, "submit.lock")
        self.counter = os.path.join(self.dir, "next_candidate")
        self.failure = os.path.join(self.dir, "last_failure.json")

    def wave(self, number):
        return os.path.join(self.waves_dir, f"{number}.json")

    def candidate(self, cid):
        return os.path.join(self.candidates, f"{cid}.json")


def info(paths):
    return read_json(paths.info)


def alive(data):
    pid = (data or {}).get("pid")
    return isinstance(pid, int) and pid > 1 and state.process_start_time(pid) is not None and \
        (not data.get("pid_start") or state.process_start_time(pid) == data.get("pid_start"))


def is_up(repo):
    """True when a pool runner serves this repo (the engine's `run` then goes through it)."""
    paths = Paths(repo)
    if not os.path.exists(paths.info):
        return False
    data = info(paths)
    return bool(data) and data.get("status") == "up" and alive(data)


def queued(paths):
    """The submitted candidates, by id."""
    return sorted(_numbered(paths.candidates), key=lambda c: c["id"])


def waves(paths):
    """Every wave's file, by wave number."""
    return sorted(_numbered(paths.waves_dir), key=lambda w: w["wave"])


def _numbered(folder):
    """The readable `N.json` files of `folder` (none when it is missing)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    found = (read_json(os.path.join(folder, n)) for n in names if n.endswith(".json") and n[:-5].isdigit())
    return [data for data in found if data]


def status_data(repo):
    """The pool block of `pool status` (and of `status`/`brief` while a pool is up)."""
    paths = Paths(repo)
    data = info(paths) or {}
    up = data.get("status") == "up" and alive(data)
    running = next((w for w in waves(paths) if w.get("status") == "running"), None)
    busy = len(running["runs"]) if running else 0
    q = queued(paths)
    return {"up": up, "address": data.get("address") if up else None, "local": data.get("local"),
            "ray_version": data.get("ray_version"), "gpus": data.get("gpus", 0) if up else 0,
            "slots": data.get("slots", []) if up else [], "classes": data.get("classes", []) if up else [],
            "busy": min(busy, data.get("gpus", 0)) if up else 0, "queued": len(q),
            "queued_candidates": [{"id": c["id"], "description": c["description"]} for c in q],
            "wave_running": running["wave"] if running else None}
