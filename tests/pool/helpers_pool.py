"""Helpers for the pool tests: a research repo driven through the real CLI, a real local Ray.

The benchmark `bench.sh` reads `value.txt` (the scope) as `METRIC[:SECONDS]`: it sleeps that
long (default 2 s), writes what the run saw (CUDA_VISIBLE_DEVICES, start and end times) into
its run folder, and prints `METRIC loss=<value>`; `crash` exits 1 with a traceback.

Where `$AR_TEST_MARKERS` names a folder (a test's own, declared a cache at init), each run also leaves a marker there as
it starts (`start-RUN-PID`), and when that folder holds a file `barrier` with a number N, the
run holds until N runs have started (120 s at most) before it sleeps: a test can then wait for
the markers, an event, instead of guessing with sleeps, and knows every run is mid-benchmark.
Every run reports its throughput as `METRIC num_steps=100`; a file `contend` there holding N
plays a noisy neighbour: the first N runs to start report 50 steps instead (each claims one of
the N slots atomically with mkdir), the runs after them 100 again.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from gitrepo import git_repo

SRC = Path(__file__).resolve().parents[2] / "src"

BENCH = r"""#!/bin/bash
v=$(cat value.txt)
m=${v%%:*}; s=2; case "$v" in *:*) s=${v#*:} ;; esac
{ echo "${CUDA_VISIBLE_DEVICES-unset}"; date +%s.%N; } > "$AUTORESEARCH_RUN_DIR/env.txt"
echo "training with value $m on GPU ${CUDA_VISIBLE_DEVICES-unset}"
steps=100
if [ -n "${AR_TEST_MARKERS-}" ]; then
  : > "$AR_TEST_MARKERS/start-$AUTORESEARCH_RUN-$$"
  if [ -f "$AR_TEST_MARKERS/contend" ]; then
    for i in $(seq 1 "$(cat "$AR_TEST_MARKERS/contend")"); do
      if mkdir "$AR_TEST_MARKERS/claim-$i" 2>/dev/null; then steps=50; break; fi
    done
  fi
  if [ -f "$AR_TEST_MARKERS/barrier" ]; then
    n=$(cat "$AR_TEST_MARKERS/barrier"); t=0
    while [ "$(ls "$AR_TEST_MARKERS" | grep '^start-' | cut -d- -f2 | sort -u | wc -l)" -lt "$n" ] && [ $t -lt 1200 ]; do
      sleep 0.1; t=$((t+1))
    done
  fi
fi
if [ "$m" = crash ]; then echo "Traceback (most recent call last):" >&2; echo "RuntimeError: boom" >&2; exit 1; fi
sleep "$s"
date +%s.%N >> "$AUTORESEARCH_RUN_DIR/env.txt"
echo "METRIC num_steps=$steps"
echo "METRIC loss=$m"
"""


def require_ray():
    """Skip when Ray is missing (fail under AUTORESEARCH_REQUIRE_ALL=1, as CI sets)."""
    try:
        import ray  # noqa: F401
    except ImportError:
        message = "ray is not installed; pip install -e '.[pool]' (CI installs it)"
        if os.environ.get("AUTORESEARCH_REQUIRE_ALL") == "1":
            pytest.fail(message)
        pytest.skip(message)


def ray_env():
    """HOME and RAY_TMPDIR of our own (Ray writes its token and sockets there; socket paths
    must stay short), and this checkout's src/ on the path."""
    base = tempfile.mkdtemp(prefix="ar-ray-", dir="/tmp")
    os.makedirs(os.path.join(base, "home"))
    return base, {"HOME": os.path.join(base, "home"), "RAY_TMPDIR": os.path.join(base, "tmp"),
                  "PYTHONPATH": str(SRC), "RAY_USAGE_STATS_ENABLED": "0"}


class Research:
    def __init__(self, root, env):
        self.root = Path(root)
        self.env = env

    def cli(self, *args, timeout=240):
        env = dict(os.environ)
        env.pop("CLAUDE_CODE_SESSION_ID", None)
        env.update(self.env)
        return subprocess.run([sys.executable, "-m", "autoresearch", *args], cwd=self.root, env=env,
                              capture_output=True, text=True, timeout=timeout)

    def ok(self, *args, timeout=240):
        proc = self.cli(*args, timeout=timeout)
        assert proc.returncode == 0, f"{args}: rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        return proc

    def json(self, *args, timeout=240):
        proc = self.cli(*args, "--json", timeout=timeout)
        assert proc.stdout.count("\n") == 1, (proc.stdout, proc.stderr)
        return proc.returncode, json.loads(proc.stdout)

    def set(self, value):
        (self.root / "value.txt").write_text(f"{value}\n")

    def submit(self, value, message=None):
        self.set(value)
        rc, data = self.json("submit", "-m", message or f"value {value}")
        assert rc == 0, data
        return data["candidate"]

    def git(self, *args):
        return subprocess.run(["git", *args], cwd=self.root, capture_output=True, text=True,
                              check=True).stdout.strip()

    def runs(self):
        lines = (self.root / "autoresearch.jsonl").read_text().splitlines()
        return [r for r in map(json.loads, lines) if "run" in r]

    def seen(self, run):
        """(CUDA_VISIBLE_DEVICES, start, end) the benchmark of `run` wrote."""
        lines = (self.root / ".autoresearch" / "runs" / str(run) / "env.txt").read_text().split()
        return lines[0], float(lines[1]), float(lines[2]) if len(lines) > 2 else None


def make_repo(root, env, value="1.0"):
    Path(root).mkdir(parents=True)
    root = git_repo(root, {"bench.sh": BENCH, "value.txt": f"{value}\n"})
    repo = Research(root, env)
    # The markers' folder is a declared cache: the sandbox lets a run write it (and only it).
    repo.ok("init", "--metric", "loss", "--command", "bash bench.sh", "--scope", "value.txt",
            "--fixed", "bench.sh", "--cache", "$AR_TEST_MARKERS")
    return repo


def cleanup(base):
    shutil.rmtree(base, ignore_errors=True)
