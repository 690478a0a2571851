"""What the fixed benchmark itself said about a failed run, and the harness's refusals.

The ML template's `autoresearch.sh` ends a failed run with one line on stderr:

    autoresearch.sh: train.py failed (exit 1): FAIL: CAUSALITY VIOLATION: ...
    autoresearch.sh: the evaluation failed (exit 1): FAIL: train.py left no final weights in ...

after `): ` comes the last `FAIL:` or exception line of that stage's output. Only the script can
write a line that starts with `autoresearch.sh:`: it defuses that token (and `METRIC`) in all
that train.py prints, in training and from its model code in the evaluator. So `find` looks
for the line in the raw log (before ANSI codes or quote markers are dropped, which could join a
token out of split text), and the diagnoser lets it decide over whatever train.py printed:

- the evaluation failed: train.py had exited 0, so nothing it printed while training ended the
  run; the harness's verdict (its refusal, or the exception it quoted) decides;
- train.py failed on a `FAIL:` line: the harness's verdict in train.py's process, printed as the
  process ended, decides over earlier text (a traceback train.py printed but survived);
- train.py failed on an exception: train.py's own crash, read from its output as any log.

`REFUSALS` are the harness's refusals: each has a code, the stages where the harness can raise it
(an evaluator-only refusal on train.py's own failure line is text train.py printed), and the
one-line fix in train.py. The texts are assets/harness.py's.
"""

import re
from dataclasses import dataclass

_M = re.MULTILINE
REASON = re.compile(r"^autoresearch\.sh: (train\.py failed|the evaluation failed) \(exit (-?\d+)\): ?(.*?)\r?$", _M)
STAGES = {"train.py failed": "train", "the evaluation failed": "evaluate"}
# The reason line is the last thing the script prints; only the log's end is searched.
TAIL = 64 * 1024


@dataclass
class Verdict:
    stage: str     # "train" (train.py failed) or "evaluate" (the harness's evaluation failed)
    exit: int      # the failed process's exit status
    why: str       # the stage's last FAIL or exception line as the script quoted it; "" for none

    @property
    def failed_on_fail_line(self):
        return self.why.startswith("FAIL")


def find(raw_text):
    """The script's reason line in the raw log (the last one), or None."""
    tail = raw_text[-TAIL:]
    if len(tail) < len(raw_text):
        tail = tail[tail.find("\n") + 1:]   # whole lines only
    match = None
    for match in REASON.finditer(tail):
        pass
    if match is None:
        return None
    why = match.group(3).strip()
    return Verdict(STAGES[match.group(1)], int(match.group(2)), "" if why == "no output" else why)


def why_span(text):
    """(start, end) of the quoted verdict on the last reason line of `text`, or None."""
    match = None
    for match in REASON.finditer(text, max(0, len(text) - TAIL)):
        pass
    return (match.start(3), match.end(3)) if match else None


@dataclass(frozen=True)
class Refusal:
    code: str
    family: str
    stages: tuple          # where the harness raises it: "train" (train.py's process), "evaluate"
    pattern: re.Pattern
    what: str              # what happened, for the explanation
    fix: str               # the one change in train.py (or the one step) that the agent makes


_BOTH, _EVAL = ("train", "evaluate"), ("evaluate",)

REFUSALS = [
    Refusal("TRAIN_PY_REFUSED", "CONFIG_INVALID", _BOTH, re.compile(
        r"(train\.py:\d+): (.+?)\. The harness imports train\.py in the evaluator to rebuild the model"),
        "The harness's check of train.py refused {1}: {2}",
        "change that line: train.py may not use files, processes, os/sys/subprocess, exec/eval or the "
        "harness's internals, and its top level may hold only imports, constants, functions and classes "
        "(put the rest in main())"),
    Refusal("MODEL_CODE_REFUSED", "CONFIG_INVALID", _EVAL, re.compile(
        r"the evaluator refused train\.py's model code: (.+)|train\.py's code changed (\S+) while the evaluator ran it"
        r"|train\.py's model code raised (\w+) while the evaluator ran it"),
        "The evaluator refused train.py's model code ({0})",
        "GPT, GPTConfig and what they call run inside the evaluator and may only compute logits: take the "
        "file or process access, exit() or the rebinding of torch/harness names out of the model code "
        "(training-only work belongs in main(), which the evaluator never runs)"),
    Refusal("LOGITS_SHAPE", "CONFIG_INVALID", _BOTH, re.compile(
        r"model\(idx\) must return logits of shape \(B, T, (\d+)\); got ([^\n]*?)\. The harness calls the model"),
        "model(idx) returned {2} where the harness needs logits of shape (B, T, {1})",
        "make GPT.forward(idx) with no targets return the logits alone, shaped (batch, time, vocab): no "
        "loss, tuple or cut vocabulary (the harness computes the loss itself)"),
    Refusal("NO_FINAL_WEIGHTS", "CONFIG_INVALID", _EVAL, re.compile(
        r"train\.py left no final weights in (\S+) \((\w+)\); it must end with recorder\.finish"),
        "train.py exited without leaving its final weights ({2} in {1}), so the harness had no model to evaluate",
        "end main() with recorder.finish(model, asdict(config), training_time, step, timed_steps, ...) and "
        "let every way out of training (a break, a return) reach it"),
    Refusal("VOCAB_CONTEXT_MISMATCH", "CONFIG_INVALID", _EVAL, re.compile(
        r"the saved model is for vocab (\S+) and context (\S+); the harness evaluates vocab (\d+), context (\d+)"),
        "The saved model is for vocab {1} and context {2}, but the harness evaluates vocab {3}, context {4}",
        "build GPTConfig with vocab_size=tokenizer.get_vocab_size() and sequence_len=MAX_SEQ_LEN, both "
        "from prepare.py, not numbers of train.py's own"),
    Refusal("TRAIN_PY_CHANGED", "CONFIG_INVALID", _EVAL, re.compile(r"train\.py changed while it ran"),
        "train.py was rewritten while the run went on, so the evaluator refused to rebuild the model from it",
        "take out what writes to train.py (or any file of the repo) during the run; the evaluator uses only "
        "the train.py that trained"),
    Refusal("VAL_BPB_NONFINITE", "NAN_LOSS", _EVAL, re.compile(r"\bval_bpb is (-?nan|-?inf)\b"),
        "Training finished with a finite loss, but the final weights give val_bpb = {1}",
        "look for what the last edit does differently in model.eval() than in training: a `self.training` "
        "branch, a buffer the state dict does not hold (filled outside __init__), a division or exp that "
        "overflows"),
    Refusal("CAUSAL_LEAK", "LOSS_TOO_GOOD", _BOTH, re.compile(
        r"CAUSALITY VIOLATION: changing tokens after position (\d+) changed the loss before it by (\S+) nats"),
        "The harness's causality probe failed: changing the tokens after position {1} moved the loss "
        "before it by {2} nats, so the model sees future tokens",
        "restore causal attention in train.py (is_causal=True, the causal mask) or undo the operation that "
        "mixes positions"),
    Refusal("NO_CUDA_DEVICE", "NO_ACCELERATOR", _BOTH, re.compile(
        r"nvidia-smi sees (.+?) but torch (\S+) cannot use CUDA"),
        "There is a GPU ({1}) but torch {2} cannot use it, so the harness refused to train on the CPU",
        "`uv sync` (pyproject.toml pins a CUDA torch) or update the NVIDIA driver; AUTORESEARCH_DEVICE=cpu "
        "trains on the CPU on purpose"),
    Refusal("TORCH_COMPILE_FAILED", "COMPILE_FAILURE", ("train",), re.compile(
        r"torch\.compile failed \(([^\n]*?)\); set COMPILE = False"),
        "torch.compile failed on train.py's model ({1})",
        "set COMPILE = False to train eagerly, or undo the change that broke compilation"),
    Refusal("FA_UNSUPPORTED_ARCH", "GPU_UNSUPPORTED", _BOTH, re.compile(
        r"ATTENTION_BACKEND='fa3' needs an Ampere or newer NVIDIA GPU"),
        "ATTENTION_BACKEND='fa3' needs an Ampere or newer NVIDIA GPU",
        "set ATTENTION_BACKEND to \"sdpa\" (or \"auto\")"),
]


def refusal(line, stage=None):
    """(Refusal, match) for the harness's refusal on `line`, or None; with a `stage`, only a
    refusal the harness raises in that stage counts."""
    for item in REFUSALS:
        if stage is not None and stage not in item.stages:
            continue
        match = item.pattern.search(line or "")
        if match:
            return item, match
    return None


def describe(item, match):
    """The refusal's first sentence, with what the harness named filled in."""
    groups = [match.group(0)] + [g or "" for g in match.groups()]
    if item.code == "MODEL_CODE_REFUSED":
        groups[0] = next((g for g in match.groups() if g), match.group(0))
        if match.group(2):
            groups[0] = f"it changed {match.group(2)}"
        elif match.group(3):
            groups[0] = f"it raised {match.group(3)}"
    return item.what.format(*groups)
