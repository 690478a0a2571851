"""
Pretrain a small GPT for a fixed wall-clock budget and report val_bpb. Single device, single file.
This is the file the agent edits. Run: `uv run train.py` (or `bash autoresearch.sh`).

Runs on CUDA (Flash Attention 3 on Hopper, FlexAttention for sliding windows on other recent
GPUs, SDPA everywhere else), Apple MPS and CPU. The constants below are the knobs.
"""

import os
import sys

os.environ.setdefault("PYTORCH_ALLOC_CONF", "expandable_segments:True")
sys.dont_write_bytecode = True   # no __pycache__ for prepare.py in the research repo

import contextlib
import gc
import json
import math
import time
from dataclasses import asdict, dataclass

try:
    import resource   # peak RSS on CPU; not on Windows
except ImportError:
    resource = None
import torch
import torch._dynamo
import torch.nn as nn
import torch.nn.functional as F

import prepare
from prepare import MAX_SEQ_LEN, TIME_BUDGET, Tokenizer, evaluate_bpb, make_dataloader

# ---------------------------------------------------------------------------
# Hyperparameters (edit these directly; plain literals, read by tools with `ast`)
# ---------------------------------------------------------------------------

ASPECT_RATIO = 64           # model_dim = DEPTH * ASPECT_RATIO, rounded up to a multiple of HEAD_DIM
# >>> baseline (prepare.py --fit-baseline rewrites this block for the machine)
# tier: 80 GiB (written by prepare.py --fit-baseline; edit freely afterwards)
DEPTH = 8
DEVICE_BATCH_SIZE = 128
TOTAL_BATCH_SIZE = 524288   # 2**19 tokens per optimizer step
WINDOW_PATTERN = "SSSL"     # per layer: S = half-context sliding window, L = full; last layer always L
HEAD_DIM = 128
# <<< baseline

EMBEDDING_LR = 0.6          # AdamW, token and value embeddings
UNEMBEDDING_LR = 0.004      # AdamW, lm_head
MATRIX_LR = 0.04            # Muon, every matrix inside the blocks
SCALAR_LR = 0.5             # AdamW, residual and x0 scalars
WEIGHT_DECAY = 0.2          # Muon, cautious, decays linearly to 0 over the budget
ADAM_BETAS = (0.8, 0.95)
WARMUP_RATIO = 0.0          # fractions of the time budget
WARMDOWN_RATIO = 0.5
FINAL_LR_FRAC = 0.0

ATTENTION_BACKEND = "auto"  # "auto", "fa3", "flex", "sdpa"
DTYPE = "auto"              # "auto", "bfloat16", "float16", "float32"
COMPILE = "auto"            # "auto" (CUDA with Triton), True, False
GRAD_CHECKPOINTING = False  # recompute blocks in backward: less memory, ~30% more compute
SEED = 42
SAMPLE_TOKENS = 48          # generated after the eval, outside the budget
SAMPLE_PROMPTS = ["Once upon a time", "The capital of France is", "Ada is a"]

# ---------------------------------------------------------------------------
# Device, dtype and attention backend
# ---------------------------------------------------------------------------


def pick_device():
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def pick_dtype(device, requested=DTYPE):
    """bf16 where the device does it well, fp16 (with loss scaling) on older GPUs, fp32 on CPU."""
    if requested != "auto":
        return getattr(torch, requested)
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if device.type == "mps":
        with contextlib.suppress(Exception), torch.autocast("mps", dtype=torch.bfloat16):
            torch.ones(2, 2, device=device) @ torch.ones(2, 2, device=device)
            return torch.bfloat16
    return torch.float32


def triton_available():
    try:
        import triton  # noqa: F401
        return True
    except ImportError:
        return False


def pick_compile(device, requested=COMPILE):
    if requested != "auto":
        return bool(requested)
    # Triton (torch.compile's GPU backend) needs compute capability 7.0 or newer.
    return device.type == "cuda" and torch.cuda.get_device_capability(device) >= (7, 0) and triton_available()


def load_fa3():
    """Flash Attention 3: the pip build if installed, else the Hub kernel (needs network once)."""
    try:
        import flash_attn_interface
        return flash_attn_interface
    except ImportError:
        pass
    from kernels import get_kernel
    return get_kernel("varunneal/flash-attention-3").flash_attn_interface


def pick_attention(device, compiled, windows, seq_len, requested=ATTENTION_BACKEND):
    """Return (backend, fa3 module or None, reason)."""
    cap = torch.cuda.get_device_capability(device) if device.type == "cuda" else None
    if requested in ("auto", "fa3") and cap == (9, 0):
        try:
            return "fa3", load_fa3(), "Hopper GPU with Flash Attention 3"
        except Exception as e:
            if requested == "fa3":
                raise RuntimeError(f"ATTENTION_BACKEND='fa3' but Flash Attention 3 is unavailable ({e}); "
                                   "set ATTENTION_BACKEND='auto'")
            fa3_error = f"FA3 unavailable ({type(e).__name__}), "
    else:
        fa3_error = ""
    if requested == "fa3":
        raise RuntimeError("ATTENTION_BACKEND='fa3' needs a Hopper (sm_90) GPU; set ATTENTION_BACKEND='auto'")
    windowed = any(w < seq_len - 1 for w in windows)
    if requested == "flex" or (requested == "auto" and cap and cap >= (8, 0) and compiled and windowed):
        if not (device.type == "cuda" and compiled):
            raise RuntimeError("ATTENTION_BACKEND='flex' needs CUDA and torch.compile; set 'auto' or 'sdpa'")
        return "flex", None, fa3_error + "sliding windows via FlexAttention"
    return "sdpa", None, fa3_error + ("SDPA with a window mask" if windowed else "SDPA causal")


_mask_cache = {}


def window_mask(T, window, device):
    """Boolean (T, T) mask, True where query i may attend key j: 0 <= i - j <= window."""
    key = (T, window, str(device))
    if key not in _mask_cache:
        i = torch.arange(T, device=device)
        d = i[:, None] - i[None, :]
        _mask_cache[key] = (d >= 0) & (d <= window)
    return _mask_cache[key]


_block_masks = {}


def flex_block_mask(T, window, device):
    from torch.nn.attention.flex_attention import create_block_mask
    key = (T, window, str(device))
    if key not in _block_masks:
        def sliding(b, h, q, kv):
            return (q >= kv) & (q - kv <= window)
        _block_masks[key] = create_block_mask(sliding, None, None, T, T, device=device)
    return _block_masks[key]


def attention(q, k, v, window, backend, fa3=None):
    """Causal attention where query i sees keys i-window..i. q, k, v: (B, T, H, D)."""
    T = q.size(1)
    if backend == "fa3":
        y = fa3.flash_attn_func(q, k, v, causal=True, window_size=(window if window < T - 1 else -1, 0))
        return y[0] if isinstance(y, tuple) else y
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    if window >= T - 1:   # full causal: SDPA picks its flash kernel where it has one
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    elif backend == "flex":
        from torch.nn.attention.flex_attention import flex_attention
        y = flex_attention(q, k, v, block_mask=flex_block_mask(T, window, q.device))
    else:
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=window_mask(T, window, q.device))
    return y.transpose(1, 2)


# ---------------------------------------------------------------------------
# Model: GPT with RoPE, QK norm, sliding windows, gated value embeddings, ReLU^2 MLP,
# logit softcap, and learnable residual / x0 scalars
# ---------------------------------------------------------------------------


@dataclass
class GPTConfig:
    sequence_len: int
    vocab_size: int
    n_layer: int
    n_head: int
    n_embd: int
    window_pattern: str
    ve_gate_channels: int = 32
    softcap: float = 15.0


def norm(x):
    return F.rms_norm(x, (x.size(-1),))


def has_value_embedding(layer, n_layer):
    """Every other layer, always including the last."""
    return layer % 2 == (n_layer - 1) % 2


def rotary_tables(seq_len, head_dim, base=10000.0):
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv_freq)
    return angles.cos()[None, :, None, :], angles.sin()[None, :, None, :]


def apply_rotary(x, cos, sin):
    half = x.size(-1) // 2
    x1, x2 = x[..., :half], x[..., half:]
    cos, sin = cos[:, :x.size(1)].to(x.dtype), sin[:, :x.size(1)].to(x.dtype)
    return torch.cat([x1 * cos + x2 * sin, x2 * cos - x1 * sin], dim=-1)


class CausalSelfAttention(nn.Module):
    def __init__(self, config, layer):
        super().__init__()
        self.n_head = config.n_head
        self.head_dim = config.n_embd // config.n_head
        self.c_q = nn.Linear(config.n_embd, config.n_embd, bias=False)
        self.c_k = nn.Linear(config.n_embd, config.n_embd, bias=False)
        self.c_v = nn.Linear(config.n_embd, config.n_embd, bias=False)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=False)
        self.gate_channels = config.ve_gate_channels
        self.ve_gate = (nn.Linear(self.gate_channels, self.n_head, bias=False)
                        if has_value_embedding(layer, config.n_layer) else None)

    def forward(self, x, ve, rope, window, backend, fa3):
        B, T, C = x.shape
        q = self.c_q(x).view(B, T, self.n_head, self.head_dim)
        k = self.c_k(x).view(B, T, self.n_head, self.head_dim)
        v = self.c_v(x).view(B, T, self.n_head, self.head_dim)
        dtype = v.dtype   # the autocast dtype: attention kernels want q, k, v alike
        if ve is not None:  # value embedding mixed in through a per-head gate in (0, 2)
            gate = 2 * torch.sigmoid(self.ve_gate(x[..., :self.gate_channels]))
            v = v + gate.unsqueeze(-1) * ve.view(B, T, self.n_head, self.head_dim)
        q, k = norm(apply_rotary(q, *rope)), norm(apply_rotary(k, *rope))
        y = attention(q.to(dtype), k.to(dtype), v.to(dtype), window, backend, fa3)
        return self.c_proj(y.reshape(B, T, C))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=False)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=False)

    def forward(self, x):
        return self.c_proj(F.relu(self.c_fc(x)).square())


class Block(nn.Module):
    def __init__(self, config, layer):
        super().__init__()
        self.attn = CausalSelfAttention(config, layer)
        self.mlp = MLP(config)

    def forward(self, x, ve, rope, window, backend, fa3):
        x = x + self.attn(norm(x), ve, rope, window, backend, fa3)
        return x + self.mlp(norm(x))


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.blocks = nn.ModuleList([Block(config, i) for i in range(config.n_layer)])
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.value_embeds = nn.ModuleDict({str(i): nn.Embedding(config.vocab_size, config.n_embd)
                                           for i in range(config.n_layer) if has_value_embedding(i, config.n_layer)})
        self.resid_lambdas = nn.Parameter(torch.ones(config.n_layer))
        self.x0_lambdas = nn.Parameter(torch.zeros(config.n_layer))
        cos, sin = rotary_tables(config.sequence_len * 2, config.n_embd // config.n_head)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.windows = self.layer_windows(config)
        self.backend, self.fa3, self.checkpointing = "sdpa", None, False

    @staticmethod
    def layer_windows(config):
        """Left window per layer, in tokens: S = half the context, L = all of it; the last layer is L."""
        pattern = config.window_pattern.upper()
        if not pattern or set(pattern) - {"S", "L"}:
            raise ValueError(f"WINDOW_PATTERN={config.window_pattern!r}: use only the letters S and L")
        full, short = config.sequence_len, config.sequence_len // 2
        windows = [short if pattern[i % len(pattern)] == "S" else full for i in range(config.n_layer)]
        windows[-1] = full
        return windows

    @torch.no_grad()
    def init_weights(self):
        d = self.config.n_embd
        bound = 3 ** 0.5 * d ** -0.5   # uniform with std d^-0.5
        nn.init.normal_(self.wte.weight, std=1.0)
        nn.init.normal_(self.lm_head.weight, std=0.001)
        for block in self.blocks:
            for lin in (block.attn.c_q, block.attn.c_k, block.attn.c_v, block.mlp.c_fc):
                nn.init.uniform_(lin.weight, -bound, bound)
            nn.init.zeros_(block.attn.c_proj.weight)   # every block starts as the identity
            nn.init.zeros_(block.mlp.c_proj.weight)
            if block.attn.ve_gate is not None:
                nn.init.zeros_(block.attn.ve_gate.weight)
        for emb in self.value_embeds.values():
            nn.init.uniform_(emb.weight, -bound, bound)
        self.resid_lambdas.fill_(1.0)
        self.x0_lambdas.fill_(0.1)

    def forward(self, idx, targets=None, reduction="mean"):
        T = idx.size(1)
        rope = (self.rope_cos[:, :T], self.rope_sin[:, :T])
        x = norm(self.wte(idx))
        x0 = x
        for i, block in enumerate(self.blocks):
            x = self.resid_lambdas[i] * x + self.x0_lambdas[i] * x0
            ve = self.value_embeds[str(i)](idx) if str(i) in self.value_embeds else None
            args = (x, ve, rope, self.windows[i], self.backend, self.fa3)
            if self.checkpointing and self.training:
                x = torch.utils.checkpoint.checkpoint(block, *args, use_reentrant=False)
            else:
                x = block(*args)
        logits = self.lm_head(norm(x)).float()
        logits = self.config.softcap * torch.tanh(logits / self.config.softcap)
        if targets is None:
            return logits
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1),
                               ignore_index=-1, reduction=reduction)

    def flops_per_token(self):
        """6 x matmul parameters (forward + backward) plus attention, PaLM's convention."""
        embed = self.wte.weight.numel() + sum(e.weight.numel() for e in self.value_embeds.values())
        scalars = self.resid_lambdas.numel() + self.x0_lambdas.numel()
        matmul = sum(p.numel() for p in self.parameters()) - embed - scalars
        T = self.config.sequence_len
        attn = sum(12 * self.config.n_embd * min(w + 1, T) for w in self.windows)
        return 6 * matmul + attn

    def param_groups(self):
        """AdamW for embeddings, head and scalars (lr scaled by 1/sqrt(d/768)); Muon for block matrices."""
        scale = (self.config.n_embd / 768) ** -0.5
        adamw = [
            dict(params=[self.lm_head.weight], lr=UNEMBEDDING_LR * scale),
            dict(params=[self.wte.weight], lr=EMBEDDING_LR * scale),
            dict(params=list(self.value_embeds.parameters()), lr=EMBEDDING_LR * scale),
            dict(params=[self.resid_lambdas], lr=SCALAR_LR * 0.01),
            dict(params=[self.x0_lambdas], lr=SCALAR_LR, betas=(0.96, 0.95)),
        ]
        by_shape = {}
        for p in self.blocks.parameters():
            by_shape.setdefault(tuple(p.shape), []).append(p)
        muon = [dict(params=ps, lr=MATRIX_LR, kind="muon") for _, ps in sorted(by_shape.items())]
        return [dict(g, kind="adamw") for g in adamw if g["params"]] + muon


# ---------------------------------------------------------------------------
# Optimizer: Muon (orthogonalised momentum) for matrices, AdamW for the rest
# ---------------------------------------------------------------------------

# Polar Express coefficients (Amsel et al. 2025, arXiv:2505.16932): five odd-polynomial steps that
# drive every singular value of a normalised matrix towards 1.
POLAR_EXPRESS = [
    (8.156554524902461, -22.48329292557795, 15.878769915207462),
    (4.042929935166739, -2.808917465908714, 0.5000178451051316),
    (3.8916678022926607, -2.772484153217685, 0.5060648178503393),
    (3.285753657755655, -2.3681294933425376, 0.46449024233003106),
    (2.3465413258596377, -1.7097828382687081, 0.42323551169305323),
]


def orthogonalize(G):
    """Approximate the orthogonal polar factor U V^T of each matrix in a (..., m, n) stack."""
    X = G.bfloat16() if G.is_cuda else G.float()
    tall = X.size(-2) > X.size(-1)
    if tall:
        X = X.mT
    X = X / (X.norm(dim=(-2, -1), keepdim=True) * 1.02 + 1e-6)
    for a, b, c in POLAR_EXPRESS:
        A = X @ X.mT
        X = a * X + (b * A + c * (A @ A)) @ X
    return (X.mT if tall else X).to(G.dtype)


class MuonAdamW(torch.optim.Optimizer):
    def __init__(self, groups):
        defaults = dict(lr=0.0, betas=ADAM_BETAS, eps=1e-10, weight_decay=0.0, momentum=0.95, beta2=0.95)
        super().__init__(groups, defaults)
        for g in self.param_groups:
            g["initial_lr"] = g["lr"]

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            if group["kind"] == "muon":
                self._muon(group)
            else:
                self._adamw(group)

    def _adamw(self, group):
        beta1, beta2 = group["betas"]
        for p in group["params"]:
            if p.grad is None:
                continue
            st = self.state[p]
            if not st:
                st["t"], st["m"], st["v"] = 0, torch.zeros_like(p), torch.zeros_like(p)
            st["t"] += 1
            st["m"].lerp_(p.grad, 1 - beta1)
            st["v"].lerp_(p.grad.square(), 1 - beta2)
            denom = (st["v"] / (1 - beta2 ** st["t"])).sqrt_().add_(group["eps"])
            p.mul_(1 - group["lr"] * group["weight_decay"])
            p.addcdiv_(st["m"], denom, value=-group["lr"] / (1 - beta1 ** st["t"]))

    def _muon(self, group):
        params = [p for p in group["params"] if p.grad is not None]
        if not params:
            return
        st = self.state[params[0]]
        grads = torch.stack([p.grad for p in params])
        if "momentum" not in st:
            st["momentum"] = torch.zeros_like(grads)
            st["second"] = torch.zeros(grads.shape[:-1] + (1,), device=grads.device, dtype=torch.float32)
        m = group["momentum"]
        st["momentum"].lerp_(grads, 1 - m)
        update = orthogonalize(grads.lerp(st["momentum"], m)).float()   # Nesterov momentum
        # NorMuon: equalise the update's per-neuron (row) scale, keep its overall norm.
        st["second"].lerp_(update.square().mean(-1, keepdim=True), 1 - group["beta2"])
        before = update.norm(dim=(-2, -1), keepdim=True)
        update = update / (st["second"].sqrt() + 1e-10)
        update = update * (before / (update.norm(dim=(-2, -1), keepdim=True) + 1e-10))
        rows, cols = grads.shape[-2:]
        lr = group["lr"] * max(1.0, rows / cols) ** 0.5
        stacked = torch.stack(params).float()
        # Cautious weight decay: only where the update pushes the weight towards zero anyway.
        decay = (update * stacked > 0).float() * stacked
        stacked.sub_(group["lr"] * group["weight_decay"] * decay).sub_(lr * update)
        torch._foreach_copy_(params, list(stacked.to(params[0].dtype).unbind(0)))


def lr_multiplier(progress):
    if progress < WARMUP_RATIO:
        return progress / WARMUP_RATIO
    if progress < 1.0 - WARMDOWN_RATIO:
        return 1.0
    cooldown = (1.0 - progress) / WARMDOWN_RATIO
    return cooldown + (1.0 - cooldown) * FINAL_LR_FRAC


def muon_momentum(step):
    frac = min(step / 300, 1.0)
    return (1 - frac) * 0.85 + frac * 0.95


# ---------------------------------------------------------------------------
# Telemetry: memory, GPU power and energy (NVML when available)
# ---------------------------------------------------------------------------


class Telemetry:
    def __init__(self, device):
        self.device, self.nvml, self.energy0, self.mps_peak = device, None, None, 0.0
        if device.type == "cuda":
            with contextlib.suppress(Exception):
                import pynvml
                pynvml.nvmlInit()
                self.nvml = pynvml
                self.handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
                with contextlib.suppress(Exception):
                    self.energy0 = pynvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)

    def peak_mb(self):
        if self.device.type == "cuda":
            return torch.cuda.max_memory_allocated() / 2**20
        if self.device.type == "mps":
            self.mps_peak = max(self.mps_peak, torch.mps.driver_allocated_memory() / 2**20)
            return self.mps_peak
        if resource is None:
            return 0.0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return rss / 2**20 if sys.platform == "darwin" else rss / 1024   # bytes on macOS, KiB on Linux

    def power(self):
        out = {}
        if self.nvml:
            with contextlib.suppress(Exception):
                out["power_w"] = self.nvml.nvmlDeviceGetPowerUsage(self.handle) / 1000
            if self.energy0 is not None:
                with contextlib.suppress(Exception):
                    out["energy_j"] = (self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle) - self.energy0) / 1000
        return out


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()
    elif device.type == "mps":
        torch.mps.synchronize()


# ---------------------------------------------------------------------------
# Sampling (after the eval, outside the budget)
# ---------------------------------------------------------------------------


@torch.no_grad()
def generate(model, tokenizer, prompt, n_tokens, temperature=0.8, seed=SEED):
    gen = torch.Generator().manual_seed(seed)
    device = next(model.parameters()).device
    ids = tokenizer.encode(prompt, prepend=tokenizer.get_bos_token_id())
    for _ in range(n_tokens):
        context = torch.tensor([ids[-MAX_SEQ_LEN:]], device=device)
        logits = model(context)[0, -1].float().cpu()
        probs = torch.softmax(logits / temperature, dim=-1)
        ids.append(int(torch.multinomial(probs, 1, generator=gen)))
    return tokenizer.decode(ids[1:])


# ---------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------


def main():
    t_start = time.time()
    torch.manual_seed(SEED)
    device = pick_device()
    dtype = pick_dtype(device)
    autocast = (torch.autocast(device.type, dtype=dtype) if dtype != torch.float32 else contextlib.nullcontext())
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    compiled = pick_compile(device)

    tokenizer = Tokenizer.from_directory()
    model_dim = -(-DEPTH * ASPECT_RATIO // HEAD_DIM) * HEAD_DIM
    config = GPTConfig(sequence_len=MAX_SEQ_LEN, vocab_size=tokenizer.get_vocab_size(), n_layer=DEPTH,
                       n_head=model_dim // HEAD_DIM, n_embd=model_dim, window_pattern=WINDOW_PATTERN)
    with torch.device("meta"):
        model = GPT(config)
    model = model.to_empty(device=device)
    model.rope_cos, model.rope_sin = (t.to(device) for t in rotary_tables(config.sequence_len * 2, HEAD_DIM))
    model.init_weights()
    model.backend, model.fa3, reason = pick_attention(device, compiled, model.windows, MAX_SEQ_LEN)
    model.checkpointing = GRAD_CHECKPOINTING
    num_params = sum(p.numel() for p in model.parameters())
    flops_per_token = model.flops_per_token()
    kind, name, _ = prepare.accelerator()
    peak = prepare.peak_flops(name, dtype)

    tokens_per_fwdbwd = DEVICE_BATCH_SIZE * MAX_SEQ_LEN
    if TOTAL_BATCH_SIZE % tokens_per_fwdbwd:
        sys.exit(f"FAIL: TOTAL_BATCH_SIZE={TOTAL_BATCH_SIZE} is not a multiple of DEVICE_BATCH_SIZE*MAX_SEQ_LEN="
                 f"{tokens_per_fwdbwd}; change one of them")
    grad_accum = TOTAL_BATCH_SIZE // tokens_per_fwdbwd
    optimizer = MuonAdamW(model.param_groups())
    scaler = torch.amp.GradScaler(device.type) if dtype == torch.float16 else None
    if compiled:
        if COMPILE == "auto":   # a compiler failure falls back to eager instead of crashing the run
            torch._dynamo.config.suppress_errors = True
        if model.backend == "flex":   # build the block masks outside the compiled graph
            for w in set(model.windows):
                if w < MAX_SEQ_LEN - 1:
                    flex_block_mask(MAX_SEQ_LEN, w, device)
    train_model = torch.compile(model, dynamic=False) if compiled else model

    print(f"Device: {kind} {name} | dtype: {str(dtype).replace('torch.', '')} | attention: {model.backend} "
          f"({reason}) | compile: {compiled}")
    print(f"Model: {num_params / 1e6:.1f}M params, depth {DEPTH}, width {model_dim}, windows {model.windows}")
    print(f"Batch: {TOTAL_BATCH_SIZE:,} tokens/step = {DEVICE_BATCH_SIZE} x {MAX_SEQ_LEN} x {grad_accum} accum | "
          f"budget {TIME_BUDGET}s | profile {prepare.PROFILE} | fingerprint {prepare.settings_fingerprint()}")
    if (prepare.MANIFEST or {}).get("synthetic"):
        print("Data: SYNTHETIC (demo/tests); val_bpb is not comparable to real text")

    run_dir = os.environ.get("AUTORESEARCH_RUN_DIR")
    steps_path = os.environ.get("AUTORESEARCH_STEPS_FILE")
    steps_file = open(steps_path, "a") if steps_path else None
    telemetry = Telemetry(device)
    loader = make_dataloader(tokenizer, DEVICE_BATCH_SIZE, MAX_SEQ_LEN, "train", device=device)
    x, y, epoch = next(loader)

    clock = prepare.budget_clock()    # wall-clock seconds (CPU seconds under the smoke profile)
    excluded = 10                     # warm-up steps (compilation, allocator) are not timed
    smooth_loss, training_time, timed_tokens, step = 0.0, 0.0, 0, 0
    tty = sys.stdout.isatty()
    last_print = -1.0
    while True:
        sync(device)
        t0, c0 = time.time(), clock()
        for _ in range(grad_accum):
            with autocast:
                loss = train_model(x, y)
            (scaler.scale(loss / grad_accum) if scaler else loss / grad_accum).backward()
            x, y, epoch = next(loader)
        progress = min(training_time / TIME_BUDGET, 1.0)
        lrm = lr_multiplier(progress)
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"] * lrm
            if group["kind"] == "muon":
                group["momentum"] = muon_momentum(step)
                group["weight_decay"] = WEIGHT_DECAY * (1 - progress)
        if scaler:
            scaler.unscale_(optimizer)
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        grad_norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads))).item()
        if scaler:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        model.zero_grad(set_to_none=True)
        loss_f = loss.item()
        if not math.isfinite(loss_f) or loss_f > 100:
            print(f"\nFAIL: training loss is {loss_f} at step {step}; the run diverged")
            sys.exit(1)
        sync(device)
        dt = time.time() - t0
        if step >= excluded:
            training_time += clock() - c0
            timed_tokens += TOTAL_BATCH_SIZE
        smooth_loss = 0.9 * smooth_loss + 0.1 * loss_f
        loss_shown = smooth_loss / (1 - 0.9 ** (step + 1))   # bias-corrected EMA
        tok_per_s = TOTAL_BATCH_SIZE / dt
        mfu = 100 * flops_per_token * tok_per_s / peak if peak else None
        mem = telemetry.peak_mb()
        if steps_file:
            record = {"step": step, "progress": round(progress, 5), "elapsed_s": round(training_time, 3),
                      "loss": round(loss_shown, 6), "lr_mult": round(lrm, 5), "grad_norm": round(grad_norm, 5),
                      "tok_per_s": round(tok_per_s, 1), "mfu": None if mfu is None else round(mfu, 3),
                      "mem_mb": round(mem, 1), **telemetry.power()}
            steps_file.write(json.dumps(record) + "\n")
            steps_file.flush()
        line = (f"step {step:05d} ({100 * progress:.1f}%) | loss: {loss_shown:.6f} | lrm: {lrm:.2f} | "
                f"dt: {dt * 1000:.0f}ms | tok/sec: {tok_per_s:,.0f} | mfu: {mfu or 0:.1f}% | epoch: {epoch} | "
                f"remaining: {max(0, TIME_BUDGET - training_time):.0f}s")
        if tty:
            print("\r" + line + "    ", end="", flush=True)
        elif progress - last_print >= 0.05 or step < 3:   # logs: one line per 5% of the budget
            print(line, flush=True)
            last_print = progress
        if step == 0:   # Python's GC causes long stalls; nothing cyclic is created after this
            gc.collect()
            gc.freeze()
            gc.disable()
        step += 1
        if step > excluded and training_time >= TIME_BUDGET:
            break
    if tty:
        print()
    if steps_file:
        steps_file.close()

    # Evaluation: the fixed metric (with its causality probe), then a sample, both outside the budget.
    model.eval()
    model.checkpointing = False
    with autocast:
        val_bpb = evaluate_bpb(train_model, tokenizer, DEVICE_BATCH_SIZE)
    if not math.isfinite(val_bpb):
        print(f"FAIL: val_bpb is {val_bpb}")
        sys.exit(1)
    backend = model.backend
    model.backend = "sdpa" if backend == "flex" else backend   # any length, no recompilation
    with autocast:
        samples = [generate(model, tokenizer, p, SAMPLE_TOKENS) for p in SAMPLE_PROMPTS]
    model.backend = backend
    sample_text = "\n\n".join(f"[{i}] {s}" for i, s in enumerate(samples))
    print("Sample (after training, outside the budget):\n" + sample_text)

    t_end = time.time()
    mfu_percent = 100 * flops_per_token * timed_tokens / training_time / peak if peak and training_time else 0.0
    summary = {
        "val_bpb": val_bpb, "training_seconds": training_time, "total_seconds": t_end - t_start,
        "peak_vram_mb": telemetry.peak_mb(), "mfu_percent": mfu_percent, "total_tokens_M": step * TOTAL_BATCH_SIZE / 1e6,
        "num_steps": step, "num_params_M": num_params / 1e6, "depth": DEPTH,
    }
    print("---")
    print(f"val_bpb:          {summary['val_bpb']:.6f}")
    print(f"training_seconds: {summary['training_seconds']:.1f}")
    print(f"total_seconds:    {summary['total_seconds']:.1f}")
    print(f"peak_vram_mb:     {summary['peak_vram_mb']:.1f}")
    print(f"mfu_percent:      {summary['mfu_percent']:.2f}")
    print(f"total_tokens_M:   {summary['total_tokens_M']:.1f}")
    print(f"num_steps:        {summary['num_steps']}")
    print(f"num_params_M:     {summary['num_params_M']:.1f}")
    print(f"depth:            {summary['depth']}")
    print(f"profile:          {prepare.PROFILE}")
    print(f"overrides:        {','.join(f'{k}={v}' for k, v in prepare.OVERRIDES.items()) or 'none'}")
    print(f"fingerprint:      {prepare.PROFILE}-{prepare.settings_fingerprint()}")
    if run_dir:
        info = {"device": f"{kind} {name}", "dtype": str(dtype).replace("torch.", ""), "attention": model.backend,
                "compile": compiled, "mfu_peak_known": bool(peak), "config": asdict(config)}
        summary.update(settings=prepare.settings(), fingerprint=prepare.settings_fingerprint(), run=info)
        with open(os.path.join(run_dir, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1)
        with open(os.path.join(run_dir, "sample.txt"), "w") as f:
            f.write(sample_text + "\n")


if __name__ == "__main__":
    try:
        main()
    except (prepare.PrepareError, prepare.CausalityError) as e:
        print(f"FAIL: {e}")
        sys.exit(1)
