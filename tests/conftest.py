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


# `make check`, the inner loop before a commit, runs what needs none of these (every room's unit
# and contract tests); `make test` and CI run everything. A file listed here is marked `slow`; a single
# slow test in an otherwise fast file carries `@pytest.mark.slow` itself.
NEEDS = {
    "a browser": ["report/test_huge_values.py", "report/test_one_story.py", "report/test_report_chart.py",
                  "report/test_report_page.py", "report/test_report_reads_right.py",
                  "report/test_report_sections.py", "report/test_serve.py", "report/test_serve_paging.py",
                  "report/test_untrusted_run_files.py", "engine/test_engine_holdout.py"],
    "the Claude CLI": ["plugin/test_plugin_e2e.py", "plugin/test_plugin_night.py", "plugin/test_plugin_manifest.py",
                       "plugin/test_agent_sandbox.py", "plugin/test_night_checks.py"],
    "Ray": ["pool/test_pool_wave.py", "pool/test_pool_cluster.py"],
    "training or uv": ["demo/", "template/test_data.py", "template/test_integrity.py", "template/test_smoke_run.py",
                       "template/test_holdout_night.py", "template/test_holdout_sealed.py",
                       "template/test_prepared_data_sealed.py", "template/test_uv_route.py",
                       "template/test_torch_route.py", "template/test_fa3_loader.py", "template/test_evaluator.py",
                       "template/test_compile_cache.py", "template/test_gpu_baseline.py",
                       "template/test_next_steps.py", "template/test_prepare_without_packages.py",
                       "diagnosis/test_diagnosis_hostile_runs.py", "engine/test_engine_compile_cache.py",
                       "engine/test_engine_chaos.py"],
    "seconds of real benchmark time per test": ["engine/test_engine_watch.py", "integrity/test_attacks.py",
                                                "integrity/test_git_execution.py"],
}
_SLOW = tuple(path for paths in NEEDS.values() for path in paths)


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: needs a browser, the Claude CLI, Ray, real training or "
                                       "long real runs (left out of `make check`)")


def pytest_collection_modifyitems(config, items):
    tests = Path(__file__).resolve().parent
    for item in items:
        rel = Path(str(item.fspath)).resolve().relative_to(tests).as_posix()
        if rel.startswith(_SLOW):
            item.add_marker(pytest.mark.slow)
