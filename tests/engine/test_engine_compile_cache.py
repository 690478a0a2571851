"""A benchmark that compiles with torch finds its cache from the run before.

Each run executes in its own snapshot with a fresh $TMPDIR, where torch.compile (Inductor, Triton)
caches by default, so without more every run would compile from nothing. The engine names one
compile-cache folder per repo, under the user's cache, in every run's environment; the ML
template's harness names the same folder for the same repo. Run through the real CLI with a
benchmark that reports what it sees.
"""

import os
import subprocess
import sys
from pathlib import Path

from gitrepo import git_repo
from helpers_engine import Research

ASSETS = Path(__file__).resolve().parents[2] / "assets"
BENCH = r"""#!/bin/bash
printf '%s\n%s\n%s\n%s\n' "$TORCHINDUCTOR_CACHE_DIR" "$TRITON_CACHE_DIR" "$TMPDIR" "$PWD" > "$AUTORESEARCH_RUN_DIR/seen.txt"
echo "METRIC loss=$(cat value.txt)"
"""


def seen(repo, run):
    inductor, triton, tmp, cwd = (repo.root / ".autoresearch" / "runs" / str(run) / "seen.txt").read_text().split("\n")[:4]
    return {"inductor": inductor, "triton": triton, "tmp": tmp, "cwd": cwd}


def research(root, env):
    repo = Research(git_repo(root, {"bench.sh": BENCH, "value.txt": "1.0\n"}))
    repo.ok("init", "--metric", "loss", "--command", "bash bench.sh", "--scope", "value.txt", "--fixed", "bench.sh",
            env=env)
    return repo


def test_every_run_of_a_repo_sees_one_compile_cache_that_the_template_names_too(tmp_path):
    cache = tmp_path / "cache"
    env = {"AUTORESEARCH_CACHE": str(cache)}
    repo = research(tmp_path / "lab", env)
    repo.ok("run", "--baseline", "-m", "baseline", env=env)
    repo.set("0.9")
    repo.ok("run", "-m", "lower", env=env)
    first, second = seen(repo, 1), seen(repo, 2)
    assert first["tmp"] != second["tmp"] and first["cwd"] != second["cwd"]   # fresh per run
    assert first["inductor"] == second["inductor"] and first["triton"] == second["triton"]
    assert first["triton"] == os.path.join(first["inductor"], "triton")
    assert os.path.dirname(first["inductor"]) == os.path.join(str(cache), "compile")
    assert os.path.basename(first["inductor"]).startswith("lab-")
    assert not first["inductor"].startswith(first["tmp"])
    # The template's harness, run from that snapshot folder, names the same folder.
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import harness; "
            "print(harness.compile_cache_dir(sys.argv[2]))")
    named = subprocess.run([sys.executable, "-c", code, str(ASSETS), first["cwd"]], capture_output=True, text=True,
                           env=dict(os.environ, AUTORESEARCH_CACHE=str(cache)), timeout=120)
    assert named.returncode == 0, named.stderr
    assert named.stdout.strip() == first["inductor"]
    # Another repo gets a folder of its own; a cache the person set wins.
    other = research(tmp_path / "other" / "lab", env)
    own = tmp_path / "mine"
    other.ok("run", "--baseline", "-m", "baseline", env=dict(env, TORCHINDUCTOR_CACHE_DIR=str(own)))
    assert seen(other, 1)["inductor"] == str(own) and seen(other, 1)["triton"] == str(own / "triton")
    other.set("0.8")
    other.ok("run", "-m", "lower", env=env)
    assert seen(other, 2)["inductor"] not in (first["inductor"], str(own))
    assert os.path.basename(seen(other, 2)["inductor"]).startswith("lab-")
