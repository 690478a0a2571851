"""Diagnosis codes, fix rules and the solver for generic training configs (the task schema).

`CODES` is the vocabulary the task prompts list: code -> (family, description, fix rule).
A fix rule returns the minimal changed fields: one field where one suffices, and the
compensating field only when a change would otherwise alter the global batch or schedule.
`diagnose` classifies a task from its config, profile and log, then applies the rules.
"""

import math

from gpu_train_debug import accounting as acc
from gpu_train_debug.rules import patterns
from gpu_train_debug import scenario as sc


def _with(c, **changes):
    return dict(c, **changes)


def fix_zero(c):
    for stage in range(int(c["zero_stage"]) + 1, 4):
        if sc.fits(_with(c, zero_stage=stage)):
            return {"zero_stage": stage}
    return None


def fix_activations(c):
    if not c.get("gradient_checkpointing") and sc.fits(_with(c, gradient_checkpointing=True)):
        return {"gradient_checkpointing": True}
    b, g = c["micro_batch"], c["grad_accum"]
    for nb in acc.divisors_at_most(b * g, b - 1):
        if sc.fits(_with(c, micro_batch=nb, grad_accum=b * g // nb)):
            return {"micro_batch": nb, "grad_accum": b * g // nb}
    return None


def fix_optimizer(c):
    for name in acc.OPTIMIZER_FALLBACKS:
        if sc.fits(_with(c, optimizer=name)):
            return {"optimizer": name}
    return None


def fix_parallelism(c):
    world, heads, batch = c["world_size"], c["n_heads"], sc.global_batch(c)
    for t in (2, 4, 8):
        if t <= c.get("tensor_parallel", 1) or heads % t or world % (t * c.get("pipeline_parallel", 1)):
            continue
        d = world // (t * c.get("pipeline_parallel", 1))
        if batch % (c["micro_batch"] * d):
            continue
        trial = _with(c, tensor_parallel=t, grad_accum=batch // (c["micro_batch"] * d))
        if sc.fits(trial):
            return {"tensor_parallel": t, "grad_accum": trial["grad_accum"]}
    return None


def fix_attention(c):
    return {"attn_implementation": "sdpa"} if sc.fits(_with(c, attn_implementation="sdpa")) else None


def fix_packing(c):
    fix = {"packing": True}
    if "lr_schedule_steps" in c:
        fix["lr_schedule_steps"] = c["epochs"] * sc.steps_per_epoch(c, packing=True)
    return fix


def fix_schedule(c):
    return {"lr_schedule_steps": sc.total_steps(c)}


def fix_global_batch(c):
    return {"grad_accum": c["target_global_batch"] // (c["micro_batch"] * sc.dp(c))}


def fix_token_budget(c):
    return {"max_steps": math.ceil(c["target_tokens"] / (sc.global_batch(c) * c["seq_len"]))}


def fix_lr(c):
    return {"lr": round_sig(c["reference_lr"] * math.sqrt(sc.global_batch(c) / c["reference_global_batch"]))}


def round_sig(value, digits=3):
    if value == 0:
        return 0.0
    return round(value, -int(math.floor(math.log10(abs(value)))) + digits - 1)


CODES = {
    "ZERO_STAGE_INSUFFICIENT": ("OOM", "multi-GPU OOM: the ZeRO stage shards too little for the memory budget", fix_zero),
    "OOM_ACTIVATIONS": ("OOM", "OOM in forward/backward: activations too large (checkpointing x accumulation)", fix_activations),
    "OPTIMIZER_STATE_FOOTPRINT": ("OOM", "OOM at the optimizer step: optimizer states too large for one GPU", fix_optimizer),
    "PARALLELISM_PER_RANK_MEMORY": ("OOM", "model states per rank too large: tensor/pipeline parallel degree too low", fix_parallelism),
    "ATTENTION_SCORES_QUADRATIC": ("OOM", "eager attention materialises s^2 score matrices", fix_attention),
    "PADDING_WASTE_NO_PACKING": ("TIMEOUT", "run exceeds its time limit computing on padding (no sequence packing)", fix_packing),
    "LR_SCHEDULE_STEP_MISMATCH": ("CONFIG_INVALID", "LR schedule horizon is not the number of optimizer steps", fix_schedule),
    "GLOBAL_BATCH_MISMATCH": ("CONFIG_INVALID", "micro_batch*grad_accum*dp differs from the target global batch", fix_global_batch),
    "TOKEN_BUDGET_MISMATCH": ("CONFIG_INVALID", "max_steps does not match the target token budget", fix_token_budget),
    "LR_TOO_HIGH_DIVERGENCE": ("NAN_LOSS", "loss diverges: learning rate too high for the global batch", fix_lr),
    "FP16_LOSS_SCALE_OVERFLOW": ("NAN_LOSS", "fp16 loss scale keeps overflowing", lambda c: {"precision": "bf16"}),
    "BF16_UNSUPPORTED": ("DTYPE_UNSUPPORTED", "GPU without bfloat16 support", lambda c: {"precision": "fp16"}),
    "FA_UNSUPPORTED_ARCH": ("GPU_UNSUPPORTED", "Flash Attention kernel not built for this GPU", lambda c: {"attn_implementation": "sdpa"}),
    "TRITON_GPU_TOO_OLD": ("GPU_UNSUPPORTED", "GPU too old for Triton / torch.compile", lambda c: {"compile": False}),
    "TORCH_COMPILE_FAILED": ("COMPILE_FAILURE", "torch.compile toolchain failure", lambda c: {"compile": False}),
    "NCCL_TIMEOUT": ("DISTRIBUTED", "a collective timed out (desynchronised ranks)", lambda c: {}),
    "DATA_SHARDS_MISSING": ("DATA", "training data files missing", lambda c: {}),
    "TOKENIZER_MISSING": ("TOKENIZER", "tokenizer files missing", lambda c: {}),
}

_SIGNATURE_CODES = {"FA_UNSUPPORTED_ARCH", "TRITON_GPU_TOO_OLD", "BF16_UNSUPPORTED", "TORCH_COMPILE_FAILED",
                    "FP16_LOSS_SCALE_OVERFLOW", "NCCL_TIMEOUT", "DATA_SHARDS_MISSING", "TOKENIZER_MISSING"}


def classify(log, c, profile):
    """The codes a task's config/profile/log show, in a fixed order."""
    codes = []
    found = [code for code, _, _ in patterns.scan(log)]
    if "OOM" in found:
        codes.append(_memory_code(log, c))
    # One log signature is one fault: the highest-priority one (a too-old GPU also makes
    # torch.compile fail; that failure is its consequence, not a second fault).
    codes += [code for code in found if code in _SIGNATURE_CODES][:1]
    if "LOSS_DIVERGED" in found and "reference_lr" in c and "FP16_LOSS_SCALE_OVERFLOW" not in codes:
        codes.append("LR_TOO_HIGH_DIVERGENCE")
    if c.get("packing") is False and "time_limit_h" in c and _over_time(c, profile):
        codes.append("PADDING_WASTE_NO_PACKING")
    elif "lr_schedule_steps" in c and "epochs" in c and c["lr_schedule_steps"] != sc.total_steps(c):
        codes.append("LR_SCHEDULE_STEP_MISMATCH")
    if "target_global_batch" in c and sc.global_batch(c) != c["target_global_batch"]:
        codes.append("GLOBAL_BATCH_MISMATCH")
    if "target_tokens" in c and c.get("max_steps") != fix_token_budget(c)["max_steps"]:
        codes.append("TOKEN_BUDGET_MISMATCH")
    return codes


def _memory_code(log, c):
    if c.get("attn_implementation") == "eager":
        return "ATTENTION_SCORES_QUADRATIC"
    if "zero_stage" in c:
        return "ZERO_STAGE_INSUFFICIENT"
    if "tensor_parallel" in c:
        return "PARALLELISM_PER_RANK_MEMORY"
    if "optimizer.step()" in log or "optimizer step" in log:
        return "OPTIMIZER_STATE_FOOTPRINT"
    return "OOM_ACTIVATIONS"


def _over_time(c, profile):
    step_time = profile.get("step_time_s")
    if not isinstance(step_time, (int, float)):
        return True
    return sc.total_steps(c) * step_time > c["time_limit_h"] * 3600


def diagnose(log, c, profile):
    codes = classify(log, c, profile)
    fix = {}
    for code in codes:
        fix.update(CODES[code][2](c) or {})
    family = CODES[codes[0]][0] if codes else "UNKNOWN"
    explanation = "; ".join(f"{code}: {CODES[code][1]}" for code in codes) or "no known fault found"
    return {"family": family, "codes": codes or ["UNKNOWN"], "intermediates": sc.all_intermediates(c),
            "fix": fix, "explanation": explanation + "."}
