"""The pool's own time per wave, against the benchmark's own time, at K = 4 and 8 logical GPUs.

For each K: a research repo whose benchmark sleeps S seconds (the stand-in for training), a
local Ray head with K logical GPUs (`pool up --gpus K`), a calibration wave, then W waves of
K-1 candidates plus the control, each through the real CLI (`submit` x (K-1), `wait`). From
the records and the clock:

- start:    `pool up` wall time (Ray head, node probe, one warm worker per GPU), once per pool
- dispatch: wave start -> the last run's benchmark started (placement, task start, snapshot)
- snapshot: the median time a task took to materialise its commit (inside dispatch)
- collect:  the last benchmark ended -> `wait` printed the wave (results back, decide, record)
- overhead: `wait` wall time - the longest benchmark of the wave

Each is reported in seconds and as a ratio to the benchmark's own time (median `gpu_s`), so the
figure does not depend on the machine. Needs Ray (`pip install -e '.[pool]'`).

    python benchmarks/pool_overhead.py [--ks 4 8] [--waves 2] [--sleep 3] [--json]
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "pool"))

from helpers_pool import make_repo, ray_env  # noqa: E402


def one_pool(k, waves, sleep_s):
    base, env = ray_env()
    try:
        repo = make_repo(Path(base) / "research", env, value=f"1.0:{sleep_s}")
        t0 = time.monotonic()
        repo.ok("pool", "up", "--gpus", str(k), "--cpus", str(os.cpu_count() or 2))
        start_s = time.monotonic() - t0
        try:
            repo.ok("run", "-m", "baseline")
            rows = []
            value = 1.0
            for w in range(waves):
                for i in range(k - 1):
                    value += 0.01      # every candidate loses: no confirmation re-runs in the timing
                    repo.submit(f"{value:.2f}:{sleep_s}")
                t0 = time.monotonic()
                proc = repo.ok("wait", "--json", "--timeout", "600")
                wall = time.monotonic() - t0
                data = json.loads(proc.stdout)
                rows.append(measure_wave(data["runs"], wall))
        finally:
            repo.cli("pool", "down")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    last = rows[-1]   # the warm wave
    return {"k": k, "start_s": round(start_s, 3), "waves": rows,
            "bench_s": last["bench_s"], "start_ratio": round(start_s / last["bench_s"], 3),
            **{f"{key}_ratio": round(last[f"{key}_s"] / last["bench_s"], 4)
               for key in ("dispatch", "snapshot", "collect", "overhead")}}


def measure_wave(runs, wall):
    started = min(r["wave_started"] for r in runs) / 1000
    bench_started = max(r["bench_started"] for r in runs) / 1000
    bench_ended = max(r["bench_ended"] for r in runs) / 1000
    bench = statistics.median(r["gpu_s"] for r in runs)
    longest = max(r["gpu_s"] for r in runs)
    ended = max(r["wave_ended"] for r in runs) / 1000
    return {"runs": len(runs), "bench_s": round(bench, 3), "wall_s": round(wall, 3),
            "dispatch_s": round(bench_started - started, 3),
            "snapshot_s": round(statistics.median(r["snapshot_s"] for r in runs), 4),
            "collect_s": round(ended - bench_ended, 3),
            "overhead_s": round(wall - longest, 3)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--waves", type=int, default=2)
    parser.add_argument("--sleep", type=float, default=3.0, help="the benchmark's own time per run, s")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        import ray  # noqa: F401
    except ImportError:
        sys.exit("pool_overhead: needs Ray: pip install -e '.[pool]'")
    results = [one_pool(k, args.waves, args.sleep) for k in args.ks]
    if args.json:
        print(json.dumps({"sleep_s": args.sleep, "pools": results}))
        return
    print(f"pool overhead per wave (benchmark = {args.sleep:g} s of sleep per run; ratios to it):")
    for r in results:
        print(f"  K={r['k']}: start {r['start_s']:.1f} s ({r['start_ratio']:.2f}x, once per pool); per wave: "
              f"dispatch {r['dispatch_ratio']:.3f}, snapshot {r['snapshot_ratio']:.4f}, "
              f"collect {r['collect_ratio']:.3f}, total overhead {r['overhead_ratio']:.3f}")


if __name__ == "__main__":
    main()
