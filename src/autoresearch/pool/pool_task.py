"""What runs on a pool worker: one experiment in its own snapshot, or a probe of the node.

Standard library only (plus snapshot/runner from this package); the pool runner wraps these
functions in Ray tasks, so they run wherever Ray places them, one GPU each. Nothing here
decides or records: the results go back to the pool runner, the one writer of the log.

- On the head machine (where the repository is) the run's commit is exported into a folder of
  its own (`snapshot.export_commit`, plus links to untracked data such as `.venv/`).
- On another machine the commit's files come with the task as bytes and are materialised
  into a temporary folder (`snapshot.materialize`).
Either way the benchmark runs in that folder, never in the live work tree, under the same
guards as a single run (guarded.py: the sandbox, the integrity guard where the repository is,
stall detection), and everything it wrote into its run folder comes back as bytes.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autoresearch.isolation import snapshot

MAX_FILE_BYTES = 32 << 20      # a file the run wrote larger than this stays behind (noted)
MAX_TOTAL_BYTES = 256 << 20    # and so does everything past this much in all


def run_experiment(spec, node_id):
    """Run one experiment as `spec` says; return what the pool runner records.

    spec: run, commit, repo (path on the head), head_node, files ({path: bytes}), executable,
    config (the segment's header, as JSON). The measurement is measure.py's, as for a single run.
    """
    from autoresearch.pipeline import guarded
    from autoresearch.pipeline.measure import run_env
    from autoresearch.store import log, research
    started = time.time()
    _reap_children()
    config = log.Config.from_json(spec["config"])
    work = Path(tempfile.mkdtemp(prefix=f"autoresearch-run{spec['run']}-"))
    run_dir = work / "run"
    run_dir.mkdir()
    repo = spec.get("repo")
    here = bool(repo) and node_id == spec.get("head_node") and os.path.exists(os.path.join(repo, ".git"))
    try:
        t0 = time.monotonic()
        tree = None
        if not here:
            tree = snapshot.materialize(spec["files"], work / "tree", executable=set(spec.get("executable") or ()))
        where = "export" if here else "bytes"
        bench = {}

        def began(pid):
            bench["started"] = time.time()
        env = run_env(spec["run"], str(run_dir))
        with guarded.run(config, spec["run"], str(run_dir), env, repo=research.Repo(repo) if here else None,
                         commit=spec["commit"], tree=tree, on_start=began,
                         on_workspace=lambda ws: bench.update(snapshot_s=time.monotonic() - t0),
                         concurrent=True) as g:
            bench_end = time.time()
            files, left = _collect(run_dir)
            return {"run": spec["run"], "measurement": g.measurement, "files": files, "left_behind": left,
                    "node": node_id, "host": socket.gethostname(), "snapshot": where,
                    "snapshot_s": round(bench.get("snapshot_s", 0.0), 4), "started": started,
                    "bench_started": bench.get("started", bench_end), "bench_ended": bench_end,
                    "ended": time.time(), "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                    "sandbox": g.sandbox, "tampered": g.changes, "not_restored": g.failed}
    finally:
        snapshot.remove(work)


def _reap_children():
    """Ray's workers ignore SIGCHLD, which makes the kernel discard a child's exit status (a
    crash would read as exit 0): restore the default so the benchmark's status comes back."""
    try:
        if signal.getsignal(signal.SIGCHLD) == signal.SIG_IGN:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    except ValueError:   # not the main thread: nothing to restore from here
        pass


def _collect(run_dir):
    files, left, total = {}, [], 0
    for path in sorted(Path(run_dir).rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        rel = path.relative_to(run_dir).as_posix()
        size = path.stat().st_size
        if size > MAX_FILE_BYTES or total + size > MAX_TOTAL_BYTES:
            left.append(rel)
            continue
        files[rel] = path.read_bytes()
        total += size
    return files, left


def probe(data_check):
    """What the pool needs to know about a node: its GPUs, Python, and the prepared data."""
    info = {"host": socket.gethostname(), "python": "%d.%d" % sys.version_info[:2],
            "gpus": _gpus(), "data": None}
    if data_check:
        if data_check.startswith("cache:"):   # the ML template's cache, as prepare.py finds it
            cache = os.environ.get("AUTORESEARCH_CACHE") or os.path.join(os.path.expanduser("~"), ".cache",
                                                                         "autoresearch")
            path = os.path.join(cache, data_check[len("cache:"):])
        else:
            path = os.path.expanduser(os.path.expandvars(data_check))
        info["data"] = {"path": path, "present": os.path.exists(path)}
    return info


def _gpus():
    """[{index, name, memory_mb, uuid}] from nvidia-smi, or [] where there is none."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run([smi, "--query-gpu=index,name,memory.total,uuid", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    gpus = []
    for line in out.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4 and parts[0].isdigit():
            gpus.append({"index": int(parts[0]), "name": parts[1],
                         "memory_mb": int(parts[2]) if parts[2].isdigit() else None, "uuid": parts[3]})
    return gpus
