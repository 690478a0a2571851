"""How long `export --pi` and `export --tsv` take on a 50,000-run segment, against reading it.

    python benchmarks/export_speed.py [--runs 50000] [--repeats 5]

The reference, measured in the same run on the same log, is what every command does first:
read the log into typed records (`log.load`). The exports add the summary, pi's confidence
after every run (an incremental MAD) and the rows; the ratio says what that costs on top.
A quadratic step (a per-run scan of the segment) would show as a ratio in the hundreds.
"""

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
from autoresearch.store import log  # noqa: E402
from autoresearch.views import export


def make_log(path, runs, seed=0):
    rng = random.Random(seed)
    lines = [json.dumps({"type": "config", "name": "bench", "metricName": "val_bpb", "metricUnit": "bpb",
                         "bestDirection": "lower"})]
    best = 1.0
    for n in range(1, runs + 1):
        value = round(rng.gauss(best + 0.01, 0.01), 6)
        status = "keep" if n == 1 or value < best - 0.02 else rng.choice(["discard"] * 8 + ["crash", "timeout"])
        best = value if status == "keep" else best
        lines.append(json.dumps({"run": n, "commit": f"{n:07x}", "metric": None if status in ("crash", "timeout") else value,
                                 "metrics": {"val_bpb": value, "peak_vram_mb": 40000.0}, "status": status,
                                 "description": f"idea {n}", "timestamp": 1_795_986_000_000 + n * 330_000,
                                 "segment": 0, "asi": {"hypothesis": f"h{n}"}, "scope_hash": f"s{n}"}))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def median_s(fn, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=50_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "autoresearch.jsonl")
        make_log(path, args.runs)
        read = median_s(lambda: log.load(path), args.repeats)
        seg = log.load(path).current

        def pi():
            export.pi_log(seg.config, seg.runs)

        def tsv():
            export.tsv(seg.config, seg.runs)

        t_pi, t_tsv = median_s(pi, args.repeats), median_s(tsv, args.repeats)
    print(json.dumps({"runs": args.runs, "read_s": round(read, 3), "pi_s": round(t_pi, 3), "tsv_s": round(t_tsv, 3),
                      "pi_over_read": round(t_pi / read, 2), "tsv_over_read": round(t_tsv / read, 2)}))


if __name__ == "__main__":
    main()
