"""How long each plugin hook takes, as Claude Code runs it, against a bare interpreter start.

Every hook is a fresh `python3 hooks/<name>.py` process fed the stdin JSON Claude Code sends.
The reference, measured in the same run on the same machine, is the least any Python hook
can cost: `python3 -c 'import json,sys; json.load(sys.stdin)'` on the same input. The ratio
says how much our work (finding the repo, asking the engine in-process, deciding) adds.

    python3 benchmarks/hook_latency.py [--repeats 30] [--runs 50] [--log-runs 50000]

`--runs` records that many experiments in the repo first, so the log has a realistic size.
`--log-runs N` then appends N more run records, as the engine writes them (a night of 50,000
runs would take weeks to record for real), and times `status`, `brief` and the hooks three
ways: with the log unchanged since the last command (the log cache's view), after one new run
(the cache adds one line), and cold (no cache: the whole log is read, as before the cache).
`--pycache user` (the default) runs them as on a user's machine, where Python keeps the
compiled bytecode of the engine's modules (here in a temporary PYTHONPYCACHEPREFIX, filled by
the first call); `--pycache none` as where PYTHONDONTWRITEBYTECODE is set and nothing is
cached (some CI images), so every call compiles every module it imports.
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

ROOT = Path(__file__).resolve().parent.parent
SESSION = "bench-session"
sys.path.insert(0, str(ROOT / "src"))


def engine(repo, *args):
    env = dict(os.environ, CLAUDE_CODE_SESSION_ID=SESSION)
    subprocess.run([str(ROOT / "bin" / "autoresearch"), *args], cwd=repo, env=env, check=True,
                   capture_output=True)


def make_repo(path, runs):
    path.mkdir()
    (path / "prepare.py").write_text("EVAL = 'fixed'\n")
    (path / "train.py").write_text("OFFSET = 0\nprint(f'METRIC loss={2.0 + OFFSET}')\n")
    subprocess.run(["git", "init", "-q"], cwd=path, check=True)
    engine(path, "init", "--metric", "loss", "--command", "python3 train.py", "--scope", "train.py",
           "--fixed", "prepare.py")
    for k in range(runs):
        (path / "train.py").write_text(f"OFFSET = {k % 7}\nprint(f'METRIC loss={{2.0 + OFFSET}}')\n")
        engine(path, "run", "-m", f"experiment {k}", "--force")
    return path


def append_runs(repo, count, start):
    """`count` run records after run `start`, shaped like the engine's (commit, metrics, reason...)."""
    import random
    from autoresearch.store import log
    rng = random.Random(0)
    best, lines = 2.0, []
    for n in range(start + 1, start + count + 1):
        metric = round(best + rng.gauss(0.002, 0.003), 6)
        status = "keep" if metric < best - 0.001 else rng.choice(["discard"] * 8 + ["crash"])
        best = metric if status == "keep" else best
        lines.append(log._encode({
            "run": n, "commit": f"{rng.getrandbits(28):07x}", "metric": None if status == "crash" else metric,
            "metrics": {"loss": metric, "peak_vram_mb": 40000.0}, "status": status,
            "description": f"experiment {n}: lr {rng.random():.4f} with warmup", "timestamp": 1.7e12 + n * 360000,
            "segment": 0, "duration_s": 330.0, "reason": "gain within the noise threshold", "best_before": best,
            "threshold": 0.0, "run_dir": f".autoresearch/runs/{n}", "ref": f"refs/autoresearch/runs/{n}",
            "scope_hash": f"{rng.getrandbits(64):016x}", "scope_lines": 300, "exit_code": 0}))
    _append_chained(repo / "autoresearch.jsonl", lines)
    return start + count


def _append_chained(path, lines):
    """Append encoded records as log.append does, each linked to the line before it (the log's
    hash chain), in one write: a night's worth of records in seconds, not one fsync each."""
    import json as _json
    from autoresearch.store import chain
    folder = chain.state_dir(path)
    first = _json.loads(lines[0])
    first, folder = chain.link(path, first)
    if folder is None:   # an unchained log: the lines as they are
        with open(path, "ab") as f:
            f.write(b"".join(lines))
        return
    prev, linked = first[chain.FIELD], []
    for raw in lines:
        record = _json.loads(raw)
        record[chain.FIELD] = prev
        line = _json.dumps(record, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode() + b"\n"
        linked.append(line)
        prev = chain.line_hash(line)
    data = b"".join(linked)
    size = os.path.getsize(path)
    chain.begin(folder, linked[-1], chain.line_hash(linked[-2]) if len(linked) > 1 else first[chain.FIELD],
                size + len(data))
    with open(path, "ab") as f:
        f.write(data)
    chain.copy_append(folder, data)


def timed(cmd, payload, repeats):
    data = json.dumps(payload).encode()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(cmd, input=data, capture_output=True, check=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--log-runs", type=int, default=0, metavar="N",
                        help="append N engine-shaped run records, then time status/brief/hooks at that length")
    parser.add_argument("--pycache", choices=("user", "none"), default="user",
                        help="with --log-runs: bytecode cached as Python does by default, or none at all")
    args = parser.parse_args()
    if args.log_runs:
        return long_log(args)
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp) / "research", args.runs)
        common = {"session_id": SESSION, "transcript_path": "/dev/null", "cwd": str(repo)}
        cases = {
            "Stop (blocks, with brief)": ("stop", dict(common, hook_event_name="Stop", stop_hook_active=True)),
            "SessionStart (compact)": ("session_start", dict(common, hook_event_name="SessionStart",
                                                             source="compact")),
            "PreToolUse Edit prepare.py (deny)": ("pre_tool_use", dict(
                common, hook_event_name="PreToolUse", tool_name="Edit",
                tool_input={"file_path": str(repo / "prepare.py")})),
            "PreToolUse Bash (allow)": ("pre_tool_use", dict(
                common, hook_event_name="PreToolUse", tool_name="Bash",
                tool_input={"command": "sed -i 's/OFFSET = .*/OFFSET = 1/' train.py && autoresearch run -m x"})),
        }
        reference = timed([sys.executable, "-c", "import json,sys; json.load(sys.stdin)"],
                          cases["Stop (blocks, with brief)"][1], args.repeats)
        counter = repo / ".autoresearch" / "stop-hook.json"
        print(f"python {sys.version.split()[0]}, log with {args.runs} runs, median of {args.repeats}")
        print(f"{'reference: bare python3 reading the input':45s} {reference * 1000:7.1f} ms   1.00x")
        for label, (name, payload) in cases.items():
            counter.unlink(missing_ok=True)  # keep the Stop hook below its stuck limit
            if name == "stop":
                seconds = statistics.median(
                    _stop_once(name, payload, counter) for _ in range(args.repeats))
            else:
                seconds = timed([sys.executable, str(ROOT / "hooks" / f"{name}.py")], payload, args.repeats)
            print(f"{label:45s} {seconds * 1000:7.1f} ms {seconds / reference:6.2f}x")


def _stop_once(name, payload, counter):
    counter.unlink(missing_ok=True)
    return timed([sys.executable, str(ROOT / "hooks" / f"{name}.py")], payload, 1)




def long_log(args):
    """status, brief and the hooks at a long log: unchanged, after one new run, and cold."""
    env = dict(os.environ, CLAUDE_CODE_SESSION_ID=SESSION, PYTHONPATH=str(ROOT / "src"))
    with tempfile.TemporaryDirectory() as tmp:
        if args.pycache == "user":   # the engine's bytecode in a folder of its own, written by the first call
            env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
            env.pop("PYTHONDONTWRITEBYTECODE", None)
        else:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
            if any((ROOT / "src").glob("*/__pycache__")):
                print("note: src/*/__pycache__ exists and is used; delete it to time a checkout without bytecode")
        repo = make_repo(Path(tmp) / "research", args.runs)
        last = append_runs(repo, args.log_runs, args.runs)
        common = {"session_id": SESSION, "transcript_path": "/dev/null", "cwd": str(repo)}
        stop = dict(common, hook_event_name="Stop", stop_hook_active=True)
        start = dict(common, hook_event_name="SessionStart", source="compact")
        cases = {
            "autoresearch status": ([sys.executable, "-m", "autoresearch", "status"], None),
            "autoresearch brief": ([sys.executable, "-m", "autoresearch", "brief"], None),
            "Stop hook": ([sys.executable, str(ROOT / "hooks" / "stop.py")], stop),
            "SessionStart hook": ([sys.executable, str(ROOT / "hooks" / "session_start.py")], start),
        }
        counter = repo / ".autoresearch" / "stop-hook.json"
        cache = repo / ".autoresearch" / "cache"

        def once(cmd, payload):
            counter.unlink(missing_ok=True)
            data = json.dumps(payload).encode() if payload else b""
            t0 = time.perf_counter()
            subprocess.run(cmd, input=data, capture_output=True, check=True, cwd=repo, env=env)
            return time.perf_counter() - t0

        reference = statistics.median(
            once([sys.executable, "-c", "import json,sys; json.load(sys.stdin)"], stop) for _ in range(args.repeats))
        results = {"runs_in_log": last, "log_mib": round((repo / "autoresearch.jsonl").stat().st_size / 2**20, 1),
                   "reference_ms": round(reference * 1000, 1), "load_avg_1m": round(os.getloadavg()[0], 2),
                   "pycache": args.pycache}
        print(f"python {sys.version.split()[0]}, log with {last} runs ({results['log_mib']} MiB), "
              f"median of {args.repeats}, load average {results['load_avg_1m']}, bytecode cache: {args.pycache}")
        print(f"{'reference: bare python3 reading the input':40s} {reference * 1000:8.1f} ms   1.00x")
        for label, (cmd, payload) in cases.items():
            once(cmd, payload)   # the cache is made
            unchanged = statistics.median(once(cmd, payload) for _ in range(args.repeats))
            grown = []
            for _ in range(max(3, args.repeats // 3)):
                last = append_runs(repo, 1, last)
                grown.append(once(cmd, payload))
            grown = statistics.median(grown)
            colds = []
            for _ in range(3):
                subprocess.run(["rm", "-rf", str(cache)], check=True)
                colds.append(once(cmd, payload))
            cold = statistics.median(colds)
            results[label] = {"unchanged_ms": round(unchanged * 1000, 1), "one_new_run_ms": round(grown * 1000, 1),
                              "cold_ms": round(cold * 1000, 1), "unchanged_x": round(unchanged / reference, 2),
                              "one_new_run_x": round(grown / reference, 2), "cold_x": round(cold / reference, 2)}
            print(f"{label:40s} unchanged {unchanged * 1000:7.1f} ms {unchanged / reference:5.1f}x | "
                  f"one new run {grown * 1000:7.1f} ms {grown / reference:5.1f}x | "
                  f"cold (whole log) {cold * 1000:7.1f} ms {cold / reference:5.1f}x")
        print(json.dumps(results))


if __name__ == "__main__":
    main()
