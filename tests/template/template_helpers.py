"""Helpers shared by the template tests (a unique module name: several conftest.py files coexist)."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ASSETS = ROOT / "assets"


def prepare_cmd(repo, *args):
    return [sys.executable, str(repo / "prepare.py"), *args]


def tiny_gpt(train, vocab, seq_len=32, depth=2, width=64, heads=2, pattern="SL", seed=0):
    """A small GPT with every weight random (no zero-initialised projections)."""
    import torch
    torch.manual_seed(seed)
    cfg = train.GPTConfig(sequence_len=seq_len, vocab_size=vocab, n_layer=depth, n_head=heads,
                          n_embd=width, window_pattern=pattern)
    model = train.GPT(cfg)
    model.init_weights()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.2)
    return model.eval()


def load_packing_benchmark():
    """benchmarks/packing.py (home of the reference best-fit scan) under a unique module name,
    leaving sys.path and sys.modules as they were."""
    saved_path, saved_prepare = list(sys.path), sys.modules.get("prepare")
    spec = importlib.util.spec_from_file_location("template_packing_benchmark", ROOT / "benchmarks" / "packing.py")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved_path
        if saved_prepare is None:
            sys.modules.pop("prepare", None)
        else:
            sys.modules["prepare"] = saved_prepare
    return module
