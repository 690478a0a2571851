"""The engine's own time per experiment: everything `autoresearch run` does except the benchmark.

Sets up a research repo whose log already holds 500 runs, then times N real experiments
(`python -m autoresearch run`, alternating keeps and discards so both the commit and the reset
paths are measured). Overhead = wall time of the CLI call − the benchmark's own duration
(`duration_s` in the record). In the same run it measures two references: the bare start-up of
the same Python (`python -c pass`), and the minimum git bookkeeping a human or agent does by hand
per experiment (`git commit` of the change plus `git reset --hard` back), so the result reads as a
ratio that does not depend on how fast the machine is.

    python benchmarks/engine_overhead.py [--runs 15] [--log-runs 500] [--json] [--reference-src DIR]

`--reference-src DIR` also times another checkout's engine (its `src/`, e.g. an export of an
earlier commit of main) on its own 500-run repo, one experiment of each in turn, and reports
the ratio of the two medians: what a change costs per experiment, whatever the machine's load.
It reports the whole call's ratio too: the sandbox's start-up (bubblewrap) falls inside the
record's `duration_s`, so only the whole call shows it.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
sys.path.insert(0, str(SRC))

from autoresearch.store import log  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="experiments to time")
    parser.add_argument("--log-runs", type=int, default=500, help="runs already in the log")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--reference-src", metavar="DIR", help="another engine's src/ to time in the same run")
    args = parser.parse_args()
    reference = None
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "research"
        setup(repo, args.log_runs)
        if args.reference_src:
            other = Path(tmp) / "reference"
            setup(other, args.log_runs)
            overhead, reference, walls, reference_walls = [], [], [], []
            for i in range(args.runs):
                reference += time_experiments(other, 1, src=Path(args.reference_src), first=i, walls=reference_walls)
                overhead += time_experiments(repo, 1, first=i, walls=walls)
        else:
            walls = []
            overhead = time_experiments(repo, args.runs, walls=walls)
        startup = time_reference([sys.executable, "-c", "pass"], repo, args.runs)
        manual = time_manual_git(Path(tmp) / "manual", args.runs)
    result = {
        "log_runs": args.log_runs,
        "experiments": args.runs,
        "engine_overhead_median_s": round(statistics.median(overhead), 4),
        "engine_overhead_p90_s": round(sorted(overhead)[int(0.9 * (len(overhead) - 1))], 4),
        "engine_wall_median_s": round(statistics.median(walls), 4),
        "python_startup_median_s": round(statistics.median(startup), 4),
        "manual_git_median_s": round(statistics.median(manual), 4),
    }
    result["overhead_vs_python_startup"] = round(result["engine_overhead_median_s"]
                                                 / result["python_startup_median_s"], 1)
    result["overhead_vs_manual_git"] = round(result["engine_overhead_median_s"]
                                             / result["manual_git_median_s"], 1)
    if reference:
        result["reference_overhead_median_s"] = round(statistics.median(reference), 4)
        result["overhead_vs_reference"] = round(result["engine_overhead_median_s"]
                                                / result["reference_overhead_median_s"], 2)
        # The whole call, the sandbox's start-up included (the record's duration_s counts it as
        # the benchmark's time, so the overhead above does not).
        result["reference_wall_median_s"] = round(statistics.median(reference_walls), 4)
        result["wall_vs_reference"] = round(result["engine_wall_median_s"] / result["reference_wall_median_s"], 2)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"engine overhead per experiment, {args.log_runs}-run log, {args.runs} experiments:")
        print(f"  median {result['engine_overhead_median_s'] * 1000:.0f} ms "
              f"(p90 {result['engine_overhead_p90_s'] * 1000:.0f} ms)")
        print(f"  = {result['overhead_vs_python_startup']}x a bare python start-up "
              f"({result['python_startup_median_s'] * 1000:.0f} ms)")
        print(f"  = {result['overhead_vs_manual_git']}x a hand-made git commit + reset "
              f"({result['manual_git_median_s'] * 1000:.0f} ms)")
        if reference:
            print(f"  = {result['overhead_vs_reference']}x the reference engine "
                  f"({result['reference_overhead_median_s'] * 1000:.0f} ms, {args.reference_src})")
            print(f"  whole call {result['engine_wall_median_s'] * 1000:.0f} ms = {result['wall_vs_reference']}x "
                  f"the reference's ({result['reference_wall_median_s'] * 1000:.0f} ms), sandbox start-up included")


def git(repo, *args):
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def new_repo(repo, files):
    """A git repository holding `files` ({name: text}) in one first commit."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    git(repo, "config", "user.name", "bench")
    git(repo, "config", "user.email", "bench@localhost")
    for name, text in files.items():
        (repo / name).write_text(text)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "start")


def setup(repo, log_runs):
    new_repo(repo, {"bench.sh": 'echo "METRIC loss=$(cat value.txt)"\n', "value.txt": "100.0\n"})
    cli(repo, "init", "--metric", "loss", "--command", "bash bench.sh", "--scope", "value.txt",
        "--fixed", "bench.sh")
    head = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], cwd=repo, capture_output=True,
                          text=True, check=True).stdout.strip()
    # A realistic history: the fields a real run writes, every run on the (only) commit there is.
    for n in range(1, log_runs + 1):
        log.append(str(repo / "autoresearch.jsonl"), {
            "run": n, "commit": head, "metric": 100.0 + (n % 7), "metrics": {"loss": 100.0 + (n % 7)},
            "status": "keep" if n == 1 else ("discard" if n % 5 else "crash"),
            "description": f"historic experiment {n} with a description of typical length",
            "timestamp": int(time.time() * 1000), "segment": 0, "confidence": 1.5, "asi": {},
            "duration_s": 300.0, "reason": "worse than the best", "best_before": 100.0, "threshold": 0.0,
            "diagnosis": None, "run_dir": f".autoresearch/runs/{n}", "ref": f"refs/autoresearch/runs/{n}",
            "scope_hash": f"{n:016x}", "scope_lines": 1, "repeat_of": None})


def cli(repo, *args, src=SRC):
    env = dict(os.environ, PYTHONPATH=str(src))
    # Measure the engine as users run it: with Python's bytecode cache (some sandboxes turn it off).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    proc = subprocess.run([sys.executable, "-m", "autoresearch", *args], cwd=repo, env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"autoresearch {' '.join(args)} failed: {proc.stderr}")
    return proc


def time_experiments(repo, runs, src=SRC, first=0, walls=None):
    """The engine's time per experiment (wall minus the record's duration_s); `walls` gets each
    whole call's wall time."""
    overhead = []
    for i in range(first, first + runs):
        # Even experiments improve (kept: a commit), odd ones regress (discarded: a reset).
        value = 99.5 - i if i % 2 == 0 else 1000.0 + i
        (repo / "value.txt").write_text(f"{value}\n")
        start = time.perf_counter()
        proc = cli(repo, "run", "-q", "-m", f"experiment {i}", "--json", src=src)
        wall = time.perf_counter() - start
        record = json.loads(proc.stdout)["record"]
        assert record["status"] == ("keep" if i % 2 == 0 else "discard"), record
        overhead.append(wall - record["duration_s"])
        if walls is not None:
            walls.append(wall)
    return overhead


def time_reference(command, cwd, runs):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, cwd=cwd, check=True)
        times.append(time.perf_counter() - start)
    return times


def time_manual_git(repo, runs):
    """What an agent does by hand per experiment: commit the change, reset on a discard."""
    new_repo(repo, {"value.txt": "0\n"})
    times = []
    for i in range(runs):
        (repo / "value.txt").write_text(f"{i + 1}\n")
        start = time.perf_counter()
        git(repo, "commit", "-q", "-am", f"try {i}")
        git(repo, "reset", "-q", "--hard", "HEAD~1")
        times.append(time.perf_counter() - start)
    return times


if __name__ == "__main__":
    main()
