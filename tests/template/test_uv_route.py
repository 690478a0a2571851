"""The route a user takes: `uv sync`, `uv run prepare.py`, then the engine's baseline and one
experiment through `bash autoresearch.sh` (which picks `uv run python`), for real on CPU.

uv installs from PyPI; torch comes from a local wheel of the pinned version (CI: /opt/wheels, the
CPU build), with the project's CUDA index switched off (`UV_NO_SOURCES=1`), so no CUDA torch is
ever downloaded here.
"""

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import require_tool, run_cli

from .template_helpers import ROOT
from gitrepo import git_repo

WHEELS = Path(os.environ.get("AUTORESEARCH_TORCH_WHEELS", "/opt/wheels"))


def _uv():
    local = ROOT / ".tools" / "uv" / "bin" / "uv"
    return str(local) if local.exists() else require_tool("uv", "run scripts/install-test-tools.sh (pip installs uv)")


def _pinned_torch():
    return re.search(r'"torch==([0-9.]+)"', (ROOT / "assets" / "pyproject.toml").read_text()).group(1)


def test_uv_sync_prepare_baseline_and_one_experiment(tmp_path):
    uv = _uv()
    version = _pinned_torch()
    if not list(WHEELS.glob(f"torch-{version}+cpu-*.whl")):
        message = f"no CPU torch {version} wheel in {WHEELS} (set AUTORESEARCH_TORCH_WHEELS)"
        if os.environ.get("AUTORESEARCH_REQUIRE_ALL") == "1":
            pytest.fail(message)
        pytest.skip(message)
    lab = tmp_path / "lab"
    lab.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AUTORESEARCH_", "VIRTUAL_ENV", "UV_", "PYTHONPATH"))}
    env.update(AUTORESEARCH_HOME=str(ROOT), AUTORESEARCH_CACHE=str(tmp_path / "cache"),
               PATH=f"{Path(uv).parent}{os.pathsep}{env['PATH']}", UV_NO_SOURCES="1", UV_FIND_LINKS=str(WHEELS),
               GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")

    def sh(*args, timeout=600):
        import subprocess
        done = subprocess.run(list(args), cwd=lab, env=env, capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, f"{args}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
        return done

    git_repo(lab)
    done = run_cli(["init", "--template", "ml", "--noise-runs", "1", "--implausible-gain", "0.9", "--json"],
                   cwd=lab, env=env)
    assert done.returncode == 0, done.stderr
    assert "harness.py" in json.loads(done.stdout)["config"]["fixed"]
    sh(uv, "sync")
    torch_line = sh(uv, "run", "python", "-c", "import torch; print(torch.__version__, torch.version.cuda)").stdout
    assert torch_line.split() == [f"{version}+cpu", "None"]
    fitted = sh(uv, "run", "prepare.py", "--source", "synthetic", "--profile", "smoke", "--fit-baseline", "smoke")
    # the fitted tier is committed, so a crashed first baseline cannot reset it away
    assert "committed train.py" in fitted.stdout and sh("git", "status", "--porcelain", "train.py").stdout == ""

    done = run_cli(["run", "--baseline", "-q", "-m", "baseline", "--json"], cwd=lab, env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    baseline = json.loads(done.stdout)
    text = (lab / "train.py").read_text()
    (lab / "train.py").write_text(text.replace("MATRIX_LR = 0.04", "MATRIX_LR = 0.05", 1))
    done = run_cli(["run", "-q", "-m", "a slightly higher Muon learning rate", "--json"], cwd=lab, env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    experiment = json.loads(done.stdout)

    runs = [json.loads(line) for line in (lab / "autoresearch.jsonl").read_text().splitlines()]
    runs = [r for r in runs if "run" in r]
    assert [r["status"] for r in runs][0] == "keep", runs
    assert runs[1]["status"] in ("keep", "discard"), runs[1]
    assert 0 < runs[0]["metric"] < 1.0 and 0 < runs[1]["metric"] < 1.0
    assert baseline and experiment
    shutil.rmtree(lab / ".venv", ignore_errors=True)
