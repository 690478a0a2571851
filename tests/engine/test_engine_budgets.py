"""Budgets that stop the loop: time (--max-hours), GPU time (--max-gpu-hours), as the iteration
budget does: `run` refuses with the figure, status says so, the Stop hook lets the owner stop."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from helpers_engine import make_repo

HOOK = Path(__file__).resolve().parents[2] / "hooks" / "stop.py"
INIT = ("--metric", "loss", "--command", "bash bench.sh", "--scope", "value.txt", "--fixed", "bench.sh")


def stop_hook(repo, session):
    proc = subprocess.run([sys.executable, str(HOOK)], input=json.dumps(
        {"session_id": session, "cwd": str(repo.root), "hook_event_name": "Stop", "stop_hook_active": True,
         "transcript_path": str(repo.root / "no-such-transcript.jsonl")}), capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout) if proc.stdout.strip() else {}


def test_time_budget_refuses_the_next_run_and_lets_the_agent_stop(tmp_path):
    repo = make_repo(tmp_path / "r", init_args=(*INIT, "--max-hours", "0.0003", "--session", "owner-1"))
    time.sleep(1.2)   # 0.0003 h is 1.08 s
    before = repo.snapshot()
    proc = repo.cli("run", "-q", "-m", "baseline")
    assert proc.returncode == 3
    assert re.search(r"refused: the time budget is spent \(deadline \d{4}-\d\d-\d\d \d\d:\d\d passed\); "
                     r"the loop ends here", proc.stderr), proc.stderr
    assert repo.snapshot() == before                       # nothing run, nothing recorded
    status = repo.status()
    assert status["budget_spent"].startswith("the time budget is spent")
    assert status["budgets"]["max_hours"] == 0.0003
    answer = stop_hook(repo, "owner-1")
    assert answer.get("decision") is None and "the time budget is spent" in answer["systemMessage"]


def test_gpu_hour_budget_counts_run_time_and_says_the_figure(tmp_path):
    repo = make_repo(tmp_path / "r", init_args=(*INIT, "--max-gpu-hours", "0.0002", "--session", "owner-1"))
    first = repo.experiment("1:1.0", "baseline")           # sleeps 1 s: 0.00028 GPU-hours or more
    assert first["status"] == "keep"
    repo.set("0.5")
    proc = repo.cli("run", "-q", "-m", "smaller")
    assert proc.returncode == 3
    used = float(re.search(r"the GPU-hour budget is spent \(([0-9.e-]+) of 0\.0002 GPU-hours\)", proc.stderr)[1])
    assert used == float(f"{first['duration_s'] / 3600:.3g}")
    ledger = repo.status()["ledger"]
    assert ledger["gpu_seconds"] == first["duration_s"] and ledger["runs_per_gpu_hour"] > 0
    assert "the GPU-hour budget is spent" in stop_hook(repo, "owner-1")["systemMessage"]
    assert "budget: the GPU-hour budget is spent" in repo.ok("status").stdout


def test_init_checks_the_price_file_and_keeps_it_in_the_header(tmp_path):
    bad = tmp_path / "prices.json"
    bad.write_text('{"claude-opus-5-5": {"input": "four"}}')
    repo = make_repo(tmp_path / "r", init_args=None)
    proc = repo.cli("init", *INIT, "--prices", str(bad))
    assert proc.returncode == 2 and "--prices" in proc.stderr and "input" in proc.stderr
    assert not (repo.root / "autoresearch.jsonl").exists()
    good = tmp_path / "good.json"
    good.write_text('{"claude-opus-5-5": {"input": 10, "output": 50}}')
    repo.ok("init", *INIT, "--prices", str(good), "--max-cost", "2.5")
    header = repo.records()[0]
    assert header["prices"] == {"claude-opus-5-5": [10.0, 50.0, 12.5, 20.0, 1.0]} and header["max_cost"] == 2.5
    assert repo.status()["ledger"]["prices_source"] == "the price file given to `init --prices`"


def test_the_limits_of_a_night_that_was_killed_do_not_outlive_it(tmp_path):
    repo = make_repo(tmp_path / "r", init_args=(*INIT, "--session", "owner-1"))
    session = json.loads((repo.root / ".autoresearch" / "session.json").read_text())
    dead = subprocess.Popen(["true"])
    dead.wait()
    live = dict(session, night={"id": "n1", "pid": os.getpid(), "deadline_ms": 1, "max_cost": 1.0})
    (repo.root / ".autoresearch" / "session.json").write_text(json.dumps(live))
    assert repo.status()["budget_spent"].startswith("the time budget is spent")   # its night still runs
    killed = dict(live, night=dict(live["night"], pid=dead.pid))
    (repo.root / ".autoresearch" / "session.json").write_text(json.dumps(killed))
    assert repo.status()["budget_spent"] is None
    assert repo.experiment("1.0", "baseline")["status"] == "keep"
