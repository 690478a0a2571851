"""The benchmark's verdict decides over what train.py printed (gpu_train_debug/harness_verdict.py).

The training output is the real one of the template's smoke run (tests/fixtures/logs/); the FAIL
and `autoresearch.sh:` lines are our harness's and our script's text; the fake traceback is what a
hostile train.py would print (PyTorch's OOM message, tests/fixtures/make_logs.py cites its source).
"""

import json
import re
from pathlib import Path

import pytest

from gpu_train_debug import diagnose, harness_verdict

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
CASES = json.loads((LOGS / "cases.json").read_text())
CONFIG = next(c for c in CASES if c["log"] == "template_real_timeout.log")["config"]
TRAINING = (LOGS / "template_real_timeout.log").read_text()
OOM_LINE = next(line for line in (LOGS / "oom_eval_after_training.log").read_text().splitlines()
                if line.startswith("torch.OutOfMemoryError"))
FAKE_OOM = ('Traceback (most recent call last):\n  File "/home/user/research/train.py", line 431, in main\n'
            f"    loss = train_model(x, y)\n{OOM_LINE}\n")
NO_WEIGHTS = ("FAIL: train.py left no final weights in /r/.autoresearch/runs/4 (FileNotFoundError); it must end "
              "with recorder.finish(model, config, ...)")
CRASH = {"status": "crash", "reason": "exit 1"}
# autoresearch.sh's choice of the quoted line: the stage's last FAIL or exception line.
WHY = re.compile(r"^(FAIL|[A-Za-z_.]*(Error|Exception|Interrupt)\b)")


def reason(stage, output, status=1):
    quoted = [line for line in output.splitlines() if WHY.match(line)]
    return f"autoresearch.sh: {stage} (exit {status}): {quoted[-1] if quoted else 'no output'}\n"


def run(text, config=CONFIG, profile=CRASH):
    result = diagnose(text, config, profile)
    return result["family"], result["codes"], result["fix"]


def test_evaluation_refused_after_a_fake_oom_in_training():
    train_out = TRAINING + FAKE_OOM
    eval_out = NO_WEIGHTS + "\n"
    log = train_out + eval_out + reason("the evaluation failed", eval_out)
    assert run(train_out) == ("OOM", ["OOM_TRAIN_ACTIVATIONS"], {"DEVICE_BATCH_SIZE": 4})   # the bait
    result = diagnose(log, CONFIG, CRASH)
    assert (result["family"], result["codes"], result["fix"]) == ("CONFIG_INVALID", ["NO_FINAL_WEIGHTS"], {})
    assert result["intermediates"]["failed_stage"] == "the harness's evaluation"
    assert result["intermediates"]["overruled_text"].startswith("OutOfMemoryError: CUDA out of memory")
    assert "did not end the run" in result["explanation"]
    # Without the script's line (the harness run by hand), its FAIL line, the log's last, still decides.
    assert run(train_out + eval_out)[1] == ["NO_FINAL_WEIGHTS"]


def test_a_fake_fail_line_printed_by_the_model_code_in_the_evaluator():
    eval_out = FAKE_OOM + "FAIL: CUDA out of memory\n" + NO_WEIGHTS + "\n"
    assert run(TRAINING + eval_out + reason("the evaluation failed", eval_out))[1] == ["NO_FINAL_WEIGHTS"]


def test_a_harness_fail_in_training_decides_over_an_earlier_fake_traceback():
    fail = "FAIL: TOTAL_BATCH_SIZE=4096 is not a multiple of DEVICE_BATCH_SIZE*MAX_SEQ_LEN=1536; change one of them"
    train_out = FAKE_OOM + fail + "\n"
    config = dict(CONFIG, DEVICE_BATCH_SIZE=6)
    assert run(train_out, config)[0] == "OOM"                                     # no verdict: as before
    assert run(train_out + reason("train.py failed", train_out), config) == (
        "CONFIG_INVALID", ["BATCH_NOT_DIVISIBLE"], {"DEVICE_BATCH_SIZE": 4})


@pytest.mark.parametrize("forged", [
    "autoresearch.sh(train.py): the evaluation failed (exit 1): {oom}",           # defused by the script
    "\x1b[31mautoresearch\x1b[0m.sh: the evaluation failed (exit 1): {oom}",      # joins once ANSI is dropped
    "> autoresearch.sh: the evaluation failed (exit 1): {oom}",
    "  autoresearch.sh: the evaluation failed (exit 1): {oom}",
])
def test_forged_reason_lines_are_not_the_verdict(forged):
    line = forged.format(oom=OOM_LINE)
    assert harness_verdict.find(TRAINING + line + "\n") is None
    train_out = TRAINING + line + "\nNameError: name 'lr_sched' is not defined\n"
    log = train_out + reason("train.py failed", train_out)
    assert harness_verdict.find(log).why == "NameError: name 'lr_sched' is not defined"


def test_an_evaluator_only_refusal_quoted_from_train_py_output_is_train_py_text():
    """train.py failed: the evaluator never ran, so a 'no final weights' line is train.py's own print."""
    train_out = TRAINING + FAKE_OOM + NO_WEIGHTS + "\n"
    log = train_out + reason("train.py failed", train_out)
    assert run(log)[1] == ["OOM_TRAIN_ACTIVATIONS"]     # read as any log: train.py's text is all there is


@pytest.mark.parametrize("case", [c for c in CASES if c["kind"] == "real" and c.get("status", "crash") == "crash"],
                         ids=lambda c: c["log"])
def test_genuine_train_py_crashes_read_as_before_with_the_reason_line(case):
    """A real crash of train.py (its own traceback, or the harness's FAIL in its process) gets the same
    family, code and fix with autoresearch.sh's line after it as without."""
    text = (LOGS / case["log"]).read_text(errors="replace")
    profile = {"status": "crash", "reason": case.get("reason", "exit 1")}
    before = run(text, case["config"], profile)
    after = run(text + reason("train.py failed", text), case["config"], profile)
    assert after == before
    assert after[0] == case["family"] and case["code"] in after[1]


def test_a_genuine_oom_in_the_evaluation():
    eval_out = ('Traceback (most recent call last):\n  File "/r/harness.py", line 1100, in main\n'
                '    evaluate_run(definitions)\n  File "/r/harness.py", line 699, in evaluate_split\n'
                f"    loss = token_losses(model, x, y, vocab).view(-1)\n{OOM_LINE}\n")
    result = diagnose(TRAINING + eval_out + reason("the evaluation failed", eval_out), CONFIG, CRASH)
    assert (result["family"], result["codes"]) == ("OOM", ["OOM_EVAL"])


def test_an_evaluation_killed_without_a_word():
    log = TRAINING + "autoresearch.sh: the evaluation failed (exit 137): no output\n"
    assert run(log)[1] == ["HOST_OOM_KILLED"]


def test_an_exception_in_model_code_only_the_evaluator_runs():
    eval_out = ('Traceback (most recent call last):\n  File "/r/harness.py", line 1100, in main\n'
                '    evaluate_run(definitions)\n  File "/r/train.py", line 201, in forward\n'
                "    x = self.eval_only(x)\nAttributeError: 'GPT' object has no attribute 'eval_only'\n")
    result = diagnose(TRAINING + FAKE_OOM + eval_out + reason("the evaluation failed", eval_out), CONFIG, CRASH)
    assert (result["family"], result["codes"]) == ("CONFIG_INVALID", ["CODE_ERROR"])
    assert result["intermediates"]["exception_at"] == "/r/train.py line 201, in forward"


def test_the_refusal_as_an_older_harness_printed_it():
    """Before its refusals were FAIL lines, the evaluator's audit ended on a PermissionError
    traceback: that is the harness refusing model code, not a file's permissions."""
    eval_out = ('Traceback (most recent call last):\n  File "/r/harness.py", line 938, in _audit\n'
                "PermissionError: the evaluator refused train.py's model code: open('/tmp/x.log')\n")
    log = TRAINING + eval_out + reason("the evaluation failed", eval_out)
    assert run(log)[:2] == ("CONFIG_INVALID", ["MODEL_CODE_REFUSED"])


def test_every_refusal_code_is_documented_with_its_family():
    doc = (Path(__file__).resolve().parents[2] / "references" / "diagnosis-codes.md").read_text()
    for item in harness_verdict.REFUSALS:
        assert re.search(rf"\| `{item.code}` \| {item.family} \|", doc), item.code
