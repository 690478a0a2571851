"""The real thing on CPU: `bash autoresearch.sh` trains the smoke baseline and reports METRIC lines."""

import json
import math
import re
import shutil
import subprocess
import sys

import pytest
import torch

from .template_helpers import ROOT

METRIC = re.compile(r"^METRIC\s+([A-Za-z_][A-Za-z0-9_.]*)=(\S+)\s*$")   # the METRIC line grammar
SUMMARY = [("val_bpb", r"\d+\.\d{6}"), ("training_seconds", r"\d+\.\d"), ("total_seconds", r"\d+\.\d"),
           ("peak_vram_mb", r"\d+\.\d"), ("mfu_percent", r"\d+\.\d\d"), ("total_tokens_M", r"\d+\.\d"),
           ("num_steps", r"\d+"), ("num_params_M", r"\d+\.\d"), ("depth", r"\d+")]
STEP_KEYS = {"step", "progress", "elapsed_s", "loss", "lr_mult", "grad_norm", "tok_per_s", "mfu", "mem_mb"}


def untrained_bpb(prepare, train):
    tok = prepare.Tokenizer.from_directory()
    model_dim = -(-train.DEPTH * train.ASPECT_RATIO // train.HEAD_DIM) * train.HEAD_DIM
    cfg = train.GPTConfig(sequence_len=prepare.MAX_SEQ_LEN, vocab_size=tok.get_vocab_size(), n_layer=train.DEPTH,
                          n_head=model_dim // train.HEAD_DIM, n_embd=model_dim, window_pattern=train.WINDOW_PATTERN)
    torch.manual_seed(train.SEED)
    model = train.GPT(cfg)
    model.init_weights()
    return prepare.evaluate_bpb(model.eval(), tok, train.DEVICE_BATCH_SIZE)


def run_benchmark(repo, env, run_dir, timeout=300):
    run_dir.mkdir(parents=True, exist_ok=True)
    env = dict(env, AUTORESEARCH_RUN="1", AUTORESEARCH_RUN_DIR=str(run_dir),
               AUTORESEARCH_STEPS_FILE=str(run_dir / "steps.jsonl"))
    return subprocess.run(["bash", "autoresearch.sh"], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_smoke_training_run_learns_and_reports(research_repo, modules, tmp_path):
    prepare, train = modules
    repo, env = research_repo
    assert prepare.PROFILE == "smoke" and train.DEPTH == 2      # the fitted smoke tier
    before = untrained_bpb(prepare, train)

    run_dir = tmp_path / "runs" / "1"
    done = run_benchmark(repo, env, run_dir)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    metrics = {}
    for line in done.stdout.splitlines():
        m = METRIC.match(line)
        if m:
            metrics[m.group(1)] = float(m.group(2))
    assert [name for name, _ in SUMMARY] == [k for k in metrics if k in dict(SUMMARY)]
    val_bpb = metrics["val_bpb"]
    assert math.isfinite(val_bpb) and val_bpb < 0.6 * before, (val_bpb, before)
    assert metrics["num_steps"] > 10 and metrics["depth"] == 2

    # karpathy's summary block, exact names and formats, after a line '---'
    lines = done.stdout.splitlines()
    block = lines[len(lines) - 1 - lines[::-1].index("---") + 1:]
    for (name, fmt), line in zip(SUMMARY, block):
        assert re.fullmatch(rf"{name}:\s+{fmt}", line), line
    assert "profile:          smoke" in block
    assert ("overrides:        MAX_SEQ_LEN=256,TIME_BUDGET=20,EVAL_TOKENS=65536,VOCAB_SIZE=512,BUDGET_CLOCK=cpu,"
            "CPU_THREADS=1") in block
    assert "SYNTHETIC" in done.stdout

    steps = [json.loads(s) for s in (run_dir / "steps.jsonl").read_text().splitlines()]
    assert len(steps) == metrics["num_steps"]
    assert all(STEP_KEYS <= set(s) for s in steps)
    assert [s["step"] for s in steps] == list(range(len(steps)))
    progress = [s["progress"] for s in steps]
    assert progress == sorted(progress) and 0 <= progress[0] and progress[-1] <= 1
    assert all(math.isfinite(s["loss"]) and s["mfu"] is None for s in steps)   # no CPU peak: MFU unknown
    assert steps[-1]["loss"] < steps[0]["loss"]

    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["val_bpb"] == pytest.approx(val_bpb, abs=1e-6)
    assert summary["settings"]["profile"] == "smoke" and summary["settings"]["synthetic"] is True
    assert summary["settings"]["MAX_SEQ_LEN"] == 256
    sample = (run_dir / "sample.txt").read_text()
    assert sample.startswith("[0] Once upon a time") and len(sample) > 100


def test_failed_training_fails_the_benchmark_with_the_reason(research_repo, tmp_path):
    repo, env = research_repo
    broken = tmp_path / "repo"
    shutil.copytree(repo, broken)
    text = (broken / "train.py").read_text()
    (broken / "train.py").write_text(re.sub(r"(?m)^TOTAL_BATCH_SIZE = \d+", "TOTAL_BATCH_SIZE = 1000", text))
    done = run_benchmark(broken, env, tmp_path / "run")
    assert done.returncode == 1
    assert "METRIC" not in done.stdout
    assert done.stderr.strip().splitlines()[-1].startswith(
        "autoresearch.sh: train.py failed (exit 1): FAIL: TOTAL_BATCH_SIZE=1000 is not a multiple")

    done = run_benchmark(repo, dict(env, AUTORESEARCH_CACHE=str(tmp_path / "empty")), tmp_path / "run2")
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert "FAIL: no tokenizer" in last and "python prepare.py" in last


@pytest.mark.parametrize("printed, metrics, status", [
    # only the last block counts; non-numeric values are skipped; names keep their case
    ("---\nval_bpb: 9.0\n---\nval_bpb:          0.991234\nmfu_percent:      n/a\nnum_steps:        12\n"
     "profile:          smoke\nfingerprint:      smoke-123\n", ["METRIC val_bpb=0.991234", "METRIC num_steps=12"], 0),
    ("step 1 | loss 3.2\n---\npeak_vram_mb: 10.0\n", [], 1),        # exit 0 but no val_bpb: a failure
    ("no summary at all\n", [], 1),
])
def test_benchmark_turns_only_the_last_summary_block_into_metrics(tmp_path, printed, metrics, status):
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy(ROOT / "autoresearch.sh", repo)
    (repo / "train.py").write_text(f"import sys\nsys.stdout.write({printed!r})\n")
    done = subprocess.run(["bash", "autoresearch.sh"], cwd=repo, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "AUTORESEARCH_PYTHON": sys.executable})
    assert done.returncode == status, done.stderr
    assert [line for line in done.stdout.splitlines() if line.startswith("METRIC")] == metrics
    if status:
        assert "autoresearch.sh: train.py exited 0 but printed no numeric val_bpb" in done.stderr
