"""The hidden holdout on the real route: the ML template, the real engine, CPU smoke runs.

A night of three runs: the baseline measured twice (noise), then a change that leaks the
validation split into training (train.py trains on "val" batches instead of "train"). The engine
keeps it (validation improved); `autoresearch verify` warns that the night fitted the validation
set (the holdout did not improve), and no output the agent reads carries a holdout value.
"""

import json
import os
import subprocess
import sys

from agent_outputs import collect, leaks
from conftest import run_cli

LEAK_FROM = "harness.train_batches(DEVICE_BATCH_SIZE, device)"
LEAK_TO = 'harness.prepare.make_dataloader(None, DEVICE_BATCH_SIZE, harness.prepare.MAX_SEQ_LEN, "val", device=device)'


def test_a_change_that_trains_on_validation_is_warned_about_and_hidden_from_the_agent(tmp_path):
    repo, cache = tmp_path / "night", tmp_path / "cache"
    repo.mkdir()
    env = {"AUTORESEARCH_CACHE": str(cache), "AUTORESEARCH_PYTHON": sys.executable}
    for key in ("AUTORESEARCH_RUN", "AUTORESEARCH_RUN_DIR", "AUTORESEARCH_STEPS_FILE"):
        os.environ.pop(key, None)
    def cli(*args, timeout=600):
        proc = run_cli(list(args), cwd=repo, env=env, timeout=timeout)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "config", "user.name", "Test"], cwd=repo, check=True)
    subprocess.run(["git", "config", "user.email", "t@example.com"], cwd=repo, check=True)
    cli("init", "--template", "ml", "--noise-runs", "2")
    prep = subprocess.run([sys.executable, "prepare.py", "--source", "synthetic", "--profile", "smoke",
                           "--fit-baseline"], cwd=repo, env=dict(os.environ, **env), capture_output=True,
                          text=True, timeout=300)
    assert prep.returncode == 0, prep.stdout + prep.stderr
    outputs = [cli("run", "-m", "baseline").stdout]
    train = (repo / "train.py").read_text()
    assert LEAK_FROM in train
    (repo / "train.py").write_text(train.replace(LEAK_FROM, LEAK_TO))
    outputs.append(cli("run", "-m", "train on more data").stdout)
    runs = [json.loads(line) for line in (repo / "autoresearch.jsonl").read_text().splitlines() if '"run"' in line]
    assert [r["status"] for r in runs] == ["keep", "discard", "keep"], [(r["status"], r["reason"]) for r in runs]
    data = json.loads(cli("verify", "--json").stdout)
    holdouts = [json.loads((repo / ".autoresearch" / "runs" / str(n) / "holdout.json").read_text())["holdout_bpb"]
                for n in (1, 2, 3)]
    assert data["validation_gain"] > data["validation_threshold"], data
    assert data["holdout_gain"] <= data["holdout_threshold"], data
    assert data["warning"].startswith("the night fitted the validation set"), data
    assert "WARNING: the night fitted the validation set" in cli("verify").stdout
    assert leaks(collect(repo, outputs), holdouts) == []
