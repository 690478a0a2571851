"""Time to first step with torch.compile: a run on a cold compile cache against the next one.

The engine gives every run a fresh $TMPDIR, and Inductor keeps its caches under $TMPDIR unless told
otherwise, so before the harness named a cache folder every experiment of a night compiled from
nothing. Now the harness points Inductor and Triton at one folder per research repo under the
user's cache (harness.compile_cache_dir()), shared by all the repo's runs.

This makes a smoke-profile research repo (synthetic data, CPU), turns COMPILE on in train.py (the
template compiles on CPU when asked) and caps training at a few steps. Each pair of runs starts from
an empty compile cache: the first run compiles, the second runs from a different snapshot folder
(`<repo>/.autoresearch/snapshots/N`, as the engine runs them) with a fresh $TMPDIR and finds the
first one's kernels. Time to first step is the harness's `first_step_s` (train.json: from the
process's start, interpreter and `import torch` included, to the end of step 0) and, as a check,
the wall time from starting the command to the first line of steps.jsonl.

    python benchmarks/compile_cache.py [--pairs 2] [--json]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEPS = 3   # step 0 compiles; a few more so the run ends the way a real one does
LOOP_END = "        if step > harness.WARMUP_STEPS and training_time >= TIME_BUDGET:\n"


def make_repo(base):
    """A research repo from assets/ with the smoke profile's data in its own cache, compiling."""
    repo, cache = base / "lab", base / "cache"
    shutil.copytree(ROOT / "assets", repo, ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ, AUTORESEARCH_CACHE=str(cache), AUTORESEARCH_PYTHON=sys.executable)
    for key in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "AUTORESEARCH_RUN_DIR", "AUTORESEARCH_STEPS_FILE"):
        env.pop(key, None)
    subprocess.run([sys.executable, "prepare.py", "--source", "synthetic", "--profile", "smoke", "--fit-baseline"],
                   cwd=repo, env=env, check=True, capture_output=True)
    text = (repo / "train.py").read_text()
    assert 'COMPILE = "auto"' in text and LOOP_END in text, "train.py changed: update this benchmark"
    text = text.replace('COMPILE = "auto"', "COMPILE = True")
    text = text.replace(LOOP_END, f"        if step >= {STEPS}:\n")
    (repo / "train.py").write_text(text)
    return repo, env


def snapshot(repo, n):
    """A copy of the repo where the engine would run it: .autoresearch/snapshots/N."""
    dest = repo / ".autoresearch" / "snapshots" / str(n)
    shutil.copytree(repo, dest, ignore=shutil.ignore_patterns(".autoresearch"))
    return dest


def one_run(where, env, run_dir):
    """(first_step_s from train.json, wall seconds to the first steps.jsonl line, compile cache)."""
    run_dir.mkdir(parents=True)
    steps = run_dir / "steps.jsonl"
    tmp = tempfile.mkdtemp(prefix="compile-cache-run-")   # fresh per run, as the engine does
    env = dict(env, TMPDIR=tmp, AUTORESEARCH_RUN_DIR=str(run_dir), AUTORESEARCH_STEPS_FILE=str(steps))
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-I", "harness.py", "train", "train.py"], cwd=where, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    first = None
    while proc.poll() is None:
        if first is None and steps.exists() and steps.stat().st_size:
            first = time.perf_counter() - t0
        time.sleep(0.05)
    out = proc.stdout.read()
    shutil.rmtree(tmp, ignore_errors=True)
    if proc.returncode:
        raise SystemExit(f"run failed in {where}:\n{out[-2000:]}")
    info = json.loads((run_dir / "train.json").read_text())
    return info["first_step_s"], first, info["compile_cache"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=2, help="cold + warm pairs, each from an empty cache")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="compile-cache-bench-"))
    try:
        repo, env = make_repo(base)
        rows, n = [], 0
        for pair in range(args.pairs):
            shutil.rmtree(base / "cache" / "compile", ignore_errors=True)
            row = {}
            for kind in ("cold", "warm"):
                n += 1
                first, wall, cache = one_run(snapshot(repo, n), env, base / "runs" / str(n))
                row[kind] = {"first_step_s": round(first, 2), "wall_to_first_step_s": round(wall, 2),
                             "snapshot": n, "compile_cache": cache}
            row["ratio"] = round(row["warm"]["first_step_s"] / row["cold"]["first_step_s"], 3)
            rows.append(row)
            print(f"pair {pair + 1}: cold {row['cold']['first_step_s']:.1f}s (wall {row['cold']['wall_to_first_step_s']:.1f}s), "
                  f"warm {row['warm']['first_step_s']:.1f}s (wall {row['warm']['wall_to_first_step_s']:.1f}s), "
                  f"warm/cold {row['ratio']:.3f}", file=sys.stderr)
        same = len({r[k]["compile_cache"] for r in rows for k in ("cold", "warm")}) == 1
        result = {"pairs": rows, "median_ratio": statistics.median(r["ratio"] for r in rows),
                  "one_cache_for_all_snapshots": same, "device": "cpu", "steps": STEPS}
        if args.json:
            print(json.dumps(result, indent=1))
        else:
            print(f"time to first step, warm cache / cold cache: {result['median_ratio']:.3f} (median of "
                  f"{len(rows)} pairs; one cache folder for every snapshot: {same})")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
