"""Stall detection, early abort and the lean result, through the real CLI and real processes.

The benchmark `steps.py` writes a steps file as the ML harness does (one JSON line per step with
`progress` and `loss`, into $AUTORESEARCH_STEPS_FILE) and prints what `value.txt` asks for:
a loss curve (`curve:<start>:<end>`), a hang after its first step (`hang`), 10 KB of output before
its metric (`chatty`), or a crash after 10 KB (`crashy`).
"""

import json
import time

from helpers_engine import make_repo

STEPS = r'''
import json, os, sys, time
kind = open("value.txt").read().strip()
steps = open(os.environ["AUTORESEARCH_STEPS_FILE"], "a")
def step(i, n, loss):
    steps.write(json.dumps({"step": i, "progress": (i + 1) / n, "loss": loss}) + "\n")
    steps.flush()
if kind == "hang":
    print("starting", flush=True)
    step(0, 100, 5.0)
    print("step 00000 (1.0%) | loss: 5.000000", flush=True)
    time.sleep(1000)
elif kind.startswith("curve:"):
    _, start, end = kind.split(":")
    start, end, n = float(start), float(end), 40
    for i in range(n - 1):   # as the harness: the last step reports 97.5%, not 100%
        step(i, n, start + (end - start) * i / (n - 2))
        time.sleep(0.05)
    time.sleep(1.5)   # the evaluation: no step lines, no output, after the budget
    print(f"METRIC loss={end}")
elif kind == "chatty":
    for i in range(120):
        print(f"step {i:05d} ({i}.0%) | loss: 3.{i:06d} | lrm: 1.00 | dt: 120ms | tok/sec: 123,456 | mfu: 40%")
    print("METRIC loss=1.0")
elif kind == "crashy":
    for i in range(120):
        print(f"step {i:05d} ({i}.0%) | loss: 3.{i:06d} | lrm: 1.00 | dt: 120ms | tok/sec: 123,456 | mfu: 40%")
    print("Traceback (most recent call last):", file=sys.stderr)
    print('  File "train.py", line 412, in <module>', file=sys.stderr)
    print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
          "of 23.64 GiB of which 1.12 GiB is free. " + "x" * 400, file=sys.stderr)
    sys.exit(1)
'''


def steps_repo(tmp_path, *init_extra, value="curve:5.0:3.0"):
    root = tmp_path / "research"
    repo = make_repo(root, init_args=None, value=value)
    (root / "steps.py").write_text(STEPS)
    repo.git("add", "steps.py")
    repo.git("commit", "-q", "-m", "steps benchmark")
    repo.ok("init", "--metric", "loss", "--command", "python3 steps.py", "--scope", "value.txt",
            "--fixed", "steps.py", "--timeout", "120", *init_extra)
    return repo


def run_json(repo, value, *extra, env=None):
    repo.set(value)
    proc = repo.cli("run", "-m", f"value {value}", "--json", *extra, env=env, timeout=150)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)["record"]


def test_a_run_that_hangs_after_its_first_step_is_stopped_as_stalled(tmp_path):
    repo = steps_repo(tmp_path, value="hang")
    started = time.monotonic()
    record = run_json(repo, "hang", env={"AUTORESEARCH_STALL_FLOOR_S": "3"})
    took = time.monotonic() - started
    assert record["status"] == "timeout", record
    assert record["reason"].startswith("stalled after step 0"), record["reason"]
    # The limit is the floor (3 s; one gap only): stopped within it plus a poll and the kill's grace,
    # far from the 120 s timeout.
    assert 3 <= record["duration_s"] < 3 + 0.5 + 2 + 3, record
    assert took < 60, took
    assert record["diagnosis"] is not None


def test_a_steady_run_and_its_quiet_evaluation_are_not_stalls(tmp_path):
    repo = steps_repo(tmp_path)
    # Steps every 0.05 s, then 1.5 s without a line after the whole budget (the evaluation), with a
    # floor of 1 s: neither the steps nor the evaluation are a stall.
    record = run_json(repo, "curve:5.0:3.0", env={"AUTORESEARCH_STALL_FLOOR_S": "1"})
    assert record["status"] == "keep", record


def test_early_abort_stops_a_candidate_clearly_behind_and_spares_one_ahead(tmp_path):
    repo = steps_repo(tmp_path, "--early-abort", "--noise-runs", "2")
    repo.set("curve:5.0:3.0")
    proc = repo.cli("run", "--baseline", "-m", "baseline", "--json", timeout=150)
    assert proc.returncode == 0, proc.stderr
    behind = run_json(repo, "curve:5.0:3.6")
    assert behind["status"] == "discard", behind
    assert behind["reason"].startswith("stopped at "), behind["reason"]
    assert "vs the best's" in behind["reason"] and "at the same point" in behind["reason"]
    abort = behind["early_abort"]
    assert 0.4 <= abort["progress"] < 1.0 and abort["loss"] > abort["best_loss"] + abort["margin"]
    assert abort["against"] == 1 and abort["saved_s"] > 0
    assert behind["metric"] is None
    ahead = run_json(repo, "curve:5.0:2.9")
    assert ahead["status"] == "keep" and ahead.get("early_abort") is None, ahead
    # The report counts the stopped run and the time it saved.
    proc = repo.cli("report", "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)["summary"]
    assert summary["earlyAborts"] == 1 and summary["earlyAbortSavedHours"] * 3600 == abort["saved_s"]


def test_early_abort_is_off_unless_turned_on(tmp_path):
    repo = steps_repo(tmp_path)
    run_json(repo, "curve:5.0:3.0")
    behind = run_json(repo, "curve:5.0:3.6")
    assert behind["status"] == "discard" and behind["metric"] == 3.6 and behind.get("early_abort") is None


def test_piped_run_prints_only_the_verdict(tmp_path):
    repo = steps_repo(tmp_path, value="chatty")
    repo.set("chatty")
    proc = repo.cli("run", "-m", "baseline", timeout=150)   # stdout is a pipe here, as in the Bash tool
    assert proc.returncode == 0, proc.stderr
    output_log = (repo.root / ".autoresearch" / "runs" / "1" / "output.log").read_bytes()
    assert len(output_log) >= 10_000
    out = proc.stdout.encode()
    assert len(out) <= 1024, proc.stdout
    assert "run 1: KEEP" in proc.stdout and "best: run 1" in proc.stdout and "next:" in proc.stdout
    assert "step 00050" not in proc.stdout
    verbose = repo.cli("run", "--baseline", "-m", "again", "--verbose", timeout=150)
    assert "step 00050" in verbose.stdout and len(verbose.stdout) > 10_000


def test_piped_crash_prints_the_verdict_the_diagnosis_and_the_lines_that_matter(tmp_path):
    repo = steps_repo(tmp_path, value="crashy")
    proc = repo.cli("run", "-m", "baseline", timeout=150)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert len(out.encode()) <= 3 * 1024, out
    assert "run 1: CRASH" in out and "diagnosis:" in out and "fix:" in out
    assert "OutOfMemoryError" in out
    assert "step 00119" not in out   # progress lines are not the lines that matter
