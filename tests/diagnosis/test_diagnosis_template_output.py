"""The diagnoser reads the ML template's own output exactly.

Before its first step train.py prints a header whose batch line reads
`Batch: 4,096 tokens/step = 8 x 256 x 2 accum`; that is a rate, not a progress line. Each crash
the template can end in is diagnosed here on a log that carries the template's real header (and,
for crashes after training started, its real step lines), captured from a real CPU run of
./autoresearch.sh in tests/fixtures/template_run/ (make_template_run.py says how). A crash before
the first step must not be read as one after step 8 (DEVICE_BATCH_SIZE): a hang there is a stall
whose fix is COMPILE=False, an out-of-memory in the first optimizer step is the optimizer's state,
not the activations.
"""

import json
from pathlib import Path

import pytest

from autoresearch.pipeline.diagnosis import read_log
from gpu_train_debug import diagnose
from gpu_train_debug.rules import patterns

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
RUN = FIXTURES / "template_run"
LOGS = FIXTURES / "logs"
CAPTURED = json.loads((RUN / "config.json").read_text(encoding="utf-8"))
CONFIG = CAPTURED["config"]
SOURCED = {c["log"]: c for c in json.loads((LOGS / "cases.json").read_text(encoding="utf-8"))}

CLEAN = read_log(RUN / "clean.log")
_LINES = CLEAN.splitlines(keepends=True)
_FIRST_STEP = next(i for i, line in enumerate(_LINES) if line.startswith("step "))
HEADER = "".join(_LINES[:_FIRST_STEP])
# The step lines up to the end of training (the evaluator's output follows them).
_TRAINING = [line for line in _LINES[_FIRST_STEP:] if line.startswith(("step ", "Causality probe after"))]
WARMUP = "".join(_TRAINING[:4])   # steps 0-2 and the early causality probe
TRAINING = "".join(_TRAINING)


def _tail(name, first=("Traceback", "FAIL", "\nFAIL", "[rank")):
    """The failure text of a stored log (tests/fixtures/logs), without what came before it."""
    text = read_log(LOGS / name)
    starts = [text.find(mark) for mark in first if text.find(mark) >= 0]
    return text[min(starts):].lstrip("\n")


def test_the_header_is_real_and_is_not_a_step():
    assert "Batch: 4,096 tokens/step = 8 x 256 x 2 accum" in HEADER
    assert HEADER.startswith("Device: ") and "Model: " in HEADER and "Data: " in HEADER
    assert patterns.last_step(HEADER) is None
    assert patterns.printed_shapes(HEADER) == {"TOTAL_BATCH_SIZE": 4096, "DEVICE_BATCH_SIZE": 8, "MAX_SEQ_LEN": 256}


def test_step_lines_are_read_after_the_header():
    assert patterns.last_step(HEADER + WARMUP) == (2, 0.0)
    last = _TRAINING[-1] if _TRAINING[-1].startswith("step ") else _TRAINING[-2]
    step, pct = patterns.last_step(HEADER + TRAINING)
    assert f"step {step:05d} ({pct:.1f}%)" in last


def test_other_rates_per_step_are_not_progress():
    for line in ("Batch: 524,288 tokens/step = 128 x 2048 x 2 accum", "tokens per step = 4096",
                 "samples/step: 64"):
        assert patterns.last_step(line) is None, line
    assert patterns.last_step("step 00012 (4.8%) | loss: 3.1") == (12, 4.8)
    assert patterns.last_step("iter 3 | step: 7 loss=2.0") == (7, None)


# name, log text, (status, reason), config, code, fix (a dict, or a predicate on it), started?
CASES = [
    # Before the first step: the hang and the out-of-memory errors come from real runs (the
    # error injected into one torch call: make_template_run.py).
    ("hang_before_first_step", read_log(RUN / "hang_before_first_step.log"), ("timeout", "timed out after 40 s"),
     CONFIG, "STALL_BEFORE_FIRST_STEP", {"COMPILE": False}, False),
    ("oom_in_muon_state", read_log(RUN / "oom_optimizer_state.log"), ("crash", "exit 1"),
     CONFIG, "OOM_MODEL_STATES", lambda fix: "DEVICE_BATCH_SIZE" not in fix, False),
    ("oom_in_adamw_state", read_log(RUN / "oom_adamw_state.log"), ("crash", "exit 1"),
     CONFIG, "OOM_MODEL_STATES", lambda fix: "DEVICE_BATCH_SIZE" not in fix, False),
    ("oom_first_forward", read_log(RUN / "oom_first_forward.log"), ("crash", "exit 1"),
     CONFIG, "OOM_TRAIN_ACTIVATIONS", lambda fix: 0 < fix.get("DEVICE_BATCH_SIZE", 0) < 8
     and 4096 % (fix["DEVICE_BATCH_SIZE"] * 256) == 0, False),
    # The first forward pass (where compilation happens) on GPUs: the error text the sources print.
    ("compile_without_triton", HEADER + _tail("triton_missing.log"), ("crash", "exit 1"),
     dict(CONFIG, COMPILE="auto"), "TORCH_COMPILE_FAILED", {"COMPILE": False}, False),
    ("triton_gpu_too_old", HEADER + _tail("triton_gpu_too_old.log"), ("crash", "exit 1"),
     dict(CONFIG, COMPILE=True), "TRITON_GPU_TOO_OLD", {"COMPILE": False}, False),
    ("fa3_kernel_missing", HEADER + _tail("fa3_no_kernel_image_blackwell.log"), ("crash", "exit 1"),
     dict(CONFIG, ATTENTION_BACKEND="fa3"), "TORCH_ARCH_UNSUPPORTED", {"ATTENTION_BACKEND": "sdpa"}, False),
    ("bf16_unsupported", HEADER + _tail("bf16_unsupported.log"), ("crash", "exit 1"),
     dict(CONFIG, DTYPE="bfloat16"), "BF16_UNSUPPORTED", {"DTYPE": "float16"}, False),
    # Real template runs, broken on purpose (tests/fixtures/make_logs.py): their own header.
    ("shape_mismatch", read_log(LOGS / "template_real_shape.log"), ("crash", "exit 1"),
     SOURCED["template_real_shape.log"]["config"], "SHAPE_MISMATCH", {}, False),
    ("fa3_on_cpu", read_log(LOGS / "template_real_fa3_on_cpu.log"), ("crash", "exit 1"),
     SOURCED["template_real_fa3_on_cpu.log"]["config"], "FA_UNSUPPORTED_ARCH", {"ATTENTION_BACKEND": "sdpa"}, False),
    ("flex_on_cpu", read_log(LOGS / "template_real_flex_on_cpu.log"), ("crash", "exit 1"),
     SOURCED["template_real_flex_on_cpu.log"]["config"], "BACKEND_NEEDS_CUDA_COMPILE",
     {"ATTENTION_BACKEND": "sdpa"}, False),
    ("window_pattern", read_log(LOGS / "template_real_window_pattern.log"), ("crash", "exit 1"),
     SOURCED["template_real_window_pattern.log"]["config"], "WINDOW_PATTERN_INVALID", {"WINDOW_PATTERN": "SL"}, False),
    ("batch_not_multiple", read_log(LOGS / "template_real_batch_not_multiple.log"), ("crash", "exit 1"),
     SOURCED["template_real_batch_not_multiple.log"]["config"], "BATCH_NOT_DIVISIBLE", {"DEVICE_BATCH_SIZE": 4}, False),
    ("no_prepared_data", read_log(LOGS / "template_real_no_data.log"), ("crash", "exit 1"),
     SOURCED["template_real_no_data.log"]["config"], "TOKENIZER_MISSING", {}, False),
    # After training started: the real step lines, then the template's own failure text.
    ("causality_violation", HEADER + WARMUP + _tail("template_causality_violation.log"), ("crash", "exit 1"),
     CONFIG, "CAUSAL_LEAK", {}, True),
    ("diverged", HEADER + TRAINING + _tail("template_diverged.log"), ("crash", "exit 1"),
     dict(CONFIG, MATRIX_LR=4.0), "LOSS_DIVERGED", {"MATRIX_LR": 0.04}, True),
    ("hang_during_training", HEADER + TRAINING[:len(TRAINING) // 2], ("timeout", "timed out after 40 s"),
     CONFIG, "HANG_DURING_TRAINING", {}, True),
    ("oom_in_evaluation", HEADER + TRAINING + _tail("oom_eval_after_training.log"), ("crash", "exit 1"),
     CONFIG, "OOM_EVAL", lambda fix: 0 < fix.get("DEVICE_BATCH_SIZE", 0) < 8, True),
]


@pytest.mark.parametrize("name,log,status,config,code,fix,started", CASES, ids=[c[0] for c in CASES])
def test_template_crash_with_its_real_header(name, log, status, config, code, fix, started):
    result = diagnose(log, config, {"status": status[0], "reason": status[1]})
    assert result["codes"][0] == code, result["explanation"]
    assert fix(result["fix"]) if callable(fix) else result["fix"] == fix, result
    printed = patterns.last_step(log)
    if started:
        assert printed is not None and result["intermediates"]["last_step"] == printed[0]
    else:
        assert printed is None
        assert "last_step" not in result["intermediates"], result["intermediates"]
        assert "after step" not in result["explanation"]


def test_the_captured_logs_are_what_the_generator_records():
    for name, case in CAPTURED["cases"].items():
        text = (RUN / case["log"]).read_text(encoding="utf-8")
        assert text.startswith(HEADER.splitlines()[0].split(" | ")[0]), name
        assert (case["exit_code"] == 0) == (name == "clean"), case
    assert "METRIC val_bpb=" in CLEAN
    assert CONFIG["DEVICE_BATCH_SIZE"] == 8 and CONFIG["MAX_SEQ_LEN"] == 256


def test_next_steps_of_the_commonest_template_failures():
    """The step a person follows: the shape error's own line in train.py, `uv sync` for a package."""
    log = read_log(LOGS / "template_real_shape.log")
    shape = diagnose(log, SOURCED["template_real_shape.log"]["config"], {"status": "crash", "reason": "exit 1"})
    step = shape["intermediates"]["fix_step"]
    assert step.startswith("fix or revert train.py line ") and ", in forward" in step, step
    line = int(step.split("line ")[1].split(",")[0])
    # the line named is train.py's frame of the traceback (not torch's linear.py), with its code
    assert f'train.py", line {line}, in forward\n    return self.c_proj(' in log
    assert "self.c_proj" in step and f"train.py line {line}" in shape["explanation"]
    missing = diagnose(HEADER + "Traceback (most recent call last):\n"
                       '  File "/home/user/research/train.py", line 17, in <module>\n    import torch\n'
                       "ModuleNotFoundError: No module named 'torch'\n", CONFIG, {"status": "crash", "reason": "exit 1"})
    assert missing["codes"] == ["MISSING_PACKAGE"]
    assert missing["intermediates"]["fix_step"].startswith("`uv sync` in the research repo")
