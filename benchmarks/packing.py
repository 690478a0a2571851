"""Packing benchmark: our bucketed best-fit loader against a best-fit scan over the buffer.

The reference below packs the way karpathy/autoresearch's dataloader does (written here from its
description): keep a buffer of >= 1000 tokenized documents, refilled 128 at a time; for each
placement scan the whole buffer for the largest document that fits the room left in the row, or
crop the shortest one when none fits; write each document into a torch row buffer.

Both loaders get the same documents in the same order (already tokenized: ours reads the flat
token array prepare.py writes, the reference gets the token lists a tokenizer returns), produce
(B, T+1) int64 rows, and are timed in the same process. The script checks the batches are
identical (hence equal packing quality: same crops, same tokens kept) and prints the speed ratio.

    python benchmarks/packing.py                 # T=2048, B=32, web-like document lengths
    python benchmarks/packing.py --batches 20 --T 2048 --B 128
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "assets"))
import prepare  # noqa: E402


def reference_rows(doc_chunks, B, capacity, buffer_size=1000):
    """Best-fit by scanning the whole buffer for every placement (the baseline being measured)."""
    buffer = []
    row_buffer = torch.empty((B, capacity), dtype=torch.long)
    epoch = 1
    while True:
        for r in range(B):
            pos = 0
            while pos < capacity:
                while len(buffer) < buffer_size:
                    chunk, epoch = next(doc_chunks)
                    buffer.extend(chunk)
                room = capacity - pos
                best, best_len = -1, 0
                for i, doc in enumerate(buffer):
                    n = len(doc)
                    if best_len < n <= room:
                        best, best_len = i, n
                if best >= 0:
                    doc = buffer.pop(best)
                    row_buffer[r, pos:pos + len(doc)] = torch.tensor(doc, dtype=torch.long)
                    pos += len(doc)
                else:
                    shortest = min(range(len(buffer)), key=lambda i: len(buffer[i]))
                    doc = buffer.pop(shortest)
                    row_buffer[r, pos:pos + room] = torch.tensor(doc[:room], dtype=torch.long)
                    pos += room
        yield row_buffer.clone(), epoch


def list_chunks(tokens, offsets, chunk=prepare.REFILL_DOCS):
    """The same document stream as prepare._doc_chunks, as token lists (what a tokenizer returns)."""
    docs = [tokens[offsets[i]:offsets[i + 1]].tolist() for i in range(len(offsets) - 1)]
    epoch = 1
    while True:
        for i in range(0, len(docs), chunk):
            yield docs[i:i + chunk], epoch
        epoch += 1


def web_like_corpus(n_docs, vocab=8192, seed=0, bos=8188):
    """Token documents with a heavy-tailed length distribution (median ~350, mean ~700 tokens)."""
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(mean=5.9, sigma=1.1, size=n_docs).astype(np.int64), 8, 60_000)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    tokens = rng.integers(0, vocab - 4, size=int(offsets[-1]), dtype=np.uint16)
    tokens[offsets[:-1]] = bos
    return tokens, offsets


def measure(tokens, offsets, B, T, batches, buffer_size=1000):
    capacity = T + 1
    ours = prepare.packed_rows(tokens, offsets, B, capacity, buffer_size)
    ref = reference_rows(list_chunks(tokens, offsets), B, capacity, buffer_size)
    t_ours = t_ref = 0.0
    identical = True
    kept_ours = kept_ref = 0
    for _ in range(batches):
        t0 = time.perf_counter()
        a, _ = next(ours)
        a = torch.from_numpy(a)
        t1 = time.perf_counter()
        b, _ = next(ref)
        t2 = time.perf_counter()
        t_ours += t1 - t0
        t_ref += t2 - t1
        identical &= torch.equal(a, b)
        kept_ours += a.numel()
        kept_ref += b.numel()
    bos = int(tokens[0])
    return {"B": B, "T": T, "batches": batches, "ours_s": t_ours, "reference_s": t_ref,
            "ratio": t_ref / t_ours, "identical": bool(identical),
            "rows_start_with_bos": bool((a[:, 0] == bos).all()), "tokens": kept_ours}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--B", type=int, default=32)
    ap.add_argument("--T", type=int, default=2048)
    ap.add_argument("--batches", type=int, default=12)
    ap.add_argument("--docs", type=int, default=60_000)
    args = ap.parse_args(argv)
    tokens, offsets = web_like_corpus(args.docs)
    next(prepare.packed_rows(tokens, offsets, 2, 64))   # import and allocation warm-up
    r = measure(tokens, offsets, args.B, args.T, args.batches)
    per_batch = lambda s: 1000 * s / r["batches"]  # noqa: E731
    print(f"packing B={r['B']} T={r['T']} batches={r['batches']} ({r['tokens']:,} tokens), same documents, same run")
    print(f"  reference best-fit scan: {per_batch(r['reference_s']):8.2f} ms/batch")
    print(f"  ours (bucketed best-fit): {per_batch(r['ours_s']):8.2f} ms/batch")
    print(f"  ratio: {r['ratio']:.1f}x   identical batches: {r['identical']}   rows start with BOS: {r['rows_start_with_bos']}")
    return 0 if r["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
