"""Helpers and fixtures for the engine tests: a real git repo with a tiny benchmark, the real CLI.

No conftest.py here (tests/conftest.py stays the one `conftest` module that other folders
import); test modules import the fixtures they use.

The benchmark `bench.sh` reads `value.txt` (the scope) and reports `METRIC loss=<value>`,
or misbehaves on purpose when the value is a keyword (crash, hang, nometric, nan, ...).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gitrepo import git_repo

SRC = Path(__file__).resolve().parents[2] / "src"


def run_cli(args, cwd, env=None, timeout=60):
    """The real CLI: `python -m autoresearch ARGS` with this checkout's src/ (as tests/conftest.py)."""
    full = dict(os.environ)
    full["PYTHONPATH"] = str(SRC) + (os.pathsep + full["PYTHONPATH"] if full.get("PYTHONPATH") else "")
    full.pop("CLAUDE_CODE_SESSION_ID", None)
    full.pop("PYTHONDONTWRITEBYTECODE", None)  # the CLI starts ~2x faster with its bytecode cache
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "autoresearch", *args], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=timeout)

BENCH = r"""#!/bin/bash
v=$(cat value.txt)
printf '%s\n%s\n%s\n' "$AUTORESEARCH_RUN" "$AUTORESEARCH_RUN_DIR" "$AUTORESEARCH_STEPS_FILE" > "$AUTORESEARCH_RUN_DIR/env.txt"
echo "training with value $v"
case "$v" in
  crash) echo "Traceback (most recent call last):" >&2; echo "RuntimeError: boom" >&2; exit 1 ;;
  hang) sleep 1000 & echo $! > "$AUTORESEARCH_RUN_DIR/grandchild.pid"; sleep 1000 ;;
  nometric) echo "done, but no metric" ;;
  nan) echo "METRIC loss=nan" ;;
  sleep:*) sleep "${v#sleep:}"; echo "METRIC loss=1.0" ;;
  [0-9]*:*) sleep "${v%%:*}"; echo "METRIC loss=${v#*:}" ;;
  *) echo "METRIC loss=$v"; echo "METRIC peak_vram_mb=2048" ;;
esac
"""


class Research:
    """A research repo in a temp dir, driven through the real `python -m autoresearch`."""

    def __init__(self, root):
        self.root = Path(root)
        self.env = {}   # added to every call's environment

    def cli(self, *args, env=None, timeout=60):
        return run_cli(list(args), cwd=self.root, env={**self.env, **(env or {})}, timeout=timeout)

    def outside_data(self, folder):
        """Name `folder` (outside the repo, under the private /tmp of a bubblewrap sandbox) in the
        engine's environment, as AUTORESEARCH_CACHE names the ML data: the benchmark sees it, read-only."""
        self.env["BENCH_DATA"] = str(folder)

    def ok(self, *args, env=None):
        proc = self.cli(*args, env=env)
        assert proc.returncode == 0, f"{args}: rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        return proc

    def json(self, *args):
        proc = self.cli(*args, "--json")
        assert proc.stdout.count("\n") == 1, proc.stdout
        return proc.returncode, json.loads(proc.stdout)

    def set(self, value, name="value.txt"):
        (self.root / name).write_text(f"{value}\n")

    def experiment(self, value, message=None, *extra):
        self.set(value)
        rc, data = self.json("run", "-q", "-m", message or f"value {value}", *extra)
        assert rc == 0, data
        return data["record"]

    def git(self, *args):
        return subprocess.run(["git", *args], cwd=self.root, capture_output=True, text=True,
                              check=True).stdout.strip()

    def head(self):
        return self.git("rev-parse", "HEAD")

    def log_lines(self):
        path = self.root / "autoresearch.jsonl"
        return path.read_text().splitlines() if path.exists() else []

    def records(self):
        return [json.loads(line) for line in self.log_lines()]

    def runs(self):
        return [r for r in self.records() if "run" in r]

    def status(self):
        rc, data = self.json("status")
        assert rc == 0
        return data

    def snapshot(self):
        """What a refusal must leave untouched: the log bytes, HEAD, the refs."""
        log = self.root / "autoresearch.jsonl"
        return (log.read_bytes() if log.exists() else b"", self.head(),
                self.git("for-each-ref", "refs/autoresearch"))


def engine_env():
    """Environment for starting the engine with Popen (as run_cli does)."""
    env = dict(os.environ, PYTHONPATH=str(SRC))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("CLAUDE_CODE_SESSION_ID", None)
    return env


def make_repo(root, init_args=("--metric", "loss", "--command", "bash bench.sh", "--scope", "value.txt",
                               "--fixed", "bench.sh"), value="1.0"):
    root = git_repo(root, {"bench.sh": BENCH, "value.txt": f"{value}\n", "README.txt": "outside the scope\n"})
    repo = Research(root)
    if init_args is not None:
        repo.ok("init", *init_args)
    return repo


def process_gone(pid):
    """True when `pid` no longer runs (a zombie waiting for its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True
    except ProcessLookupError:
        return True


@pytest.fixture
def repo(tmp_path):
    return make_repo(tmp_path / "research")


@pytest.fixture
def make(tmp_path):
    """make(*init_args) -> a fresh research repo initialised with those arguments."""
    counter = iter(range(1000))

    def factory(*init_args, value="1.0"):
        base = ("--metric", "loss", "--command", "bash bench.sh", "--scope", "value.txt", "--fixed", "bench.sh")
        return make_repo(tmp_path / f"research{next(counter)}", base + tuple(init_args), value=value)
    return factory
