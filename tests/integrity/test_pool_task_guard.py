"""A pool wave's run gets the same guards as a single run: the sandbox, the integrity guard,
stall detection, and METRIC lines only while the benchmark's main process lives.

The pool task (pool/pool_task.run_experiment) is called as Ray calls it on the head machine
and on another node, without Ray: a hostile train.sh inside the fixed bench.sh, as in
test_attacks.py."""

import os

import pytest
from hostile import forged_keep, make

from autoresearch.isolation import bubblewrap, sandbox
from autoresearch.pool import pool_runner, pool_task
from autoresearch.store import research

needs_sandbox = pytest.mark.skipif(not sandbox.abi() and not bubblewrap.usable(), reason="no sandbox here")


def _spec(repo, run=7):
    config = research.load(research.Repo(str(repo.root)))[1].to_json()
    repo.git("commit", "-qam", "candidate")
    commit = repo.git("rev-parse", "HEAD")
    files, executable = pool_runner._commit_files(str(repo.root), commit, ["train.sh", "bench.sh", "eval.sh"])
    return {"run": run, "commit": commit, "repo": str(repo.root), "head_node": "head", "files": files,
            "executable": executable, "config": config}


def _hostile(tmp_path, script):
    """The live repo is $L: a pool run's folder is not inside the repo, so its path is given."""
    repo = make(tmp_path / "r")
    repo.baseline()
    (repo.root / "train.sh").write_text(f"L='{repo.root}'\n" + script + "\necho trained\n")
    return repo


@needs_sandbox
@pytest.mark.parametrize("node", ["head", "another-node"])
def test_a_wave_run_is_sandboxed_like_a_single_run(tmp_path, node):
    repo = _hostile(tmp_path, f"echo '{forged_keep(99)}' >> \"$L/autoresearch.jsonl\"; "
                              'echo evil >> "$HOME/.bashrc" 2>/dev/null; '
                              '( sleep 0.4; echo "METRIC loss=0.001" ) & true')
    log_before = (repo.root / "autoresearch.jsonl").read_bytes()
    res = pool_task.run_experiment(_spec(repo), node)
    single = repo.runs()[0]["sandbox"]
    assert res["sandbox"] == single and res["sandbox"] != "none"
    assert res["measurement"].found == {"loss": 1.0}
    assert res["tampered"] == []
    assert (repo.root / "autoresearch.jsonl").read_bytes() == log_before


def test_with_detection_alone_a_wave_run_that_changes_the_log_is_tampered(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTORESEARCH_SANDBOX", "off")
    repo = _hostile(tmp_path, f"echo '{forged_keep(99)}' >> \"$L/autoresearch.jsonl\"")
    log_before = (repo.root / "autoresearch.jsonl").read_bytes()
    res = pool_task.run_experiment(_spec(repo), "head")
    assert res["sandbox"] == "none"
    assert [c.what for c in res["tampered"]] == ["the log"] and all(c.restored for c in res["tampered"])
    assert (repo.root / "autoresearch.jsonl").read_bytes() == log_before
    repo.assert_log_as_written()


def test_a_stalled_wave_run_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTORESEARCH_STALL_FLOOR_S", "1")
    repo = _hostile(tmp_path, 'echo \'{"step": 1, "progress": 0.1, "loss": 3.0}\' >> "$AUTORESEARCH_STEPS_FILE"; '
                              "sleep 60")
    res = pool_task.run_experiment(_spec(repo), "head")
    m = res["measurement"]
    assert m.stopped is not None and m.stopped.status == "timeout", m
    assert res["bench_ended"] - res["bench_started"] < 30
    assert os.path.isdir(repo.root)
