"""`autoresearch run` end to end: real git, real subprocesses, the real CLI."""

import json
import os
import signal
import subprocess
import sys
import time

from helpers_engine import engine_env, process_gone
from helpers_engine import repo, make  # noqa: F401 (fixtures)


def test_baseline_keep_discard_and_refs(repo):
    base = repo.experiment("1.0", "baseline")
    assert base["status"] == "keep" and base["metric"] == 1.0 and base["run"] == 1
    assert "baseline" in base["reason"]

    better = repo.experiment("0.8", "lower value")
    assert better["status"] == "keep" and better["best_before"] == 1.0
    kept_head = repo.head()
    assert repo.git("rev-parse", "--short=7", "HEAD") == better["commit"]
    assert repo.git("log", "-1", "--format=%s") == "lower value"

    worse = repo.experiment("0.9", "higher value")
    assert worse["status"] == "discard" and "worse" in worse["reason"]
    # HEAD is back at the best commit, the work tree holds the best code ...
    assert repo.head() == kept_head
    assert (repo.root / "value.txt").read_text() == "0.8\n"
    assert repo.git("status", "--porcelain", "--untracked-files=no") == ""
    # ... and the discarded commit is still reachable from its ref, with its change.
    ref = repo.git("rev-parse", "refs/autoresearch/runs/3")
    assert ref.startswith(worse["commit"])
    assert repo.git("show", f"{ref}:value.txt") == "0.9"
    assert worse["ref"] == "refs/autoresearch/runs/3"

    run_dir = repo.root / worse["run_dir"]
    assert "METRIC loss=0.9" in (run_dir / "output.log").read_text()
    assert "+0.9" in (run_dir / "diff.patch").read_text()
    env = (run_dir / "env.txt").read_text().split("\n")
    assert env[0] == "3" and env[1] == str(run_dir) and env[2] == str(run_dir / "steps.jsonl")


def test_log_keeps_pi_field_names(repo):
    repo.experiment("1.0", 'a "quoted"\nmultiline description')
    header, run = repo.records()
    for key in ("type", "name", "metricName", "metricUnit", "bestDirection"):
        assert key in header
    assert header["type"] == "config" and header["metricName"] == "loss"
    for key in ("run", "commit", "metric", "metrics", "status", "description", "timestamp", "segment",
                "confidence", "asi"):
        assert key in run
    assert run["description"] == 'a "quoted"\nmultiline description'
    assert run["metrics"] == {"loss": 1.0, "peak_vram_mb": 2048.0}
    assert abs(run["timestamp"] - time.time() * 1000) < 120_000  # milliseconds
    for key in ("duration_s", "reason", "best_before", "threshold", "diagnosis", "run_dir", "ref",
                "scope_hash", "repeat_of"):
        assert key in run


def test_tie_is_discarded(repo):
    repo.experiment("1.0")
    tie = repo.experiment("1.00", "same number, other spelling")
    assert tie["status"] == "discard" and "tie" in tie["reason"]


def test_crash_records_tail_and_resets(repo):
    repo.experiment("1.0")
    best = repo.head()
    repo.set("crash")
    proc = repo.cli("run", "-m", "will crash")
    assert proc.returncode == 0
    assert "CRASH" in proc.stdout and "RuntimeError: boom" in proc.stdout  # the tail of the output
    assert "diagnosis:" in proc.stdout
    record = repo.runs()[-1]
    assert record["status"] == "crash" and record["metric"] is None and record["reason"] == "exit 1"
    assert record["diagnosis"]["family"]
    assert json.loads((repo.root / record["run_dir"] / "diagnosis.json").read_text()) == record["diagnosis"]
    assert repo.head() == best and (repo.root / "value.txt").read_text() == "1.0\n"


def test_missing_and_non_finite_metric_are_crashes(repo):
    repo.experiment("1.0")
    missing = repo.experiment("nometric")
    assert missing["status"] == "crash" and "no valid METRIC loss" in missing["reason"]
    nan = repo.experiment("nan")
    assert nan["status"] == "crash" and "not a finite number" in nan["reason"]


def test_timeout_kills_the_whole_process_group(make):
    repo = make("--timeout", "1")
    repo.experiment("1.0")
    started = time.monotonic()
    record = repo.experiment("hang")
    assert time.monotonic() - started < 1 + 5 + 3  # timeout + 5 s to kill + CLI start-up
    assert record["status"] == "timeout" and "timed out after 1 s" in record["reason"]
    # Found by its run folder in its environment: under bubblewrap its own pid ($!) is one of
    # its pid namespace, not of this machine.
    run_dir = str(repo.root / record["run_dir"])
    deadline = time.monotonic() + 5
    while _procs_of_run(run_dir) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _procs_of_run(run_dir) == [], "the benchmark's background child survived the timeout"
    assert record["diagnosis"] is not None


def test_failed_checks(make):
    flag = "../../../checks-fail"   # from the run's snapshot: the research repo (the sandbox hides /tmp)
    repo = make("--checks", f"test ! -e {flag} || (echo 'unit test failed'; exit 1)")
    flag = repo.root / "checks-fail"
    repo.experiment("1.0")
    flag.write_text("x")
    repo.set("0.5")
    proc = repo.cli("run", "-m", "better but breaks the tests")
    assert proc.returncode == 0, proc.stderr
    record = repo.runs()[-1]
    assert record["status"] == "checks_failed" and record["metric"] == 0.5
    assert "unit test failed" in proc.stdout
    assert (repo.root / "value.txt").read_text() == "1.0\n"
    flag.unlink()
    assert repo.experiment("0.5", "same change, tests pass", "--force")["status"] == "keep"


def test_json_output_is_one_object(repo):
    repo.set("1.0")
    proc = repo.cli("run", "-m", "baseline", "--json")
    data = json.loads(proc.stdout)
    assert data["ok"] and data["status"] == "keep" and data["best"]["metric"] == 1.0
    assert proc.stderr == ""   # --json: nothing but the object; the output is in the run's output.log
    assert "METRIC loss=1.0" in (repo.root / ".autoresearch/runs/1/output.log").read_text()


def test_streams_output_in_a_terminal_and_with_verbose_but_not_into_a_pipe(repo):
    proc = repo.cli("run", "-m", "baseline")   # a pipe, as an agent's Bash tool: the verdict only
    assert "training with value 1.0" not in proc.stdout and "run 1: KEEP" in proc.stdout
    proc = repo.cli("run", "--baseline", "-m", "again", "--verbose")
    assert "training with value 1.0" in proc.stdout and "run 2: DISCARD" in proc.stdout
    # In a terminal (a pseudo-terminal here) it streams as it always did.
    import os
    import pty
    from helpers_engine import engine_env
    leader, follower = pty.openpty()
    child = subprocess.Popen([sys.executable, "-m", "autoresearch", "run", "--baseline", "-m", "in a terminal"],
                             cwd=repo.root, env=engine_env(), stdin=subprocess.DEVNULL, stdout=follower,
                             stderr=follower)
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:   # EIO: the terminal's other end is closed
            break
        if not chunk:
            break
        seen += chunk
    child.wait(timeout=60)
    os.close(leader)
    assert b"training with value 1.0" in seen and b"run 3: DISCARD" in seen, seen


def test_max_iterations(make):
    repo = make("--max-iterations", "2")
    repo.experiment("1.0")
    repo.experiment("0.9")
    assert repo.status()["iterations_left"] == 0
    before = repo.snapshot()
    repo.set("0.8")
    rc, data = repo.json("run", "-m", "one too many")
    assert rc == 3 and "budget is spent" in data["message"]
    assert repo.snapshot() == before


def test_second_init_starts_a_new_segment(repo):
    repo.experiment("1.0")
    repo.experiment("0.5")
    repo.ok("init", "--metric", "loss", "--command", "bash bench.sh", "--scope", "value.txt",
            "--name", "second")
    status = repo.status()
    assert status["segment"] == 1 and status["runs"] == 0 and status["total_runs"] == 2
    assert status["best"] is None
    # The first run of the new segment is its baseline, even without a change.
    first = repo.experiment("0.5", "new baseline")
    assert first["status"] == "keep" and first["segment"] == 1 and first["run"] == 3
    assert repo.experiment("0.6")["status"] == "discard"
    assert [r.get("segment") for r in repo.records()] == [0, 0, 0, 1, 1, 1]


def _start_slow_run(repo, piped=True, started=None):
    """A kept baseline, then `autoresearch run` of a 30-second benchmark in the background:
    (the baseline's commit, the engine process). `started` runs in the engine's process before it
    starts (what `nohup` does to it)."""
    repo.experiment("1.0")
    best = repo.head()
    repo.set("sleep:30")
    out = dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) if piped else \
        dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    engine = subprocess.Popen([sys.executable, "-m", "autoresearch", "run", "-q", "-m", "slow"],
                              cwd=repo.root, env=_env(), preexec_fn=started, **out)
    return best, engine


def test_killed_mid_run_is_recorded_as_crash(repo):
    best, engine = _start_slow_run(repo, piped=False)
    child = _wait_for_child(repo)
    engine.kill()
    engine.wait()
    status = repo.status()  # the next engine call notices the unfinished run
    assert status["running"] is None and status["counts"]["crash"] == 1
    crash = repo.runs()[-1]
    assert crash["status"] == "crash" and "engine stopped mid-run" in crash["reason"]
    assert repo.head() == best and not (repo.root / ".autoresearch/current.json").exists()
    assert repo.git("rev-parse", "refs/autoresearch/runs/2").startswith(crash["commit"])
    _wait_gone(child)
    assert repo.experiment("0.9")["status"] == "keep"


def test_sigterm_records_the_run(repo):
    best, engine = _start_slow_run(repo)
    child = _wait_for_child(repo)
    engine.send_signal(signal.SIGTERM)
    out, err = engine.communicate(timeout=20)
    assert engine.returncode == 130, err
    record = repo.runs()[-1]
    assert record["status"] == "crash" and "SIGTERM" in record["reason"]
    assert repo.head() == best
    _wait_gone(child)


def test_signals_after_the_first_leave_the_record_whole(repo):
    """Ctrl-C, then Claude Code stopping its Bash tool, then more: the engine is already stopping,
    and nothing after the first signal cuts its record of the run short."""
    best, engine = _start_slow_run(repo)
    child = _wait_for_child(repo)
    engine.send_signal(signal.SIGINT)
    # "After the first" as the engine sees it: once it has acted on the Ctrl-C (the benchmark is
    # stopped). Two signals sent microseconds apart reach a two-threaded process in either order on
    # a loaded machine, and which of the two is named first is then not the engine's to know.
    deadline = time.monotonic() + 15
    while not process_gone(child) and time.monotonic() < deadline:
        time.sleep(0.002)
    deadline, sent = time.monotonic() + 30, 0
    while engine.poll() is None and time.monotonic() < deadline:
        engine.send_signal(signal.SIGTERM)
        sent += 1
        time.sleep(0.005)
    assert sent >= 1   # the storm met the engine while it recorded the run (about 20 here)
    out, err = engine.communicate(timeout=20)
    assert engine.returncode == 130 and "interrupted by SIGINT: recorded" in out, err
    record = repo.runs()[-1]
    assert record["status"] == "crash" and "SIGINT" in record["reason"], record
    assert repo.head() == best and not (repo.root / ".autoresearch/current.json").exists()


def test_a_hangup_the_engine_was_started_ignoring_stays_ignored(repo):
    """`nohup autoresearch run ...` and the terminal closes: the run goes on (nohup asked for that);
    the signals it was not told to ignore still stop it and record it."""
    best, engine = _start_slow_run(repo, started=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    child = _wait_for_child(repo)
    engine.send_signal(signal.SIGHUP)
    time.sleep(1.0)   # a trapped SIGHUP stops the benchmark within milliseconds
    assert engine.poll() is None and not process_gone(child)
    engine.send_signal(signal.SIGTERM)
    out, err = engine.communicate(timeout=30)
    assert engine.returncode == 130 and "interrupted by SIGTERM: recorded" in out, err
    assert "SIGTERM" in repo.runs()[-1]["reason"] and repo.head() == best


def test_a_signal_while_the_run_is_prepared_stops_it_whole(repo):
    """A signal before the benchmark started (the commit, the snapshot): the run is recorded as an
    interrupted crash at once, its benchmark never runs, nothing is left for the next call."""
    current = repo.root / ".autoresearch/current.json"
    best, engine = _start_slow_run(repo)
    deadline = time.monotonic() + 20
    while not current.exists() and engine.poll() is None and time.monotonic() < deadline:
        time.sleep(0.001)
    engine.send_signal(signal.SIGTERM)
    out, err = engine.communicate(timeout=30)
    assert engine.returncode == 130, err
    record = repo.runs()[-1]
    assert record["run"] == 2 and record["status"] == "crash" and "SIGTERM" in record["reason"], record
    assert record["duration_s"] < 25   # the 30 s benchmark did not run
    assert repo.head() == best and not current.exists()


def test_second_run_while_one_is_going_is_refused(repo):
    repo.experiment("1.0")
    repo.set("sleep:3")
    engine = subprocess.Popen([sys.executable, "-m", "autoresearch", "run", "-q", "-m", "slow"],
                              cwd=repo.root, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_child(repo)
        status = repo.status()
        assert status["running"]["run"] == 2 and status["running"]["pid"] == engine.pid
        rc, data = repo.json("run", "-m", "concurrent")
        assert rc == 3 and "already going" in data["message"]
    finally:
        engine.wait(timeout=30)
    assert [r["run"] for r in repo.runs()] == [1, 2]


def _env():
    return engine_env()


def _procs_of_run(run_dir):
    """Live processes that carry the run's folder in their environment (every one it started)."""
    marker = f"AUTORESEARCH_RUN_DIR={run_dir}".encode()
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[-1].split()[0]
        except OSError:
            continue
        if marker in env and state != b"Z":
            found.append(int(pid))
    return found


def _wait_for_child(repo, timeout=20):
    path = repo.root / ".autoresearch/current.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            current = json.loads(path.read_text())
            # The child exists once its pid is recorded; the benchmark runs once the engine let it
            # go (the pipe handshake): then it prints its first line.
            out = repo.root / ".autoresearch/runs" / str(current.get("run")) / "output.log"
            if current.get("child_pid") and out.exists() and out.stat().st_size:
                return current["child_pid"]
        except (FileNotFoundError, ValueError):
            pass
        time.sleep(0.02)
    raise AssertionError("the benchmark never started")


def _wait_gone(pid, timeout=15):
    deadline = time.monotonic() + timeout
    while not process_gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process_gone(pid)
