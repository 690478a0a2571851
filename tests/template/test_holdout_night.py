"""The hidden holdout on the real route: the ML template, the real engine, CPU smoke runs.

A night of three runs: the baseline measured twice (noise), then an edit of train.py. Every run
leaves its holdout value in its folder; `autoresearch verify` shows them; no output the agent
reads carries one (tests/agent_outputs.py greps them all). The warning itself is tested in
tests/engine/test_engine_holdout.py: the template's harness refuses the data loaders and files in
train.py, so a change that trains on the validation split cannot be written here.
"""

import json
import os
import subprocess
import sys

from agent_outputs import collect, leaks
from conftest import run_cli
from gitrepo import git_repo

EDIT = ("UNEMBEDDING_LR = 0.004", "UNEMBEDDING_LR = 0.008")


def test_the_holdout_of_a_real_night_reaches_verify_and_nothing_the_agent_reads(tmp_path):
    repo, cache = tmp_path / "night", tmp_path / "cache"
    repo.mkdir()
    env = {"AUTORESEARCH_CACHE": str(cache), "AUTORESEARCH_PYTHON": sys.executable}
    for key in ("AUTORESEARCH_RUN", "AUTORESEARCH_RUN_DIR", "AUTORESEARCH_STEPS_FILE"):
        os.environ.pop(key, None)
    def cli(*args, timeout=600):
        proc = run_cli(list(args), cwd=repo, env=env, timeout=timeout)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc
    git_repo(repo)
    cli("init", "--template", "ml", "--noise-runs", "2")
    prep = subprocess.run([sys.executable, "prepare.py", "--source", "synthetic", "--profile", "smoke",
                           "--fit-baseline"], cwd=repo, env=dict(os.environ, **env), capture_output=True,
                          text=True, timeout=300)
    assert prep.returncode == 0, prep.stdout + prep.stderr
    outputs = [cli("run", "-m", "baseline").stdout]
    train = (repo / "train.py").read_text()
    assert EDIT[0] in train
    (repo / "train.py").write_text(train.replace(*EDIT))
    outputs.append(cli("run", "-m", "unembedding LR 2x").stdout)
    runs = [json.loads(line) for line in (repo / "autoresearch.jsonl").read_text().splitlines() if '"run"' in line]
    assert [r["status"] for r in runs][:2] == ["keep", "discard"] and runs[2]["metric"] is not None, runs
    holdouts = [json.loads((repo / ".autoresearch" / "runs" / str(n) / "holdout.json").read_text())["holdout_bpb"]
                for n in (1, 2, 3)]
    data = json.loads(cli("verify", "--json").stdout)
    assert data["rows"][0]["holdout"] == sorted(holdouts[:2])[0] or data["rows"][0]["holdout"] == sum(holdouts[:2]) / 2
    # Whether the edit was kept is the CPU's noise; what follows from it is not: with two kept codes
    # the holdout's noise comes from the baseline's repeats, with one there is nothing to compare.
    kept_edit = runs[2]["status"] == "keep"
    assert data["holdout_noise"] == ("repeats" if kept_edit else "none"), (runs[2], data)
    assert (data["holdout_gain"] is not None) == kept_edit, data
    assert f"{data['rows'][0]['holdout']:12.6g}".strip() in cli("verify").stdout
    assert leaks(collect(repo, outputs), holdouts) == []
