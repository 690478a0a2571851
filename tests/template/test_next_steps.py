"""The next step a failed run prints is one a person can follow to an accepted run, on the real
ML template on CPU (smoke profile, synthetic data), through the real engine.

A crashed baseline: the template's commonest first failure after an edit, a shape error, in the
very first run. `next:` must not say "edit train.py, then run an experiment" (there is nothing
to compare with yet): it gives the diagnosis's step, which names train.py's own line (from the
traceback, not torch's linear.py), says that the engine has already undone the edit, and then
the baseline again. Following exactly that (the command printed) must give an accepted baseline. The missing-package
step (`uv sync`) is followed in test_uv_route.py, where uv and the pinned torch are at hand.
"""

import json
import os
import re
import subprocess
import sys

from tests.conftest import run_cli

from .template_helpers import ROOT

BROKEN = ("self.c_proj = nn.Linear(4 * config.n_embd", "self.c_proj = nn.Linear(3 * config.n_embd")


def test_a_crashed_baseline_says_the_step_and_the_baseline_again(tmp_path):
    lab = tmp_path / "lab"
    lab.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUTORESEARCH_", "PYTHONPATH"))}
    env.update(AUTORESEARCH_HOME=str(ROOT), AUTORESEARCH_CACHE=str(tmp_path / "cache"),
               AUTORESEARCH_PYTHON=sys.executable, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")

    def sh(*args):
        done = subprocess.run(list(args), cwd=lab, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{args}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
        return done

    sh("git", "init", "-q")
    done = run_cli(["init", "--template", "ml", "--noise-runs", "1", "--implausible-gain", "0.9"], cwd=lab, env=env)
    assert done.returncode == 0, done.stderr
    sh(sys.executable, "prepare.py", "--source", "synthetic", "--profile", "smoke", "--fit-baseline", "smoke")

    # the agent's first edit breaks a dimension; the baseline crashes on it
    source = (lab / "train.py").read_text()
    assert BROKEN[0] in source
    (lab / "train.py").write_text(source.replace(*BROKEN, 1))
    done = run_cli(["run", "-q", "-m", "baseline"], cwd=lab, env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    text = done.stdout
    assert "run 1: CRASH" in text and "SHAPE_MISMATCH" in text, text
    step = re.search(r"^next: (.*)$", text, re.M).group(1)
    assert "edit train.py, then" not in step, step
    named = re.search(r"fix or revert train\.py line (\d+), in forward \(`(.+?)`\)", step)
    assert named, step
    assert step.endswith('then record the baseline again: autoresearch run -m "baseline"'), step

    # follow it: the line named is train.py's line that calls the layer the edit made too narrow,
    # and the step says the engine has already undone the edit: train.py is as committed
    line = int(named.group(1))
    assert "(train.py is back as committed: the engine undid the run's edit)" in step
    assert (lab / "train.py").read_text() == source
    assert named.group(2) in source.splitlines()[line - 1] and "self.c_proj(" in source.splitlines()[line - 1]
    assert "or a layer it uses" in step
    command = step.rsplit("then record the baseline again: ", 1)[1]
    assert command == 'autoresearch run -m "baseline"'
    done = run_cli(["run", "-q", "--json", "-m", "baseline"], cwd=lab, env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["status"] == "keep" and result["record"]["run"] == 2, result
    assert "baseline" in result["record"]["reason"]
