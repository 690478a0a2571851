"""diagnose(log_text, config, profile): family, codes, intermediates, minimal fix, explanation.

`config` is either the constants of an autoresearch `train.py` (+ `prepare.py`), read with
gpu_train_debug.config, or a generic training config of the task environment (it has a
`micro_batch` field; see gpu_train_debug.rules.generic). `profile` holds what the run measured:
`status` and `reason` from the engine, `steps` (steps.jsonl records), `summary`
(summary.json), `gpu_memory_mb`, `gpu_name`, `compute_capability`, `timeout_s`.

`fix` holds only the constants that change, with values valid for the config: an OOM fix
keeps TOTAL_BATCH_SIZE divisible by DEVICE_BATCH_SIZE * MAX_SEQ_LEN, so the total batch and
the optimisation stay the same and only gradient accumulation grows.
"""

import math
import re

from gpu_train_debug import accounting as acc
from gpu_train_debug import evidence, harness_verdict, logtext, memory
from gpu_train_debug.rules import fallbacks, patterns, semantics

FAMILIES = ("OOM", "GPU_UNSUPPORTED", "DTYPE_UNSUPPORTED", "NO_ACCELERATOR", "NAN_LOSS",
            "COMPILE_FAILURE", "MISSING_DEPENDENCY", "TOKENIZER", "DATA", "DISTRIBUTED",
            "CONFIG_INVALID", "TIMEOUT", "LOSS_TOO_GOOD", "UNKNOWN")

# karpathy/autoresearch defaults: a diverged run is brought back to the nearest sane value.
DEFAULT_LRS = {"EMBEDDING_LR": 0.6, "UNEMBEDDING_LR": 0.004, "MATRIX_LR": 0.04, "SCALAR_LR": 0.5}
# Loss (nats/token) or val_bpb this low in a 5-minute run means the model sees its targets.
LEAK_LOSS = 0.3
LEAK_BPB = 0.3
# The most shared memory a block may use on any GPU so far (Hopper and Blackwell: 227 KiB).
MAX_SHARED_MEMORY_PER_BLOCK = 232448
_COMPILER_FRAME = re.compile(r"torch[/\\]_(?:dynamo|inductor)[/\\]|[/\\]triton[/\\]")
_EVAL_FRAMES = ("evaluate_bpb", "def evaluate", "eval_loss", "in evaluate", "model.eval()")
# The first optimizer step (before any step line) allocates the optimizer's state: the
# template's Muon momentum buffers come from torch.zeros inside optimizer.step().
_STATE_FRAMES = ("setup_optimizer", "init_weights", ".to(device", "to_empty(", "_init_group",
                 "zeros_like", "in __init__", "optimizer.step(", "/torch/optim/")


# Warnings that are themselves the cause: the run goes on (on the CPU, or to a later error) but
# nothing after them can work. A later exception does not outrank them.
CAUSE_WARNINGS = ("DRIVER_TOO_OLD", "TORCH_ARCH_UNSUPPORTED")
# TensorFlow's dynamic loader's warning for a CUDA library it could not open (it then runs on the CPU).
_TF_DLERROR = re.compile(r"Could not load dynamic library '[^'\n]+'; dlerror:|Cannot dlopen some GPU libraries")
# An exception that is itself about a library or the GPU (then the loader's warning explains it).
_LIBRARY_WORDS = re.compile(r"ImportError|OSError|shared object|dlerror|\blib\w+\.so|DLL|CUDA|cuda|GPU|device", re.I)
_GPU_WORDS = re.compile(r"cuda|\bgpu|device|driver|nvidia|\bhip\b|rocm", re.I)
_ANY_RANK = re.compile(r"\[(?:rank|default)(\d+)\]:|\bRank (\d+)\]")
# Exceptions that are always the code's own mistake, wherever they are raised.
_ALWAYS_CODE = ("NameError", "SyntaxError", "IndentationError", "TabError", "UnboundLocalError")


# A failure shows at the start (warnings, setup) or at the end (the traceback) of a log;
# the middle is progress lines. Reading only these parts bounds the time for any log size.
EXCERPT_HEAD = 64 * 1024
EXCERPT_TAIL = 128 * 1024


def excerpt(log_text):
    if len(log_text) <= EXCERPT_HEAD + EXCERPT_TAIL:
        return log_text
    return log_text[:EXCERPT_HEAD] + "\n[... middle of the log skipped ...]\n" + log_text[-EXCERPT_TAIL:]


_INSTALLED = re.compile(r"[/\\](?:site|dist)-packages[/\\]")


def diagnose(log_text, config=None, profile=None):
    raw = excerpt(log_text or "")
    # The benchmark's own reason line, read before normalising (which could join one out of split text).
    verdict = harness_verdict.find(raw)
    # One failure per line: \r redraws split, ANSI colours, quote markers and wraps undone; then the
    # per-line envelopes (rank prefixes, timestamps, logger headers) go, the ranks kept by line.
    log_text, ranks = logtext.normalise_lines(raw)
    config = dict(config or {})
    profile = dict(profile or {})
    if "micro_batch" in config:
        from gpu_train_debug.rules import generic
        try:
            return generic.diagnose(log_text, config, profile)
        except (KeyError, TypeError, ValueError, ZeroDivisionError, OverflowError):
            pass  # not a complete task config: diagnose from the log alone
    config = _clean(config)
    config.update(patterns.printed_shapes(log_text, config.get("DEVICE_BATCH_SIZE")))
    return _Diagnosis(log_text, config, _clean_profile(profile), verdict, ranks).run()


def _clean_profile(profile):
    out = dict(profile)
    steps = out.get("steps")
    out["steps"] = [s for s in steps if isinstance(s, dict)] if isinstance(steps, list) else []
    if not isinstance(out.get("summary"), dict):
        out["summary"] = {}
    if not memory.valid_number(out.get("gpu_memory_mb")):
        out.pop("gpu_memory_mb", None)
    return out


_INTEGER_CONSTANTS = ("DEPTH", "ASPECT_RATIO", "HEAD_DIM", "TOTAL_BATCH_SIZE", "DEVICE_BATCH_SIZE",
                      "MAX_SEQ_LEN", "VOCAB_SIZE", "TIME_BUDGET", "EVAL_TOKENS")


def _clean(config):
    """Drop constants whose values cannot be what train.py means (train.py is untrusted text)."""
    out = {}
    for name, value in config.items():
        if name in _INTEGER_CONSTANTS:
            if not (memory.valid_number(value) and float(value).is_integer()):
                continue
            value = int(value)
        elif name.endswith("_LR") or name in ("LEARNING_RATE", "LR"):
            if not memory.valid_number(value):
                continue
        out[name] = value
    return out


class _Diagnosis:
    def __init__(self, log_text, config, profile, verdict=None, ranks=None):
        self.log, self.config, self.profile = log_text, config, profile
        self.ranks = ranks or {}   # {line index: rank} of the lines a `[rankN]:` prefix named
        self.child_end = None      # where a launcher's report of its failed child begins (_failing_exception)
        self.verdict = verdict
        self.status = str(profile.get("status") or "")
        self.reason = str(profile.get("reason") or "")
        # Memory numbers only when train.py's shape constants were read (never from defaults alone).
        shaped = any(name in config for name in ("DEPTH", "DEVICE_BATCH_SIZE", "TOTAL_BATCH_SIZE"))
        # Without the template's constants the repo is some other benchmark: explanations then
        # speak of its command, exception and output, not of training steps.
        self.template = shaped
        self.inter = memory.intermediates(config) if shaped else {}
        self.command = profile.get("command") if isinstance(profile.get("command"), str) else None
        self.exit = logtext.exit_status(log_text, self.reason)
        self._log_facts()

    def _log_facts(self):
        steps = self.profile["steps"]
        losses = patterns.losses(self.log)
        losses += [s["loss"] for s in steps if isinstance(s.get("loss"), (int, float))]
        self.losses = losses
        last = patterns.last_step(self.log)
        if steps and isinstance(steps[-1].get("step"), int) and not isinstance(steps[-1].get("step"), bool):
            pct = steps[-1].get("progress")
            last = (steps[-1]["step"], pct * 100 if isinstance(pct, (int, float)) else None)
        self.last = last
        if last:
            self.inter["last_step"] = last[0]
            if last[1] is not None:
                self.inter["last_progress_pct"] = round(last[1], 1)
        finite = [x for x in losses if math.isfinite(x)]
        if finite:
            self.inter["last_finite_loss"] = round(finite[-1], 4)
            self.inter["min_loss"] = round(min(finite), 4)
        summary = self.profile["summary"]
        self.val_bpb = summary.get("val_bpb") if memory.valid_number(summary.get("val_bpb")) else (
            patterns.val_bpb(self.log))

    # -- dispatch -------------------------------------------------------------------------

    def run(self):
        # Structure first: the exception chain, its frames and libraries, the rank that failed
        # first, the warnings before the failure (gpu_train_debug/evidence.py).
        self.ev = evidence.read(self.log, self.ranks)
        self.decided_by = []
        found = self._first_failed_rank_first(patterns.scan(self.log))
        decided = None if self.status == "implausible" else self._from_benchmark(found)
        if self.status == "implausible":
            # The run finished and only its result is in doubt: error text in its log was not fatal.
            causal = any(code == "CAUSAL_LEAK" for code, _, _ in found)
            result = self._too_good(forced=causal)
        elif decided:
            result = decided
        elif found:
            code, family, match = self._cause_of(found)
            warned = patterns.on_warning_line(self.log, match)
            # Only a warning matched: an exception raised after it is what ended the run, unless
            # the warning is one that causes the failure (a driver too old for the CUDA runtime).
            before = len(self.decided_by)
            raised = warned and self._from_exception(after=match.end())
            if raised and code in CAUSE_WARNINGS and _GPU_WORDS.search(self.inter.get("exception", "")):
                raised = None   # the later error is the GPU the warning said was unusable
            if not raised:
                del self.decided_by[before:]   # the exception read above did not decide
            if not raised:
                self._decided(match, "warning that caused the failure" if warned else "signature " + code)
            result = raised or self._from_signature(code, family, match)
        elif self.status == "timeout" or "timed out" in self.reason:
            result = self._timeout()
        elif self.template and self._leaky() and not self._failing_exception():
            result = self._too_good()
        elif any(not math.isfinite(x) for x in self.losses):
            result = self._nan("LOSS_DIVERGED")
        elif self._batch_invalid():
            result = self._batch_not_divisible()
        else:
            result = (self._from_results_row() or self._from_exception() or self._nan_tensor()
                      or self._usage_block() or self._semantic() or self._killed() or self._unknown())
        family, codes, fix, explanation = result
        if not self.template and self.status != "implausible":
            explanation = (explanation.rstrip() + " " + self._benchmark_context()).strip()
        facts = self.ev.summary()
        if self.decided_by:
            facts["decided_by"] = self.decided_by
        if facts:
            self.inter["evidence"] = facts
        return {"family": family, "codes": codes, "intermediates": self.inter, "fix": fix,
                "explanation": explanation}

    # -- which evidence decides -------------------------------------------------------------

    def _decided(self, match, why):
        """Record the line that decided the diagnosis (and the rank that printed it)."""
        line = self._line(match).strip()
        entry = {"line": line[:300], "why": why}
        rank = self._rank_of(match.start())
        if rank is not None:
            entry["rank"] = rank
        self.decided_by.append(entry)

    def _rank_of(self, offset):
        """The rank whose `[rankN]:` prefix the line at `offset` carried (stripped from the text), or None."""
        return self.ranks.get(logtext.line_index(self.log, offset)) if self.ranks else None

    def _first_failed_rank_first(self, found):
        """torchrun's `Root Cause (first observed failure)` names the rank that failed first: its
        own lines decide over the other ranks' consequences (their NCCL errors and timeouts)."""
        root = self.ev.root_cause
        if not root or root.rank is None or len(found) < 2:
            return found
        own = [f for f in found if self._rank_of(f[2].start()) == root.rank]
        return own + [f for f in found if f not in own]

    def _cause_of(self, found):
        """The first signature, unless a warning earlier in the log is what made it happen."""
        code, family, match = found[0]
        if code in ("NO_CUDA_DEVICE",):
            for other in found[1:]:
                if other[0] in CAUSE_WARNINGS and other[2].start() < match.start():
                    self._decided(match, "the failure the warning explains")
                    return other
        return found[0]

    # -- what the fixed benchmark said (harness_verdict.py) --------------------------------

    def _from_benchmark(self, found):
        """The diagnosis the benchmark's own verdict decides, or None to read the log as any log.

        With autoresearch.sh's reason line, its quoted verdict decides over train.py's text; without
        one, a harness refusal on the log's last error line (the harness prints it as it exits)."""
        verdict = self.verdict
        line = verdict.why if verdict else patterns.last_error_line(self.log)
        refused = harness_verdict.refusal(line, verdict.stage if verdict else None)
        if verdict is None:
            return self._refused(*refused, found) if refused else None
        self.inter["failed_stage"] = {"train": "training (train.py)", "evaluate": "the harness's evaluation"}[verdict.stage]
        if verdict.why:
            self.inter["benchmark_verdict"] = verdict.why[:300]
        if refused:
            return self._refused(*refused, found)
        if verdict.stage == "train" and not verdict.failed_on_fail_line:
            return None   # train.py's own crash: its output is the evidence
        span = harness_verdict.why_span(self.log)
        on_line = patterns.scan(self.log, start=span[0], stop=span[1]) if span else []
        if on_line:
            code, family, match = on_line[0]
            return self._overruling(self._from_signature(code, family, match), found)
        if verdict.stage == "train":
            return None
        return self._overruling(self._evaluation_failed(verdict), found)

    def _refused(self, item, match, found):
        """A refusal of the harness: its code and the one change in train.py that answers it."""
        fix = {}
        if item.code == "TORCH_COMPILE_FAILED":
            fix = self._set("COMPILE", False)
        elif item.code == "FA_UNSUPPORTED_ARCH":
            fix = self._set("ATTENTION_BACKEND", "sdpa")
        elif item.code == "VAL_BPB_NONFINITE" and self.config.get("DTYPE") == "float16":
            fix = self._set("DTYPE", "bfloat16") if self._bf16_ok() else self._set("DTYPE", "float32")
        if self.verdict is None:
            self.inter["harness_refusal"] = match.group(0)[:300]
        if not fix:
            self.inter["fix_step"] = item.fix   # no constant to change: the step, for the engine's line
        text = harness_verdict.describe(item, match) + ". Fix: " + item.fix + "."
        return self._overruling((item.family, [item.code], fix, text), found)

    def _overruling(self, result, found):
        """Say so when the log also holds another failure's text that did not end the run."""
        if result is None:
            return None
        family, codes, fix, text = result
        if self.verdict is None:
            return result
        span = harness_verdict.why_span(self.log)
        verdict_at = self.log.rfind("\n", 0, span[0]) + 1 if span else len(self.log)
        for code, fam, match in found:
            line = self._line(match).strip()
            if (fam == family or code in codes or line == self.verdict.why or match.start() >= verdict_at
                    or patterns.on_warning_line(self.log, match)):
                continue
            end = self.log.find("\n", match.start())
            shown = self.log[match.start():len(self.log) if end < 0 else end].strip()   # not a prefix it carries
            self.inter["overruled_text"] = shown[:200]
            text += (f" The log also shows {shown[:120]!r} ({code}), but that did not end the run: "
                     "the benchmark's own verdict did.")
            break
        return family, codes, fix, text

    def _evaluation_failed(self, verdict):
        """The evaluation ended on an exception no signature knows, on a signal, or silently."""
        raised = self._from_exception()
        if raised:
            return raised
        if verdict.exit == 137:
            return self._host_oom(None)
        if verdict.exit == 139:
            return self._segfault(None)
        said = verdict.why or "it printed no error line"
        return "UNKNOWN", ["UNKNOWN"], {}, (
            f"The harness's evaluation of train.py's final weights failed (exit {verdict.exit}): {said}.")

    def _benchmark_context(self):
        """What the benchmark itself showed: its command, how it ended, what it printed last."""
        parts = []
        ended = self.exit or ("the time limit" if self.status == "timeout" else None)
        if self.command:
            parts.append(f"The benchmark `{self.command}` ended with {ended or 'a failure'}.")
            self.inter["command"] = self.command
        elif ended:
            parts.append(f"The benchmark ended with {ended}.")
        if self.exit:
            self.inter["exit_status"] = self.exit
        last = logtext.last_printed(self.log)
        if last:
            self.inter["last_output_line"] = last
            parts.append(f"Its last output line: {last!r}.")
        return " ".join(parts)

    def _from_signature(self, code, family, match):
        if code == "OOM":
            return self._oom(match)
        if family == "NAN_LOSS":
            return self._nan(code)
        if code == "MISSING_PACKAGE":
            return self._missing(match)
        if code == "MISSING_COMMAND":
            return self._missing_command(match)
        if code == "BATCH_NOT_DIVISIBLE":
            return self._batch_not_divisible()
        handler = {
            "GPU_TOO_OLD": self._gpu_too_old,
            "BACKEND_OP_MISSING": self._backend_op,
            "BINARY_MISMATCH": self._binary_mismatch,
            "HUB_ACCESS_DENIED": self._hub_access,
            "TOKENIZER_INCOMPATIBLE": self._tokenizer_incompatible,
            "DEVICE_MISMATCH": self._device_mismatch,
            "DEVICE_ASSERT": self._device_assert,
            "AUTOGRAD_ERROR": self._autograd,
            "HALF_ON_CPU": self._half_on_cpu,
            "PACKAGE_VERSION": self._package_attr,
            "DDP_UNUSED_PARAMETERS": self._ddp_unused,
            "CHECKPOINT_MISMATCH": self._checkpoint_mismatch,
            "SHM_EXHAUSTED": self._shm,
            "TORCH_TOO_OLD": self._torch_too_old,
            "COMMAND_NOT_EXECUTABLE": self._not_executable,
            "DISK_FULL": self._disk_full,
            "PERMISSION_DENIED": self._permission,
            "HUB_UNREACHABLE": self._hub,
            "DATA_CORRUPT": self._corrupt,
            "DATA_CHANGED": self._data_changed,
            "HOST_OOM_KILLED": self._host_oom,
            "DIST_INIT_FAILED": self._nccl,
            "SEGFAULT": self._segfault,
            "LOSS_NEAR_ZERO": lambda m: self._too_good(forced=True),
            "FA_UNSUPPORTED_ARCH": self._fa_unsupported,
            "TRITON_GPU_TOO_OLD": self._triton_old,
            "TORCH_ARCH_UNSUPPORTED": self._arch_unsupported,
            "BF16_UNSUPPORTED": self._bf16,
            "NO_CUDA_DEVICE": self._no_cuda,
            "TORCH_COMPILE_FAILED": self._compile_failed,
            "TOKENIZER_MISSING": self._tokenizer,
            "DATA_SHARDS_MISSING": self._data,
            "SHAPE_MISMATCH": self._shape,
            "CAUSAL_LEAK": lambda m: self._too_good(forced=True),
            "BACKEND_NEEDS_CUDA_COMPILE": self._backend_needs_cuda,
            "WINDOW_PATTERN_INVALID": self._window_pattern,
            "NCCL_TIMEOUT": self._nccl,
            "NCCL_ERROR": self._nccl,
            "BUILD_TOOLCHAIN": self._toolchain,
            "DRIVER_TOO_OLD": self._driver_too_old,
            "MPS_FLOAT64": self._mps_float64,
            "DATALOADER_WORKER_EXITED": self._worker_exited,
            "USAGE_ERROR": self._usage,
            "BUILD_FAILED": self._build_failed,
            "TRITON_SHARED_MEMORY": self._triton_shared_memory,
            "FP16_WEIGHTS_SCALED": self._fp16_weights_scaled,
            "GPU_WATCHDOG_TIMEOUT": self._gpu_watchdog,
        }.get(code) or (lambda m: self._described(code, family, m))
        return handler(match)

    # -- helpers --------------------------------------------------------------------------

    def _set(self, name, value):
        """{name: value} when the config has that constant and it differs; else {}."""
        if name in self.config and self.config[name] != value:
            return {name: value}
        return {}

    def _context(self, match, before=4000):
        return self.log[max(0, match.start() - before):match.end() + 200]

    def _capacity(self, oom):
        if "capacity" in oom:
            return oom["capacity"]
        mb = self.profile.get("gpu_memory_mb")
        return float(mb) * acc.MIB if isinstance(mb, (int, float)) and mb > 0 else None

    # -- families -------------------------------------------------------------------------

    def _oom(self, match):
        oom = patterns.oom_numbers(self.log[match.start():match.start() + 2000])
        context = self._context(match)
        for key, value in oom.items():
            self.inter[f"oom_{key}_mb"] = round(value / acc.MIB, 1)
        if any(frame in context for frame in _EVAL_FRAMES):
            code, where = "OOM_EVAL", "in the evaluation after training"
        elif self.last is None and any(frame in context for frame in _STATE_FRAMES):
            code, where = "OOM_MODEL_STATES", "while building the model and optimizer"
        else:
            code, where = "OOM_TRAIN_ACTIVATIONS", "in a training forward/backward pass"
        fix, how = self._oom_fix(code, oom)
        if "ALLOC_FAILED" in match.group(0) or "MemoryAllocation" in match.group(0):
            where += " (a cuBLAS/cuDNN workspace could not be allocated: GPU memory was full, often held by another process)"
        device = _oom_device(self._line(match), context)
        text = (f"{device} ran out of memory {where}. " + how)
        return "OOM", [code], fix, text

    def _oom_fix(self, code, oom):
        if "DEVICE_BATCH_SIZE" not in self.config:
            return {}, ("Lower DEVICE_BATCH_SIZE (keeping TOTAL_BATCH_SIZE, so gradient "
                        "accumulation grows); pass --config train.py for a computed value.")
        b = int(self.config["DEVICE_BATCH_SIZE"])
        fixed = memory.fixed_bytes(self.config)
        per_sample = memory.per_sample_activation_bytes(self.config)
        needed = oom.get("allocated", 0) + oom.get("tried", 0)
        if code != "OOM_MODEL_STATES" and needed > fixed:
            # The crash proves at least this much was needed at batch b.
            per_sample = max(per_sample, (needed - fixed) / b)
        capacity = self._capacity(oom)
        valid = memory.valid_device_batches(self.config)
        if capacity:
            usable = capacity * memory.USABLE_FRACTION
            self.inter["usable_mb"] = round(usable / acc.MIB, 1)
            if code == "OOM_MODEL_STATES" or fixed >= usable:
                return self._depth_fix(b, usable)
            fits = [d for d in valid if d < b and fixed + d * per_sample <= usable]
        else:
            fits = [d for d in valid if d <= b // 2]  # no capacity known: halve
        self.inter["activation_mb_per_sample_used"] = round(per_sample / acc.MIB, 1)
        if fits:
            new = fits[0]
            total, seq = int(self.config.get("TOTAL_BATCH_SIZE", 0)), memory.shape(self.config)["seq_len"]
            self.inter["new_device_batch_size"] = new
            if total:
                self.inter["new_grad_accum_steps"] = total // (new * seq)
            self.inter["estimated_peak_mb_after"] = round((fixed + new * per_sample) / acc.MIB, 1)
            return {"DEVICE_BATCH_SIZE": new}, (
                f"DEVICE_BATCH_SIZE {b} -> {new} is the largest size that fits and still divides "
                f"TOTAL_BATCH_SIZE / MAX_SEQ_LEN, so the total batch per step is unchanged "
                f"(gradient accumulation {self.inter.get('grad_accum_steps', '?')} -> "
                f"{self.inter.get('new_grad_accum_steps', '?')}).")
        if self.config.get("GRAD_CHECKPOINTING") is False:
            return {"GRAD_CHECKPOINTING": True}, (
                "Even one sequence per device does not fit; turn on activation checkpointing "
                "(stores 2*s*h instead of 34*s*h bytes per layer).")
        return {}, ("The model states alone (16 bytes per parameter) leave no room on this GPU: "
                    "reduce DEPTH or the model width.")

    def _depth_fix(self, b, usable):
        """The model itself is too big: the deepest DEPTH that fits at the same device batch."""
        depth = memory.shape(self.config)["depth"]
        for d in range(depth - 1, 0, -1):
            trial = dict(self.config, DEPTH=d)
            peak = memory.peak_bytes(trial, b)
            if peak <= usable:
                self.inter["new_depth"] = d
                self.inter["estimated_peak_mb_after"] = round(peak / acc.MIB, 1)
                return {"DEPTH": d}, (
                    f"The model states alone ({self.inter.get('fixed_memory_mb')} MiB at 16 bytes per "
                    f"parameter) do not fit next to the activations; DEPTH {depth} -> {d} is the deepest "
                    f"model that fits at DEVICE_BATCH_SIZE {b}.")
        return {}, "Even a one-layer model does not fit at this device batch; lower DEVICE_BATCH_SIZE too."

    def _nan(self, code):
        if code == "FP16_LOSS_SCALE_OVERFLOW" or self.config.get("DTYPE") == "float16":
            fix = self._set("DTYPE", "bfloat16") if self._bf16_ok() else self._set("DTYPE", "float32")
            return "NAN_LOSS", ["FP16_LOSS_SCALE_OVERFLOW"], fix, (
                "The fp16 loss scale kept overflowing and the loss became non-finite; bf16 has "
                "fp32's exponent range and needs no loss scaling.")
        self._nan_step()
        fix, which = self._lr_fix()
        return "NAN_LOSS", ["LOSS_DIVERGED"], fix, (
            "The training loss became NaN/inf (divergence); " + which)

    def _nan_step(self):
        for i, value in enumerate(self.losses):
            if not math.isfinite(value):
                self.inter["first_nonfinite_loss_index"] = i
                return

    def _lr_fix(self):
        ratios = {name: self.config[name] / default for name, default in DEFAULT_LRS.items()
                  if isinstance(self.config.get(name), (int, float)) and default > 0}
        if ratios:
            name = max(ratios, key=ratios.get)
            self.inter["lr_ratio_to_default"] = round(ratios[name], 3)
            new = DEFAULT_LRS[name] if ratios[name] > 2 else _round_sig(self.config[name] / 2)
            return {name: new}, (f"{name} is {ratios[name]:.3g}x the reference value; set it to {new}.")
        for name in ("LEARNING_RATE", "LR", "MATRIX_LR"):
            if isinstance(self.config.get(name), (int, float)):
                new = _round_sig(self.config[name] / 10)
                return {name: new}, f"lower {name} tenfold to {new}."
        return {}, "lower the learning rate or add warmup/clipping."

    def _bf16_ok(self):
        cap = self.profile.get("compute_capability")
        try:
            return float(cap) >= 8.0
        except (TypeError, ValueError):
            return True

    def _fa_unsupported(self, match):
        fix = self._set("ATTENTION_BACKEND", "sdpa")
        if "backward for head dim" in match.group(0) or "is_sm8" in match.group(0):
            return "GPU_UNSUPPORTED", ["FA_UNSUPPORTED_ARCH"], fix, (
                "This FlashAttention build's backward pass for this head dimension needs an A100/H100 (more shared "
                "memory than this GPU has): " + match.group(0)[:90] + ". Use a smaller head dimension, a newer "
                "FlashAttention (v2 runs head dim <= 192 backward on other Ampere GPUs), or PyTorch SDPA"
                + (' (ATTENTION_BACKEND="sdpa").' if fix else "."))
        return "GPU_UNSUPPORTED", ["FA_UNSUPPORTED_ARCH"], fix, (
            "The Flash Attention kernel does not support this GPU architecture (FA3 needs Hopper, "
            "sm_90). PyTorch's scaled_dot_product_attention runs everywhere: ATTENTION_BACKEND=\"sdpa\".")

    def _triton_old(self, match):
        return "GPU_UNSUPPORTED", ["TRITON_GPU_TOO_OLD"], self._set("COMPILE", False), (
            "Triton (torch.compile's GPU backend) needs compute capability 7.0 or newer; run eager "
            "with COMPILE=False.")

    def _arch_unsupported(self, match):
        context = self._context(match).lower()
        torch_lacks_arch = "is not compatible with the current pytorch installation" in self.log.lower()
        if not torch_lacks_arch and any(word in context for word in ("flash", "fa3", "kernels", "flex_attention")):
            return "GPU_UNSUPPORTED", ["TORCH_ARCH_UNSUPPORTED"], self._set("ATTENTION_BACKEND", "sdpa"), (
                "An attention kernel has no build for this GPU's architecture; use PyTorch SDPA.")
        if "hip" in match.group(0).lower() or "isa" in match.group(0).lower():
            return "GPU_UNSUPPORTED", ["TORCH_ARCH_UNSUPPORTED"], {}, (
                "This ROCm build has no kernels for the GPU's architecture (HIP: invalid device function). "
                "Install a ROCm torch built for this gfx target, or set HSA_OVERRIDE_GFX_VERSION to the "
                "nearest supported one (10.3.0 for RDNA2, 11.0.0 for RDNA3); with an integrated and a "
                "discrete GPU, pick the discrete one with HIP_VISIBLE_DEVICES.")
        return "GPU_UNSUPPORTED", ["TORCH_ARCH_UNSUPPORTED"], {}, (
            "This PyTorch build has no kernels for the GPU's architecture (Blackwell, sm_100/sm_120, "
            "needs a CUDA 12.8 or newer build: for torch 2.13 the CUDA 13.0 one, the package index's "
            "default, with NVIDIA driver 580+). No train.py constant fixes it.")

    def _bf16(self, match):
        return "DTYPE_UNSUPPORTED", ["BF16_UNSUPPORTED"], self._set("DTYPE", "float16"), (
            "This GPU (compute capability < 8.0) has no bfloat16 support; train in float16 with "
            "loss scaling.")

    def _no_cuda(self, match):
        said = match.group(0)
        if "802" in self._line(match) or "SystemNotReady" in said:
            return "NO_ACCELERATOR", ["CUDA_SYSTEM_NOT_READY"], {}, (
                "CUDA could not start on this node (error 802, 'system not yet initialized'): the NVSwitch fabric of an "
                "HGX/DGX node is not up. Start NVIDIA's fabric manager (`systemctl start nvidia-fabricmanager`, the "
                "driver's version) and check `nvidia-smi -q | grep -i fabric`, then rerun.")
        if "version mismatch" in said:
            return "NO_ACCELERATOR", ["NO_CUDA_DEVICE"], {}, (
                "The NVIDIA kernel module and the user-space driver libraries differ (NVML: Driver/library version "
                "mismatch), usually after a driver update without a reboot: reboot (or reload the nvidia modules), "
                "then check `nvidia-smi` before rerunning.")
        if "busy or unavailable" in said or "DevicesUnavailable" in said:
            return "NO_ACCELERATOR", ["NO_CUDA_DEVICE"], {}, (
                "The GPU refused a new CUDA context (busy or unavailable): it is in exclusive-process compute mode and "
                "another process holds it, or it is in a bad state. Check `nvidia-smi` (compute mode, processes), end "
                "the other process or pick another GPU with CUDA_VISIBLE_DEVICES, or reset the GPU.")
        if "fp16" in said.lower():
            return "NO_ACCELERATOR", ["NO_CUDA_DEVICE"], {}, (
                "fp16 mixed precision was asked for, but torch sees no CUDA device (" + said[:70] + "): a CPU-only "
                "torch, no NVIDIA driver, or a Mac (MPS). Install a CUDA build of torch on a machine with an NVIDIA "
                "GPU, or drop fp16 (--fp16 / mixed_precision='fp16') to run on this device.")
        if "machine only has" in said or said.startswith("Invalid CUDA") or "num_gpus" in said:
            # The launcher was asked for GPUs that torch does not see (fewer GPUs than asked for,
            # another index, CUDA_VISIBLE_DEVICES, or a CPU-only torch that sees none).
            return "NO_ACCELERATOR", ["NO_CUDA_DEVICE"], {}, (
                "The run asked for GPUs that torch does not see (" + said[:80] + "): it named more GPUs or another "
                "index than this machine has, CUDA_VISIBLE_DEVICES hides them, or torch is a CPU-only build that sees "
                "none. Check `python -c 'import torch; print(torch.cuda.is_available(), torch.cuda.device_count())'`, "
                "then ask for the GPUs that exist (devices=1 / --device 0) or install a CUDA build of torch.")
        if "MPS" in said:
            return "NO_ACCELERATOR", ["NO_CUDA_DEVICE"], {}, (
                "The MPS backend is not available (" + said[:80] + "): macOS older than 12.3, a torch built without MPS, "
                "or not an Apple-silicon Mac. Update macOS/torch, or run on the CPU on purpose.")
        return "NO_ACCELERATOR", ["NO_CUDA_DEVICE"], {}, (
            "No usable CUDA device: the PyTorch build is CPU-only or no NVIDIA driver/GPU is "
            "visible. Install a CUDA build of torch, or run the CPU profile on purpose.")

    def _compile_failed(self, match):
        return "COMPILE_FAILURE", ["TORCH_COMPILE_FAILED"], self._set("COMPILE", False), (
            "torch.compile failed (no working Triton/C++ toolchain, Windows or an old version); "
            "run eager with COMPILE=False.")

    def _missing(self, match):
        package = next((g for g in match.groups() if g), "").split(".")[0]
        package = package.lower() if package in ("SentencePiece", "Protobuf", "Tokenizers") else package
        self.inter["missing_package"] = package
        fix = {}
        if package in ("kernels", "flash_attn", "flash_attn_interface"):
            fix = self._set("ATTENTION_BACKEND", "sdpa")
        elif package == "triton":
            fix = self._set("COMPILE", False)
        hint = "; or avoid it with the fix" if fix else ""
        module = next((g for g in match.groups() if g), "")
        if not fix and "." in module:
            # `a.b` missing while `a` imported: the installed `a` is a release without that submodule
            # (torch._six, peft.utils.config, colossalai.legacy), not a package to install.
            self.inter["fix_step"] = f"the `{package}` release the project pins"
            return "MISSING_DEPENDENCY", ["PACKAGE_VERSION"], fix, (
                f"The installed `{package}` has no module `{module}`: it was moved, renamed or removed between "
                f"releases (or added in a newer one). Install the `{package}` version the project pins (its "
                f"requirements or lock file), or change the import to where the installed release keeps it.")
        if not fix:
            self.inter["fix_step"] = "`uv sync` in the research repo (not `uv add`), then the same run again"
        # `uv sync` installs what the repo's pyproject.toml lists (the ML template lists torch and
        # the rest); `uv add` would edit that tracked file, and the next run be refused as out of scope.
        return "MISSING_DEPENDENCY", ["MISSING_PACKAGE"], fix, (
            f"Python package '{package}' is not installed in the environment the run used. Run "
            f"`uv sync` in the research repo (it installs what pyproject.toml lists), then the same "
            f"run again; a package pyproject.toml does not list: `uv pip install {package}` (or "
            f"`python3 -m pip install {package}`), which leaves the tracked files as they are{hint}.")

    def _missing_command(self, match):
        command = next((g for g in match.groups() if g), "?")
        self.inter["missing_command"] = command
        return "MISSING_DEPENDENCY", ["MISSING_COMMAND"], {}, (
            f"The shell could not run `{command}` (command not found, exit 127): install it, or fix "
            f"its name or path in the benchmark command/script (is the right virtual environment "
            f"on PATH?). No train.py constant fixes it.")

    def _prepare_step(self):
        """The command that makes the data: the one the log names, else the template's."""
        said = logtext.suggested_command(self.log)
        if said:
            self.inter["suggested_command"] = said
            return f"`{said}` (the command the log itself names)"
        return "`python prepare.py`" if self.template else None

    def _missing_path(self, match):
        line = self._line(match)
        quoted = re.search(r"(?<!\w)['\"]([^'\"]+)['\"]", line[line.find(":") + 1:] if ":" in line else line)
        named = quoted or re.search(r"(?<![\w.])([\w.~/\\-]*\w\.(?:model|bin|json|txt|pkl|parquet|npy|arrow|pt|safetensors))\b", line)
        if named:
            self.inter["missing_path"] = named.group(1)
            return named.group(1)
        return None

    def _tokenizer(self, match):
        refused = _HUB_REFUSED.search(self.log)
        if refused:
            # The tokenizer file was asked of the Hub for an id that is no repository it serves (a
            # local path that does not exist, a misspelt or gated id): the Hub's refusal decides.
            self._decided(refused, "the Hub refused the repository the tokenizer was asked of")
            return self._hub_access(refused)
        hub_id = _HUB_ID_TOKENIZER.search(self._line(match))
        if hub_id and _is_hub_id(hub_id.group(1)):
            # transformers could not load a tokenizer named by its Hub id. The same message follows an
            # unreachable Hub, a local folder of that name that shadows it, and a transformers too
            # old for the tokenizer's files: only a network error in the log says which.
            self.inter["hub_id"] = hub_id.group(1)
            if not _NETWORK_FAILED.search(self.log):
                return "UNKNOWN", ["UNKNOWN"], {}, (
                    f"transformers could not load the tokenizer of `{hub_id.group(1)}` and the log does not say why. "
                    "Most often the Hugging Face Hub was unreachable (no network, a firewall: download the files on a "
                    "machine with network, or set HF_ENDPOINT to a reachable mirror); else a local folder of that name "
                    "shadows the Hub id, or the installed transformers/tokenizers are too old for its files.")
            return "DATA", ["HUB_UNREACHABLE"], {}, (
                f"transformers could not load the tokenizer of `{hub_id.group(1)}` from the Hugging Face Hub and "
                "has no copy in its cache: the Hub was unreachable (no network, a firewall; set HF_ENDPOINT to a "
                "reachable mirror), the repo is gated (log in with HF_TOKEN), or the id is misspelt. A local "
                "folder of that name would also shadow it.")
        step = self._prepare_step()
        path = self._missing_path(match)
        what = f"`{path}`" if path else "the tokenizer file"
        return "TOKENIZER", ["TOKENIZER_MISSING"], {}, (
            f"{what[0].upper() + what[1:]} is missing: the tokenizer was never built or downloaded, or the "
            f"run looks in another folder. " + (f"Run {step} once to make it." if step else
                                                 "Build or download it, or pass its path."))

    def _data(self, match):
        step = self._prepare_step()
        path = self._missing_path(match)
        what = f"The data file `{path}`" if path else "Training data"
        return "DATA", ["DATA_SHARDS_MISSING"], {}, (
            f"{what} is missing: the data was not prepared, or the run reads it from another folder "
            f"(a relative path depends on the working directory). " +
            (f"Run {step} to prepare it." if step else "Prepare or download it, or fix its path."))

    def _described(self, code, family, match):
        """A crash class whose signature says the cause; the step is the one its threads found."""
        self._decided(match, "signature " + code)
        said = self._line(match).strip()[:120]
        return family, [code], {}, f"{_FIX_STEPS[code][0]} ({said}). {_FIX_STEPS[code][1]}"

    def _gpu_watchdog(self, match):
        self._decided(match, "a GPU watchdog stopped a kernel")
        return "TIMEOUT", ["GPU_WATCHDOG_TIMEOUT"], {}, (
            "The GPU's watchdog stopped a kernel that ran too long (" + match.group(0)[:80] + "): on Windows "
            "the display driver resets a GPU that also drives the screen after about 2 s (TDR), and macOS "
            "stops Metal work that blocks the display. Run on a GPU that drives no display, raise the driver's "
            "limit (TdrDelay in the registry on Windows), or make each step shorter (a smaller batch or "
            "resolution).")

    def _disk_full(self, match):
        said = match.group(0)
        before = self.log[max(0, match.start() - 3000):match.start()]
        near = before + self.log[match.start():match.end() + 3000]
        # joblib's semaphore probe, or a multiprocessing Lock/Queue/Semaphore being made, right around it.
        if "SemLock" in near or re.search(r"multiprocessing[/\\]synchronize\.py|_multiprocessing_helpers"
                                          r"|= ctx\.(?:R?Lock|(?:Bounded)?Semaphore|Condition|Event)\(\)", near) or re.search(
                r"multiprocessing[/\\](?:synchronize|queues)\.py[^\n]*\n[^\n]*(?:Lock|Semaphore|SemLock)\(", near):
            # A multiprocessing semaphore lives in /dev/shm: ENOSPC there is shared memory, not the disk.
            self._decided(match, "ENOSPC raised while multiprocessing created a semaphore (/dev/shm)")
            return self._shm(match)
        if "cannot be opened" in said or "FileWriter" in said:
            return "DATA", ["DISK_FULL"], {}, (
                "torch.save could not create the checkpoint file (" + self._line(match).strip()[:100] + "): the disk "
                "or the quota is full, or the folder is missing or not writable. Free space (old checkpoints pile "
                "up), create the output folder, or point the output at a writable, larger disk, then rerun.")
        if "StreamWriter" in said or "unexpected pos" in said:
            return "DATA", ["DISK_FULL"], {}, (
                "torch.save could not finish writing a checkpoint (" + self._line(match).strip()[:100] + "): the "
                "disk or the quota filled while it wrote (checkpoints are large; old ones pile up). Free space or "
                "keep fewer checkpoints (save_total_limit), or write them to a larger disk, then rerun.")
        return "DATA", ["DISK_FULL"], {}, (
            "The disk is full (ENOSPC: " + match.group(0) + "): a download, the data cache or a checkpoint "
            "could not be written. Free space, or point the caches (HF_HOME, AUTORESEARCH_CACHE) and "
            "outputs at a larger disk, then rerun.")

    def _permission(self, match):
        path = self._missing_path(match)
        where = f"`{path}`" if path else "a file or folder it needs"
        return "DATA", ["PERMISSION_DENIED"], {}, (
            f"Permission denied on {where}: the run may not read or write it (often a cache owned by "
            f"another user, or `/.cache` when HOME is unset). Make it writable (chown/chmod), or point "
            f"the cache at a writable directory (HF_HOME, XDG_CACHE_HOME, AUTORESEARCH_CACHE).")

    def _hub(self, match):
        step = self._prepare_step()
        return "DATA", ["HUB_UNREACHABLE"], {}, (
            "The run could not reach Hugging Face and the files are not in the local cache. Download "
            "them once on a machine with network" + (f" ({step})" if step else "") +
            ", or set HF_ENDPOINT to a reachable mirror; HF_HUB_OFFLINE=1 works only with a filled cache.")

    def _corrupt(self, match):
        step = self._prepare_step()
        return "DATA", ["DATA_CORRUPT"], {}, (
            "A data file is truncated or corrupt (" + match.group(0)[:80] + "), usually an interrupted "
            "download. Delete it and download or prepare it again" + (f" with {step}." if step else "."))

    def _data_changed(self, match):
        what = self.log[match.end():].split("\n", 1)[0].split(";")[0].strip() or "a prepared file differs"
        return "DATA", ["DATA_CHANGED"], {}, (
            f"Run `python prepare.py --force` once you have undone what in train.py writes to the cache: "
            f"the prepared data is not what prepare.py wrote ({what}), so the evaluator refused to score it, "
            "and it refuses every run until the data is rebuilt.")

    def _host_oom(self, match):
        said = match.group(0) if match else ""
        if re.search(r"WinError 1455|paging file", said, re.I):
            return "OOM", ["HOST_OOM_KILLED"], {}, (
                "Windows ran out of virtual memory (WinError 1455: the paging file is too small): each DataLoader "
                "worker and process loads torch's large CUDA DLLs. Use fewer DataLoader workers (num_workers=0 to "
                "confirm), or let Windows grow the paging file (system-managed size, on a disk with free space).")
        if re.search(r"allocate|bad_alloc|MemoryError", said, re.I):
            self.inter["host_allocation"] = self._line(match).strip()[:200]
            return "OOM", ["HOST_OOM_KILLED"], {}, (
                "Host RAM (not GPU memory) ran out: the system refused an allocation (" + said[:80] + "), here "
                "when " + ("fork() started DataLoader workers, each a copy of the process"
                           if "Errno 12" in said and "fork" in self._context(match, 3000) else "the process asked for more") +
                ". Lower the host memory use: fewer DataLoader workers, data memory-mapped or streamed instead of "
                "loaded whole, a smaller model to load, or a machine (or container limit) with more RAM or swap.")
        return "OOM", ["HOST_OOM_KILLED"], {}, (
            "The process was killed with SIGKILL (exit 137 / exitcode -9), which is what the kernel's "
            "OOM killer does when host RAM (not GPU memory) runs out. Lower the host memory use: fewer "
            "DataLoader workers, memory-mapped data instead of loading it whole, a smaller model to "
            "load, or a machine (or container limit) with more RAM.")

    def _killed(self):
        """No exception, but the engine saw the process die on SIGKILL / 137."""
        return self._by_signal(self.exit)

    # What a signal that ended a process says: SIGKILL is the kernel's OOM killer (unless the engine
    # itself stopped a run that timed out), SIGSEGV a native crash, SIGBUS shared memory that ran out.
    _SIGNAL_READS = {"SIGKILL": "_host_oom", "exit 137": "_host_oom", "SIGSEGV": "_segfault",
                     "exit 139": "_segfault", "SIGBUS": "_shm", "exit 135": "_shm"}

    def _by_signal(self, status):
        read = self._SIGNAL_READS.get(status)
        if read is None or (read == "_host_oom" and self.status != "crash"):
            return None
        return getattr(self, read)(None)

    def _launcher_signal(self, raised):
        """A launcher's report that its child died on a signal, with no error of the child's own in
        the log (torch.multiprocessing's `process 0 terminated with signal SIGKILL`, a CalledProcessError
        that `died with <Signals.SIGKILL: 9>`): the signal is the evidence."""
        if not evidence.is_launcher_report(raised):
            return None
        status = logtext.exit_status(raised.text())
        read = self._by_signal(status)
        if read:
            self.decided_by.append({"line": raised.text()[:200], "why": f"the launcher reported its child ended by {status}"})
        return read

    def _segfault(self, match):
        return "UNKNOWN", ["SEGFAULT"], {}, (
            "The process died on SIGSEGV (a segmentation fault in native code: a CUDA/C++ extension, a "
            "DataLoader worker or a library built for another version). There is no Python traceback; "
            "rerun with PYTHONFAULTHANDLER=1 (and CUDA_LAUNCH_BLOCKING=1) to see where.")

    def _backend_op(self, match):
        device = next((g for g in match.groups() if g), "")
        if device.upper() == "MPS":
            return "GPU_UNSUPPORTED", ["BACKEND_OP_MISSING"], {}, (
                "The MPS backend has no kernel for an operator the run uses (" + match.group(0)[:90] + "). Set "
                "PYTORCH_ENABLE_MPS_FALLBACK=1 so that operator runs on the CPU (slower), or use a newer torch.")
        if "No operator found" in match.group(0):
            reasons = self.log[match.start():match.start() + 6000]
            near = self.log[max(0, match.start() - 6000):match.start() + 6000]
            if re.search(r"xFormers can't load C\+\+/CUDA extensions|xFormers was built for|wasn't build with CUDA", near):
                self._decided(match, "xformers says its compiled extensions do not match the installed torch")
                return "MISSING_DEPENDENCY", ["BINARY_MISMATCH"], {}, (
                    "xformers cannot load its compiled kernels: it was built for another torch/CUDA/Python than the "
                    "one installed (see `python -m xformers.info`), so no attention operator is left. Install the "
                    "xformers build that matches the installed torch (`pip install xformers` with torch's index URL, "
                    "or the version pinned for it), or drop xformers for PyTorch SDPA.")
            if "device=cpu" not in reasons and re.search(r"attn_bias type is|attn_bias\.stride|unsupported attn_bias", reasons):
                self._decided(match, "every xformers operator refused the attention bias it was given")
                return "CONFIG_INVALID", ["ATTENTION_INPUT_UNSUPPORTED"], {}, (
                    "No xformers attention kernel accepts these inputs: each one lists the attention bias (its type, "
                    "its memory layout) among its reasons. Pass the bias as one of xformers' bias classes or as a "
                    "contiguous tensor padded as the kernels require, or use PyTorch SDPA with an attention mask.")
        return "GPU_UNSUPPORTED", ["BACKEND_OP_MISSING"], self._set("ATTENTION_BACKEND", "sdpa") if "No operator found" in match.group(0) else {}, (
            "The accelerator's backend has no kernel for an operator the run uses (" + match.group(0)[:90] + "): "
            "use an implementation built for this device (PyTorch SDPA for attention) or a build that has it.")

    def _binary_mismatch(self, match):
        if re.search(r"WinError 1455|paging file is too small", self._line(match)):
            # Windows could not map a DLL of torch: its virtual memory (RAM + paging file) is exhausted.
            return self._host_oom(match)
        if _TF_DLERROR.search(self._line(match)) or self._continues_warning(match):
            # TensorFlow's loader warns when it cannot open a CUDA library and goes on without the GPU
            # (imported only for TensorBoard, say), torchvision when its image extension does not load
            # (its warning wrapped onto the next line): a Python exception of another kind decides.
            before = len(self.decided_by)
            raised = self._from_exception()
            if raised and raised[0] != "UNKNOWN" and not _LIBRARY_WORDS.search(self.inter.get("exception", "")):
                return raised
            del self.decided_by[before:]
        return "MISSING_DEPENDENCY", ["BINARY_MISMATCH"], {}, (
            "A compiled extension does not match what is installed (" + match.group(0)[:100] + "): it was "
            "built for another torch/CUDA, or the CUDA toolkit it needs is absent. Reinstall that package "
            "built for the installed torch (e.g. `pip install --force-reinstall --no-build-isolation <pkg>`), "
            "or install the matching CUDA toolkit / set CUDA_HOME.")

    def _hub_access(self, match):
        return "DATA", ["HUB_ACCESS_DENIED"], {}, (
            "Hugging Face refused the download (" + match.group(0)[:80] + "): the repo is gated, private or "
            "misspelled. Log in (`huggingface-cli login` or HF_TOKEN), accept the model's terms on its page, "
            "and check the repo id.")

    def _tokenizer_incompatible(self, match):
        return "TOKENIZER", ["TOKENIZER_INCOMPATIBLE"], {}, (
            "The tokenizer file was written by a newer `tokenizers`/`transformers` than the one installed ("
            + match.group(0)[:90] + "): upgrade them (`pip install -U tokenizers transformers`).")

    def _device_mismatch(self, match):
        return "CONFIG_INVALID", ["DEVICE_MISMATCH"], {}, (
            "Two tensors of one operation live on different devices or dtypes (" + match.group(0)[:90] + "): "
            "a tensor created in the code was not moved with `.to(device)` (or cast). Move it where the model "
            "is, or revert the edit.")

    def _package_attr(self, match):
        if match.group(3):
            cls, keyword = match.group(3), match.group(4)
            self.inter["class"], self.inter["unexpected_keyword"] = cls, keyword
            return "MISSING_DEPENDENCY", ["PACKAGE_VERSION"], {}, (
                f"`{cls}` does not take `{keyword}` in the installed version: the library renamed or removed it "
                f"(transformers renamed `evaluation_strategy` to `eval_strategy`, for one), or the code was written "
                f"for a newer release. Install the version the project pins (its requirements file), or use the "
                f"argument's name in the installed version.")
        if match.group(5):   # (r4) an environment of the old Gym API under a library of the new one
            self.inter["class"], self.inter["missing_attribute"] = match.group(5), match.group(6)
            return "MISSING_DEPENDENCY", ["PACKAGE_VERSION"], {}, (
                f"`{match.group(5)}` has no `render_mode`: the environment was written for the Gym API before 0.26, "
                f"and the installed gym/gymnasium or stable-baselines3 uses the new one (every Env has render_mode, "
                f"reset/step return more values). Install the gym/sb3 versions the project pins, or port the "
                f"environment to the new API.")
        module, attr = match.group(1), match.group(2)
        self.inter["module"], self.inter["missing_attribute"] = module, attr
        return "MISSING_DEPENDENCY", ["PACKAGE_VERSION"], {}, (
            f"The module `{module}` has no `{attr}`: a local file or folder named `{module}` shadows the "
            f"installed package (rename it), or the installed version is not the one the code expects "
            f"(`pip install -U {module.split('.')[0]}`, or the version the project pins).")

    def _half_on_cpu(self, match):
        return "DTYPE_UNSUPPORTED", ["HALF_ON_CPU"], self._set("DTYPE", "float32"), (
            "A CPU kernel has no half-precision version (" + match.group(0)[:80] + "): the model runs in "
            "fp16/bf16 on the CPU. Use float32 on the CPU (DTYPE=\"float32\"), or run on the GPU.")

    def _autograd(self, match):
        return "CONFIG_INVALID", ["AUTOGRAD_ERROR"], {}, (
            "Autograd could not compute the gradient (" + match.group(0)[:80] + "): the code changes a tensor "
            "in place that backward still needs (`x += ...`, `relu_(...)`, `inplace=True`), reuses a freed "
            "graph, or detaches the loss. Use out-of-place operations (`x = x + ...`) there; "
            "torch.autograd.set_detect_anomaly(True) names the operation.")

    def _ddp_unused(self, match):
        return "DISTRIBUTED", ["DDP_UNUSED_PARAMETERS"], {}, (
            "DistributedDataParallel found parameters that got no gradient in a step (a layer defined but "
            "not used in forward, or a branch some steps skip). Use every parameter in the loss, or pass "
            "find_unused_parameters=True to DistributedDataParallel (slower).")

    def _device_assert(self, match):
        return "CONFIG_INVALID", ["DEVICE_ASSERT"], {}, (
            "A CUDA kernel's bounds check failed (device-side assert): an index is out of range, most often a "
            "token id >= the vocabulary size or a label outside the classes. Check VOCAB_SIZE against the "
            "tokenizer; rerun with CUDA_LAUNCH_BLOCKING=1 to see the operation.")

    def _checkpoint_mismatch(self, match):
        return "CONFIG_INVALID", ["CHECKPOINT_MISMATCH"], {}, (
            "The checkpoint does not fit the model (" + match.group(0)[:80] + "): the architecture constants "
            "differ from the ones it was saved with. Use the same config, or start without the checkpoint.")

    def _shm(self, match):
        said = match.group(0) if match else ""
        if match is not None:
            near = self.log[max(0, match.start() - 2000):match.end() + 500]
            denied = re.search(r"shm_open failed\s*:\s*Permission denied|/dev/shm[^\n]*Permission denied", near)
            if denied:
                # The errno NCCL quotes decides: /dev/shm is not writable, not full.
                self._decided(match, "the shared-memory call failed with EACCES, not ENOSPC")
                return "DATA", ["PERMISSION_DENIED"], {}, (
                    "The process may not create files in /dev/shm (" + denied.group(0)[:80] + "): NCCL and DataLoader "
                    "workers put shared-memory segments there. Make /dev/shm writable for the user (its mode is "
                    "normally 1777: `chmod 1777 /dev/shm`), or run the container with its own /dev/shm (`--ipc=host`); "
                    "NCCL_SHM_DISABLE=1 avoids it for NCCL at some speed.")
        if not match or re.search(r"-7\b|signal 7|sigbus|core dumped", said, re.I):
            return "OOM", ["SHM_EXHAUSTED"], {}, (
                "The process died on SIGBUS (signal 7): it touched shared memory that could not be backed, almost "
                "always /dev/shm running out (Docker gives a container 64 MB; NCCL and DataLoader workers use it), "
                "sometimes host memory itself. Raise the shared memory (`docker run --shm-size=16g` or `--ipc=host`, "
                "a memory-backed /dev/shm volume on Kubernetes), use fewer DataLoader workers, or NCCL_SHM_DISABLE=1.")
        if re.search(r"nccl|shared memory segment", said, re.I):
            return "OOM", ["SHM_EXHAUSTED"], {}, (
                "NCCL could not create its shared-memory segment in /dev/shm (" + said[:80] + "): /dev/shm is too "
                "small, as in a container (Docker gives 64 MB). Raise it (`docker run --shm-size=8g` or `--ipc=host`, "
                "a memory-backed /dev/shm volume on Kubernetes), or set NCCL_SHM_DISABLE=1 (slower intra-node traffic).")
        return "OOM", ["SHM_EXHAUSTED"], {}, (
            "DataLoader workers ran out of shared memory (/dev/shm), common in containers: raise it "
            "(`docker run --shm-size=8g`) or use fewer DataLoader workers (num_workers=0).")

    def _fp16_weights_scaled(self, match):
        if "BFloat16" in match.group(0):
            return "CONFIG_INVALID", ["FP16_WEIGHTS_SCALED"], {}, (
                "fp16 mixed precision's gradient scaler was given bfloat16 gradients (" + match.group(0)[:90] + "): the "
                "model was loaded in bfloat16 while fp16 AMP (GradScaler) is on, and the scaler has no bfloat16 kernel. "
                "Train in bfloat16 without the scaler (bf16=True, fp16=False) where the GPU supports it (Ampere or "
                "newer), or load the trainable weights in float32 for fp16 AMP (V100, T4).")
        return "CONFIG_INVALID", ["FP16_WEIGHTS_SCALED"], {}, (
            "AMP's gradient scaler was given parameters stored in float16 (Attempting to unscale FP16 gradients): "
            "mixed precision keeps the trainable weights in float32 and only computes in float16. Load or cast the "
            "trainable parameters (the LoRA adapters, the fine-tuned module) to float32, or train in bfloat16 "
            "without the scaler where the GPU supports it.")

    def _triton_shared_memory(self, match):
        numbers = re.findall(r"\d+", match.group(0))
        if len(numbers) >= 2:
            self.inter["shared_memory_required"], self.inter["shared_memory_limit"] = int(numbers[0]), int(numbers[1])
        frames = self.log[max(0, match.start() - 6000):match.start()]
        fix = self._set("COMPILE", False) if _COMPILER_FRAME.search(frames) and "_inductor" in frames else {}
        if len(numbers) >= 2 and int(numbers[0]) > MAX_SHARED_MEMORY_PER_BLOCK:
            # More than the largest GPU offers (H100/B200: 227 KiB a block): no GPU runs this kernel
            # configuration, so its sizes must shrink (the threads: fewer pipeline stages in the
            # library's kernel, or a smaller head dimension), not the GPU change.
            self._decided(match, "the kernel asks for more shared memory than any GPU has")
            return "GPU_UNSUPPORTED", ["TRITON_SHARED_MEMORY"], fix, (
                f"A Triton kernel's configuration needs {int(numbers[0]) // 1024} KiB of shared memory per block, more "
                "than any GPU has (227 KiB on H100), so no GPU runs it as configured: lower the kernel's num_stages or "
                "block sizes (the library's setting for smaller GPUs), or use a smaller head dimension.")
        return "GPU_UNSUPPORTED", ["TRITON_SHARED_MEMORY"], fix, (
            "A Triton kernel needs more shared memory per block than this GPU has (" + match.group(0)[:90] + "): "
            "older GPUs (Pascal, Turing) have 48-64 KiB. It is not GPU memory (VRAM) running out. Use a kernel "
            "configuration with smaller blocks or fewer stages (the library's option for older GPUs), or a GPU "
            "with more shared memory" + (", or run eager with COMPILE=False." if fix else "."))

    def _build_failed(self, match):
        said = match.group(0)
        self.inter["build_error"] = self._line(match).strip()[:200]
        if "Ninja is required" in said:
            return "MISSING_DEPENDENCY", ["BUILD_FAILED"], {}, (
                "torch builds this C++/CUDA extension with ninja, which is not installed: `pip install ninja` "
                "(in the same environment), then rerun.")
        if "conflicting dependencies" in said or "ResolutionImpossible" in said:
            return "MISSING_DEPENDENCY", ["BUILD_FAILED"], {}, (
                "pip cannot install these versions together (" + said[:100] + "): two pins (or a pin and what "
                "another package requires) conflict, e.g. a torchvision/torchaudio built for another torch. Pin "
                "versions that go together (torch's matching torchvision), or loosen the pin the error names.")
        if "distribution" in said or "satisfies the requirement" in said:
            return "MISSING_DEPENDENCY", ["BUILD_FAILED"], {}, (
                "pip found no build of a package for this Python and platform (" + said[:100] + "): the pinned "
                "version does not exist for this Python version/OS/CUDA, or the index is wrong. Use a Python "
                "version the project supports, or the package's own index URL (e.g. PyTorch's --index-url).")
        return "MISSING_DEPENDENCY", ["BUILD_FAILED"], {}, (
            "A package with compiled code did not build (" + said[:100] + "). The first compiler error above "
            "this line is the cause (a compiler, CUDA toolkit or header the build needs). Install a prebuilt "
            "wheel for this torch/CUDA/Python if the project offers one, or the toolchain the build asks for.")

    def _semantic(self):
        """What a script, a configuration or a dataset refused, read from the message's shape and the
        library that raised it (gpu_train_debug/rules/semantics.py); None when nothing there applies."""
        usage = semantics.usage_error(self.log)
        if usage:
            self._decided(usage, "argparse refused the command line")
            return self._usage(usage)
        nan = semantics.nan_losses(self.log)
        if nan:
            self.decided_by.append({"line": nan[1], "why": "losses logged as NaN/inf"})
            return self._nan(nan[0])
        raised = self._failing_exception()
        if raised is None:
            # Quoted inside the user's sentence: its message is what the run said.
            raised = fallbacks.pasted_exception(self.log)
        read = semantics.read(self.log, raised, self._link(raised) if raised is not None else None)
        if read is None:
            return None
        family, code, line, text = read
        self.decided_by.append({"line": line, "why": "what the run's settings or data were refused for"})
        return family, [code], {}, text

    def _usage(self, match):
        self.inter["usage_error"] = match.group(0)[:200]
        return "CONFIG_INVALID", ["USAGE_ERROR"], {}, (
            "The script refused its command line (" + match.group(0)[:120] + "): an argument it requires is "
            "missing, unknown or malformed. Run it with --help and pass the arguments it lists; no train.py "
            "constant fixes it.")

    def _worker_exited(self, match):
        return "OOM", ["SHM_EXHAUSTED"], {}, (
            "A DataLoader worker exited without a Python error: in a container this is almost always "
            "/dev/shm running out (Docker's default is 64 MB), otherwise the host's OOM killer. Raise the "
            "container's shared memory (`docker run --shm-size=8g` or `--ipc=host`) or use fewer DataLoader "
            "workers (num_workers=0 to confirm).")

    def _toolchain(self, match):
        said = match.group(0)
        lowered = said.lower()
        self.inter["toolchain_error"] = self._line(match).strip()[:200]
        if "gnu version" in lowered or "visual studio" in lowered:
            return "MISSING_DEPENDENCY", ["BUILD_TOOLCHAIN"], {}, (
                "The CUDA extension did not build: the host compiler is newer than this nvcc accepts (" + said[:80] +
                "). Build with an older gcc/g++ (e.g. `CC=gcc-11 CXX=g++-11`, or update-alternatives), or install "
                "a newer CUDA toolkit that supports this compiler.")
        if "architecture" in lowered or "gpu-name" in lowered:
            return "MISSING_DEPENDENCY", ["BUILD_TOOLCHAIN"], {}, (
                "The CUDA extension did not build: this nvcc is older than the GPU (" + said[:60] + "). Install a "
                "newer CUDA toolkit (sm_89 needs 11.8, sm_90 12.0, sm_120 12.8), or build for an architecture this "
                "toolkit knows (TORCH_CUDA_ARCH_LIST=8.6).")
        return "MISSING_DEPENDENCY", ["BUILD_TOOLCHAIN"], {}, (
            "The CUDA extension did not build: the local CUDA toolkit (nvcc, CUDA_HOME) is not the CUDA version "
            "torch was built with. Install the torch wheel for the local CUDA, or point CUDA_HOME at a toolkit of "
            "torch's CUDA version (torch.version.cuda), then rebuild.")

    def _driver_too_old(self, match):
        said = match.group(0)
        warned = patterns.on_warning_line(self.log, match)
        how = (" It was printed as a warning, and everything after it ran without the GPU." if warned else "")
        if "compat" in said.lower() or "container" in said.lower():
            return "NO_ACCELERATOR", ["DRIVER_TOO_OLD"], {}, (
                "The NVIDIA driver is older than the CUDA runtime in use, and this GPU has no forward compatibility "
                "(error 804, common in containers built for a newer CUDA)." + how + " Update the host driver to "
                "one that supports the container's CUDA, or use an image/torch built for an older CUDA.")
        return "NO_ACCELERATOR", ["DRIVER_TOO_OLD"], {}, (
            "The NVIDIA driver is too old for the CUDA runtime torch was built with, so CUDA cannot start." + how +
            " Update the GPU driver, or install a torch wheel built for an older CUDA (one the driver supports: "
            "nvidia-smi shows the highest).")

    def _mps_float64(self, match):
        return "DTYPE_UNSUPPORTED", ["MPS_FLOAT64"], {}, (
            "Apple's MPS backend has no float64: a float64 tensor (numpy's default dtype) was moved to the GPU. "
            "Cast it to float32 before `.to('mps')` (`torch.from_numpy(a).float()`, or "
            "torch.set_default_dtype(torch.float32)).")

    def _gpu_too_old(self, match):
        return "GPU_UNSUPPORTED", ["GPU_TOO_OLD"], {}, (
            "This GPU's compute capability is below what the software supports (" + match.group(0)[:100] +
            "). No setting fixes it: use a newer GPU, or a release of the library that still supports it.")

    def _torch_too_old(self, match):
        attr = next((g for g in match.groups() if g), None)
        if attr:
            self.inter["missing_attribute"] = attr
        return "MISSING_DEPENDENCY", ["TORCH_TOO_OLD"], {}, (
            "The installed torch is too old for this code (" + match.group(0)[:100] + "): upgrade it "
            "(`pip install -U torch`, or `uv add 'torch>=2.5'`); torch.compile needs 2.0, "
            "torch.compiler 2.1.")

    def _not_executable(self, match):
        command = match.group(1)
        self.inter["not_executable"] = command
        return "MISSING_DEPENDENCY", ["COMMAND_NOT_EXECUTABLE"], {}, (
            f"The shell could not execute `{command}` (permission denied, exit 126): make it executable "
            f"(`chmod +x {command}`) or run it through its interpreter (`bash {command}`).")

    # -- a results.tsv row whose description names the cause -------------------------------

    _RESULTS_ROW = re.compile(r"^[0-9a-z]{6,40}\t(?:[^\t\n]*\t){1,4}crash\t([^\t\n]+)", re.M)
    _DESCRIBED = (
        (re.compile(r"\bOOM\b|out of memory|OutOfMemory", re.I), "CUDA out of memory"),
        (re.compile(r"\bnan\b|diverg|\binf\b|explod", re.I), "loss: nan"),
        (re.compile(r"compile|triton|inductor", re.I), "InductorError"),
        (re.compile(r"shape|size mismatch", re.I), "mat1 and mat2 shapes cannot be multiplied"),
        (re.compile(r"\bbf16\b|bfloat16", re.I), "bf16 is not supported"),
        (re.compile(r"flash", re.I), "FlashAttention only supports this GPU"),
    )

    def _from_results_row(self):
        """An autoresearch results.tsv `crash` row: its description is all there is to go on."""
        rows = self._RESULTS_ROW.findall(self.log[-65536:])
        if not rows:
            return None
        said = rows[-1].strip()
        self.inter["results_description"] = said
        for regex, canonical in self._DESCRIBED:
            if regex.search(said):
                self.log += "\n" + canonical + "\n"
                code, family, match = patterns.scan(self.log)[0]
                family, codes, fix, text = self._from_signature(code, family, match)
                return family, codes, fix, f"results.tsv marks the run a crash: {said!r}. " + text
        if re.search(r"time ?out|timed out|\bhang|stuck", said, re.I):
            family, codes, fix, text = self._timeout()
            return family, codes, fix, f"results.tsv marks the run a crash: {said!r}. " + text
        return None

    # -- exceptions the signatures do not know --------------------------------------------

    _GENERIC = ("RuntimeError", "Exception", "AssertionError", "OSError", "SystemError")
    _CODE_ERRORS = ("NameError", "SyntaxError", "IndentationError", "TabError", "UnboundLocalError",
                    "TypeError", "AttributeError", "IndexError", "KeyError", "ZeroDivisionError",
                    "ValueError", "AssertionError", "RecursionError", "NotImplementedError")

    def _failing_exception(self):
        """The exception that ended the run: the first of the last chain, or, when that is a
        launcher's report that its child failed, the child's own exception printed before it."""
        raised = logtext.last_exception(self.log)
        outer = None
        # Launchers nest (accelerate runs torchrun runs torch.multiprocessing): walk back through every
        # report to the first error that is not one; a report with nothing before it stays the answer.
        while raised is not None and evidence.is_launcher_report(raised) and raised.start > 0:
            begins = logtext.traceback_start(self.log, raised.start)
            child = logtext.last_exception(self.log[:begins])
            if child is None:
                break
            outer = outer or raised
            self.child_end = begins
            raised = child
        if (raised is not None and evidence.is_launcher_report(raised) and raised.start > 0
                and logtext.exit_status(raised.text()) not in self._SIGNAL_READS):
            # The child's error was printed, but not as an exception line of its own (quoted in a
            # sentence, or only its message): read the text before the report the way a log without
            # any exception line is read. (A report of the child's signal is read by the signal.)
            before = self.log[:raised.start]
            child = fallbacks.pasted_exception(before) or fallbacks.message_only(before)
            if child is not None:
                outer = outer or raised
                self.child_end = raised.start
                raised = child
        if outer is not None:
            self.inter["launcher_error"] = outer.text()[:200]
        return raised

    def _cause_end(self, offset):
        """Where the traceback of the error at `offset` ends: at the next "During handling ..." /
        "direct cause" marker (its consequences follow) or a launcher's report, else at the log's end."""
        ends = [self.log.find(marker, offset) for marker in logtext.CHAINED]
        ends = [end for end in ends if end >= 0] + [len(self.log)]
        if self.child_end is not None and self.child_end > offset:
            ends.append(self.child_end)
        return min(ends)

    def _chain_of_failure(self):
        """The exception chain that ended the run: the last one of the log, or the child's when a
        launcher's report followed it."""
        if self.child_end is None:
            return self.ev.chain
        return evidence.read(self.log[:self.child_end]).chain

    def _link(self, raised):
        """The evidence chain link (frames, libraries) of an exception."""
        link = self.ev.first
        if link is not None and link.start == raised.start:
            return link
        return evidence.link_at(self.log, raised.start)

    def _from_exception(self, after=0):
        raised = self._failing_exception()
        if raised is None and not after:
            # Quoted inside a sentence, or only its message printed (a launcher's own wording).
            raised = fallbacks.pasted_exception(self.log) or fallbacks.message_only(self.log)
        if raised is None or raised.start < after:
            return None
        self.inter["exception"] = raised.text()[:300]
        if raised.file:
            self.inter["exception_at"] = raised.where()
        where = f" at {raised.where()}" if raised.file else ""
        name = raised.name
        frame = raised.file or (logtext.deepest_frame(self.log[:self._cause_end(raised.start)],
                                                      evidence.LAUNCHER_FRAME) or ("",))[0]
        self.decided_by.append({"line": raised.text()[:300], "why": "first exception of the last chain"
                                + (f", raised at {raised.where()}" if raised.file else "")})
        by_signal = self._launcher_signal(raised)
        if by_signal:
            return by_signal
        if name in self._GENERIC and _COMPILER_FRAME.search(frame or ""):
            # The message was cut off, but the traceback ends inside torch.compile's stack.
            fix = self._set("COMPILE", False)
            return "COMPILE_FAILURE", ["TORCH_COMPILE_FAILED"], fix, (
                f"{raised.text()} was raised inside torch.compile ({frame}): the compiler stack failed, "
                f"not the model. Run eager" + (" with COMPILE=False." if fix else " (drop torch.compile)."))
        if name == "KeyError" and re.search(r"[/\\]", raised.message) and "data" in raised.message.lower():
            return "DATA", ["DATASET_UNKNOWN"], {}, (
                f"{raised.text()}{where}: the dataset path is not one the code knows. Use a dataset name "
                f"or folder the code lists (its config or README), or register the new one.")
        link = self._link(raised)
        read = self._library_contract(raised, link)
        if read is not None:
            return read or None
        if _building_extension(link, raised):
            self.decided_by.append({"line": raised.text()[:200], "why": "raised while torch built a C++/CUDA extension"})
            self.inter["build_error"] = raised.text()[:200]
            return "MISSING_DEPENDENCY", ["BUILD_FAILED"], {}, (
                f"A C++/CUDA extension did not build ({raised.text()[:100]}, in torch's extension builder): the "
                "first compiler error above ninja's `build stopped` line is the cause, most often a CUDA toolkit "
                "(nvcc) that does not match torch's CUDA or the GPU, or a host compiler nvcc does not accept. "
                "Install a prebuilt wheel for this torch/CUDA/Python if one exists, or the matching toolkit "
                "(CUDA_HOME), then rebuild.")
        if name == "TypeError" and re.match(r"forward\(\) missing \d+ required positional arguments?", raised.message):
            # A module called with fewer inputs than its forward takes. Called by the project's own code,
            # that call is the code's mistake; called from inside a library, no release says whose.
            callers = [f for f in (link.frames if link else []) if not re.search(r"torch[/\\]nn[/\\](?:modules|parallel)[/\\]", f.file or "")]
            if any(f.library not in (None, "python") for f in callers):
                return None
            self.decided_by.append({"line": raised.text()[:200], "why": "the project's code called a module without an input its forward takes"})
            return "CONFIG_INVALID", ["CODE_ERROR"], {}, (
                f"{raised.text()[:160]}{where}: a module was called with fewer inputs than its forward() takes: "
                "the call in the project's code does not match the model's signature (an argument left out, or "
                "a model/config of another variant than the training script expects). Pass the inputs the "
                "forward() names, or build the model variant the script was written for.")
        if name == "KeyError" and _ANNOTATION_READER.search(raised.function or ""):
            # A loader of annotation files (mmdetection's load_annotations, _parse_ann_info, ...) looked up a
            # field the file does not have: the dataset's format, wherever the loader's code lives.
            self.decided_by.append({"line": raised.text()[:200], "why": "raised while annotations were read"})
            return "DATA", ["DATASET_KEY"], {}, (
                f"{raised.text()[:160]}{where}: the annotation file has no such field where the loader reads it "
                "(a custom dataset converted to another layout: COCO images without `file_name`, records "
                "without the keys the loader expects). Convert the annotations to the format the project "
                "documents, or point the config at the split that carries them.")
        if name in ("KeyError", "IndexError") and _through_dataset(link, raised):
            self.decided_by.append({"line": raised.text()[:200], "why": "raised while a DataLoader fetched a sample"})
            return "DATA", ["DATASET_ITEM_MISSING"], {}, (
                f"{raised.text()[:160]}{where}: the dataset could not build a sample (it was raised in a "
                "`__getitem__` the DataLoader called): its index, annotations or precomputed features do not "
                "match the files on disk (a dataset not fully prepared or extracted, a custom dataset in another "
                "format). Check the sample it names against the data, or prepare the data again as the project "
                "describes.")
        if _JSON_PARSE.search(raised.message) and "tokeniz" in self.log[max(0, raised.start - 3000):raised.start].lower():
            self.decided_by.append({"line": raised.text()[:200], "why": "a JSON parse error while a tokenizer loaded"})
            return "TOKENIZER", ["TOKENIZER_INCOMPATIBLE"], {}, (
                f"{raised.text()[:120]}: the tokenizer file (tokenizer.json) is not valid JSON: a Git LFS pointer "
                "or an interrupted download, or a format newer than the installed `tokenizers`. Download the "
                "tokenizer files again (git lfs pull), or upgrade tokenizers/transformers.")
        if name == "KeyError" and link is not None and link.frames and re.search(r"collat", link.frames[-1].function or "", re.I) \
                and any(re.search(r"transformers[/\\]trainer\.py", f.file) for f in link.frames):
            self.decided_by.append({"line": raised.text()[:200], "why": "a collate function under transformers' Trainer misses a field"})
            return "CONFIG_INVALID", ["CONFIG_VALUE"], {}, (
                f"{raised.text()[:120]}{where}, raised in the collate function the Trainer calls: the Trainer drops the "
                "dataset columns the model's forward does not take (remove_unused_columns=True), so a collator that reads "
                "another field gets none. Set remove_unused_columns=False, or name the field as the model's input.")
        read = self._structure(raised, link)
        if read is not None:
            return read or None
        if name in self._CODE_ERRORS and not self._code_error_evidence(raised):
            # A TypeError/ValueError/... raised inside an installed library, or pasted without a
            # traceback, is as often a version mismatch or bad data as a bug in the code: a
            # wrong family is worse than none, so say what was raised and where instead.
            return None
        field = semantics.record_field(raised, self.log) if name == "KeyError" else None
        if field:
            # The project's own statement read that field from a record of the data (a loaded JSON/parquet row,
            # an annotation): the data lacks the field, which is not a bug of the line that read it.
            family, code, line, text = field
            self.decided_by.append({"line": line[:200], "why": "the statement that raised reads that field from a data record"})
            return family, [code], {}, text
        if name in self._CODE_ERRORS:
            hint = self._code_hint(raised)
            return "CONFIG_INVALID", ["CODE_ERROR"], {}, (
                f"The {'training script' if self.template else 'benchmark'} raised {raised.text()}{where}: "
                f"a bug in the code (often the last edit), not a resource limit. " + hint)
        if name == "FileNotFoundError" and re.search(r"No such file or directory: '(?:|\.|/|[A-Za-z]:[\\/]*)'", raised.message):
            # '' or a bare root is no file anyone meant to read: a path setting left empty or joined wrongly.
            self.decided_by.append({"line": raised.text()[:200], "why": "the path named is empty or a bare root"})
            return "CONFIG_INVALID", ["CONFIG_VALUE"], {}, (
                f"{raised.text()[:160]}{where}: the path the run opened is empty or a bare drive/root, so the "
                "setting that names it was left empty, was not passed, or was joined from parts that are missing "
                "(a config or argument expected to hold a file). Pass the file's path in the setting the script "
                "reads (its config or command line).")
        if name in ("FileNotFoundError", "IsADirectoryError", "NotADirectoryError"):
            return "DATA", ["FILE_MISSING"], {}, (
                f"A file the run reads is missing: {raised.text()}{where}. Create or download it, or fix "
                f"its path (relative paths depend on the working directory).")
        if name == "ImportError" and raised.file and not _INSTALLED.search(raised.file) \
                and re.match(r"\s*from \.+ import ", _statement_before(self.log, raised.start) or ""):
            # A relative import in the project's own tree: a script run as a file instead of as a
            # module (`python -m pkg.train`) fails the same way; no release says which.
            return None
        if name == "ImportError":
            return "MISSING_DEPENDENCY", ["PACKAGE_VERSION"], {}, (
                f"{raised.text()}{where}: an installed package is a different version than the code "
                f"expects. Install the version the project pins (its requirements or lock file).")
        return None

    def _structure(self, raised, link):
        """What the exception's structure says when no signature knew its text
        (gpu_train_debug/rules/fallbacks.py): the statement that raised it, the library it was raised
        in, the other exceptions of its chain. A diagnosis, False for "name no family", or None."""
        statement = _statement_before(self.log, raised.start)
        own = logtext.own_frame(self.log, raised.start) if raised.file else None
        names = [raised.name] + [link.name for link in self._chain_of_failure()]
        for read in (lambda: fallbacks.assertion(raised, statement),
                     lambda: fallbacks.path_check(raised),   # (r5) a script's own path check, raised
                     lambda: fallbacks.record_index(raised, statement),   # (r8) a data record's field misread
                     lambda: fallbacks.dataset_build(names, raised.message, link,
                                                     self.log[max(0, raised.start - 4000):raised.start + 300]),
                     lambda: fallbacks.json_decode(raised, own[3] if own and own[3] else statement),
                     lambda: fallbacks.library_class_attribute(raised),
                     lambda: fallbacks.library_attribute(raised, link),
                     lambda: fallbacks.config_library(raised),
                     lambda: fallbacks.exception_class(raised),
                     lambda: fallbacks.model_files(raised, self.log[max(0, raised.start - 2000):raised.start]),
                     lambda: fallbacks.message_contract(raised)):
            found = read()
            if found:
                family, codes, why, explanation = found
                self.decided_by.append({"line": raised.text()[:200], "why": why})
                return family, codes, {}, explanation
            if found is False:
                return False
        return None

    def _usage_block(self):
        """argparse's usage block and its error line, whatever the program printed before `error:`."""
        line = fallbacks.usage_block(self.log)
        if not line:
            return None
        self.decided_by.append({"line": line[:200], "why": "argparse's usage block ends in an error line"})
        return "CONFIG_INVALID", ["USAGE_ERROR"], {}, (
            f"The command line was refused ({line[:160]}): an argument the script does not define, a missing "
            "required one, or a value outside its choices. Pass the arguments the script's --help lists.")

    def _nan_tensor(self):
        """A loss printed as a tensor that is nan/inf, with no exception after it."""
        if not fallbacks.nan_loss_tensor(self.log):
            return None
        self.decided_by.append({"line": "tensor(nan/inf ...) printed as the loss", "why": "a non-finite loss"})
        return self._nan("LOSS_DIVERGED")

    def _library_contract(self, raised, link):
        """Exceptions whose structure says more than their type: a keyword a library no longer
        takes, a model type the installed transformers does not know, a name an optional kernel
        import left undefined, a division by an empty dataset's length. Returns a diagnosis,
        False for "name no family" (UNKNOWN beats a wrong one), or None to read on."""
        name, message = raised.name, raised.message
        frames = link.frames if link else []
        where = f" at {raised.where()}" if raised.file else ""
        keyword = fallbacks.unexpected_keyword(raised, link)
        if keyword is False:
            self.decided_by.append({"line": raised.text()[:200], "why": "a keyword a model's forward does not take: "
                                    "the model's own signature or the caller's code, no release says which"})
            return False
        if keyword:
            family, codes, why, explanation = keyword
            self.decided_by.append({"line": raised.text()[:200], "why": why})
            return family, codes, {}, explanation
        if name == "TypeError" and "unexpected keyword argument" in message:
            if link is not None and link.raised_in not in (None, "python"):
                self.decided_by.append({"line": raised.text()[:200], "why": f"a keyword the installed `{link.raised_in}` does not take"})
                return "MISSING_DEPENDENCY", ["PACKAGE_VERSION"], {}, (
                    f"{raised.text()[:160]}{where}: the installed `{link.raised_in}` does not take a keyword the code "
                    "passes (it was renamed or added in another version). Install the version the project pins "
                    "(its requirements), or rename the keyword as the installed version's documentation says.")
            # Raised at the caller: a renamed library keyword or the code's own mistake; the log
            # does not say whose function it is.
            return False
        if name == "KeyError" and any(re.search(r"transformers[/\\]models[/\\]auto[/\\]", f.file) for f in frames):
            model_type = message.strip("'\" ")
            self.inter["model_type"] = model_type
            self.decided_by.append({"line": raised.text()[:200], "why": "transformers' registry of model types has no such entry"})
            return "MISSING_DEPENDENCY", ["PACKAGE_VERSION"], {}, (
                f"The installed transformers does not know the model type {message.strip()} ({raised.text()[:80]}, "
                "raised in its auto-configuration registry): the model is newer than that transformers. Upgrade "
                "transformers to the version the model card or the project asks for (`pip install -U transformers`).")
        if name == "NameError":
            undefined = re.search(r"name '([^']+)' is not defined", message)
            if undefined and _OPTIONAL_KERNEL.match(undefined.group(1)):
                self.inter["undefined_name"] = undefined.group(1)
                self.decided_by.append({"line": raised.text()[:200], "why": "a name an optional kernel package provides"})
                return "MISSING_DEPENDENCY", ["PACKAGE_VERSION"], {}, (
                    f"{raised.text()}{where}: `{undefined.group(1)}` comes from an optional kernel package that the "
                    "code imports inside a try/except, so the import failed quietly (the package is missing, or its "
                    "installed version has no such function). Install the version the project names (e.g. "
                    "flash-attn 2 for `flash_attn_varlen_func`), or turn the option off.")
        if name == "ZeroDivisionError":
            statement = _statement_before(self.log, raised.start)
            if _COUNT_DIVISOR.search(statement) or re.search(r"\b(?:len|size|samples?)\W{0,3}0\b|\b0/0\b",
                                                            self.log[max(0, raised.start - 4000):raised.start]):
                self.decided_by.append({"line": statement.strip()[:200], "why": "divided by a count of samples or batches"})
                return "DATA", ["DATASET_EMPTY"], {}, (
                    f"{raised.text()}{where}, dividing by a count of samples or batches (`{statement.strip()[:80]}`): "
                    "the dataset, or one split of it, is empty, so the loader yields nothing. Check the data path and "
                    "the files it should match (names, extensions, the split's folder), and that the batch size is "
                    "not larger than the dataset with drop_last=True.")
            return False   # a division by zero elsewhere: a bug or a value gone to zero, the log does not say which
        return None

    def _code_error_evidence(self, raised):
        """True when the frames show the code's own mistake: an error that is always one
        (NameError, SyntaxError, ...), or one raised in the project's own code, not a library."""
        if raised.name in _ALWAYS_CODE:
            return True
        link = self._link(raised)
        if link is None or not link.frames:
            return False
        if raised.name in ("KeyError", "IndexError") and link.frames[-1].cell:
            # A lookup that failed in a notebook cell: the cell reads the data it loaded as often as it
            # has a bug (an annotation file without the field, an id the split does not list).
            return False
        lib = link.raised_in
        if lib is not None:
            self.decided_by.append({"line": f"{link.frames[-1].file} line {link.frames[-1].line}",
                                    "why": f"raised inside the installed package `{lib}`, not the project's code"})
        return lib is None

    def _code_hint(self, raised):
        if raised.name == "NameError":
            name = re.search(r"name '([^']+)' is not defined", raised.message)
            if name:
                self.inter["undefined_name"] = name.group(1)
                return f"Define or import `{name.group(1)}` before it is used, or revert the edit."
        if raised.name in ("SyntaxError", "IndentationError", "TabError"):
            return "Fix the syntax at that line, or revert the edit."
        return "Fix or revert the code at that line."

    def _shape(self, match):
        if "stack expects each tensor" in match.group(0):
            stacked = self._stacked_samples(match)
            if stacked is not None:
                return stacked or self._unknown()
        head = self.config.get("HEAD_DIM")
        if isinstance(head, int) and head % 2:
            return "CONFIG_INVALID", ["SHAPE_MISMATCH"], {"HEAD_DIM": head + 1}, (
                "Rotary embeddings need an even HEAD_DIM.")
        where = ""
        frame = logtext.own_frame(self.log, match.start())
        if frame:
            name, line, function, source = frame
            self.inter["exception_at"] = f"{name} line {line}" + (f", in {function}" if function else "")
            where = f" at {self.inter['exception_at']}" + (f": `{source[:120]}`" if source else "")
            self.inter["fix_step"] = f"fix or revert {self.inter['exception_at']}" + (
                f" (`{source[:80]}`)" if source else "") + " or a layer it uses"
        return "CONFIG_INVALID", ["SHAPE_MISMATCH"], {}, (
            "Tensor shapes do not agree" + where + " (" + match.group(0)[:120] + "). A change to the "
            "model code broke a dimension: fix that line (or the layer it uses), or revert the edit.")

    def _stacked_samples(self, match):
        """torch.stack of samples of different sizes while the DataLoader built a batch: with torch's
        own collate (or a dataset's __getitem__) the samples differ, i.e. the data; with a collate
        function of the project the code that pads them is as likely: None to read on, False to
        name no family."""
        last = self.log.rfind("stack expects each tensor")   # the traceback's own line, not a quote above it
        # Its frames are above it, or below when the user quoted the error before pasting the traceback.
        trace = self.log[max(0, last - 5000):min(last + 5000, self._cause_end(last))]
        if not re.search(r"torch[/\\]utils[/\\]data[/\\]|DataLoader worker|collate", trace):
            return None
        frames = re.findall(r"(?:File [^\n]*|\S*collate\S*\.py\S* in \w+[^\n]*)", trace)
        # A launcher's traceback printed after the child's (torchrun, accelerate) is not where it failed.
        last_frames = "\n".join([f for f in frames if not evidence.LAUNCHER_FRAME.search(f)][-2:])
        if re.search(r"_utils[/\\]collate\.py|in (?:default_collate|collate_tensor_fn)\b|in __getitem__", last_frames):
            self._decided(match, "torch's collate stacked samples of different sizes")
            return "DATA", ["DATA_SHAPE_INCONSISTENT"], {}, (
                "The DataLoader could not make a batch: the samples have different sizes (" + match.group(0)[:100] +
                "). Make every sample the same size in the dataset (resize or crop images, pad or truncate sequences, "
                "bucket by size), or pass a collate_fn that pads them; batch_size=1 hides it.")
        return False

    def _backend_needs_cuda(self, match):
        return "CONFIG_INVALID", ["BACKEND_NEEDS_CUDA_COMPILE"], self._set("ATTENTION_BACKEND", "sdpa"), (
            "FlexAttention needs a CUDA GPU and torch.compile; SDPA runs everywhere.")

    def _window_pattern(self, match):
        pattern = self.config.get("WINDOW_PATTERN")
        fix = {}
        if isinstance(pattern, str):
            kept = "".join(ch for ch in pattern.upper() if ch in "SL") or "L"
            fix = self._set("WINDOW_PATTERN", kept)
        return "CONFIG_INVALID", ["WINDOW_PATTERN_INVALID"], fix, (
            "WINDOW_PATTERN may only hold S (half-context sliding window) and L (full context).")

    def _batch_invalid(self):
        total, b = self.config.get("TOTAL_BATCH_SIZE"), self.config.get("DEVICE_BATCH_SIZE")
        if not (isinstance(total, int) and isinstance(b, int) and b > 0):
            return False
        return total % (b * memory.shape(self.config)["seq_len"]) != 0

    def _batch_not_divisible(self):
        seq = memory.shape(self.config)["seq_len"]
        total, b = self.config.get("TOTAL_BATCH_SIZE"), self.config.get("DEVICE_BATCH_SIZE")
        if not (isinstance(total, int) and isinstance(b, int) and b > 0):
            return "CONFIG_INVALID", ["BATCH_NOT_DIVISIBLE"], {}, (
                "TOTAL_BATCH_SIZE must be a multiple of DEVICE_BATCH_SIZE * MAX_SEQ_LEN.")
        valid = [d for d in memory.valid_device_batches(self.config) if d <= b]
        if valid:
            fix = {"DEVICE_BATCH_SIZE": valid[0]}
        else:
            fix = {"TOTAL_BATCH_SIZE": max(1, round(total / (b * seq))) * b * seq}
        self.inter["tokens_per_fwdbwd"] = b * seq
        return "CONFIG_INVALID", ["BATCH_NOT_DIVISIBLE"], fix, (
            f"TOTAL_BATCH_SIZE {total} is not a multiple of DEVICE_BATCH_SIZE*MAX_SEQ_LEN = {b * seq}, "
            "so gradient accumulation is not a whole number of micro-batches.")

    def _nccl(self, match):
        text = match.group(0)
        code = ("NCCL_TIMEOUT" if "Watchdog" in text else "NCCL_ERROR" if "NCCL" in text or "nccl" in text
                or "DistBackend" in text else "DIST_INIT_FAILED")
        if "doesn't have NCCL built in" in text:
            return "DISTRIBUTED", [code], {}, (
                "This torch build has no NCCL (macOS, Windows or a CPU wheel): launch one process "
                "without torch.distributed, or use the gloo backend.")
        if "HCCL" in text or "Notify register" in text or "EI0002" in text:
            return "DISTRIBUTED", ["HCCL_TIMEOUT" if "imeout" in text else "NCCL_ERROR"], {}, (
                "A collective on Ascend NPUs (HCCL) failed or timed out (" + text[:80] + "): one rank stopped or "
                "took another code path, or the devices cannot reach each other. Look for the first rank's own "
                "error; raise HCCL_CONNECT_TIMEOUT/HCCL_EXEC_TIMEOUT if the work between collectives is long.")
        if "env:// rendezvous" in text:
            return "DISTRIBUTED", [code], {}, (
                "torch.distributed was initialised from environment variables that are not set (RANK, WORLD_SIZE, "
                "MASTER_ADDR/MASTER_PORT): the script was started with `python` instead of a launcher. Start it with "
                "`torchrun --nproc_per_node=N` (or accelerate/deepspeed), or run one process without the distributed path.")
        if code == "DIST_INIT_FAILED" and re.search(r"gloo|connectFullMesh", text, re.I):
            return "DISTRIBUTED", [code], {}, (
                "The gloo backend's processes could not connect to each other (" + text[:80] + "): a rank bound "
                "to the wrong network interface or address (127.0.0.1 from the hosts file), a firewall, or a rank "
                "that died. Set GLOO_SOCKET_IFNAME (and NCCL_SOCKET_IFNAME) to the interface the nodes share and "
                "check that every node resolves its own hostname to that address.")
        if code == "DIST_INIT_FAILED" and ("Address already in use" in text or "98" in text or "EADDRINUSE" in text
                                           or "server socket" in text):
            return "DISTRIBUTED", [code], {}, (
                "The rendezvous port is taken (address already in use): another run, or a stale process of an "
                "earlier one, holds it. Give this run another port (`torchrun --master_port=29501`, or "
                "`--rdzv_endpoint=localhost:0` to pick a free one) or end the old process.")
        if code == "DIST_INIT_FAILED" and "response" in text and "expected" in text:
            return "DISTRIBUTED", [code], {}, (
                "The rendezvous store answered with something that is not torch's TCPStore protocol (" + text[:60] +
                "): MASTER_ADDR/MASTER_PORT are empty or point at another service. Pass the master node's address "
                "and a free port (`--master_addr=<host> --master_port=29500`), the same on every node.")
        if code == "DIST_INIT_FAILED":
            return "DISTRIBUTED", [code], {}, (
                "The distributed set-up failed before training (" + text[:80] + "): the launcher, the "
                "rendezvous or the build's MPI/NCCL support does not match how the run was started. "
                "For one GPU, run a single process without the multi-GPU path.")
        if code == "NCCL_TIMEOUT":
            return self._collective_timeout()
        if re.search(r"Call to ibv_\w+ failed", text):
            return "DISTRIBUTED", [code], {}, (
                "NCCL's InfiniBand transport failed (" + text[:70] + "): the nodes have no working IB/RoCE path "
                "between them (no device, a port down, a container without the IB devices). Without InfiniBand, "
                "set NCCL_IB_DISABLE=1 so NCCL uses sockets, and NCCL_SOCKET_IFNAME to the interface the nodes "
                "share; with it, check `ibv_devinfo` on every node.")
        duplicate = _NCCL_DUPLICATE_GPU.search(self.log, match.start(), match.end() + 3000)
        if duplicate:
            # NCCL's own reason for ncclInvalidUsage: the GPUs are there, but two ranks were given the same one.
            return "DISTRIBUTED", [code], {}, (
                "NCCL found two ranks on the same GPU (" + duplicate.group(0)[:80] + "): more processes were launched "
                "than this machine has visible GPUs (--nproc_per_node / num_processes above the GPU count, or "
                "CUDA_VISIBLE_DEVICES hiding some), or the ranks were not each pinned to their own GPU. Launch one "
                "process per visible GPU, and set each rank's device from LOCAL_RANK (torch.cuda.set_device).")
        cuda = _NCCL_CUDA_FAILURE.search(self.log, match.start(), match.end() + 3000)
        if cuda:
            return self._nccl_cuda_failure(cuda)
        if re.search(r"unhandled cuda error|ncclUnhandledCudaError|NCCL Error 1\b", self._line(match), re.I):
            # NCCL only passes on what a CUDA call returned; without that CUDA error the cause is not shown.
            self._decided(match, "NCCL reported a CUDA call that failed, without the CUDA error")
            return "UNKNOWN", ["UNKNOWN"], {}, (
                "NCCL stopped on a CUDA call that failed (" + self._line(match).strip()[:80] + "), and the log does "
                "not show which CUDA error: the fault is in CUDA on that node (the driver, a GPU, the container's "
                "device access, peer-to-peer between the GPUs), not in the collective. Rerun with NCCL_DEBUG=INFO "
                "to see the CUDA error and which GPU; try NCCL_P2P_DISABLE=1, and run a single-GPU CUDA program "
                "on the same node.")
        return "DISTRIBUTED", [code], {}, (
            "A collective (NCCL) operation failed or timed out: one rank crashed or took a different "
            "code path. Look for the first rank's own error; single-GPU runs should not use NCCL.")

    def _nccl_cuda_failure(self, cuda):
        """NCCL's `unhandled cuda error`: NCCL only reports what a CUDA call returned, and that is the cause."""
        said = cuda.group(2)
        self.inter["cuda_failure"] = cuda.group(0).strip()[:120]
        self._decided(cuda, "the CUDA failure NCCL reported")
        if cuda.group(1) == "802" or "system not yet initialized" in said:
            return "NO_ACCELERATOR", ["CUDA_SYSTEM_NOT_READY"], {}, (
                "CUDA could not start on this node (" + cuda.group(0).strip()[:80] + "): error 802, 'system not yet "
                "initialized', means the NVSwitch fabric of an HGX/DGX node (A100/H100/B200 8-GPU boards) is not up. "
                "Start NVIDIA's fabric manager (`systemctl start nvidia-fabricmanager`, the same version as the "
                "driver) and check `nvidia-smi -q | grep -i fabric`, then rerun.")
        return "UNKNOWN", ["UNKNOWN"], {}, (
            "NCCL stopped on a CUDA call that failed (" + cuda.group(0).strip()[:80] + "): the fault is in CUDA on "
            "that node (the driver, the GPU, the container's device access), not in the collective. Run a "
            "single-GPU CUDA program on the same node, check `nvidia-smi` and the kernel log (Xid errors), and "
            "rerun with NCCL_DEBUG=INFO to see which GPU.")

    def _collective_timeout(self):
        """A watchdog timeout: which ranks waited at which collective, and who was elsewhere.

        No rank's own error was found (that would have ranked first), so the ranks that timed out
        waited for one that was busy elsewhere: saving, evaluating or preparing data on one rank, or
        a different code path. Ranks stopped at different collectives say the same."""
        waits = _watchdog_waits(self.log)
        ranks = sorted({rank for rank, _, _, _ in waits})
        where = sorted({(seq, op) for _, seq, op, _ in waits})
        begin = max(0, len(self.log) - 65536)
        first = logtext.line_index(self.log, begin)
        lines = self.log[begin:].split("\n")
        seen = {rank for index, rank in self.ranks.items() if index >= first}
        waited = set(ranks) | {int(r) for line in lines if "watchdog" in line.lower()
                               for pair in _ANY_RANK.findall(line) for r in pair if r}
        waited |= {self.ranks[first + k] for k, line in enumerate(lines)
                   if first + k in self.ranks and "watchdog" in line.lower()}
        absent = sorted(seen - waited)
        busy = _busy_before(self.log, waits[0][3] if waits else len(self.log))
        if ranks:
            self.inter["timed_out_ranks"] = ranks
            self.inter["collectives"] = [f"{op} #{seq}" for seq, op in where][:4]
        if absent:
            self.inter["ranks_not_timed_out"] = absent
        if busy:
            self.inter["busy_with"] = busy
        said = []
        if len({op for _, op in where}) > 1:
            # Sequence numbers differ between process groups; different operations do not.
            said.append("the ranks stopped at different collectives (" + ", ".join(
                f"{op} #{seq}" for seq, op in where[:3]) + "): they took different code paths")
        if absent:
            said.append(f"rank{'s' if len(absent) > 1 else ''} {', '.join(map(str, absent))} did not time out: "
                        "it was elsewhere while the others waited")
        if busy:
            said.append(f"just before, the log shows {busy}")
        detail = ("; ".join(said) + ". ") if said else ""
        return "DISTRIBUTED", ["NCCL_TIMEOUT"], {}, (
            "A collective timed out on the NCCL watchdog with no rank's own error in the log: the other ranks "
            "waited for one that was busy elsewhere or never arrived. " + detail[:1].upper() + detail[1:] +
            "Do one-rank work (saving a checkpoint, evaluation, data preparation) on every rank or behind a "
            "barrier, and raise the collective timeout if it is legitimately long (init_process_group(timeout=...), "
            "HF `ddp_timeout`); single-GPU runs should not use NCCL.")

    def _timeout(self):
        if not self.template and self.last is None:
            return "TIMEOUT", ["STALL"], {}, (
                "The benchmark ran out of time without finishing (a hang, or work that takes longer "
                "than the timeout). Look at what it printed last; raise the timeout only if the work "
                "is legitimately longer.")
        if self.last is None:
            fix = self._set("COMPILE", False)
            return "TIMEOUT", ["STALL_BEFORE_FIRST_STEP"], fix, (
                "The run hit the time limit before the first training step: compilation, data "
                "loading or a download hung." + (" Try COMPILE=False." if fix else ""))
        pct = self.last[1]
        if pct is not None and pct >= 99.0:
            return "TIMEOUT", ["SLOW_EVAL"], {}, (
                "Training used its whole budget and the run then ran out of time in evaluation or "
                "shutdown; the eval cost grows with DEVICE_BATCH_SIZE-independent EVAL_TOKENS.")
        return "TIMEOUT", ["HANG_DURING_TRAINING"], {}, (
            f"Training stopped making progress after step {self.last[0]} and the run was killed "
            "at the time limit (a hang: deadlock, dataloader stall or a very slow step).")

    def _leaky(self):
        finite = [x for x in self.losses if math.isfinite(x)]
        if finite and min(finite) < 0:
            return False   # a loss below zero is not next-token cross-entropy: no bound to fall under
        return bool(finite and min(finite) < LEAK_LOSS) or (
            self.val_bpb is not None and self.val_bpb < LEAK_BPB)

    def _too_good(self, forced=False):
        if not forced and patterns.causality_probe_passed(self.log):
            return "LOSS_TOO_GOOD", ["IMPLAUSIBLE_GAIN"], {}, (
                "The gain over the best run exceeds the implausibility threshold, but the "
                "harness's causality probe passed: the model does not see future tokens. Check "
                "that nothing else changed what is measured, then measure the same code again "
                "(`autoresearch run --force`) before trusting it. On synthetic smoke data large "
                "gains are normal; raise the limit with `init --implausible-gain`.")
        if forced or self._leaky():
            return "LOSS_TOO_GOOD", ["CAUSAL_LEAK"], {}, (
                "The loss fell far below what next-token prediction on this data allows: the model "
                "sees the tokens it predicts (causal mask off, is_causal=False, or targets in the "
                "input). Restore causal attention.")
        return "LOSS_TOO_GOOD", ["IMPLAUSIBLE_GAIN"], {}, (
            "The gain over the best run exceeds the implausibility threshold. Check that the "
            "evaluation is unchanged and the model cannot see future tokens; rerun to confirm.")

    def _unknown(self):
        raised = self._failing_exception()
        line = raised.text() if raised else patterns.last_error_line(self.log)
        if line:
            self.inter["error_line"] = line[:300]
        where = f" at {raised.where()}" if raised and raised.file else ""
        link = self._link(raised) if raised else None
        if link is not None and link.raised_in:
            where += f" (inside the installed package `{link.raised_in}`)"
        return "UNKNOWN", ["UNKNOWN"], {}, (
            "No known failure signature: " + (line + where if line else "the log has no error line") + ".")

    def _continues_warning(self, match):
        """The match is on a line that continues a warning printed on the line before it."""
        start = self.log.rfind("\n", 0, match.start())
        if start < 0:
            return False
        before = self.log[self.log.rfind("\n", 0, start) + 1:start]
        return bool(re.search(r"\w*Warning: ", before)) and not re.search(r"\w+Error\b", self._line(match))

    def _line(self, match):
        start = self.log.rfind("\n", 0, match.start()) + 1
        stop = self.log.find("\n", match.end())
        return self.log[start:len(self.log) if stop < 0 else stop]


_WATCHDOG = re.compile(r"\[Rank (\d+)\] Watchdog caught collective operation timeout:\s*WorkNCCL\(SeqNum=(\d+), OpType=(\w+)")
_BUSY = (("saving a checkpoint", re.compile(r"\bsav(?:e|ing)\b[^\n]*(?:checkpoint|model|state)|checkpoint", re.I)),
         ("an evaluation", re.compile(r"\beval(?:uat\w*)?\b|\bvalidat\w*", re.I)),
         ("data being loaded or tokenised", re.compile(r"\b(?:tokeniz|Map|Loading|preprocess)\w*\b.*\d+%|Generating \w+ split")))


def _watchdog_waits(log, limit=64):
    """(rank, seq, op, offset) of each NCCL watchdog timeout line, found from str.find."""
    out, pos = [], log.find("Watchdog caught")
    while pos >= 0 and len(out) < limit:
        start = log.rfind("\n", 0, pos) + 1
        match = _WATCHDOG.search(log, start, min(len(log), pos + 400))
        if match:
            out.append((int(match.group(1)), int(match.group(2)), match.group(3), start))
        pos = log.find("Watchdog caught", pos + 1)
    return out


def _busy_before(log, offset, lines=40):
    """What the run was doing just before the first timeout (the one-rank work others waited for)."""
    window = log[max(0, offset - 8000):offset].splitlines()[-lines:]
    for what, regex in _BUSY:
        if any(regex.search(line) for line in window):
            return what
    return None


# What each described crash class is, and the fix step its threads found.
_FIX_STEPS = {
    "XPU_FLOAT64": (
        "This Intel GPU has no float64 (Arc and other client GPUs) and a kernel uses double precision",
        "Keep tensors on the XPU in float32: convert numpy's float64 arrays (`.astype(np.float32)`, "
        "`torch.from_numpy(x).float()`) and float64 constants before `.to('xpu')`; set "
        "IPEX_FP32_MATH_MODE or OverrideDefaultFP64Settings=1 with IGC_EnableDPEmulation=1 only to emulate it."),
    "TOKENIZER_NO_PAD_TOKEN": (
        "The tokenizer has no padding token and the data collator pads batches",
        "Give it one before training: `tokenizer.pad_token = tokenizer.eos_token` (or add a pad token and "
        "resize the model's embeddings), as the model card's fine-tuning example does."),
    "TOKENIZER_CORRUPT": (
        "sentencepiece cannot parse tokenizer.model",
        "The file is not a sentencepiece model: a Git LFS pointer or an interrupted download (download it again, "
        "`git lfs pull`), or a tokenizer of another kind (Llama 3 ships a tiktoken file: load it with its own "
        "tokenizer class or AutoTokenizer)."),
    "DDP_REENTRANT_CHECKPOINT": (
        "DDP saw a parameter marked ready twice in one backward pass",
        "Reentrant activation checkpointing (or a module called twice per step) does this under DDP: use "
        "non-reentrant checkpointing (`gradient_checkpointing_kwargs={'use_reentrant': False}`, "
        "`torch.utils.checkpoint(..., use_reentrant=False)`), or `static_graph=True` when the graph does not "
        "change, and `find_unused_parameters=False`."),
    "FSDP_MIXED_DTYPE": (
        "FSDP cannot flatten parameters of different dtypes into one unit",
        "Give every wrapped parameter one dtype before wrapping (cast the model, or for QLoRA set "
        "`bnb_4bit_quant_storage` to the compute dtype), or use FSDP's `use_orig_params=True` / mixed-precision "
        "policy instead of mixed parameter dtypes."),
    "QUANTIZED_DEVICE_MAP": (
        "A model loaded in 8-/4-bit with `device_map='auto'` is trained by several processes",
        "Under torchrun/accelerate each process must hold its own copy on its own GPU: load with "
        "`device_map={'': local_rank}` (e.g. `{'': PartialState().process_index}`), or train with one process."),
    "WANDB_NOT_LOGGED_IN": (
        "Weights & Biases has no API key and cannot ask for one (no terminal)",
        "Run `wandb login` once, or set WANDB_API_KEY; to train without it set WANDB_MODE=offline (or "
        "disabled), or `report_to='none'` in transformers."),
    "CUDA_FORK_REINIT": (
        "CUDA was initialised before the process forked, and a forked child used it",
        "Use the 'spawn' start method (`torch.multiprocessing.set_start_method('spawn')`, "
        "`multiprocessing_context='spawn'` for the DataLoader), or keep CUDA out of the dataset and of "
        "everything that runs before the workers start."),
    "TOO_MANY_OPEN_FILES": (
        "The process hit the open-file limit while DataLoader workers shared tensors",
        "Raise the limit (`ulimit -n 65535`) or share through the file system "
        "(`torch.multiprocessing.set_sharing_strategy('file_system')`), or use fewer workers."),
    "DEEPSPEED_BATCH_SIZE": (
        "DeepSpeed's batch sizes disagree: train_batch_size must equal micro batch x gradient accumulation x GPUs",
        "Set train_batch_size (and gradient_accumulation_steps) to 'auto' in the DeepSpeed config when the "
        "trainer sets them, or make the three agree for the number of GPUs launched."),
    "DATA_FORMAT": (
        "A data file is not in the format the code reads",
        "A JSON Lines file (one object a line) read with json.load gives `Extra data`: read it line by line or "
        "convert it to the format the code expects; text that is not UTF-8 needs its encoding "
        "(`open(..., encoding=...)`) or a conversion to UTF-8."),
    "MODEL_PATH_MISSING": (
        "The model or tokenizer path does not exist here, so huggingface_hub took it for a Hub repo id, which a "
        "path cannot be",
        "Fix the path (absolute, or relative to the directory the run starts in) or download the model to it; a "
        "Hub id is `org/name`."),
    "NUMPY2_ABI": (
        "A compiled package was built against NumPy 1.x and NumPy 2 is installed",
        "Install `numpy<2` (or versions of the compiled packages built for NumPy 2, e.g. a newer torch)."),
    "CPU_ISA_UNSUPPORTED": (
        "The process died on an illegal instruction (SIGILL): the CPU lacks an instruction set the binary was built "
        "for (AVX/AVX2)",
        "Install a build for this CPU (an older torch/TensorFlow wheel without AVX, or build from source), or "
        "run on a CPU with AVX2."),
}

# NCCL's report of the CUDA call that failed under it: `Cuda failure 802 'system not yet initialized'`.
_NCCL_DUPLICATE_GPU = re.compile(r"Duplicate GPU detected ?: rank \d+ and rank \d+ both on CUDA device \w+")
_NCCL_CUDA_FAILURE = re.compile(r"Cuda failure (?:(\d+) )?'([^'\n]+)'")
_JSON_PARSE = re.compile(r"[Ee]xpect(?:ed|ing) value:? (?:at )?line \d+ column \d+")


def _building_extension(link, raised):
    """True when the exception came out of torch's C++/CUDA extension builder (ninja failed)."""
    if "Error building extension" in raised.message or "'ninja', '-v'" in raised.message:
        return True
    frames = link.frames if link else []
    return any("cpp_extension" in f.file and f.function in ("_run_ninja_build", "_write_ninja_file_and_compile_objects",
                                                           "_jit_compile", "_write_ninja_file_and_build_library")
               for f in frames)


# Functions that read a dataset's annotation files (mmdetection/mmcv style loaders and their kin).
_ANNOTATION_READER = re.compile(r"^_?(?:load|parse|read|get)_?ann(?:otation)?s?(?:_info|_file)?$", re.I)


def _through_dataset(link, raised):
    """True when the exception came out of a dataset's __getitem__ (or the DataLoader's fetch);
    a library's own mapping (transformers' registry of model types) is not a dataset."""
    frames = link.frames if link else []
    if frames and re.search(r"collat", frames[-1].function or "", re.I):
        return False   # raised by the collate function, not by the dataset building a sample
    if "in DataLoader worker" in raised.message:
        return True
    return any((f.function == "__getitem__" and f.library in (None, "torch", "datasets"))
               or re.search(r"torch[/\\]utils[/\\]data[/\\]", f.file) for f in frames)


# Names that optional kernel packages provide; projects import them in try/except blocks.
_OPTIONAL_KERNEL = re.compile(r"(?:flash_attn|xformers|apex|bitsandbytes|bnb|triton|deepspeed|fused|causal_conv1d"
                              r"|selective_scan|mamba_ssm)\w*", re.I)
# A divisor that counts data: len(...), or a name for samples, batches, steps, items.
_COUNT_DIVISOR = re.compile(r"/=?\s*\(?\s*(?:len\(|\w*(?:data|loader|batch|sample|step|iter|count|num_|total|size|items?)\w*)", re.I)


def _statement_before(log, offset):
    """The source line a traceback printed just above its exception line (the failing statement)."""
    for line in reversed(log[max(0, offset - 2000):offset].splitlines()[-6:]):
        text = line.strip()
        if text and not text.startswith(("File ", "^", "~", "Traceback")) and set(text) - set("^~ "):
            return text
    return ""


_HUB_REFUSED = re.compile(r"Repository Not Found for url|RepositoryNotFoundError|GatedRepoError"
                          r"|is not a local folder and is not a valid model identifier")
_NETWORK_FAILED = re.compile(r"ConnectionError|ConnectTimeout|ReadTimeout|Max retries exceeded|Failed to establish"
                             r"|Name or service not known|Temporary failure in name resolution|Network is unreachable"
                             r"|SSLError|couldn't connect to|Connection refused|LocalEntryNotFoundError|timed out", re.I)
_HUB_ID_TOKENIZER = re.compile(r"Can't load tokenizer for '([^']+)'")


def _is_hub_id(name):
    """`org/name` or `name` as the Hub spells repos, not a filesystem path."""
    return bool(re.fullmatch(r"[A-Za-z0-9][\w.-]*(?:/[\w.-]+)?", name)) and not name.startswith(".")


def _oom_device(said, context):
    """Which accelerator ran out of memory, in the words its runtime used."""
    lowered = said.lower()
    if "mps backend" in lowered:
        return "The MPS device"
    if "metal" in context.lower() or "kiogpu" in lowered or "metal::" in lowered:
        return "Metal"
    if re.search(r"\bhip\b|hiperror|hip_error", lowered):
        return "The ROCm (HIP) GPU"
    if re.search(r"\bxpu\b", lowered) or "ur_result" in lowered or "out of device memory" in lowered:
        return "The Intel XPU"
    if "memory space" in lowered or "resource_exhausted" in lowered:
        return "The TPU/XLA device"
    return "CUDA"


def _round_sig(value, digits=3):
    if value == 0:
        return 0.0
    return round(value, -int(math.floor(math.log10(abs(value)))) + digits - 1)
