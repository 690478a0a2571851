"""The benchmark cannot change what decides: each attack of a hostile experiment, reproduced.

Each attack runs twice where it matters: under the sandbox (Landlock: the write fails) and with
detection alone (AUTORESEARCH_SANDBOX=off: the engine finds the change after the run, restores
it and records the run `tampered`). Either way no forged or hacked result is kept or shown as
the best, and the log and the harness end as the engine wrote them.
"""

import json
import os
import signal
import subprocess
import time

import pytest
from hostile import LIVE, forged_keep, make, procs_with

from autoresearch.isolation import sandbox
from autoresearch.store import chain

MODES = [pytest.param(True, id="sandbox"), pytest.param(False, id="detection")]


def _mode(on):
    if on and not sandbox.abi():
        pytest.skip("Landlock is not available on this kernel")
    return on


@pytest.mark.parametrize("on", MODES)
def test_forged_keep_appended_by_the_benchmark(tmp_path, on):
    repo = make(tmp_path / "r", sandbox=_mode(on))
    repo.baseline()
    rc, data = repo.attack(f"echo '{forged_keep(99)}' >> \"$L/autoresearch.jsonl\"")
    assert rc == 0
    assert data["record"]["status"] == ("discard" if on else "tampered")
    assert repo.best()["run"] == 1 and repo.best()["metric"] == 1.0
    assert 99 not in [r.get("run") for r in repo.assert_log_as_written()]


@pytest.mark.parametrize("on", MODES)
def test_fixed_file_rewritten_during_the_run(tmp_path, on):
    """The hack rewrites the evaluation (in the run's snapshot and in the work tree)."""
    repo = make(tmp_path / "r", sandbox=_mode(on))
    repo.baseline()
    rc, data = repo.attack("echo 'echo \"METRIC loss=0.001\"' > eval.sh; "
                           "echo 'echo \"METRIC loss=0.001\"' > \"$L/eval.sh\"; true")
    record = data["record"]
    assert record["status"] == ("discard" if on else "tampered"), record
    if not on:
        assert "fixed file eval.sh" in record["reason"] and record["metric"] is None
        assert any("eval.sh" in t for t in record["tampered"])
    assert repo.best()["run"] == 1
    repo.assert_harness_intact()
    repo.assert_log_as_written()


def test_rewrite_and_restore_is_still_caught(tmp_path):
    """The hacked evaluation puts the original back after printing: same bytes, new write time."""
    repo = make(tmp_path / "r", sandbox=False)
    repo.baseline()
    rc, data = repo.attack('cp eval.sh "$TMPDIR/orig"; '
                           'printf \'echo "METRIC loss=0.001"\\ncp "$TMPDIR/orig" eval.sh\\n\' > eval.sh')
    record = data["record"]
    assert record["status"] == "tampered" and "put back" in record["reason"], record
    assert repo.best()["run"] == 1
    repo.assert_harness_intact()


def test_log_truncated_during_the_run(tmp_path):
    repo = make(tmp_path / "r", sandbox=False)
    repo.baseline()
    rc, data = repo.attack(': > "$L/autoresearch.jsonl"; : > "$L/.git/autoresearch/log.jsonl"')
    assert data["record"]["status"] == "tampered"
    records = repo.assert_log_as_written()
    assert [r["run"] for r in records if "run" in r] == [1, 2]
    assert repo.best()["run"] == 1


def test_run_state_and_head_changed_during_the_run(tmp_path):
    repo = make(tmp_path / "r", sandbox=False)
    repo.baseline()
    best = repo.head()
    rc, data = repo.attack('echo "{}" > "$L/.autoresearch/current.json"; '
                           'git -C "$L" commit -q --allow-empty -m sneaky; '
                           'git -C "$L" update-ref refs/autoresearch/runs/1 HEAD')
    record = data["record"]
    assert record["status"] == "tampered", record
    assert "run-state" in record["reason"] and "HEAD" in record["reason"] and "refs/autoresearch/runs/1" in record["reason"]
    assert repo.head() == best and repo.git("rev-parse", "refs/autoresearch/runs/1") == best


def test_forged_lines_appended_between_runs(tmp_path):
    """A tool appends a keep with a valid-looking chain link, and a second config header that
    would accept a changed harness: neither counts, and the next run puts the log back."""
    repo = make(tmp_path / "r")
    repo.baseline()
    path = repo.root / "autoresearch.jsonl"
    lines = path.read_bytes().splitlines()
    header = json.loads(lines[0])
    header.update(fixed={"bench.sh": "0" * 64, "eval.sh": "0" * 64}, prev=chain.line_hash(lines[-1]))
    with open(path, "ab") as f:
        f.write(forged_keep(7, prev=chain.line_hash(lines[-1])).encode() + b"\n")
        f.write(json.dumps(header).encode() + b"\n")
    records, warnings = repo.engine_view()
    assert [r.get("run") for r in records if "run" in r] == [1]
    assert any(":3:" in w for w in warnings) and any(":4:" in w for w in warnings)
    proc = repo.cli("status", "--json")
    assert json.loads(proc.stdout)["best"]["run"] == 1 and "off the log's hash chain" in proc.stdout
    (repo.root / "eval.sh").write_text('echo "METRIC loss=0.001"\n')   # the harness the forged header allows
    rc, data = repo.attack("true")
    assert rc == 3 and "fixed file eval.sh" in data["message"]
    (repo.root / "eval.sh").write_text(EVAL_TEXT)
    rc, data = repo.attack("echo again")
    assert rc == 0 and data["record"]["status"] == "discard"
    repo.assert_log_as_written()
    assert list((repo.root / ".autoresearch" / "foreign").iterdir()), "the replaced log was not kept aside"


EVAL_TEXT = 'echo "METRIC loss=1.0"\n'


def test_truncated_log_between_runs_is_read_from_the_engine_copy(tmp_path):
    repo = make(tmp_path / "r")
    repo.baseline()
    repo.attack("echo two")
    (repo.root / "autoresearch.jsonl").write_bytes(b"")
    proc = repo.cli("status", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["runs"] == 2 and "engine's copy" in proc.stdout
    rc, data = repo.attack("echo three")
    assert rc == 0
    assert [r["run"] for r in repo.assert_log_as_written() if "run" in r] == [1, 2, 3]


def test_forged_current_json_is_ignored_and_a_foreign_process_is_not_signalled(tmp_path):
    repo = make(tmp_path / "r")
    repo.baseline()
    bystander = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        with open(f"/proc/{bystander.pid}/stat") as f:
            start = f.read().rsplit(")", 1)[-1].split()[19]
        pending = json.loads(forged_keep(5))
        forged = {"run": 6, "pid": 999999, "started": 1, "phase": "benchmark", "base": repo.head(),
                  "description": "x", "asi": {}, "commit": repo.head(), "pending": pending,
                  "child_pid": bystander.pid, "child_start": start}
        (repo.root / ".autoresearch" / "current.json").write_text(json.dumps(forged))
        proc = repo.cli("status", "--json")
        assert proc.returncode == 0 and "not written by the engine" in proc.stdout + proc.stderr
        time.sleep(0.3)
        assert bystander.poll() is None, "the engine signalled a process it did not start"
        runs = [r.get("run") for r in repo.assert_log_as_written() if "run" in r]
        assert runs == [1] and json.loads(proc.stdout)["best"]["run"] == 1
    finally:
        bystander.kill()
        bystander.wait()


def test_edits_while_a_run_is_in_flight(tmp_path):
    """The run measures its commit (a snapshot), and the agent's edit made meanwhile survives."""
    repo = make(tmp_path / "r")
    repo.baseline()
    (repo.root / "train.sh").write_text('sleep 1.5; cat train.sh > "$AUTORESEARCH_RUN_DIR/measured"\n')
    engine = subprocess.Popen([os.sys.executable, "-m", "autoresearch", "run", "-q", "-m", "slow", "--json"],
                              cwd=repo.root, env=repo.env_for_popen(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while not (repo.root / ".autoresearch/runs/2/output.log").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    (repo.root / "train.sh").write_text("echo the agent's next idea\n")
    out, err = engine.communicate(timeout=60)
    data = json.loads(out)
    record = data["record"]
    measured = (repo.root / ".autoresearch/runs/2/measured").read_text()
    assert measured == repo.git("show", f"{record['commit']}:train.sh") + "\n"
    assert (repo.root / "train.sh").read_text() == "echo the agent's next idea\n"
    assert "kept, uncommitted" in data["message"]
    assert repo.head().startswith(repo.best()["commit"])


def test_setsid_daemons_are_killed_at_the_end_of_the_run(tmp_path):
    repo = make(tmp_path / "r")
    repo.baseline()
    rc, data = repo.attack("setsid sleep 3001 < /dev/null > /dev/null 2>&1 & "
                           "( setsid bash -c 'sleep 3002' < /dev/null > /dev/null 2>&1 & ); sleep 0.2")
    assert rc == 0
    deadline = time.monotonic() + 5
    while (procs_with("3001") or procs_with("3002")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert procs_with("3001") == [] and procs_with("3002") == []


def test_sigkill_between_spawn_and_pid_record_and_during_the_new_steps(tmp_path):
    """Kills at random moments (the snapshot, the handshake, the benchmark, the verification,
    the record): nothing the benchmark started outlives the next engine call, nothing is lost."""
    import random
    rng = random.Random(int(os.environ.get("CHAOS_SEED", "1010")))
    repo = make(tmp_path / "r")
    repo.baseline()
    for i in range(20):
        (repo.root / "train.sh").write_text(LIVE + f"setsid sleep 3003 < /dev/null > /dev/null 2>&1 & "
                                            f"sleep 0.{rng.randint(0, 3)}; echo {i}\n")
        engine = subprocess.Popen([os.sys.executable, "-m", "autoresearch", "run", "-q", "-m", f"kill {i}"],
                                  cwd=repo.root, env=repo.env_for_popen(), stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.0, 0.6))
        engine.send_signal(signal.SIGKILL)
        engine.wait()
        status = repo.status()          # recovers the unfinished run
        assert status["running"] is None and status["best"]["run"] == 1
        records = repo.assert_log_as_written()
        runs = [r["run"] for r in records if "run" in r]
        assert runs == sorted(set(runs))
        deadline = time.monotonic() + 5
        while procs_with("3003") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert procs_with("3003") == [], f"kill {i}: a daemon of the run outlived the engine"
        repo.assert_harness_intact()
    assert not (repo.root / ".autoresearch" / "snapshots").exists() or \
        not list((repo.root / ".autoresearch" / "snapshots").iterdir())


def test_runaway_print_loop_is_capped_and_the_metric_still_read(tmp_path):
    repo = make(tmp_path / "r", init=("--metric", "loss", "--command", "bash bench.sh", "--scope", "train.sh",
                                       "--fixed", "bench.sh", "eval.sh", "--output-cap", "1", "--timeout", "300"))
    repo.baseline()
    (repo.root / "train.sh").write_text("yes 'a runaway line of output' | head -c 100000000\n")
    # The engine is started by a small fresh interpreter, not forked from pytest: a child's peak
    # RSS counts the pages it shared with its parent at fork, and pytest may hold torch by now.
    peak_file = tmp_path / "peak_kib"
    starter = ("import resource, subprocess, sys; subprocess.run(sys.argv[2:]); "
               "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))")
    engine = subprocess.Popen([os.sys.executable, "-c", starter, str(peak_file),
                               os.sys.executable, "-m", "autoresearch", "run", "-q", "-m", "flood", "--json"],
                              cwd=repo.root, env=repo.env_for_popen(), stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL)
    out = engine.stdout.read()
    engine.wait()
    peak_kib = int(peak_file.read_text())
    record = json.loads(out)["record"]
    assert record["status"] == "discard" and record["metric"] == 1.0   # METRIC after the flood, still read
    size = (repo.root / ".autoresearch/runs/2/output.log").stat().st_size
    assert size <= 1.1 * (1 << 20) and record["output_cut_bytes"] > 95_000_000
    assert b"bytes of output left out here" in (repo.root / ".autoresearch/runs/2/output.log").read_bytes()
    assert peak_kib < 200 * 1024, f"the engine peaked at {peak_kib} KiB"


def test_merge_in_progress_is_refused_before_anything_runs(tmp_path):
    repo = make(tmp_path / "r")
    repo.baseline()
    repo.git("checkout", "-q", "-b", "other")
    (repo.root / "train.sh").write_text("echo other\n")
    repo.git("commit", "-qam", "other")
    repo.git("checkout", "-q", "master" if "master" in repo.git("branch") else "main")
    (repo.root / "train.sh").write_text("echo mine\n")
    repo.git("commit", "-qam", "mine")
    subprocess.run(["git", "merge", "other"], cwd=repo.root, capture_output=True)
    before = (repo.root / "autoresearch.jsonl").read_bytes()
    rc, data = repo.json("run", "-q", "-m", "during a merge")
    assert rc == 3 and "merge is in progress" in data["message"]
    assert (repo.root / "autoresearch.jsonl").read_bytes() == before
    assert not (repo.root / ".autoresearch/current.json").exists()


def test_detached_head_is_refused_and_the_advice_does_not_detach(tmp_path):
    repo = make(tmp_path / "r")
    repo.baseline()
    repo.git("checkout", "-q", "--detach")
    rc, data = repo.attack("echo x")
    assert rc == 3 and "detached" in data["message"] and "git switch" in data["message"]


def test_two_worktrees_of_one_repository_do_not_collide(tmp_path):
    a = make(tmp_path / "a")
    a.baseline()
    a.git("worktree", "add", "-q", "-b", "second", str(tmp_path / "b"))
    from hostile import Hostile
    b = Hostile(tmp_path / "b")
    b.ok("init", "--metric", "loss", "--command", "bash bench.sh", "--scope", "train.sh", "--fixed", "bench.sh",
         "eval.sh")
    b.baseline()
    for i in range(2):
        for repo in (a, b):
            rc, data = repo.attack(f"echo {repo.root.name} {i}")
            assert rc == 0, data
            ref = data["record"]["ref"]
            assert repo.git("rev-parse", ref).startswith(data["record"]["commit"])
    assert not {r["ref"] for r in a.runs()} & {r["ref"] for r in b.runs()}
    for repo in (a, b):   # every run's ref still holds that run's own commit
        for r in repo.runs():
            assert repo.git("rev-parse", r["ref"]).startswith(r["commit"])


def test_benchmark_making_the_log_immutable_is_tampered_and_nothing_is_lost(tmp_path):
    """chattr +i on the log from inside the run: the run changed what decides (tampered), the
    log cannot take its record (EPERM even for root), and the record waits, appended later."""
    repo = make(tmp_path / "r", sandbox=False)
    repo.baseline()
    log_path = repo.root / "autoresearch.jsonl"
    if subprocess.run(["chattr", "+i", str(log_path)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not possible here (needs root and a file system that has it)")
    subprocess.run(["chattr", "-i", str(log_path)], check=True)
    try:
        rc, data = repo.attack('chattr +i "$L/autoresearch.jsonl"')
        assert rc == 3 and "cannot be written" in data["message"] and "waits" in data["message"], data
    finally:
        subprocess.run(["chattr", "-i", str(log_path)], check=True)
    status = repo.status()
    assert status["best"]["run"] == 1 and status["counts"]["tampered"] == 1
    repo.assert_log_as_written()


def test_result_the_log_cannot_take_waits_and_is_appended_by_the_next_command(tmp_path):
    """A real improvement is measured, then the log cannot grow (a file size limit: EFBIG, as a
    full disk gives ENOSPC): a refusal in one line, the result waits, the next command appends it."""
    import resource
    import sys
    repo = make(tmp_path / "r", init=("--metric", "loss", "--command", "bash bench.sh", "--scope", "train.sh",
                                      "eval.sh", "--fixed", "bench.sh"))
    repo.baseline()
    (repo.root / "eval.sh").write_text('echo "METRIC loss=0.5"\n')   # in the scope here: a real improvement
    (repo.root / "train.sh").write_text("echo improved\n")
    limit = (repo.root / "autoresearch.jsonl").stat().st_size + 100

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    proc = subprocess.run([sys.executable, "-m", "autoresearch", "run", "-q", "-m", "improve", "--json"],
                          cwd=repo.root, env=repo.env_for_popen(), capture_output=True, text=True,
                          preexec_fn=small_files, timeout=120)
    data = json.loads(proc.stdout)
    assert proc.returncode == 3 and "cannot be written" in data["message"] and "waits" in data["message"], data
    assert "Traceback" not in proc.stderr
    status = repo.status()
    assert status["best"]["run"] == 2 and status["best"]["metric"] == 0.5
    repo.assert_log_as_written()
    assert repo.head().startswith(status["best"]["commit"])


def test_too_little_free_space_is_refused_before_the_run(tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        repo = make(mount / "r")
        before = (repo.root / "autoresearch.jsonl").read_bytes()
        rc, data = repo.json("run", "-q", "-m", "no room for output.log")
        assert rc == 3 and "free on the disk" in data["message"] and "--output-cap" in data["message"]
        assert (repo.root / "autoresearch.jsonl").read_bytes() == before
        assert not (repo.root / ".autoresearch/runs/1").exists()
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)
