"""SIGKILL the engine at random moments of `run`, many times: nothing kept is ever lost.

After every kill the log still parses line by line, every kept commit is still in git, the
next engine call records the unfinished run and puts HEAD back at the best commit, nothing
the benchmark started is left running, and the next `run` works.
"""

import json
import os
import random
import signal
import subprocess
import sys
import time

from helpers_engine import engine_env, make_repo

KILLS = 24


def test_sigkill_at_random_moments(tmp_path):
    repo = make_repo(tmp_path / "chaos")
    rng = random.Random(int(os.environ.get("CHAOS_SEED", "20261130")))
    env = engine_env()
    repo.experiment("0.05:5.0", "baseline")
    values = iter(f"{v:.6f}" for v in rng.sample(range(1000, 5000), 200))
    moments = []
    for i in range(KILLS):
        repo.set(f"{rng.choice(['0.05', '0.2', '0.3'])}:{next(values)}")
        engine = subprocess.Popen([sys.executable, "-m", "autoresearch", "run", "-q", "-m", f"try {i}"],
                                  cwd=repo.root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        moment = rng.uniform(0.0, 0.7)
        time.sleep(moment)
        engine.send_signal(signal.SIGKILL)
        engine.wait()
        moments.append(moment)
        if i % 3 == 2:
            # The next `run` itself recovers and works.
            repo.set(f"0.05:{next(values)}")
            proc = repo.cli("run", "-q", "-m", f"after kill {i}", "--json")
            assert proc.returncode == 0, proc.stdout + proc.stderr
        _check_invariants(repo)
    statuses = [r["status"] for r in repo.runs()]
    # The kills really landed mid-run: some runs were cut short, some had finished.
    assert "crash" in statuses and len(statuses) > KILLS // 3
    assert not _leftovers(repo), "benchmark processes outlived the engine"


def _check_invariants(repo):
    status = repo.status()  # the next engine call: recovers an unfinished run
    for line in repo.log_lines():
        json.loads(line)  # every line parses: a record is written whole or not at all
    runs = repo.runs()
    assert [r["run"] for r in runs] == sorted({r["run"] for r in runs}), "duplicate or unordered runs"
    for record in runs:
        if record["status"] == "keep":
            assert subprocess.run(["git", "cat-file", "-e", record["commit"] + "^{commit}"],
                                  cwd=repo.root).returncode == 0, f"kept commit of run {record['run']} lost"
    assert status["running"] is None
    assert not (repo.root / ".autoresearch/current.json").exists()
    assert repo.git("rev-parse", "--short=7", "HEAD") == status["best"]["commit"]
    assert repo.git("status", "--porcelain", "--untracked-files=no", "--", "README.txt", "bench.sh") == ""


def _leftovers(repo, wait_s=3.0):
    """Processes whose working directory is the research repo (the benchmark runs there)."""
    deadline = time.monotonic() + wait_s
    while True:
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if os.readlink(f"/proc/{pid}/cwd") == str(repo.root):
                    with open(f"/proc/{pid}/stat") as f:
                        if f.read().rsplit(")", 1)[-1].split()[0] != "Z":
                            found.append(pid)
            except OSError:
                continue
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)
