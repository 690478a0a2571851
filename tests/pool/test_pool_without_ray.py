"""With no pool nothing changes: the engine never imports Ray; without Ray, `pool up` says in
one line how to install it; `submit`/`wait` without a pool refuse. And a run's snapshot as
bytes (what another machine gets) runs like the exported one. No Ray needed here."""

import os
import subprocess
import sys

from helpers_pool import SRC, make_repo


def _env(tmp_path):
    return {"PYTHONPATH": str(SRC), "HOME": str(tmp_path)}


def test_the_engine_imports_no_ray(tmp_path):
    repo = make_repo(tmp_path / "r", _env(tmp_path), value="1.0:0")
    for args in (["run", "-q", "-m", "baseline"], ["status"], ["brief"], ["wait"], ["pool", "status"]):
        env = dict(os.environ, **repo.env)
        proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "autoresearch", *args], cwd=repo.root,
                              env=env, capture_output=True, text=True, timeout=120)
        imported = {line.split("|")[-1].strip().split(".")[0] for line in proc.stderr.splitlines()
                    if line.startswith("import time:")}
        assert "ray" not in imported and "autoresearch" in imported, (args, proc.stderr[-500:])
    assert repo.runs()[0]["status"] == "keep" and "wave" not in repo.runs()[0]


def test_without_ray_pool_up_says_how_to_install_it(tmp_path):
    repo = make_repo(tmp_path / "r", _env(tmp_path))
    shim = tmp_path / "python-without-ray"
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")   # -S: no site-packages, so no Ray
    shim.chmod(0o755)
    repo.env["AUTORESEARCH_POOL_PYTHON"] = str(shim)
    proc = repo.cli("pool", "up", "--gpus", "2")
    assert proc.returncode == 3 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Ray is not installed" in lines[0] and "pip install" in lines[0]
    assert not (repo.root / ".autoresearch" / "pool" / "pool.json").exists()


def test_submit_and_wait_refuse_without_a_pool(tmp_path):
    repo = make_repo(tmp_path / "r", _env(tmp_path))
    repo.set("0.5")
    for args in (["submit", "-m", "x"], ["wait", "--timeout", "1"]):
        proc = repo.cli(*args)
        assert proc.returncode == 3 and "pool up" in proc.stderr
    assert (repo.root / "value.txt").read_text() == "0.5\n"       # nothing touched
    assert repo.git("for-each-ref", "refs/autoresearch") == ""


def test_a_snapshot_shipped_as_bytes_runs_like_the_exported_one(tmp_path):
    from autoresearch.pool import pool_runner, pool_task
    from autoresearch.store import research
    repo = make_repo(tmp_path / "r", _env(tmp_path), value="0.75:0")
    config = research.load(research.Repo(repo.root))[1].to_json()
    commit = repo.git("rev-parse", "HEAD")
    files, executable = pool_runner._commit_files(str(repo.root), commit, ["value.txt", "bench.sh"])
    assert set(files) == {"value.txt", "bench.sh"}
    spec = {"run": 7, "commit": commit, "repo": str(repo.root), "head_node": "head", "files": files,
            "executable": executable, "config": config}
    here = pool_task.run_experiment(spec, "head")
    there = pool_task.run_experiment(spec, "another-node")
    assert here["snapshot"] == "export" and there["snapshot"] == "bytes"
    for res in (here, there):
        m = res["measurement"]
        assert m.exit_code == 0 and m.found["loss"] == 0.75 and b"METRIC loss=0.75" in res["files"]["output.log"]
    # Never the live tree: an edit made while the run goes is not what runs.
    repo.set("crash")
    assert pool_task.run_experiment(spec, "another-node")["measurement"].found["loss"] == 0.75
