"""
Pretrain a small GPT for a fixed wall-clock budget. Single device, single file.
This is the file the agent edits: the model, the optimizer, the schedule and the training loop.
Run: `bash autoresearch.sh` (the engine does). The fixed harness (harness.py, prepare.py) owns the
machine (device, dtype, compile, attention kernels), the data, the run's files and the metric:
after this file exits, a process of the harness rebuilds `GPT(GPTConfig(**config))` from the
weights `recorder.finish` leaves, calls it on inputs only and computes val_bpb itself.

Importing this file must run nothing but definitions (the harness checks with `ast`): constants,
imports, functions and classes at the top level; everything else inside main().
"""

import math
import time
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

import harness
from harness import attention
from prepare import MAX_SEQ_LEN, TIME_BUDGET, Tokenizer, budget_clock

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

SEED = 42

# ---------------------------------------------------------------------------
# Machine knobs (how to run, not what to learn; the harness reads them in setup)
# ---------------------------------------------------------------------------

ATTENTION_BACKEND = "auto"  # "auto", "fa3", "flex", "sdpa"
DTYPE = "auto"              # "auto", "bfloat16", "float16", "float32"
COMPILE = "auto"            # "auto" (CUDA with Triton), True, False
GRAD_CHECKPOINTING = False  # recompute blocks in backward: less memory, ~30% more compute


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

    def forward(self, x, ve, rope, window):
        B, T, C = x.shape
        q = self.c_q(x).view(B, T, self.n_head, self.head_dim)
        k = self.c_k(x).view(B, T, self.n_head, self.head_dim)
        v = self.c_v(x).view(B, T, self.n_head, self.head_dim)
        dtype = v.dtype   # the autocast dtype: attention kernels want q, k, v alike
        if ve is not None:  # value embedding mixed in through a per-head gate in (0, 2)
            gate = 2 * torch.sigmoid(self.ve_gate(x[..., :self.gate_channels]))
            v = v + gate.unsqueeze(-1) * ve.view(B, T, self.n_head, self.head_dim)
        q, k = norm(apply_rotary(q, *rope)), norm(apply_rotary(k, *rope))
        y = attention(q.to(dtype), k.to(dtype), v.to(dtype), window)
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

    def forward(self, x, ve, rope, window):
        x = x + self.attn(norm(x), ve, rope, window)
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
        self.checkpointing = False

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
        """Logits (B, T, vocab) for idx (B, T); with targets, the training loss instead."""
        T = idx.size(1)
        rope = (self.rope_cos[:, :T], self.rope_sin[:, :T])
        x = norm(self.wte(idx))
        x0 = x
        for i, block in enumerate(self.blocks):
            x = self.resid_lambdas[i] * x + self.x0_lambdas[i] * x0
            ve = self.value_embeds[str(i)](idx) if str(i) in self.value_embeds else None
            args = (x, ve, rope, self.windows[i])
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


def orthogonalize(X, tall):
    """Approximate the orthogonal polar factor U V^T of each matrix in a (..., m, n) stack, normalised."""
    X = X / (X.norm(dim=(-2, -1), keepdim=True) * 1.02 + 1e-6)
    for a, b, c in POLAR_EXPRESS:
        if tall:   # work with the smaller Gram matrix
            A = X.mT @ X
            X = a * X + X @ (b * A + c * (A @ A))
        else:
            A = X @ X.mT
            X = a * X + (b * A + c * (A @ A)) @ X
    return X


def adamw_step(p, grad, exp_avg, exp_avg_sq, step, lr, beta1, beta2, eps, wd):
    p.mul_(1 - lr * wd)
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.lerp_(grad.square(), 1 - beta2)
    denom = (exp_avg_sq / (1 - beta2 ** step)).sqrt() + eps
    p.add_(exp_avg / denom, alpha=-(lr / (1 - beta1 ** step)))


def muon_step(grads, params, momentum_buffer, second_buffer, momentum, lr, wd, beta2, red_dim, ns_dtype):
    """Nesterov momentum, Polar Express orthogonalisation, NorMuon variance reduction along the
    larger dimension, then the update with cautious weight decay at the aspect-scaled lr."""
    momentum = momentum.to(grads.dtype)
    momentum_buffer.lerp_(grads, 1 - momentum)
    g = grads.lerp_(momentum_buffer, momentum)
    g = orthogonalize(g.to(ns_dtype), tall=g.size(-2) > g.size(-1))
    beta2 = beta2.to(g.dtype)
    v_mean = g.float().square().mean(dim=red_dim, keepdim=True)
    red_size = g.size(red_dim)
    v_norm = (v_mean.sum(dim=(-2, -1), keepdim=True) * red_size).sqrt()
    second_buffer.lerp_(v_mean.to(second_buffer.dtype), 1 - beta2)
    step_size = second_buffer.clamp_min(1e-10).rsqrt()
    v_norm_new = ((v_mean * red_size) * step_size.float().square()).sum(dim=(-2, -1), keepdim=True).sqrt()
    g = g * (step_size * (v_norm / v_norm_new.clamp_min(1e-10))).to(g.dtype)
    lr, wd = lr.to(g.dtype), wd.to(g.dtype)
    mask = (g * params) >= 0     # cautious: decay only where the update agrees with shrinking
    params.sub_(lr * g + lr * wd * params * mask)


class MuonAdamW(torch.optim.Optimizer):
    """Muon for the block matrices (stacked by shape), AdamW for the rest. Hyperparameters are fed
    to the fused steps as 0-d CPU tensors, so a changed value never recompiles them."""

    def __init__(self, groups, compiled=False, ns_dtype=torch.float32):
        defaults = dict(lr=0.0, betas=ADAM_BETAS, eps=1e-10, weight_decay=0.0, momentum=0.95, beta2=0.95)
        super().__init__(groups, defaults)
        for g in self.param_groups:
            g["initial_lr"] = g["lr"]
        self.ns_dtype = ns_dtype
        # karpathy compiles both steps (fullgraph); eager where torch.compile is off (CPU, MPS, old GPUs).
        self.adamw_fn = torch.compile(adamw_step, dynamic=False, fullgraph=True) if compiled else adamw_step
        self.muon_fn = torch.compile(muon_step, dynamic=False, fullgraph=True) if compiled else muon_step
        self.t = {k: torch.tensor(0.0) for k in ("step", "lr", "b1", "b2", "eps", "wd", "mom", "mlr", "mwd", "mb2")}

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            if group["kind"] == "muon":
                self._muon(group)
            else:
                self._adamw(group)

    def _adamw(self, group):
        t = self.t
        for p in group["params"]:
            if p.grad is None:
                continue
            st = self.state[p]
            if not st:
                st["step"], st["exp_avg"], st["exp_avg_sq"] = 0, torch.zeros_like(p), torch.zeros_like(p)
            st["step"] += 1
            t["step"].fill_(st["step"])
            t["lr"].fill_(group["lr"])
            t["b1"].fill_(group["betas"][0])
            t["b2"].fill_(group["betas"][1])
            t["eps"].fill_(group["eps"])
            t["wd"].fill_(group["weight_decay"])
            self.adamw_fn(p, p.grad, st["exp_avg"], st["exp_avg_sq"], t["step"], t["lr"], t["b1"], t["b2"],
                          t["eps"], t["wd"])

    def _muon(self, group):
        params = [p for p in group["params"] if p.grad is not None]
        if not params:
            return
        rows, cols = params[0].shape[-2:]
        st = self.state[params[0]]
        if "momentum_buffer" not in st:
            st["momentum_buffer"] = torch.zeros(len(params), rows, cols, dtype=params[0].dtype, device=params[0].device)
            # NorMuon's statistics along the larger dimension (one per row of a tall matrix, per column of a wide one)
            shape = (len(params), rows, 1) if rows >= cols else (len(params), 1, cols)
            st["second_buffer"] = torch.zeros(shape, dtype=params[0].dtype, device=params[0].device)
        red_dim = -1 if rows >= cols else -2
        stacked_params = torch.stack(params)
        t = self.t
        t["mom"].fill_(group["momentum"])
        t["mb2"].fill_(group["beta2"])
        t["mlr"].fill_(group["lr"] * max(1.0, rows / cols) ** 0.5)
        t["mwd"].fill_(group["weight_decay"])
        self.muon_fn(torch.stack([p.grad for p in params]), stacked_params, st["momentum_buffer"],
                     st["second_buffer"], t["mom"], t["mlr"], t["mwd"], t["mb2"], red_dim, self.ns_dtype)
        torch._foreach_copy_(params, list(stacked_params.unbind(0)))


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
# Training
# ---------------------------------------------------------------------------


def build_model(device, vocab_size):
    model_dim = -(-DEPTH * ASPECT_RATIO // HEAD_DIM) * HEAD_DIM
    config = GPTConfig(sequence_len=MAX_SEQ_LEN, vocab_size=vocab_size, n_layer=DEPTH,
                       n_head=model_dim // HEAD_DIM, n_embd=model_dim, window_pattern=WINDOW_PATTERN)
    with torch.device("meta"):
        model = GPT(config)
    model = model.to_empty(device=device)
    model.rope_cos, model.rope_sin = (t.to(device) for t in rotary_tables(config.sequence_len * 2, HEAD_DIM))
    model.init_weights()
    if device.type == "cuda":   # as karpathy: bf16 embedding tables (less memory, same quality)
        model.wte.to(dtype=torch.bfloat16)
        for emb in model.value_embeds.values():
            emb.to(dtype=torch.bfloat16)
    model.checkpointing = GRAD_CHECKPOINTING
    return model, config


def main():
    torch.manual_seed(SEED)
    windowed = WINDOW_PATTERN.upper().count("S") > 0 and DEPTH > 1
    machine = harness.setup(windowed, attention=ATTENTION_BACKEND, dtype=DTYPE, compile=COMPILE)
    device = machine.device
    tokenizer = Tokenizer.from_directory()
    model, config = build_model(device, tokenizer.get_vocab_size())
    num_params = sum(p.numel() for p in model.parameters())
    tokens_per_fwdbwd = DEVICE_BATCH_SIZE * MAX_SEQ_LEN
    if TOTAL_BATCH_SIZE % tokens_per_fwdbwd:
        raise harness.HarnessError(f"TOTAL_BATCH_SIZE={TOTAL_BATCH_SIZE} is not a multiple of "
                                   f"DEVICE_BATCH_SIZE*MAX_SEQ_LEN={tokens_per_fwdbwd}; change one of them")
    grad_accum = TOTAL_BATCH_SIZE // tokens_per_fwdbwd
    optimizer = MuonAdamW(model.param_groups(), compiled=machine.compiled, ns_dtype=harness.muon_dtype(device))
    scaler = torch.amp.GradScaler(device.type) if machine.dtype == torch.float16 else None
    train_model = harness.compile_model(model, machine)
    recorder = harness.Recorder(machine, model, TOTAL_BATCH_SIZE, model.flops_per_token(), DEVICE_BATCH_SIZE)

    print(machine.describe())
    print(f"Model: {num_params / 1e6:.1f}M params, depth {DEPTH}, width {config.n_embd}, windows {model.windows}")
    print(f"Batch: {TOTAL_BATCH_SIZE:,} tokens/step = {DEVICE_BATCH_SIZE} x {MAX_SEQ_LEN} x {grad_accum} accum | "
          f"budget {TIME_BUDGET}s | {harness.describe_data()}")
    loader = harness.train_batches(DEVICE_BATCH_SIZE, device)
    x, y, epoch = next(loader)

    clock = budget_clock()   # wall-clock seconds (CPU seconds under the smoke profile)
    smooth_loss, training_time, timed_steps, step = 0.0, 0.0, 0, 0
    while True:
        harness.sync(device)
        t0, c0 = time.time(), clock()
        for _ in range(grad_accum):
            with machine.autocast():
                loss = train_model(x, y)
            train_loss = loss.detach()
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
            scaler.unscale_(optimizer)   # so the norm below is of the true gradients
        # Logged, not clipped: a norm that climbs step after step is the first sign of divergence.
        grad_norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None])
        if scaler:
            scaler.step(optimizer)   # skips the step on inf/nan gradients
            scaler.update()
        else:
            optimizer.step()
        model.zero_grad(set_to_none=True)
        loss_f = train_loss.item()   # the one host sync per step: the logged loss
        grad_norm_f = grad_norm.item()   # computed before the step, so already done: no new wait
        if not math.isfinite(loss_f) or loss_f > 100:
            raise harness.HarnessError(f"training loss is {loss_f} at step {step}; the run diverged")
        harness.sync(device)
        dt = time.time() - t0
        if step >= harness.WARMUP_STEPS:   # warm-up steps (compilation, allocator) are not timed
            training_time += clock() - c0
            timed_steps += 1
        smooth_loss = 0.9 * smooth_loss + 0.1 * loss_f
        recorder.step(step, progress, training_time, smooth_loss / (1 - 0.9 ** (step + 1)), lrm, dt,
                      grad_norm=grad_norm_f, epoch=epoch)
        if step == 0:   # Python's GC causes long stalls; nothing cyclic is created after this
            harness.freeze_gc()
        step += 1
        if step > harness.WARMUP_STEPS and training_time >= TIME_BUDGET:
            break
    recorder.finish(model, asdict(config), training_time, step, timed_steps, depth=DEPTH)


if __name__ == "__main__":
    harness.run_main(main)
