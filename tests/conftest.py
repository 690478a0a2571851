"""Shared test helpers.

Tests that need an external tool (Chromium, the Claude Code CLI) use `require_tool`:
locally they skip when the tool is missing; with AUTORESEARCH_REQUIRE_ALL=1 (CI) they fail.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"


@pytest.fixture(autouse=True, scope="session")
def _engine_state_home(tmp_path_factory):
    """The engine's state outside the repo (the chain's anchor, anchor.py) goes to a folder of
    this test session, for the engine run in-process and every subprocess, never the user's."""
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("state-home"))


def require_tool(path_or_name, install_hint):
    """Return the tool's path, or skip (fail under AUTORESEARCH_REQUIRE_ALL=1) when missing."""
    found = shutil.which(str(path_or_name)) if os.sep not in str(path_or_name) else (
        str(path_or_name) if os.access(str(path_or_name), os.X_OK) else None)
    if found:
        return found
    message = f"{path_or_name} not found; {install_hint}"
    if os.environ.get("AUTORESEARCH_REQUIRE_ALL") == "1":
        pytest.fail(message)
    pytest.skip(message)


def engine_env(extra=None):
    """Environment for running the engine as a subprocess from this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if extra:
        env.update(extra)
    return env


def run_cli(args, cwd, env=None, timeout=120, input=None):
    """Run `python -m autoresearch ARGS` in `cwd`; return the CompletedProcess (text)."""
    return subprocess.run(
        [sys.executable, "-m", "autoresearch", *args],
        cwd=cwd, env=engine_env(env), capture_output=True, text=True, timeout=timeout, input=input,
    )
