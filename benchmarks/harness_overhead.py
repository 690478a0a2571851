"""Time outside the training budget per ML run: today's harness against a reference, same run.

The template's runs spend TIME_BUDGET seconds training; everything else (start-up, the evaluation,
the sample, and now the evaluator's own process and the hidden holdout) is overhead. For each
version this prepares the smoke profile's synthetic data in its own cache, then runs `bash
autoresearch.sh` alternately for the reference and for this checkout. Overhead = the script's wall
time minus the training loop's wall time (the sum over steps.jsonl of tokens per step / tok_per_s,
the same for both versions). The holdout's share is its evaluation seconds (holdout.json) over the
overhead of the same run. The evaluator's check of the prepared data (every file it scores read
and hashed against manifest.json) runs while train.py trains, so it is off the overhead; its
seconds (summary.json) are shown as a share of the overhead anyway, and the hash rate measured
here (sha256 over 1 MiB blocks, against reading the same file) says what it costs for the
default profile's data.

    python benchmarks/harness_overhead.py [--reference COMMIT] [--runs 2] [--json]

The reference defaults to the commit before the evaluator moved into its own process.
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
REFERENCE = "4a98df1"   # assets/ with the evaluation inside train.py's process


def make_repo(base, name, reference=None):
    repo, cache = base / name / "repo", base / name / "cache"
    repo.mkdir(parents=True)
    files = ["assets/prepare.py", "assets/train.py", "assets/harness.py", "autoresearch.sh"]
    for f in files:
        if reference:
            done = subprocess.run(["git", "show", f"{reference}:{f}"], cwd=ROOT, capture_output=True)
            if done.returncode:
                continue   # the reference has no harness.py
            (repo / Path(f).name).write_bytes(done.stdout)
        elif (ROOT / f).exists():
            shutil.copy(ROOT / f, repo / Path(f).name)
    env = dict(os.environ, AUTORESEARCH_CACHE=str(cache), AUTORESEARCH_PYTHON=sys.executable)
    subprocess.run([sys.executable, "prepare.py", "--source", "synthetic", "--profile", "smoke", "--fit-baseline"],
                   cwd=repo, env=env, check=True, capture_output=True)
    return repo, env


def one_run(repo, env, run_dir):
    run_dir.mkdir(parents=True)
    env = dict(env, AUTORESEARCH_RUN_DIR=str(run_dir), AUTORESEARCH_STEPS_FILE=str(run_dir / "steps.jsonl"))
    t0 = time.perf_counter()
    done = subprocess.run(["bash", "autoresearch.sh"], cwd=repo, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode:
        raise SystemExit(f"run failed in {repo}: {done.stderr[-500:]}")
    steps = [json.loads(s) for s in (run_dir / "steps.jsonl").read_text().splitlines()]
    per_step = 4096   # the smoke tier's TOTAL_BATCH_SIZE (2**12), the same for both versions
    loop = sum(per_step / s["tok_per_s"] for s in steps if s["tok_per_s"])
    holdout = run_dir / "holdout.json"
    holdout_s = json.loads(holdout.read_text())["seconds"] if holdout.exists() else None
    check_s = json.loads((run_dir / "summary.json").read_text()).get("data_check_seconds")
    return {"wall_s": wall, "loop_s": loop, "outside_s": wall - loop, "holdout_s": holdout_s,
            "data_check_s": check_s, "steps": len(steps)}


def hash_rate(base, mb=256):
    """MB/s of the evaluator's check (read + sha256 over 1 MiB blocks) and of reading alone, on a
    file of `mb` MiB in the page cache (the evaluator reads files prepare.py wrote moments before
    or on an earlier night: warm or cold, the hash is the part that is ours)."""
    import hashlib
    path = base / "hash-probe.bin"
    path.write_bytes(os.urandom(mb << 20))
    rates = {}
    for name, digest in (("read", None), ("read_sha256", hashlib.sha256)):
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            h = digest() if digest else None
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    if h:
                        h.update(block)
            best = min(best, time.perf_counter() - t0)
        rates[name] = mb / best
    path.unlink()
    return rates


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", default=REFERENCE)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        old = make_repo(base, "reference", args.reference)
        new = make_repo(base, "current")
        results = {"reference": [], "current": []}
        for i in range(args.runs):
            results["reference"].append(one_run(*old, base / "runs" / f"ref{i}"))
            results["current"].append(one_run(*new, base / "runs" / f"cur{i}"))
    ref = statistics.median(r["outside_s"] for r in results["reference"])
    cur = statistics.median(r["outside_s"] for r in results["current"])
        rates = hash_rate(base)
    holdout = statistics.median(r["holdout_s"] for r in results["current"])
    check = statistics.median(r["data_check_s"] or 0 for r in results["current"])
    summary = {"reference": args.reference, "runs": args.runs, "outside_reference_s": round(ref, 2),
               "outside_current_s": round(cur, 2), "ratio": round(cur / ref, 3),
               "holdout_s": round(holdout, 3), "holdout_share": round(holdout / cur, 3),
               "data_check_s": round(check, 4), "data_check_share": round(check / cur, 4),
               "read_mb_s": round(rates["read"]), "read_sha256_mb_s": round(rates["read_sha256"]),
               "detail": results}
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"time outside the training budget (median of {args.runs}): reference {ref:.2f}s, "
              f"current {cur:.2f}s, ratio {cur / ref:.3f}")
        print(f"hidden holdout evaluation: {holdout:.3f}s = {100 * holdout / cur:.1f}% of the current overhead")
        print(f"check of the prepared data: {check:.4f}s = {100 * check / cur:.2f}% of the overhead (it runs while "
              f"train.py trains); read + sha256 {rates['read_sha256']:.0f} MB/s, read alone {rates['read']:.0f} MB/s")


if __name__ == "__main__":
    main()
