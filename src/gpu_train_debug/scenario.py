"""Quantities of a generic training config (the task environment's schema).

Config fields: n_layers, hidden_size, n_heads, vocab_size, seq_len, micro_batch, grad_accum,
world_size, optimizer, precision, gradient_checkpointing, attn_implementation, gpu_memory_gib,
and, depending on the task: zero_stage; tensor_parallel, pipeline_parallel; dataset_samples,
mean_seq_len, packing, epochs, lr_schedule_steps, time_limit_h; target_global_batch;
target_tokens, max_steps; lr, reference_lr, reference_global_batch.

The conventions (stated in every prompt, sources in references/memory-formulas.md):
- P = 12*L*h^2 + V*h
- model-state bytes per parameter: accounting.BYTES_PER_PARAM (mixed precision)
- ZeRO stage s shards optimizer states (1), + gradients (2), + weights (3) over the data-
  parallel degree d = world_size / (tensor_parallel * pipeline_parallel)
- activations per GPU: L*s*b*h*34 bytes, or L*s*b*h*2 with gradient checkpointing; eager
  attention adds L*5*a*s^2*b; tensor parallelism divides activations by t
- per-GPU memory = model states per GPU + activations per GPU; it fits when it is at most
  USABLE * gpu_memory_gib GiB
"""

import math

from gpu_train_debug import accounting as acc

USABLE = 0.9


def params(c):
    return acc.gpt_params(c["n_layers"], c["hidden_size"], c["vocab_size"])


def tp(c):
    return int(c.get("tensor_parallel", 1)) * int(c.get("pipeline_parallel", 1))


def dp(c):
    return max(1, int(c.get("world_size", 1)) // tp(c))


def bytes_per_param(c):
    return acc.BYTES_PER_PARAM[c.get("optimizer", "adamw")]


def state_bytes_per_gpu(c):
    p = params(c)
    if "zero_stage" in c:
        return acc.zero_state_bytes_per_gpu(p, c.get("optimizer", "adamw"), int(c["zero_stage"]), dp(c))
    return p * bytes_per_param(c) / tp(c)


def attention_score_bytes(c):
    if c.get("attn_implementation") != "eager":
        return 0
    return c["n_layers"] * 5 * c["n_heads"] * c["seq_len"] ** 2 * c["micro_batch"]


def activation_bytes_per_gpu(c):
    t = int(c.get("tensor_parallel", 1))
    layers = acc.activation_bytes(c["seq_len"], c["micro_batch"], c["hidden_size"], c["n_layers"],
                                  bool(c.get("gradient_checkpointing")), t)
    return layers + attention_score_bytes(c) / t


def per_gpu_bytes(c):
    return state_bytes_per_gpu(c) + activation_bytes_per_gpu(c)


def fits(c):
    return per_gpu_bytes(c) <= USABLE * c["gpu_memory_gib"] * acc.GIB


def global_batch(c):
    return c["micro_batch"] * c["grad_accum"] * dp(c)


def rows_per_epoch(c, packing=None):
    packing = c.get("packing") if packing is None else packing
    if packing:
        return acc.packed_sequences(c["dataset_samples"], c["mean_seq_len"], c["seq_len"])
    return c["dataset_samples"]


def steps_per_epoch(c, packing=None):
    return acc.steps_per_epoch(rows_per_epoch(c, packing), global_batch(c))


def total_steps(c, packing=None):
    if "max_steps" in c:
        return c["max_steps"]
    return c["epochs"] * steps_per_epoch(c, packing)


def gib3(nbytes):
    return round(nbytes / acc.GIB, 3)


# Every intermediate a task may ask for: name -> (definition shown in the prompt, function).
GLOSSARY = {
    "num_params": ("P = 12*L*h^2 + V*h (integer)", params),
    "bytes_per_param": ("model-state bytes per parameter of the configured optimizer", bytes_per_param),
    "fixed_memory_gib": ("P * bytes_per_param / 2^30, total model states before any sharding",
                         lambda c: gib3(params(c) * bytes_per_param(c))),
    "per_gpu_memory_gib": ("model states per GPU + activations per GPU of the current config, GiB",
                           lambda c: gib3(per_gpu_bytes(c))),
    "activation_memory_gib": ("activations per GPU of the current config, GiB",
                              lambda c: gib3(activation_bytes_per_gpu(c))),
    "attention_scores_gib": ("the eager attention-score term L*5*a*s^2*b, GiB",
                             lambda c: gib3(attention_score_bytes(c))),
    "global_batch": ("micro_batch * grad_accum * data-parallel degree, sequences (current config)",
                     global_batch),
    "tokens_per_step": ("target global batch * seq_len", lambda c: c["target_global_batch"] * c["seq_len"]),
    "steps_per_epoch": ("ceil(rows per epoch / global_batch) for the current config", steps_per_epoch),
    "steps_per_epoch_packed": ("ceil(ceil(dataset_samples*mean_seq_len/seq_len) / global_batch)",
                               lambda c: steps_per_epoch(c, packing=True)),
    "total_steps": ("optimizer steps of the whole run: epochs * steps_per_epoch (or max_steps)", total_steps),
    "total_tokens": ("total_steps * global_batch * seq_len, token slots processed by the run",
                     lambda c: total_steps(c) * global_batch(c) * c["seq_len"]),
    "real_tokens": ("epochs * dataset_samples * mean_seq_len, non-padding tokens trained on",
                    lambda c: c["epochs"] * c["dataset_samples"] * c["mean_seq_len"]),
    "padding_fraction": ("1 - mean_seq_len / seq_len", lambda c: round(1 - c["mean_seq_len"] / c["seq_len"], 4)),
    "lr_scale": ("sqrt(global_batch / reference_global_batch), Adam square-root scaling",
                 lambda c: round(math.sqrt(global_batch(c) / c["reference_global_batch"]), 4)),
}


def intermediate(name, c):
    return GLOSSARY[name][1](c)


def all_intermediates(c):
    """Every glossary value computable from this config (missing fields are skipped)."""
    out = {}
    for name, (_, fn) in GLOSSARY.items():
        try:
            out[name] = fn(c)
        except (KeyError, TypeError, ZeroDivisionError, ValueError):
            continue
    return out
