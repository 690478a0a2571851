"""Bad input never escapes as a traceback, never loses a run and never wedges the repo."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers_engine import SRC, engine_env, repo  # noqa: F401 (fixtures)


@pytest.mark.parametrize("asi, needle", [
    ('{"lr": 1e999}', "too large for a float"),
    ('{"k": "\\ud800"}', "not valid Unicode"),
    ('{"a": NaN}', "may not contain NaN"),
])
def test_asi_the_log_cannot_hold_is_refused_before_the_benchmark_runs(repo, asi, needle):
    repo.experiment("1.0")
    repo.set("0.9")
    before = repo.snapshot()
    proc = repo.cli("run", "-q", "-m", "x", "--asi", asi, "--json")
    assert proc.returncode == 3, proc.stderr
    assert needle in json.loads(proc.stdout)["message"]
    assert proc.stderr == ""   # --json: the one object says it all
    assert repo.snapshot() == before
    assert not (repo.root / ".autoresearch/current.json").exists()
    assert not (repo.root / ".autoresearch/runs/2").exists(), "the benchmark ran"
    assert repo.experiment("0.9", "x", "--asi", '{"lr": 1e300}')["status"] == "keep"


def test_non_utf8_argument_is_a_one_line_usage_error(repo):
    before = repo.snapshot()
    proc = subprocess.run([sys.executable, "-m", "autoresearch", "init", "--metric", "loss", "--command",
                           "bash bench.sh", "--scope", "value.txt", "--name", b"n\xff"],
                          cwd=repo.root, env=engine_env(), capture_output=True)
    assert proc.returncode == 2
    err = proc.stderr.decode()
    assert "not valid UTF-8" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert repo.snapshot() == before


def test_unfinished_run_whose_record_cannot_be_written_as_is_is_recorded_sanitised(repo):
    """An engine killed mid-run left current.json with values strict JSON cannot hold."""
    repo.experiment("1.0")
    best = repo.head()
    current = {"run": 2, "pid": 999999, "started": 1, "phase": "benchmark", "base": best,
               "description": "x", "asi": {"lr": float("inf"), "k": "\ud800"}, "commit": best}
    _write_current(repo, json.dumps(current))
    for command in ("status", "brief"):
        proc = repo.cli(command)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert not (repo.root / ".autoresearch/current.json").exists()
    crash = repo.runs()[-1]
    assert crash["run"] == 2 and crash["status"] == "crash" and crash["asi"]["lr"] is None
    repo.set("0.9")
    assert repo.experiment("0.9")["status"] == "keep"


def _write_current(repo, text):
    """The run-state as a dying engine leaves it: current.json and the engine's own copy of it
    (a current.json without that copy was not written by the engine, see tests/integrity)."""
    (repo.root / ".autoresearch/current.json").write_text(text)
    from autoresearch.store import anchor
    copy = Path(anchor.folder(str(repo.root), make=True)) / "current.json"
    copy.write_text(text)


def test_current_json_without_a_run_number_does_not_wedge(repo):
    repo.experiment("1.0")
    _write_current(repo, '{"run": "x"}')
    proc = repo.cli("status")
    assert proc.returncode == 0 and "no valid run" in proc.stderr
    assert not (repo.root / ".autoresearch/current.json").exists()


def test_unexpected_error_is_one_line_with_please_report(repo):
    before = repo.runs()
    log = repo.root / "autoresearch.jsonl"
    log.rename(repo.root / "saved.jsonl")
    log.mkdir()  # a log the engine cannot read: an OSError no command expects
    proc = repo.cli("status", "--json")
    assert proc.returncode == 1
    assert proc.stderr == "" and json.loads(proc.stdout)["error"] == "internal"
    assert "please report" in json.loads(proc.stdout)["message"]
    plain = repo.cli("status")
    assert "please report" in plain.stderr and "Traceback" not in plain.stderr
    log.rmdir()
    (repo.root / "saved.jsonl").rename(log)
    assert repo.runs() == before


def test_a_refused_init_with_git_init_leaves_no_repository_behind(tmp_path):
    empty_home = tmp_path / "not-a-checkout"
    empty_home.mkdir()
    target = tmp_path / "night"
    target.mkdir()
    proc = subprocess.run([sys.executable, "-m", "autoresearch", "init", "--git-init", "--template", "ml"],
                          cwd=target, env=dict(engine_env(), AUTORESEARCH_HOME=str(empty_home)),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3 and "AUTORESEARCH_HOME" in proc.stderr
    assert list(target.iterdir()) == [], "refused: nothing created"
    # A refusal found only after the repository was made (scope and fixed files overlap) takes it back too.
    proc = subprocess.run([sys.executable, "-m", "autoresearch", "init", "--git-init", "--metric", "m",
                           "--command", "true", "--scope", "a.py", "--fixed", "a.py"],
                          cwd=target, env=engine_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode in (2, 3), proc.stderr
    assert list(target.iterdir()) == []


def test_a_reader_that_closes_the_pipe_early_gets_no_traceback(repo):
    repo.experiment("1.0")
    proc = subprocess.run(f"{sys.executable} -m autoresearch status --json | head -c 5", shell=True,
                          cwd=repo.root, env=engine_env(), capture_output=True, text=True, timeout=60,
                          executable="/bin/bash")
    assert proc.stdout == '{"seg'
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
