"""diagnose(log_text, config, profile): family, codes, intermediates, minimal fix, explanation.

`config` is either the constants of an autoresearch `train.py` (+ `prepare.py`), read with
gpu_train_debug.config, or a generic training config of the task environment (it has a
`micro_batch` field; see gpu_train_debug.generic). `profile` holds what the run measured:
`status` and `reason` from the engine, `steps` (steps.jsonl records), `summary`
(summary.json), `gpu_memory_mb`, `gpu_name`, `compute_capability`, `timeout_s`.

`fix` holds only the constants that change, with values valid for the config: an OOM fix
keeps TOTAL_BATCH_SIZE divisible by DEVICE_BATCH_SIZE * MAX_SEQ_LEN, so the total batch and
the optimisation stay the same and only gradient accumulation grows.
"""

import math

from gpu_train_debug import accounting as acc
from gpu_train_debug import memory, patterns

FAMILIES = ("OOM", "GPU_UNSUPPORTED", "DTYPE_UNSUPPORTED", "NO_ACCELERATOR", "NAN_LOSS",
            "COMPILE_FAILURE", "MISSING_DEPENDENCY", "TOKENIZER", "DATA", "DISTRIBUTED",
            "CONFIG_INVALID", "TIMEOUT", "LOSS_TOO_GOOD", "UNKNOWN")

# karpathy/autoresearch defaults: a diverged run is brought back to the nearest sane value.
DEFAULT_LRS = {"EMBEDDING_LR": 0.6, "UNEMBEDDING_LR": 0.004, "MATRIX_LR": 0.04, "SCALAR_LR": 0.5}
# Loss (nats/token) or val_bpb this low in a 5-minute run means the model sees its targets.
LEAK_LOSS = 0.3
LEAK_BPB = 0.3
_EVAL_FRAMES = ("evaluate_bpb", "def evaluate", "eval_loss", "in evaluate", "model.eval()")
_STATE_FRAMES = ("setup_optimizer", "init_weights", ".to(device", "to_empty(", "_init_group",
                 "zeros_like", "in __init__")


# A failure shows at the start (warnings, setup) or at the end (the traceback) of a log;
# the middle is progress lines. Reading only these parts bounds the time for any log size.
EXCERPT_HEAD = 64 * 1024
EXCERPT_TAIL = 256 * 1024


def excerpt(log_text):
    if len(log_text) <= EXCERPT_HEAD + EXCERPT_TAIL:
        return log_text
    return log_text[:EXCERPT_HEAD] + "\n[... middle of the log skipped ...]\n" + log_text[-EXCERPT_TAIL:]


def diagnose(log_text, config=None, profile=None):
    # train.py redraws its progress line with \r: make every update a line of its own.
    log_text = excerpt(log_text or "").replace("\r\n", "\n").replace("\r", "\n")
    config = dict(config or {})
    profile = dict(profile or {})
    if "micro_batch" in config:
        from gpu_train_debug import generic
        try:
            return generic.diagnose(log_text, config, profile)
        except (KeyError, TypeError, ValueError, ZeroDivisionError, OverflowError):
            pass  # not a complete task config: diagnose from the log alone
    config = _clean(config)
    config.update(patterns.printed_shapes(log_text, config.get("DEVICE_BATCH_SIZE")))
    return _Diagnosis(log_text, config, _clean_profile(profile)).run()


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
    def __init__(self, log_text, config, profile):
        self.log, self.config, self.profile = log_text, config, profile
        self.status = str(profile.get("status") or "")
        self.reason = str(profile.get("reason") or "")
        # Memory numbers only when train.py's shape constants were read (never from defaults alone).
        shaped = any(name in config for name in ("DEPTH", "DEVICE_BATCH_SIZE", "TOTAL_BATCH_SIZE"))
        self.inter = memory.intermediates(config) if shaped else {}
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
        found = patterns.scan(self.log)
        if self.status == "implausible":
            # The run finished and only its result is in doubt: error text in its log was not fatal.
            causal = any(code == "CAUSAL_LEAK" for code, _, _ in found)
            result = self._too_good(forced=causal)
        elif found:
            code, family, match = found[0]
            result = self._from_signature(code, family, match)
        elif self.status == "timeout" or "timed out" in self.reason:
            result = self._timeout()
        elif self._leaky():
            result = self._too_good()
        elif any(not math.isfinite(x) for x in self.losses):
            result = self._nan("LOSS_DIVERGED")
        elif self._batch_invalid():
            result = self._batch_not_divisible()
        else:
            result = self._unknown()
        family, codes, fix, explanation = result
        return {"family": family, "codes": codes, "intermediates": self.inter, "fix": fix,
                "explanation": explanation}

    def _from_signature(self, code, family, match):
        if family == "OOM":
            return self._oom(match)
        if family == "NAN_LOSS":
            return self._nan(code)
        if code == "MISSING_PACKAGE":
            return self._missing(match)
        if code == "BATCH_NOT_DIVISIBLE":
            return self._batch_not_divisible()
        handler = {
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
        }[code]
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
        text = (f"CUDA ran out of memory {where}. " + how)
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
        return "GPU_UNSUPPORTED", ["TORCH_ARCH_UNSUPPORTED"], {}, (
            "This PyTorch build has no kernels for the GPU's architecture (for Blackwell, sm_100/"
            "sm_120, install a CUDA 12.8+ wheel). No train.py constant fixes it.")

    def _bf16(self, match):
        return "DTYPE_UNSUPPORTED", ["BF16_UNSUPPORTED"], self._set("DTYPE", "float16"), (
            "This GPU (compute capability < 8.0) has no bfloat16 support; train in float16 with "
            "loss scaling.")

    def _no_cuda(self, match):
        return "NO_ACCELERATOR", ["NO_CUDA_DEVICE"], {}, (
            "No usable CUDA device: the PyTorch build is CPU-only or no NVIDIA driver/GPU is "
            "visible. Install a CUDA build of torch, or run the CPU profile on purpose.")

    def _compile_failed(self, match):
        return "COMPILE_FAILURE", ["TORCH_COMPILE_FAILED"], self._set("COMPILE", False), (
            "torch.compile failed (no working Triton/C++ toolchain, Windows or an old version); "
            "run eager with COMPILE=False.")

    def _missing(self, match):
        package = (match.group(1) or match.group(2) or "").split(".")[0]
        self.inter["missing_package"] = package
        fix = {}
        if package in ("kernels", "flash_attn", "flash_attn_interface"):
            fix = self._set("ATTENTION_BACKEND", "sdpa")
        elif package == "triton":
            fix = self._set("COMPILE", False)
        hint = " or avoid it with the fix" if fix else ""
        return "MISSING_DEPENDENCY", ["MISSING_PACKAGE"], fix, (
            f"Python package '{package}' is not installed: install it into the research repo's "
            f"environment (uv add {package} / pip install {package}){hint}.")

    def _tokenizer(self, match):
        return "TOKENIZER", ["TOKENIZER_MISSING"], {}, (
            "The tokenizer files are missing; run `python prepare.py` once to train/download them.")

    def _data(self, match):
        return "DATA", ["DATA_SHARDS_MISSING"], {}, (
            "Training data shards are missing; run `python prepare.py` to download/prepare them.")

    def _shape(self, match):
        head = self.config.get("HEAD_DIM")
        if isinstance(head, int) and head % 2:
            return "CONFIG_INVALID", ["SHAPE_MISMATCH"], {"HEAD_DIM": head + 1}, (
                "Rotary embeddings need an even HEAD_DIM.")
        return "CONFIG_INVALID", ["SHAPE_MISMATCH"], {}, (
            "Tensor shapes do not agree (" + match.group(0)[:120] + "); a change to the model code "
            "broke a dimension. Revert or fix that edit.")

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
        code = "NCCL_TIMEOUT" if "Watchdog" in match.group(0) else "NCCL_ERROR"
        return "DISTRIBUTED", [code], {}, (
            "A collective (NCCL) operation failed or timed out: one rank crashed or took a different "
            "code path. Look for the first rank's own error; single-GPU runs should not use NCCL.")

    def _timeout(self):
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
        return bool(finite and min(finite) < LEAK_LOSS) or (
            self.val_bpb is not None and self.val_bpb < LEAK_BPB)

    def _too_good(self, forced=False):
        if forced or self._leaky():
            return "LOSS_TOO_GOOD", ["CAUSAL_LEAK"], {}, (
                "The loss fell far below what next-token prediction on this data allows: the model "
                "sees the tokens it predicts (causal mask off, is_causal=False, or targets in the "
                "input). Restore causal attention.")
        return "LOSS_TOO_GOOD", ["IMPLAUSIBLE_GAIN"], {}, (
            "The gain over the best run exceeds the implausibility threshold. Check that the "
            "evaluation is unchanged and the model cannot see future tokens; rerun to confirm.")

    def _unknown(self):
        line = patterns.last_error_line(self.log)
        if line:
            self.inter["error_line"] = line
        return "UNKNOWN", ["UNKNOWN"], {}, (
            "No known failure signature: " + (line or "the log has no error line") + ".")


def _round_sig(value, digits=3):
    if value == 0:
        return 0.0
    return round(value, -int(math.floor(math.log10(abs(value)))) + digits - 1)
