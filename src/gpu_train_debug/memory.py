"""Memory model of the autoresearch `train.py` (a nanochat-style GPT), from its constants.

The architecture follows karpathy/autoresearch: model_dim = DEPTH * ASPECT_RATIO rounded up
to a multiple of HEAD_DIM; per layer 4*d^2 attention + 8*d^2 MLP weights; token embedding
and untied head V*d each; value embeddings (V*d) on every other layer. For the defaults
(DEPTH 8, V 8192) this gives 50.3 M parameters, as train.py reports.

Peak training memory = model states (16 B/param: fp32 weights, grads and two optimizer
buffers) + per-sample activations * DEVICE_BATCH_SIZE. Activations per sample are the
Korthikanti fused-attention figure 34*s*h*L plus one fp32 logits tensor 4*s*V; with the
defaults (b=128, s=2048) this estimates 43,776 MiB against the 45,060 MiB karpathy's H100
run measured (peak_vram_mb), 2.8% under; USABLE_FRACTION's headroom covers the gap.
"""

import math

from gpu_train_debug import accounting as acc

DEFAULTS = {
    "DEPTH": 8, "ASPECT_RATIO": 64, "HEAD_DIM": 128, "TOTAL_BATCH_SIZE": 2 ** 19,
    "DEVICE_BATCH_SIZE": 128, "MAX_SEQ_LEN": 2048, "VOCAB_SIZE": 8192, "TIME_BUDGET": 300,
}
STATE_BYTES_PER_PARAM = 16
# Leave room for the CUDA context, allocator fragmentation and kernels' workspaces.
USABLE_FRACTION = 0.92


# Sane ranges: anything outside (a typo, 10**100, a string) falls back to the default.
LIMIT = 2 ** 40


def valid_number(value):
    return (not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
            and 0 < value <= LIMIT)


def _int(config, name):
    value = config.get(name, DEFAULTS.get(name))
    if not valid_number(value) or int(value) < 1:
        value = DEFAULTS[name]
    return int(value)


def shape(config):
    """Derived architecture numbers from the constants (defaults fill what is missing)."""
    depth, head_dim = _int(config, "DEPTH"), _int(config, "HEAD_DIM")
    dim = math.ceil(depth * _int(config, "ASPECT_RATIO") / head_dim) * head_dim
    vocab, seq = _int(config, "VOCAB_SIZE"), _int(config, "MAX_SEQ_LEN")
    params = depth * 12 * dim * dim + 2 * vocab * dim + ((depth + 1) // 2) * vocab * dim
    return {"depth": depth, "model_dim": dim, "n_head": dim // head_dim, "vocab": vocab,
            "seq_len": seq, "num_params": params}


def per_sample_activation_bytes(config, checkpointing=None):
    s = shape(config)
    if checkpointing is None:
        checkpointing = config.get("GRAD_CHECKPOINTING") is True
    layers = acc.activation_bytes(s["seq_len"], 1, s["model_dim"], s["depth"], checkpointing)
    return layers + acc.logits_bytes(s["seq_len"], 1, s["vocab"])


def fixed_bytes(config):
    return shape(config)["num_params"] * STATE_BYTES_PER_PARAM


def peak_bytes(config, device_batch=None, checkpointing=None):
    b = device_batch if device_batch is not None else _int(config, "DEVICE_BATCH_SIZE")
    return fixed_bytes(config) + b * per_sample_activation_bytes(config, checkpointing)


def valid_device_batches(config):
    """Device batch sizes for which TOTAL_BATCH_SIZE % (b * MAX_SEQ_LEN) == 0, largest first.

    train.py asserts this divisibility; the gradient accumulation steps are the quotient,
    so any of these keeps the total batch (and so the optimisation) unchanged.
    """
    total, seq = _int(config, "TOTAL_BATCH_SIZE"), _int(config, "MAX_SEQ_LEN")
    if total % seq:
        return []
    return acc.divisors_at_most(total // seq, total // seq)


def intermediates(config):
    s = shape(config)
    b, total = _int(config, "DEVICE_BATCH_SIZE"), _int(config, "TOTAL_BATCH_SIZE")
    tokens_fwdbwd = b * s["seq_len"]
    out = {
        "num_params": s["num_params"],
        "model_dim": s["model_dim"],
        "bytes_per_param": STATE_BYTES_PER_PARAM,
        "fixed_memory_mb": round(fixed_bytes(config) / acc.MIB, 1),
        "activation_mb_per_sample": round(per_sample_activation_bytes(config) / acc.MIB, 1),
        "estimated_peak_mb": round(peak_bytes(config) / acc.MIB, 1),
        "tokens_per_fwdbwd": tokens_fwdbwd,
        "tokens_per_step": total,
    }
    if total % tokens_fwdbwd == 0:
        out["grad_accum_steps"] = total // tokens_fwdbwd
    return out
