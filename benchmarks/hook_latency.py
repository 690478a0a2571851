"""How long each plugin hook takes, as Claude Code runs it, against a bare interpreter start.

Every hook is a fresh `python3 hooks/<name>.py` process fed the stdin JSON Claude Code sends.
The reference, measured in the same run on the same machine, is the least any Python hook
can cost: `python3 -c 'import json,sys; json.load(sys.stdin)'` on the same input. The ratio
says how much our work (finding the repo, asking the engine in-process, deciding) adds.

    python3 benchmarks/hook_latency.py [--repeats 30] [--runs 50]

`--runs` records that many experiments in the repo first, so the log has a realistic size.
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
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
