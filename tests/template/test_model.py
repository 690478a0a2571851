"""train.py: the model, Muon; harness.py: attention, the causality probe, the machine; prepare.py: device tables
and the baseline tiers."""

import ast
import math

import pytest
import torch
import torch.nn.functional as F

from .template_helpers import ASSETS, tiny_gpt


def reference_attention(q, k, v, window):
    """Loop over queries: softmax over keys j with 0 <= i - j <= window. q, k, v: (B, T, H, D)."""
    B, T, H, D = q.shape
    out = torch.zeros_like(q)
    for i in range(T):
        lo = max(0, i - window)
        scores = torch.einsum("bhd,bjhd->bhj", q[:, i], k[:, lo:i + 1]) / math.sqrt(D)
        out[:, i] = torch.einsum("bhj,bjhd->bhd", scores.softmax(-1), v[:, lo:i + 1])
    return out


@pytest.mark.parametrize("window", [0, 1, 5, 16, 31, 64])
def test_windowed_sdpa_equals_reference_masked_attention(modules, window):
    _, train = modules
    torch.manual_seed(window)
    q, k, v = (torch.randn(2, 32, 3, 8, dtype=torch.float64) for _ in range(3))
    got = train.harness.attention(q, k, v, window)   # this process: the sdpa backend
    torch.testing.assert_close(got, reference_attention(q, k, v, window), rtol=1e-9, atol=1e-9)


def test_layer_windows_follow_the_pattern_and_end_long(modules):
    _, train = modules
    cfg = train.GPTConfig(sequence_len=256, vocab_size=64, n_layer=6, n_head=2, n_embd=64, window_pattern="SSL")
    assert train.GPT.layer_windows(cfg) == [128, 128, 256, 128, 128, 256]
    cfg.window_pattern = "S"
    assert train.GPT.layer_windows(cfg)[-1] == 256
    cfg.window_pattern = "SXL"
    with pytest.raises(ValueError, match="only the letters S and L"):
        train.GPT.layer_windows(cfg)


@pytest.mark.parametrize("shape", [(64, 128), (128, 64), (3, 48, 192)])
def test_muon_orthogonalization_gives_singular_values_near_one(modules, shape):
    _, train = modules
    torch.manual_seed(0)
    G = torch.randn(*shape) * 7.0
    s = torch.linalg.svdvals(train.orthogonalize(G.float(), tall=G.size(-2) > G.size(-1)))
    assert s.min() > 0.75 and s.max() < 1.25, (s.min(), s.max())
    # and the directions are G's: U V^T of the SVD, up to those singular values
    U, _, Vh = torch.linalg.svd(G, full_matrices=False)
    cos = F.cosine_similarity(train.orthogonalize(G.float(), tall=G.size(-2) > G.size(-1)).flatten(-2), (U @ Vh).flatten(-2), dim=-1)
    assert (cos > 0.98).all()


def test_optimizer_steps_reduce_the_loss_of_a_tiny_gpt(modules):
    _, train = modules
    model = tiny_gpt(train, vocab=32, seq_len=16).train()
    with torch.no_grad():
        model.init_weights()
    opt = train.MuonAdamW(model.param_groups())
    kinds = {g["kind"] for g in opt.param_groups}
    assert kinds == {"muon", "adamw"}
    x = torch.arange(16).repeat(4, 1) % 7          # a periodic sequence to memorise
    y = (x + 1) % 7
    first = None
    for _ in range(30):
        loss = model(x, y)
        loss.backward()
        opt.step()
        model.zero_grad(set_to_none=True)
        first = first if first is not None else loss.item()
    assert loss.item() < 0.5 * first


def test_causality_probe_catches_a_model_that_sees_the_future(modules, monkeypatch):
    prepare, train = modules
    model = tiny_gpt(train, vocab=40, seq_len=32)
    gen = torch.Generator().manual_seed(1)
    row = torch.randint(0, 40, (2, 33), generator=gen)
    x, y = row[:, :-1], row[:, 1:]
    probe = train.harness.causality_probe
    assert probe(model, x, y, vocab=40) < 1e-5     # the real model is causal

    def full_attention(q, k, v, window):   # forgets the causal mask
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2)

    monkeypatch.setattr(train, "attention", full_attention)
    with pytest.raises(train.harness.CausalityError, match="CAUSALITY VIOLATION"):
        probe(model, x, y, vocab=40)

    def off_by_one(q, k, v, window):       # sees exactly one token ahead
        T = q.size(1)
        mask = torch.ones(T, T, dtype=torch.bool).tril(1)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2)

    monkeypatch.setattr(train, "attention", off_by_one)
    with pytest.raises(train.harness.CausalityError):
        probe(model, x, y, vocab=40)


def test_evaluate_bpb_refuses_a_leaky_model(modules, monkeypatch):
    prepare, train = modules
    tok = prepare.Tokenizer.from_directory()
    model = tiny_gpt(train, vocab=tok.get_vocab_size(), seq_len=prepare.MAX_SEQ_LEN)
    evaluate = train.harness.evaluate_split

    def full_attention(q, k, v, window):
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2)

    bpb, karpathy_bpb, _ = evaluate(model, 2, "val", 2 * prepare.MAX_SEQ_LEN)
    assert math.isfinite(bpb) and karpathy_bpb == pytest.approx(bpb, rel=0.05)
    monkeypatch.setattr(train, "attention", full_attention)
    with pytest.raises(train.harness.CausalityError):
        evaluate(model, 2, "val", 2 * prepare.MAX_SEQ_LEN)


def test_attention_backend_selection_on_cpu(modules):
    h = modules[1].harness
    assert h.pick_attention("cpu", None, False, True)[0] == "sdpa"
    assert h.pick_attention("cpu", None, False, False)[2] == "SDPA causal"
    with pytest.raises(RuntimeError, match="Ampere"):
        h.pick_attention("cpu", None, False, False, requested="fa3")
    with pytest.raises(RuntimeError, match="CUDA and torch.compile"):
        h.pick_attention("cpu", None, False, True, requested="flex")
    assert h.dtype_for("cpu") == torch.float32
    assert h.compile_for("cpu") is False
    assert h.dtype_for("cpu", requested="bfloat16") == torch.bfloat16


def test_peak_flops_table(modules):
    prepare, _ = modules
    assert prepare.peak_flops("NVIDIA H100 80GB HBM3", torch.bfloat16) == pytest.approx(989.5e12)
    assert prepare.peak_flops("NVIDIA H100 PCIe", "bfloat16") == pytest.approx(756e12)
    assert prepare.peak_flops("NVIDIA H200", "bfloat16") == pytest.approx(989.5e12)
    assert prepare.peak_flops("NVIDIA GeForce RTX 4090", torch.bfloat16) == pytest.approx(165.2e12)
    assert prepare.peak_flops("NVIDIA A100-SXM4-80GB", torch.float32) == pytest.approx(19.5e12)
    assert prepare.peak_flops("NVIDIA L4", "bfloat16") == pytest.approx(121e12)
    assert prepare.peak_flops("Tesla T4", torch.bfloat16) is None        # no bf16 on Turing
    assert prepare.peak_flops("Tesla T4", torch.float16) == pytest.approx(65e12)
    assert prepare.peak_flops("cpu", torch.float32) is None


@pytest.mark.parametrize("memory, tier", [
    (None, "cpu"), (3.9, 8), (7.6, 8), (11.7, 12), (15.6, 16), (23.6, 24), (31.4, 32),
    (44.4, 48), (47.5, 48), (79.1, 80), (93.0, 80), (139.8, 141),
])
def test_baseline_tier_by_memory(modules, memory, tier):
    prepare, _ = modules
    assert prepare.pick_tier(memory)[0] == tier
    assert prepare.pick_tier(memory, "smoke")[0] == "smoke"


def _constants(path):
    found = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                found[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return found


CONTRACT = ["DEPTH", "ASPECT_RATIO", "HEAD_DIM", "WINDOW_PATTERN", "TOTAL_BATCH_SIZE", "DEVICE_BATCH_SIZE",
            "EMBEDDING_LR", "UNEMBEDDING_LR", "MATRIX_LR", "SCALAR_LR", "WEIGHT_DECAY", "ADAM_BETAS",
            "WARMUP_RATIO", "WARMDOWN_RATIO", "FINAL_LR_FRAC", "ATTENTION_BACKEND", "DTYPE", "COMPILE",
            "GRAD_CHECKPOINTING"]


def test_constants_are_plain_literals_and_every_tier_is_valid(modules, tmp_path):
    prepare, _ = modules
    consts = _constants(ASSETS / "train.py")
    assert set(CONTRACT) <= set(consts), set(CONTRACT) - set(consts)
    assert consts["ATTENTION_BACKEND"] in ("auto", "fa3", "flex", "sdpa")
    assert {"MAX_SEQ_LEN", "TIME_BUDGET", "EVAL_TOKENS", "VOCAB_SIZE"} <= set(_constants(ASSETS / "prepare.py"))
    assert _constants(ASSETS / "prepare.py")["MAX_SEQ_LEN"] == 2048
    original = (ASSETS / "train.py").read_text()
    for tier in prepare.BASELINE_TIERS:
        copy = tmp_path / "train.py"
        copy.write_text(original)
        prepare.fit_baseline(copy, tier)
        c = _constants(copy)
        name, depth, dbs, tbs, pattern, head_dim = tier
        assert (c["DEPTH"], c["DEVICE_BATCH_SIZE"], c["TOTAL_BATCH_SIZE"], c["WINDOW_PATTERN"], c["HEAD_DIM"]) \
            == (depth, dbs, tbs, pattern, head_dim)
        seq = 256 if name == "smoke" else 2048
        assert tbs % (dbs * seq) == 0, f"tier {name}: TOTAL_BATCH_SIZE must divide into micro-batches"
        # everything outside the baseline block is untouched
        strip = lambda s: s[:s.index("# >>> baseline")] + s[s.index("# <<< baseline"):]  # noqa: E731
        assert strip(copy.read_text()) == strip(original)
        assert set(CONTRACT) <= set(c)


def test_mixed_precision_forward_and_backward(modules):
    """The autocast path GPUs take (bf16 here on CPU): q, k, v reach attention in one dtype."""
    _, train = modules
    model = tiny_gpt(train, vocab=48, seq_len=32).train()
    x = torch.randint(0, 48, (2, 32))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(x, x)
    loss.backward()
    assert math.isfinite(loss.item())
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_gradient_checkpointing_gives_the_same_gradients(modules):
    _, train = modules
    x = torch.randint(0, 48, (2, 32))
    grads = []
    for checkpointing in (False, True):
        model = tiny_gpt(train, vocab=48, seq_len=32).train()
        model.checkpointing = checkpointing
        model(x, x).backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b)
