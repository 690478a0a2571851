"""Shared fixtures for the ML template tests: one prepared tiny dataset for the whole session.

The template's modules are loaded from a copy of assets/ in a temporary research repo, with
AUTORESEARCH_CACHE pointing at a temporary cache, so nothing touches ~/.cache.
"""

import importlib
import os
import shutil
import subprocess
import sys

import pytest

from .template_helpers import ASSETS, ROOT, prepare_cmd


@pytest.fixture(scope="session")
def research_repo(tmp_path_factory):
    """A research repo made from assets/ + autoresearch.sh, with smoke-profile synthetic data prepared
    and the baseline fitted to the smoke tier. Returns (repo path, env for subprocesses)."""
    base = tmp_path_factory.mktemp("template")
    repo, cache = base / "repo", base / "cache"
    shutil.copytree(ASSETS, repo, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "autoresearch.sh", repo / "autoresearch.sh")
    env = dict(os.environ, AUTORESEARCH_CACHE=str(cache), AUTORESEARCH_PYTHON=sys.executable)
    for key in ("AUTORESEARCH_RUN", "AUTORESEARCH_RUN_DIR", "AUTORESEARCH_STEPS_FILE"):
        env.pop(key, None)
    done = subprocess.run(prepare_cmd(repo, "--source", "synthetic", "--profile", "smoke", "--fit-baseline"),
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return repo, env


@pytest.fixture(scope="session")
def modules(research_repo):
    """(prepare, train) imported from the research repo, reading the session's prepared data."""
    repo, env = research_repo
    saved_env = os.environ.get("AUTORESEARCH_CACHE")
    os.environ["AUTORESEARCH_CACHE"] = env["AUTORESEARCH_CACHE"]
    sys.path.insert(0, str(repo))
    try:
        for name in ("prepare", "harness", "train"):
            sys.modules.pop(name, None)
        prepare = importlib.import_module("prepare")
        train = importlib.import_module("train")
    finally:
        # Generic module names: keep the objects, not the sys.modules entries other tests could trip over.
        for name in ("prepare", "harness", "train"):
            sys.modules.pop(name, None)
        sys.path.remove(str(repo))
        if saved_env is None:
            os.environ.pop("AUTORESEARCH_CACHE", None)
        else:
            os.environ["AUTORESEARCH_CACHE"] = saved_env
    return prepare, train
