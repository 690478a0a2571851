"""The standard memory, batch and token formulas. Sources: references/memory-formulas.md.

Bytes are plain integers or floats; GiB = 2**30 bytes (what PyTorch's OOM message prints).
"""

import math

GIB = 2 ** 30
MIB = 2 ** 20

# Bytes per parameter for weights + gradients + optimizer states, mixed precision
# (16-bit weights and grads, fp32 master copy inside the optimizer states).
# ZeRO paper (arXiv:1910.02054) K=12 for Adam; Transformer Math 101 for the others.
BYTES_PER_PARAM = {
    "adamw": 16, "adam": 16,
    "adamw_8bit": 10,
    "adafactor": 8,
    "sgd_momentum": 12, "lion": 12,
    "sgd": 8,
}
# The split (weights, grads, optimizer incl. master) used by the ZeRO stage formulas.
BYTES_SPLIT = {
    "adamw": (2, 2, 12), "adam": (2, 2, 12), "adamw_8bit": (2, 2, 6), "adafactor": (2, 2, 4),
    "sgd_momentum": (2, 2, 8), "lion": (2, 2, 8), "sgd": (2, 2, 4),
}
# Cheapest drop-in first after AdamW (research notes, A3).
OPTIMIZER_FALLBACKS = ["adamw_8bit", "adafactor", "sgd_momentum"]


def gpt_params(n_layers, hidden, vocab):
    """P = 12*L*h^2 + V*h (Narayanan et al. 2021, section 5.1), biases and norms ignored."""
    return 12 * n_layers * hidden * hidden + vocab * hidden


def model_state_bytes(params, optimizer):
    return params * BYTES_PER_PARAM[optimizer]


def zero_state_bytes_per_gpu(params, optimizer, stage, dp):
    """Per-GPU model states under ZeRO stage 0..3 (ZeRO paper Fig. 1; Transformer Math 101)."""
    w, g, o = BYTES_SPLIT[optimizer]
    if stage <= 0:
        return params * (w + g + o)
    if stage == 1:
        return params * (w + g) + params * o / dp
    if stage == 2:
        return params * w + params * (g + o) / dp
    return params * (w + g + o) / dp


def activation_bytes(seq, micro_batch, hidden, n_layers, checkpointing=False, tp=1):
    """Activations of all layers for one micro-batch, 16-bit, fused attention.

    Korthikanti et al. 2022 (arXiv:2205.05198): 34*s*b*h per layer with the attention core
    recomputed/fused (flash or SDPA); 2*s*b*h per layer with full recompute (only the layer
    input is kept). Tensor parallelism with sequence parallelism divides both by t.
    """
    per_layer = (2 if checkpointing else 34) * seq * micro_batch * hidden
    return n_layers * per_layer / tp


def attention_score_bytes(seq, micro_batch, n_heads):
    """Eager attention materialises an a*s*s score matrix per sample in 16 bits: 2*a*s^2*b."""
    return 2 * n_heads * seq * seq * micro_batch


def logits_bytes(seq, micro_batch, vocab):
    """fp32 logits for the loss: 4*s*b*V (Korthikanti et al., section 4.3)."""
    return 4 * seq * micro_batch * vocab


def global_batch(micro_batch, grad_accum, dp):
    return micro_batch * grad_accum * dp


def steps_per_epoch(samples, global_batch_size):
    return math.ceil(samples / global_batch_size)


def packed_sequences(samples, mean_len, seq):
    """Concatenate-and-chunk packing: ceil(sum of lengths / s) rows."""
    return math.ceil(samples * mean_len / seq)


def divisors_at_most(n, limit):
    """Divisors of n that are <= limit, largest first."""
    return [d for d in range(min(n, limit), 0, -1) if n % d == 0]


def gib(nbytes, digits=2):
    return round(nbytes / GIB, digits)
