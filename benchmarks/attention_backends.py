"""Training throughput of the attention backends on one GPU, for the baseline tiers.

Builds train.py's model for a tier (default the 24 GiB one: depth 6, device batch 32), then for
each variant times forward + backward + optimizer steps after a warm-up (compilation excluded):

    sssl-flex   WINDOW_PATTERN "SSSL" through FlexAttention (the default on Ampere/Ada)
    l-sdpa      every layer full context through SDPA's flash kernel
    sssl-fa3    "SSSL" through Flash Attention 3 from the kernel hub (kernels-community/flash-attn3,
                version 1, as harness.load_fa3 loads it)
    sssl-sdpa   "SSSL" through SDPA with a dense window mask (what a window costs without a kernel)

Run from a prepared research repo (so the tokenizer's vocabulary is the real one):

    python benchmarks/attention_backends.py --repo PATH [--depth 6] [--batch 32] [--steps 20] [--json]

Prints tokens/s per variant and the ratio to sssl-flex. A variant that cannot run here (no FA3
build for this GPU, no CUDA) is reported with its reason instead of a number.
"""

import argparse
import json
import os
import sys
import time

VARIANTS = [("sssl-flex", "SSSL", "flex"), ("l-sdpa", "L", "sdpa"), ("sssl-fa3", "SSSL", "fa3"),
            ("sssl-sdpa", "SSSL", "sdpa")]


def measure(train, harness, pattern, backend, depth, batch, steps, warmup=5):
    import torch
    train.DEPTH, train.WINDOW_PATTERN = depth, pattern
    machine = harness.setup("S" in pattern, attention=backend)
    model, config = train.build_model(machine.device, train.Tokenizer.from_directory().get_vocab_size())
    opt = train.MuonAdamW(model.param_groups(), compiled=machine.compiled, ns_dtype=harness.muon_dtype(machine.device))
    step_model = harness.compile_model(model, machine)
    x = torch.randint(0, config.vocab_size, (batch, config.sequence_len), device=machine.device)
    y = torch.roll(x, -1, 1)
    for i in range(warmup + steps):
        if i == warmup:
            harness.sync(machine.device)
            t0 = time.time()
        with machine.autocast():
            loss = step_model(x, y)
        loss.backward()
        opt.step()
        model.zero_grad(set_to_none=True)
    harness.sync(machine.device)
    seconds = time.time() - t0
    peak = torch.cuda.max_memory_allocated() / 2**20 if machine.device.type == "cuda" else None
    tok_s = steps * batch * config.sequence_len / seconds
    mfu = 100 * model.flops_per_token() * tok_s / machine.peak if machine.peak else None
    return {"backend": machine.backend, "tok_per_s": round(tok_s), "mfu": mfu and round(mfu, 2), "peak_mb": peak}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, help="a research repo with prepared data")
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, os.path.abspath(args.repo))
    import harness
    import train
    results = {}
    for name, pattern, backend in VARIANTS:
        try:
            results[name] = measure(train, harness, pattern, backend, args.depth, args.batch, args.steps)
        except Exception as e:   # report and go on: one missing kernel must not hide the others
            results[name] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"}
        import torch
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
    base = results.get("sssl-flex", {}).get("tok_per_s")
    for r in results.values():
        if base and "tok_per_s" in r:
            r["vs_sssl_flex"] = round(r["tok_per_s"] / base, 3)
    if args.json:
        print(json.dumps(results))
    else:
        for name, r in results.items():
            print(f"{name:10s} " + (r["error"] if "error" in r else
                  f"{r['tok_per_s']:>10,} tok/s  mfu {r['mfu']}%  peak {r['peak_mb']} MB  x{r.get('vs_sssl_flex')}"))


if __name__ == "__main__":
    main()
