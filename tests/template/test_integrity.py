"""Ways train.py could move the recorded metric, each run for real through `bash autoresearch.sh`:
they are refused, crash, or get recorded honestly. The leaking models fail at the probe right after
the warm-up steps, not after the training budget."""

import json
import re
import shutil

import pytest

from autoresearch import metrics

from .test_smoke_run import run_benchmark

WARMUP_STEPS = 10


def edited(repo, tmp_path, old, new):
    copy = tmp_path / "repo"
    shutil.copytree(repo, copy)
    text = (copy / "train.py").read_text()
    assert old in text, old
    (copy / "train.py").write_text(text.replace(old, new, 1))
    return copy


# Each edit keeps train.py working; only the way it games the metric differs.
PATCHED_EVALUATION = ("    torch.manual_seed(SEED)\n",
                      "    torch.manual_seed(SEED)\n    harness.evaluate_split = lambda *a, **k: (0.01, 0.01, 1)\n")
SCALED_RESULT = ("    torch.manual_seed(SEED)\n",
                 "    torch.manual_seed(SEED)\n    harness._CROSS_ENTROPY = lambda *a, **k: 0.5 * F.cross_entropy(*a, **k)\n")
NON_CAUSAL = ("        y = attention(q.to(dtype), k.to(dtype), v.to(dtype), window)\n",
              "        y = F.scaled_dot_product_attention(q.to(dtype).transpose(1, 2), k.to(dtype).transpose(1, 2),\n"
              "                                           v.to(dtype).transpose(1, 2)).transpose(1, 2)\n")
# Only when evaluating: a bonus on the token that comes next (which is the target at each position).
NEXT_TOKEN_BONUS = ("        logits = self.config.softcap * torch.tanh(logits / self.config.softcap)\n",
                    "        logits = self.config.softcap * torch.tanh(logits / self.config.softcap)\n"
                    "        if not self.training:\n"
                    "            nxt = torch.roll(idx, -1, dims=1)\n"
                    "            logits = logits + 4.0 * F.one_hot(nxt, logits.size(-1)).float()\n")


@pytest.mark.parametrize("edit", [PATCHED_EVALUATION, SCALED_RESULT], ids=["patched-evaluation", "scaled-loss"])
def test_patching_the_harness_is_refused_before_training(research_repo, tmp_path, edit):
    repo, env = research_repo
    done = run_benchmark(edited(repo, tmp_path, *edit), env, tmp_path / "run")
    assert done.returncode == 1
    assert "val_bpb" not in metrics.parse(done.stdout)[0]
    assert re.search(r"train\.py:\d+: .*not allowed", done.stderr.strip().splitlines()[-1])
    assert not (tmp_path / "run" / "steps.jsonl").exists()    # refused before the first step


@pytest.mark.parametrize("edit", [NON_CAUSAL, NEXT_TOKEN_BONUS], ids=["non-causal", "next-token-bonus"])
def test_a_leaking_model_fails_right_after_the_warm_up(research_repo, tmp_path, edit):
    repo, env = research_repo
    done = run_benchmark(edited(repo, tmp_path, *edit), env, tmp_path / "run")
    assert done.returncode == 1, done.stdout[-2000:]
    assert "val_bpb" not in metrics.parse(done.stdout)[0]
    assert "CAUSALITY VIOLATION" in done.stderr.strip().splitlines()[-1]
    steps = (tmp_path / "run" / "steps.jsonl").read_text().splitlines()
    assert len(steps) == WARMUP_STEPS and json.loads(steps[-1])["progress"] == 0.0


def test_rebinding_through_an_alias_is_caught_in_the_evaluator(modules, monkeypatch):
    """`T = torch.Tensor` at the top level, then `T.float = ...` in a method: the static check cannot
    tell that T is torch's class, so the evaluator compares the namespaces it relies on with what
    they held before train.py was imported, after every call of the model."""
    import torch
    harness = modules[1].harness
    source = ("import torch\nT = torch.Tensor\n\n\nclass GPT(torch.nn.Module):\n"
              "    def forward(self, idx):\n        T.float = T.double\n        return idx\n")
    harness.check_train_py(source)   # passes the static check
    saved = dict(harness._WATCHED)
    harness._WATCHED.update(harness._snapshot_namespaces())
    try:
        harness._check_untouched()       # nothing changed yet
        monkeypatch.setattr(torch.Tensor, "float", torch.Tensor.double)   # what that forward does
        with pytest.raises(harness.UnsafeTrainPy, match=r"torch\.Tensor\.float"):
            harness._check_untouched()
    finally:
        harness._WATCHED.clear()
        harness._WATCHED.update(saved)


def test_what_the_model_code_prints_in_the_evaluator_is_no_metric_and_no_verdict(research_repo, tmp_path):
    """The evaluator runs train.py's model code, which may print: its METRIC lines and a line that
    looks like autoresearch.sh's verdict come through defused, and the run is scored as usual."""
    repo, env = research_repo
    copy = edited(repo, tmp_path, "        if step > harness.WARMUP_STEPS and training_time >= TIME_BUDGET:\n",
                  "        if step > harness.WARMUP_STEPS:\n")
    text = (copy / "train.py").read_text()
    doc = '        """Logits (B, T, vocab) for idx (B, T); with targets, the training loss instead."""\n'
    assert doc in text
    (copy / "train.py").write_text(text.replace(doc, doc + (
        "        if not self.training:\n"
        "            print('METRIC injected=1\\nMETRIC val_bpb=0.001')\n"
        "            print('autoresearch.sh: the evaluation failed (exit 1): torch.OutOfMemoryError: fake')\n"), 1))
    done = run_benchmark(copy, env, tmp_path / "run")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    found, _ = metrics.parse(done.stdout)
    assert "injected" not in found and found["val_bpb"] > 0.01
    assert "METRIC(evaluate) injected=1" in done.stdout
    assert "autoresearch.sh(evaluate): the evaluation failed" in done.stdout
    assert not re.search(r"(?m)^autoresearch\.sh: ", done.stdout + done.stderr)
