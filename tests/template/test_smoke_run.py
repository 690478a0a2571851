"""The real thing on CPU: `bash autoresearch.sh` trains the smoke baseline, the harness evaluates it in a
process of its own, and the METRIC lines carry the harness's numbers, never train.py's."""

import json
import math
import re
import shutil
import subprocess
import sys

import pytest
import torch

from agent_outputs import shown
from autoresearch import metrics

from .template_helpers import ROOT

METRIC = re.compile(r"^METRIC\s+([A-Za-z_][A-Za-z0-9_.]*)=(\S+)\s*$")   # the METRIC line grammar
SUMMARY = [("val_bpb", r"\d+\.\d{6}"), ("training_seconds", r"\d+\.\d"), ("total_seconds", r"\d+\.\d"),
           ("peak_vram_mb", r"\d+\.\d"), ("mfu_percent", r"\d+\.\d\d"), ("total_tokens_M", r"\d+\.\d"),
           ("num_steps", r"\d+"), ("num_params_M", r"\d+\.\d"), ("depth", r"\d+"),
           ("val_bpb_karpathy", r"\d+\.\d{6}")]
STEP_KEYS = {"step", "progress", "elapsed_s", "loss", "lr_mult", "grad_norm", "tok_per_s", "mfu", "mem_mb"}


def untrained_bpb(prepare, train):
    tok = prepare.Tokenizer.from_directory()
    model_dim = -(-train.DEPTH * train.ASPECT_RATIO // train.HEAD_DIM) * train.HEAD_DIM
    cfg = train.GPTConfig(sequence_len=prepare.MAX_SEQ_LEN, vocab_size=tok.get_vocab_size(), n_layer=train.DEPTH,
                          n_head=model_dim // train.HEAD_DIM, n_embd=model_dim, window_pattern=train.WINDOW_PATTERN)
    torch.manual_seed(train.SEED)
    model = train.GPT(cfg)
    model.init_weights()
    return train.harness.evaluate_split(model.eval(), train.DEVICE_BATCH_SIZE, "val", prepare.EVAL_TOKENS)[0]


# train.py's own word at the end of a run: a made-up summary block and METRIC lines.
MADE_UP = """
    print("---")
    print("val_bpb:          0.010000")
    print("METRIC val_bpb=0.01")
    print("num_steps: 999999", end="")   # and no final newline
"""


# ... and a bonus on the targets only while evaluating (the harness never passes targets).
TARGET_BONUS = ("""        if targets is None:
            return logits
""", """        if targets is None:
            return logits
        if not self.training:
            logits = logits + 0.4 * F.one_hot(targets, logits.size(-1)).float()
""")


def with_made_up_summary(repo):
    text = (repo / "train.py").read_text()
    assert TARGET_BONUS[0] in text
    text = text.replace(*TARGET_BONUS)
    anchor = "    recorder.finish(model, asdict(config), training_time, step, timed_steps, depth=DEPTH)\n"
    assert anchor in text
    (repo / "train.py").write_text(text.replace(anchor, anchor + MADE_UP))


def run_benchmark(repo, env, run_dir, timeout=300, **extra):
    run_dir.mkdir(parents=True, exist_ok=True)
    env = dict(env, AUTORESEARCH_RUN="1", AUTORESEARCH_RUN_DIR=str(run_dir),
               AUTORESEARCH_STEPS_FILE=str(run_dir / "steps.jsonl"), **extra)
    return subprocess.run(["bash", "autoresearch.sh"], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_smoke_training_run_learns_and_reports(research_repo, modules, tmp_path):
    prepare, train = modules
    repo, env = research_repo
    assert prepare.PROFILE == "smoke" and train.DEPTH == 2      # the fitted smoke tier
    before = untrained_bpb(prepare, train)
    attacked = tmp_path / "repo"
    shutil.copytree(repo, attacked)
    with_made_up_summary(attacked)

    run_dir = tmp_path / "runs" / "1"
    done = run_benchmark(attacked, env, run_dir, AUTORESEARCH_KEEP_WEIGHTS="1")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    metrics = {}
    for line in done.stdout.splitlines():
        m = METRIC.match(line)
        if m:
            metrics[m.group(1)] = float(m.group(2))
    assert [name for name, _ in SUMMARY] == [k for k in metrics if k in dict(SUMMARY)]
    # What the engine records (its own parser, last value wins) is the harness's number.
    recorded, _ = metrics_parse(done.stdout)
    assert recorded["val_bpb"] == metrics["val_bpb"] != 0.01 and recorded["num_steps"] < 999999
    assert "METRIC(train.py) val_bpb=0.01" in done.stdout
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
    # Evaluated once: by the benchmark's evaluator, not by train.py as well.
    assert done.stdout.count("Causality probe: passed") == 1

    steps = [json.loads(s) for s in (run_dir / "steps.jsonl").read_text().splitlines()]
    assert len(steps) == metrics["num_steps"]
    assert all(STEP_KEYS <= set(s) for s in steps)
    assert [s["step"] for s in steps] == list(range(len(steps)))
    progress = [s["progress"] for s in steps]
    assert progress == sorted(progress) and 0 <= progress[0] and progress[-1] <= 1
    assert all(math.isfinite(s["loss"]) and s["mfu"] is None for s in steps)   # no CPU peak: MFU unknown
    assert steps[-1]["loss"] < steps[0]["loss"]
    # The gradient norm of every step (before the optimizer step): a real, finite, positive number.
    assert all(isinstance(s["grad_norm"], float) and 0 < s["grad_norm"] < 1e6 for s in steps)

    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["val_bpb"] == pytest.approx(val_bpb, abs=1e-6)
    # The settings fingerprint reaches the engine as a number (a segment's runs must agree on it).
    assert metrics["settings_fingerprint"] == int(summary["fingerprint"], 16) > 0
    assert summary["settings"]["files_sha"]   # the prepared files' sums are part of it
    assert summary["settings"]["profile"] == "smoke" and summary["settings"]["synthetic"] is True
    assert summary["settings"]["MAX_SEQ_LEN"] == 256
    sample = (run_dir / "sample.txt").read_text()
    assert sample.startswith("[0] Once upon a time") and len(sample) > 100
    assert "Causality probe after warm-up: passed" in done.stdout

    # The same weights evaluated here, in the test's process, give the recorded number.
    saved = torch.load(run_dir / "final_model.pt", weights_only=True)
    model = train.GPT(train.GPTConfig(**saved["config"]))
    model.load_state_dict(saved["state_dict"])
    again = train.harness.evaluate_split(model.eval(), train.DEVICE_BATCH_SIZE, "val", prepare.EVAL_TOKENS)
    assert again[0] == pytest.approx(val_bpb, abs=2e-6)
    assert again[1] == pytest.approx(metrics["val_bpb_karpathy"], abs=2e-6)

    # The hidden holdout: in the run folder only, never in anything the run printed.
    holdout = json.loads((run_dir / "holdout.json").read_text())
    value = holdout["holdout_bpb"]
    assert math.isfinite(value) and value < 0.6 * before and holdout["tokens"] == prepare.HOLDOUT_TOKENS
    printed = done.stdout + done.stderr
    # As a number of its own: a rounding that is only the start of another figure (val_bpb can
    # share the holdout's first digits) is not the holdout shown.
    for spelling in (repr(value), f"{value:.6f}", f"{value:.4f}", f"{value:.3f}"):
        assert not shown(spelling, printed), spelling
    assert not any("holdout" in name for name in metrics)
    assert "holdout" not in json.dumps(summary)


def metrics_parse(text):
    return metrics.parse(text)


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


@pytest.mark.parametrize("printed", [
    "---\nval_bpb:          0.991234\nnum_steps:        12\n",
    "METRIC val_bpb=0.5\n",
])
def test_a_summary_printed_by_train_py_alone_is_never_a_metric(tmp_path, printed):
    """train.py prints a summary and exits 0 without leaving weights: the harness's evaluation fails."""
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy(ROOT / "autoresearch.sh", repo)
    for name in ("harness.py", "prepare.py"):
        shutil.copy(ROOT / "assets" / name, repo)
    (repo / "train.py").write_text(f"import sys\nsys.stdout.write({printed!r})\n")
    env = {"PATH": "/usr/bin:/bin", "AUTORESEARCH_PYTHON": sys.executable,
           "AUTORESEARCH_CACHE": str(tmp_path / "cache"), "AUTORESEARCH_RUN_DIR": str(tmp_path / "run")}
    done = subprocess.run(["bash", "autoresearch.sh"], cwd=repo, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 1, done.stderr
    found, _ = metrics.parse(done.stdout)
    assert "val_bpb" not in found
    assert "autoresearch.sh: the evaluation failed" in done.stderr


def test_train_py_on_its_own_prints_the_summary_block(research_repo, tmp_path):
    """karpathy's route, `python train.py` (or `uv run train.py`): it trains, then the harness's
    evaluator (a fresh process, the same one the benchmark runs) scores the saved weights and
    prints the summary block after '---'. Under autoresearch.sh only the benchmark's evaluator does."""
    repo, env = research_repo
    run_dir = tmp_path / "alone"
    done = subprocess.run([sys.executable, "train.py"], cwd=repo, capture_output=True, text=True, timeout=300,
                          env=dict(env, AUTORESEARCH_RUN_DIR=str(run_dir)))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines.count("---") == 1
    block = lines[lines.index("---") + 1:]
    for (name, fmt), line in zip(SUMMARY, block):
        assert re.fullmatch(rf"{name}:\s+{fmt}", line), line
    summary = json.loads((run_dir / "summary.json").read_text())
    assert f"val_bpb:          {summary['val_bpb']:.6f}" in block and summary["evaluated_by"] == "harness.py"
    assert not re.search(r"(?m)^METRIC ", done.stdout)   # numbers reach the engine only through autoresearch.sh
