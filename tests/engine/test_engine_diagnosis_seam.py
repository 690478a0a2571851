"""The engine's call into the diagnoser: used for every crash, timeout and implausible result,
and never able to lose a run, whatever the diagnoser does.

The stand-in diagnosers are installed with a `sitecustomize` module on PYTHONPATH, so the real
CLI process imports them as `autoresearch.pipeline.diagnosis`.
"""

import json

import pytest

from helpers_engine import SRC, repo  # noqa: F401 (fixtures)

FAKE = """
import sys, types
import autoresearch
fake = types.ModuleType("autoresearch.pipeline.diagnosis")
fake.add_parsers = lambda sub: None  # the real one adds `diagnose`
{body}
sys.modules["autoresearch.pipeline.diagnosis"] = fake
autoresearch.pipeline.diagnosis = fake
"""

WORKS = """
def for_run(repo, run_dir, status, metrics, best_metric, direction, reason):
    import os
    tail = open(os.path.join(run_dir, "output.log")).read()[-200:]
    return {"family": "NAN_LOSS" if status == "crash" else "TIMEOUT", "codes": ["X"], "intermediates":
            {"status": status, "reason": reason, "best": best_metric, "direction": direction,
             "saw_output": "training with value" in tail}, "fix": {"LR": 0.001}, "explanation": "because"}
fake.for_run = for_run
fake.short = lambda d: "diagnosis: " + d["family"] + " - fix: LR=0.001"
"""

RAISES = """
def for_run(*args):
    raise RuntimeError("diagnoser bug")
fake.for_run = for_run
fake.short = lambda d: "unused"
"""

NOT_A_DICT = """
fake.for_run = lambda *a: ["not", "a", "dict"]
fake.short = lambda d: "unused"
"""


@pytest.fixture
def with_diagnoser(tmp_path):
    def install(body):
        folder = tmp_path / f"fake{abs(hash(body))}"
        folder.mkdir()
        (folder / "sitecustomize.py").write_text(FAKE.format(body=body))
        return {"PYTHONPATH": f"{SRC}:{folder}"}
    return install


def _crash(repo, env):
    repo.experiment("1.0")
    repo.set("crash")
    proc = repo.cli("run", "-m", "crash it", env=env)
    assert proc.returncode == 0, proc.stderr
    return proc, repo.runs()[-1]


def test_diagnosis_is_stored_and_shown(repo, with_diagnoser):
    proc, record = _crash(repo, with_diagnoser(WORKS))
    d = record["diagnosis"]
    assert d["family"] == "NAN_LOSS" and d["fix"] == {"LR": 0.001}
    assert d["intermediates"] == {"status": "crash", "reason": "exit 1", "best": 1.0, "direction": "lower",
                                  "saw_output": True}
    assert json.loads((repo.root / record["run_dir"] / "diagnosis.json").read_text()) == d
    assert "diagnosis: NAN_LOSS - fix: LR=0.001" in proc.stdout


@pytest.mark.parametrize("body, error", [(RAISES, "RuntimeError: diagnoser bug"),
                                         (NOT_A_DICT, "TypeError")])
def test_a_failing_diagnoser_never_loses_the_run(repo, with_diagnoser, body, error):
    proc, record = _crash(repo, with_diagnoser(body))
    assert record["status"] == "crash" and record["run"] == 2
    assert record["diagnosis"]["family"] == "UNKNOWN" and error in record["diagnosis"]["error"]
    assert "diagnosis: UNKNOWN" in proc.stdout


def test_no_diagnosis_for_ordinary_results(repo, with_diagnoser):
    env = with_diagnoser(WORKS)
    repo.experiment("1.0")
    repo.set("1.5")
    repo.cli("run", "-m", "worse", env=env)
    record = repo.runs()[-1]
    assert record["status"] == "discard" and record["diagnosis"] is None
    assert not (repo.root / record["run_dir"] / "diagnosis.json").exists()


def test_command_not_found_is_diagnosed_as_a_missing_dependency(repo):
    """A benchmark whose command does not exist (exit 127) names the command, not UNKNOWN."""
    repo.experiment("1.0")
    (repo.root / "bench.sh").write_text("echo starting\nnot_a_real_trainer --steps 10\n")
    repo.git("commit", "-qam", "harness calls a missing program")
    repo.ok("init", "--metric", "loss", "--command", "bash bench.sh", "--scope", "value.txt", "--fixed", "bench.sh")
    repo.set("0.9")
    rc, data = repo.json("run", "-q", "-m", "x")
    record = data["record"]
    assert rc == 0 and record["status"] == "crash" and record["exit_code"] == 127
    diagnosis = record["diagnosis"]
    assert diagnosis["family"] == "MISSING_DEPENDENCY" and diagnosis["codes"] == ["MISSING_COMMAND"]
    assert "not_a_real_trainer" in diagnosis["explanation"]
    assert diagnosis["intermediates"]["missing_command"] == "not_a_real_trainer"


@pytest.mark.parametrize("line, command", [
    ("bench.sh: line 3: pyhton: command not found", "pyhton"),
    ("/bin/sh: 1: uvx: not found", "uvx"),
    ("bash: ./run.sh: No such file or directory", "./run.sh"),
    ("FileNotFoundError: [Errno 2] No such file or directory: 'data/x.bin'", None),
])
def test_missing_command_signature(line, command):
    from gpu_train_debug.rules import patterns
    found = {code: match for code, _, match in patterns.scan(f"starting\n{line}\n")}
    if command is None:
        assert "MISSING_COMMAND" not in found
    else:
        assert next(g for g in found["MISSING_COMMAND"].groups() if g) == command
