"""The engine's call into the diagnoser: used for every crash, timeout and implausible result,
and never able to lose a run, whatever the diagnoser does.

The stand-in diagnosers are installed with a `sitecustomize` module on PYTHONPATH, so the real
CLI process imports them as `autoresearch.diagnosis`.
"""

import json

import pytest

from helpers_engine import SRC, repo  # noqa: F401 (fixtures)

FAKE = """
import sys, types
import autoresearch
fake = types.ModuleType("autoresearch.diagnosis")
fake.add_parsers = lambda sub: None  # the real one adds `diagnose`
{body}
sys.modules["autoresearch.diagnosis"] = fake
autoresearch.diagnosis = fake
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
