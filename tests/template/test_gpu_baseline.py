"""benchmarks/gpu_baseline.sh, the one-call device check, runs as it is: here in its dry-run mode
(the smoke profile on the CPU, budgets of a few CPU seconds), through the same code that runs on a
lent GPU. Its last line is one JSON object with every figure, for both runs (the GPU's default tier
and the 24 GiB tier's settings), and figures.json in $OUT holds the same."""

import json
import os
import subprocess
import sys

from .template_helpers import ROOT

NUMBER = (int, float)
RUN_FIGURES = {
    "tier": str, "budget_s": NUMBER, "steps": int, "tokens_per_s": NUMBER, "mfu_percent": NUMBER,
    "val_bpb": float, "val_bpb_karpathy": float, "attention": str, "attention_why": str,
    "peak_vram_mb": NUMBER, "first_step_s": NUMBER, "outside_budget_s": NUMBER, "training_seconds": NUMBER,
    "eval_seconds": NUMBER, "holdout_seconds": NUMBER, "total_tokens_M": NUMBER, "wall_s": NUMBER,
    "sandbox": str, "dtype": str, "compile": bool, "exit": int,
}


def test_the_dry_run_prints_every_figure_of_both_runs_as_one_json_object(tmp_path):
    env = dict(os.environ, AUTORESEARCH_PYTHON=sys.executable, OUT=str(tmp_path / "out"))
    for key in ("AUTORESEARCH_CACHE", "AUTORESEARCH_RUN_DIR", "AUTORESEARCH_STEPS_FILE", "BUDGET", "BUDGET_24"):
        env.pop(key, None)
    done = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_baseline.sh"), "--dry-run"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures == json.loads((tmp_path / "out" / "figures.json").read_text())
    assert figures["dry_run"] is True and isinstance(figures["machine"]["torch"], str)
    assert set(figures["runs"]) == {"default", "24GiB"}
    for name, run in figures["runs"].items():
        wrong = {k: run.get(k) for k, kind in RUN_FIGURES.items() if not isinstance(run.get(k), kind)}
        assert wrong == {}, (name, wrong)
        assert "error" not in run and run["exit"] == 0
        assert run["steps"] > 10 and run["first_step_s"] > 0 and run["outside_budget_s"] > 0
        # karpathy's byte count is never below ours, so his bpb is never above ours
        assert run["val_bpb_karpathy"] <= run["val_bpb"] + 1e-9
        assert run["attention"] == "sdpa" and run["compile"] is False   # the CPU: no compile, no windows kernel
    assert {p.name for p in (tmp_path / "out").iterdir()} == {
        "figures.json", "default.log", "24GiB.log", "default.steps.jsonl", "24GiB.steps.jsonl"}
