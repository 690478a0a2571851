"""Procedural generator of gpu-train-debug tasks: config + profiler numbers + raw log -> gold.

Deterministic: a task is a function of (split, seed, index). Each generator samples a
config by rejection until the fault is real (the run does not fit / does not finish / the
numbers disagree) and the gold fix provably repairs it under the stated conventions.

Tiers (the seed's v0.4 mix): `interacting` (six archetypes where two settings compose),
`computed` (one fault, numeric intermediates), `two_fault` (a memory fault and an
accounting fault at once) and `diagnosis` (a log signature, no intermediates).
"""

import json
import math
import random

from gpu_train_debug import accounting as acc
from gpu_train_debug.rules import generic
from gpu_train_debug import scenario as sc

MODELS = [(24, 2048, 16), (32, 2560, 32), (32, 4096, 32), (40, 5120, 40), (48, 6144, 48),
          (60, 6656, 52), (80, 8192, 64)]
VOCABS = [32000, 50304, 128256]
GPUS = [("RTX 4090", 24, "8.9"), ("A100-SXM4-40GB", 40, "8.0"), ("A100-SXM4-80GB", 80, "8.0"),
        ("H100-SXM5-80GB", 80, "9.0"), ("H200", 141, "9.0")]
OLD_GPUS = [("Tesla V100-SXM2-32GB", 32, "7.0"), ("Tesla T4", 16, "7.5"), ("Tesla P100-PCIE-16GB", 16, "6.0")]

INTERACTING = ["zero_x_memory", "checkpointing_x_accumulation", "packing_x_token_time",
               "optimizer_x_memory", "accumulation_x_lr_schedule", "parallelism_x_per_rank_memory"]
COMPUTED = ["global_batch", "token_budget", "lr_batch_scaling", "attention_eager"]
MEMORY_FAULTS = ["zero_x_memory", "checkpointing_x_accumulation", "optimizer_x_memory",
                 "parallelism_x_per_rank_memory", "attention_eager"]
ACCOUNTING_FAULTS = ["accumulation_x_lr_schedule", "token_budget"]
DIAGNOSIS = ["FP16_LOSS_SCALE_OVERFLOW", "BF16_UNSUPPORTED", "FA_UNSUPPORTED_ARCH", "TRITON_GPU_TOO_OLD",
             "TORCH_COMPILE_FAILED"]

# Exact tier counts per split (train/test: 70% computed+interacting, 20% two-fault, 10% diagnosis).
MIX = {
    "train": {"interacting": 420, "computed": 420, "two_fault": 240, "diagnosis": 120},
    "hard": {"interacting": 120, "computed": 20, "two_fault": 60, "diagnosis": 0},
    "test": {"interacting": 86, "computed": 85, "two_fault": 49, "diagnosis": 24},
}
# Seeds of the splits live in separate namespaces, so test is held out from train by seed.
SPLIT_SALT = {"train": "train", "hard": "hard", "test": "heldout-test"}

CODE_OF = {
    "zero_x_memory": "ZERO_STAGE_INSUFFICIENT", "checkpointing_x_accumulation": "OOM_ACTIVATIONS",
    "packing_x_token_time": "PADDING_WASTE_NO_PACKING", "optimizer_x_memory": "OPTIMIZER_STATE_FOOTPRINT",
    "accumulation_x_lr_schedule": "LR_SCHEDULE_STEP_MISMATCH",
    "parallelism_x_per_rank_memory": "PARALLELISM_PER_RANK_MEMORY", "global_batch": "GLOBAL_BATCH_MISMATCH",
    "token_budget": "TOKEN_BUDGET_MISMATCH", "lr_batch_scaling": "LR_TOO_HIGH_DIVERGENCE",
    "attention_eager": "ATTENTION_SCORES_QUADRATIC",
}
REQUIRED = {
    "zero_x_memory": ["num_params", "bytes_per_param", "fixed_memory_gib", "per_gpu_memory_gib"],
    "checkpointing_x_accumulation": ["fixed_memory_gib", "activation_memory_gib", "global_batch"],
    "packing_x_token_time": ["padding_fraction", "steps_per_epoch", "steps_per_epoch_packed", "real_tokens"],
    "optimizer_x_memory": ["num_params", "bytes_per_param", "fixed_memory_gib"],
    "accumulation_x_lr_schedule": ["global_batch", "steps_per_epoch", "total_steps", "total_tokens"],
    "parallelism_x_per_rank_memory": ["num_params", "bytes_per_param", "per_gpu_memory_gib", "global_batch"],
    "global_batch": ["global_batch", "tokens_per_step"],
    "token_budget": ["global_batch", "total_tokens"],
    "lr_batch_scaling": ["global_batch", "lr_scale"],
    "attention_eager": ["activation_memory_gib", "attention_scores_gib"],
}


class Rejected(Exception):
    pass


# -- configs ------------------------------------------------------------------------------

def _base(rng, hard, models=None):
    layers, hidden, heads = rng.choice(models or (MODELS[2:] if hard else MODELS))
    gpu, mem, cap = rng.choice(GPUS)
    return {
        "n_layers": layers, "hidden_size": hidden, "n_heads": heads, "vocab_size": rng.choice(VOCABS),
        "seq_len": rng.choice([2048, 4096]), "micro_batch": rng.choice([1, 2, 4]),
        "grad_accum": rng.choice([8, 16, 32, 64, 128] if hard else [1, 2, 4, 8, 16]),
        "world_size": 1, "optimizer": "adamw", "precision": "bf16", "gradient_checkpointing": True,
        "attn_implementation": "sdpa", "compile": True, "gpu_memory_gib": mem,
    }, {"gpu": gpu, "compute_capability": cap}


def _zero(rng, hard):
    c, p = _base(rng, hard)
    c.update(world_size=rng.choice([8, 16, 32, 64]), zero_stage=rng.choice([0, 1]))
    if sc.fits(c) or not generic.fix_zero(c):
        raise Rejected
    return c, p


def _activations(rng, hard):
    c, p = _base(rng, hard, MODELS[:4])
    c.update(world_size=rng.choice([1, 2, 4, 8]), micro_batch=rng.choice([8, 16, 32, 64]),
             gradient_checkpointing=rng.random() < 0.5, grad_accum=rng.choice([1, 2, 4, 8]))
    if sc.state_bytes_per_gpu(c) > 0.6 * sc.USABLE * c["gpu_memory_gib"] * acc.GIB:
        raise Rejected
    if sc.fits(c) or not generic.fix_activations(c):
        raise Rejected
    return c, p


def _optimizer(rng, hard):
    c, p = _base(rng, hard)
    c.update(micro_batch=1)
    if sc.fits(c) or not generic.fix_optimizer(c):
        raise Rejected
    return c, p


def _parallelism(rng, hard):
    c, p = _base(rng, hard)
    c.update(world_size=rng.choice([8, 16]), tensor_parallel=1, pipeline_parallel=1)
    if sc.fits(c) or not generic.fix_parallelism(c):
        raise Rejected
    return c, p


def _attention(rng, hard):
    c, p = _base(rng, hard, MODELS[:3])
    c.update(seq_len=rng.choice([8192, 16384]), attn_implementation="eager", micro_batch=rng.choice([1, 2]))
    if sc.fits(c) or not generic.fix_attention(c) or sc.state_bytes_per_gpu(c) > sc.USABLE * c["gpu_memory_gib"] * acc.GIB:
        raise Rejected
    return c, p


def _fitting(rng, hard):
    """A config that fits in memory, for the non-memory faults."""
    for _ in range(200):
        c, p = _base(rng, hard)
        c.update(world_size=rng.choice([8, 16, 32, 64]), zero_stage=3)
        if sc.fits(c):
            return c, p
    raise Rejected


def _data_fields(rng, c, hard):
    c.update(dataset_samples=rng.randrange(200_000, 5_000_000 if hard else 2_000_000, 1000),
             epochs=rng.choice([1, 2, 3, 4]))


def _packing(rng, hard, c=None, p=None):
    if c is None:
        c, p = _fitting(rng, hard)
    _data_fields(rng, c, hard)
    c.update(mean_seq_len=rng.randrange(c["seq_len"] // 10, c["seq_len"] // 2), packing=False)
    c["lr_schedule_steps"] = sc.total_steps(c)
    step_time = round(rng.uniform(0.8, 6.0), 2)
    unpacked = sc.total_steps(c) * step_time / 3600
    packed = c["epochs"] * sc.steps_per_epoch(c, packing=True) * step_time / 3600
    if unpacked < 1.5 * packed:
        raise Rejected
    c["time_limit_h"] = round(rng.uniform(packed * 1.1, unpacked * 0.9), 1)
    if not packed < c["time_limit_h"] < unpacked:
        raise Rejected
    p["step_time_s"] = step_time
    return c, p


def _schedule(rng, hard, c=None, p=None):
    if c is None:
        c, p = _fitting(rng, hard)
    _data_fields(rng, c, hard)
    if c["grad_accum"] < 2:
        c["grad_accum"] = rng.choice([4, 8])
    right = sc.total_steps(c)
    micro = c["epochs"] * math.ceil(c["dataset_samples"] / (c["micro_batch"] * sc.dp(c)))
    c["lr_schedule_steps"] = micro if rng.random() < 0.5 else max(1, right // c["grad_accum"])
    if c["lr_schedule_steps"] == right:
        raise Rejected
    return c, p


def _global_batch(rng, hard):
    c, p = _fitting(rng, hard)
    target = c["micro_batch"] * c["grad_accum"] * c["world_size"]
    old_world = c["world_size"]
    c["world_size"] = rng.choice([w for w in (8, 16, 32, 64) if w != old_world])
    if target % (c["micro_batch"] * c["world_size"]):
        raise Rejected
    c["target_global_batch"] = target
    return c, p


def _token_budget(rng, hard, c=None, p=None):
    if c is None:
        c, p = _fitting(rng, hard)
    batch_tokens = sc.global_batch(c) * c["seq_len"]
    c["target_tokens"] = rng.choice([10, 20, 50, 100, 200, 300]) * 10 ** 9
    wrong_seq = rng.choice([1024, 2048, 4096, 8192])
    c["max_steps"] = math.ceil(c["target_tokens"] / (sc.global_batch(c) * wrong_seq))
    if c["max_steps"] == math.ceil(c["target_tokens"] / batch_tokens):
        raise Rejected
    return c, p


def _lr_scaling(rng, hard):
    c, p = _fitting(rng, hard)
    ratio = rng.choice([4, 8, 16, 32, 64])
    c["reference_global_batch"] = sc.global_batch(c) * ratio
    c["reference_lr"] = rng.choice([3e-4, 6e-4, 1e-3, 1.5e-3])
    c["lr"] = c["reference_lr"]
    return c, p


GENERATORS = {
    "zero_x_memory": _zero, "checkpointing_x_accumulation": _activations, "packing_x_token_time": _packing,
    "optimizer_x_memory": _optimizer, "accumulation_x_lr_schedule": _schedule,
    "parallelism_x_per_rank_memory": _parallelism, "global_batch": _global_batch,
    "token_budget": _token_budget, "lr_batch_scaling": _lr_scaling, "attention_eager": _attention,
}


# -- logs ---------------------------------------------------------------------------------

def _gib_text(nbytes):
    return f"{nbytes / acc.GIB:.2f} GiB" if nbytes >= acc.GIB else f"{nbytes / acc.MIB:.2f} MiB"


def _oom(c, rng, where):
    capacity = c["gpu_memory_gib"] * acc.GIB * 0.985
    need = sc.per_gpu_bytes(c)
    tried = min(need * rng.uniform(0.05, 0.25), capacity * 0.3)
    allocated = capacity - tried * rng.uniform(0.3, 0.9)
    return [
        "Traceback (most recent call last):",
        '  File "train.py", line %d, in <module>' % rng.randrange(180, 420),
        "    " + where,
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate %s. GPU 0 has a total capacity of %s "
        "of which %s is free. Of the allocated memory %s is allocated by PyTorch, and %s is reserved by PyTorch "
        "but unallocated." % (_gib_text(tried), _gib_text(capacity), _gib_text(capacity - allocated),
                              _gib_text(allocated * 0.97), _gib_text(allocated * 0.03)),
    ]


_WHERE = {
    "zero_x_memory": "model_engine.backward(loss)",
    "checkpointing_x_accumulation": "loss.backward()",
    "optimizer_x_memory": "optimizer.step()",
    "parallelism_x_per_rank_memory": "model = build_model(config).cuda()",
    "attention_eager": "outputs = model(input_ids, labels=labels)",
}


def _header(c, rng):
    lines = [f"[rank0] world_size={c['world_size']} micro_batch={c['micro_batch']} grad_accum={c['grad_accum']}",
             f"[rank0] model: {c['n_layers']} layers, hidden {c['hidden_size']}, {c['n_heads']} heads"]
    return lines + _startup_lines(c, lines)


def _startup_lines(c, header):
    """What a healthy launch prints before training: NCCL's INFO lines on multi-GPU runs, the
    precision and compile set-up. They name NCCL, bf16, the loss scale and torch.compile in runs
    where none of them is the fault, as real logs do, so counting keywords does not diagnose.
    Drawn from their own generator (seeded by the header), so the task's draws are unchanged."""
    rng = random.Random("\n".join(header))
    lines = []
    if c.get("world_size", 1) > 1:
        host = f"node{rng.randrange(1, 64):02d}"
        lines += [f"{host}:{rng.randrange(1000, 9999)}:0 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.{rng.randrange(2, 250)}<0>",
                  f"{host}:{rng.randrange(1000, 9999)}:0 [0] NCCL INFO cudaDriverVersion 12040",
                  f"{host}:{rng.randrange(1000, 9999)}:0 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation",
                  f"{host}:{rng.randrange(1000, 9999)}:0 [0] NCCL INFO Channel 00/02 : 0 1 2 3"][:rng.randrange(2, 5)]
    if c.get("precision") == "fp16":
        lines.append("[rank0] fp16 mixed precision: dynamic loss scale, initial loss scale 65536")
    elif c.get("precision") == "bf16":
        lines.append("[rank0] mixed precision: bfloat16 autocast, fp32 master weights")
    if c.get("compile"):
        lines.append("[rank0] torch.compile(model, mode='default'): compiled graphs cached in /tmp/torchinductor")
    return lines


def _loss_lines(rng, steps, start=10.8, nan_at=None, lr=None):
    lines, loss = [], start
    for step in range(1, steps + 1):
        loss = max(2.0, loss * rng.uniform(0.93, 0.99))
        shown = "nan" if nan_at and step >= nan_at else f"{loss:.4f}"
        lr_text = f" | lr {lr(step):.3e}" if lr else ""
        lines.append(f"step {step * 10:6d} | loss: {shown}{lr_text}")
    return lines


def _log_for(name, c, p, rng):
    lines = _header(c, rng)
    if name in _WHERE:
        return lines + _oom(c, rng, _WHERE[name])
    if name == "packing_x_token_time":
        limit = c["time_limit_h"]
        done = int(limit * 3600 / p["step_time_s"])
        lines += _loss_lines(rng, 4)
        return lines + [f"step {done}/{sc.total_steps(c)} | elapsed {limit:.1f} h",
                        f"time limit of {limit} h reached; job killed by the scheduler"]
    if name == "accumulation_x_lr_schedule":
        horizon = c["lr_schedule_steps"]
        return lines + _loss_lines(rng, 6, lr=lambda s: 3e-4 * max(0.0, 0.5 * (1 + math.cos(math.pi * min(1, s * 10 / horizon)))))
    if name == "global_batch":
        return lines + [f"Total train batch size (w. parallel, distributed & accumulation) = {sc.global_batch(c)}"] + _loss_lines(rng, 4)
    if name == "token_budget":
        return lines + [f"Total optimization steps = {c['max_steps']}"] + _loss_lines(rng, 4)
    if name == "lr_batch_scaling":
        return lines + _loss_lines(rng, 8, nan_at=rng.randrange(3, 8))
    raise KeyError(name)


_DIAG_LOGS = {
    "FP16_LOSS_SCALE_OVERFLOW": lambda rng: [
        f"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {2 ** k}, reducing to {2 ** (k - 1)}"
        for k in range(16, 10, -1)] + ["[deepspeed] Overflow detected. Skipping step. Attempted loss scale: 1024, reducing to 512",
                                       "step    60 | loss: nan"],
    "BF16_UNSUPPORTED": lambda rng: ["RuntimeError: Current CUDA Device does not support bfloat16. Please switch dtype to float16."],
    "FA_UNSUPPORTED_ARCH": lambda rng: ["RuntimeError: FlashAttention only supports Ampere GPUs or newer."],
    "TRITON_GPU_TOO_OLD": lambda rng: [
        "torch._inductor.exc.InductorError: GPUTooOldForTriton: Found Tesla P100-PCIE-16GB which is too old to be "
        "supported by the triton GPU compiler, which is used as the backend. Triton only supports devices of CUDA "
        "Capability >= 7.0, but your device is of CUDA capability 6.0"],
    "TORCH_COMPILE_FAILED": lambda rng: [rng.choice([
        "RuntimeError: Windows not yet supported for torch.compile",
        "torch._inductor.exc.InductorError: TritonMissing: Cannot find a working triton installation. Either the "
        "package is not installed or it is too old."])],
}


# -- tasks --------------------------------------------------------------------------------

def _sample(rng, hard, fn, *args):
    for _ in range(500):
        try:
            return fn(rng, hard, *args)
        except Rejected:
            continue
    raise RuntimeError(f"generator {fn.__name__} found no valid config")


def make_task(split, seed, index, tier, variant):
    rng = random.Random(f"{SPLIT_SALT.get(split, split)}:{seed}:{index}")
    hard = split == "hard"
    required, names = [], []
    if tier == "diagnosis":
        code = variant
        c, p = _sample(rng, hard, lambda r, h: _fitting(r, h))
        if code == "FP16_LOSS_SCALE_OVERFLOW":
            c["precision"] = "fp16"
        else:
            gpu, mem, cap = rng.choice(OLD_GPUS)
            c["gpu_memory_gib"], p = mem, {"gpu": gpu, "compute_capability": cap}
            c.update(zero_stage=3)
            if not sc.fits(c):
                c["world_size"], c["micro_batch"] = 64, 1
        if code == "FA_UNSUPPORTED_ARCH":
            c["attn_implementation"] = "flash_attention_2"
        codes, log = [code], _header(c, rng) + _DIAG_LOGS[code](rng)
    elif tier == "two_fault":
        memory_name, accounting_name = variant
        c, p = _sample(rng, hard, GENERATORS[memory_name])
        c, p = _sample(rng, hard, lambda r, h: GENERATORS[accounting_name](r, h, dict(c), dict(p)))
        names = [memory_name, accounting_name]
        codes = [CODE_OF[n] for n in names]
        log = _log_for(memory_name, c, p, rng)
    else:
        c, p = _sample(rng, hard, GENERATORS[variant])
        names, codes = [variant], [CODE_OF[variant]]
        log = _log_for(variant, c, p, rng)
    for name in names:
        required += [r for r in REQUIRED[name] if r not in required]
    fix = {}
    for code in codes:
        fix.update(generic.CODES[code][2](c))
    gold = {"diagnosis": codes, "intermediates": {r: sc.intermediate(r, c) for r in required}, "fix": fix}
    p["gpu_memory_gib"] = c["gpu_memory_gib"]
    return {
        "id": f"{split}-{seed}-{index:04d}",
        "prompt": render_prompt(c, p, log, required),
        "gold": gold,
        "tier": tier,
        "archetype": "+".join(names) if names else codes[0],
        "interaction": "+".join(names) if tier in ("interacting", "two_fault") else None,
        "reasoning_depth": {"diagnosis": 1, "computed": 2, "interacting": 3, "two_fault": 4}[tier],
        "required_computations": required + ["fit_search" if any(CODE_OF.get(n) in _MEMORY_CODES for n in names) else "rule"],
        "split": split,
    }


_MEMORY_CODES = {"ZERO_STAGE_INSUFFICIENT", "OOM_ACTIVATIONS", "OPTIMIZER_STATE_FOOTPRINT",
                 "PARALLELISM_PER_RANK_MEMORY", "ATTENTION_SCORES_QUADRATIC"}


def _variants(tier, count, rng):
    if tier == "interacting":
        pool = INTERACTING
    elif tier == "computed":
        pool = COMPUTED
    elif tier == "diagnosis":
        pool = DIAGNOSIS
    else:
        pool = [(m, a) for m in MEMORY_FAULTS for a in ACCOUNTING_FAULTS]
    out = [pool[i % len(pool)] for i in range(count)]
    rng.shuffle(out)
    return out


def generate_split(split="train", seed=0, mix=None):
    mix = mix or MIX[split]
    rng = random.Random(f"{SPLIT_SALT.get(split, split)}:{seed}:plan")
    plan = []
    for tier, count in mix.items():
        plan += [(tier, v) for v in _variants(tier, count, rng)]
    rng.shuffle(plan)
    return [make_task(split, seed, i, tier, variant) for i, (tier, variant) in enumerate(plan)]


def fresh_variants(n, seed, tier=None):
    """n new tasks outside every split (their own seed namespace), e.g. for curriculum sampling."""
    rng = random.Random(f"fresh:{seed}")
    tiers = [tier] * n if tier else [rng.choice(["interacting", "computed", "two_fault", "diagnosis"]) for _ in range(n)]
    tasks = []
    for i, t in enumerate(tiers):
        variant = _variants(t, 1, random.Random(f"fresh:{seed}:{i}"))[0]
        tasks.append(make_task("fresh", seed, i, t, variant))
    return tasks


# -- prompt -------------------------------------------------------------------------------

CONVENTIONS = """Conventions (use exactly these):
- P = 12*L*h^2 + V*h (L=n_layers, h=hidden_size, V=vocab_size); GiB = 2^30 bytes.
- Model-state bytes per parameter (mixed precision, incl. fp32 master copy): adamw 16, adamw_8bit 10, adafactor 8, sgd_momentum 12.
  Split weights 2 + grads 2 + optimizer rest. ZeRO stage 1 shards the optimizer part, stage 2 also grads, stage 3 also weights, over d.
- d (data-parallel degree) = world_size / (tensor_parallel * pipeline_parallel). Tensor parallel t divides model states and activations by t.
- Activations per GPU = L*s*b*h*34 bytes, or L*s*b*h*2 with gradient_checkpointing; eager attention adds L*5*a*s^2*b.
- A config fits when model states per GPU + activations per GPU <= 0.9 * gpu_memory_gib GiB.
- global batch = micro_batch * grad_accum * d; steps per epoch = ceil(rows / global batch); with packing rows = ceil(samples*mean_seq_len/seq_len).
- Minimal fixes: ZeRO -> the smallest higher stage that fits; activations -> gradient_checkpointing=true if that fits, else the largest
  micro_batch dividing micro_batch*grad_accum that fits, with grad_accum keeping the global batch; optimizer -> the first that fits of
  adamw_8bit, adafactor, sgd_momentum; parallelism -> the smallest tensor_parallel in 2,4,8 dividing n_heads and world_size that fits,
  with grad_accum keeping the global batch; lr after a batch change -> reference_lr * sqrt(global batch / reference_global_batch),
  3 significant digits; schedule horizons are counted in optimizer steps; token budget -> max_steps = ceil(target_tokens / (global batch * seq_len))."""


def render_prompt(config, profile, log, required):
    codes = "\n".join(f"- {code} ({family}): {text}" for code, (family, text, _) in generic.CODES.items())
    if required:
        inter = "\n".join(f"- {name}: {sc.GLOSSARY[name][0]}" for name in required)
    else:
        inter = "- none for this task: answer \"intermediates\": {}"
    return (
        "A LLM training run is broken. Read the config, the profiler numbers and the raw log, then answer with ONE JSON "
        "object: {\"diagnosis\": [codes], \"intermediates\": {name: number}, \"fix\": {config_field: new_value}}. "
        "The fix holds only the config fields you change.\n\n"
        f"Diagnosis codes:\n{codes}\n\n{CONVENTIONS}\n\nRequired intermediates:\n{inter}\n\n"
        f"Config:\n{json.dumps(config, sort_keys=True)}\n\nProfiler:\n{json.dumps(profile, sort_keys=True)}\n\n"
        "Log:\n" + "\n".join(log) + "\n")


def parse_prompt(prompt):
    """(config, profile, log) back from a prompt: what a solver sees."""
    config = json.loads(prompt.split("\nConfig:\n", 1)[1].split("\n", 1)[0])
    profile = json.loads(prompt.split("\nProfiler:\n", 1)[1].split("\n", 1)[0])
    log = prompt.split("\nLog:\n", 1)[1]
    return config, profile, log
