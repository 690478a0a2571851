"""Score a PreToolUse hook against the corpus of real-looking commands (tests/plugin/hook_corpus.py).

Each command goes to the hook as Claude Code sends it (a fresh `python3 hook.py` process, the
PreToolUse JSON on stdin) in a real research repo; a write to a protected file must be
denied, a read must pass. Prints the writes let through and the reads wrongly denied, for
this checkout's hook and, with --against REV, for the hook at that git revision.

    python3 benchmarks/hook_corpus.py [--against main] [--show]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "plugin"))

import hook_corpus  # noqa: E402


def score(hook, repo):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "AUTORESEARCH"))}
    missed, wrong = [], []
    for kind, commands in (("write", hook_corpus.WRITES), ("read", hook_corpus.READS)):
        for command in commands:
            proc = subprocess.run([sys.executable, str(hook)], input=json.dumps(hook_corpus.payload(repo, command)),
                                  capture_output=True, text=True, env=env, timeout=60)
            denied = '"deny"' in proc.stdout
            if kind == "write" and not denied:
                missed.append(command)
            if kind == "read" and denied:
                wrong.append(command)
    return missed, wrong


def old_hook(rev, folder):
    for name in subprocess.run(["git", "ls-tree", "--name-only", rev, "hooks/"], cwd=ROOT, capture_output=True,
                               text=True, check=True).stdout.split():
        data = subprocess.run(["git", "show", f"{rev}:{name}"], cwd=ROOT, capture_output=True, check=True).stdout
        (folder / Path(name).name).write_bytes(data)
    return folder / "pre_tool_use.py"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", metavar="REV", help="also score the hook at this git revision")
    ap.add_argument("--show", action="store_true", help="list the commands each hook gets wrong")
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    with tempfile.TemporaryDirectory() as tmp:
        repo = hook_corpus.make_repo(Path(tmp) / "research", env)
        hooks = {"this checkout": ROOT / "hooks" / "pre_tool_use.py"}
        if args.against:
            folder = Path(tmp) / "old-hooks"
            folder.mkdir()
            hooks[args.against] = old_hook(args.against, folder)
        results = {}
        print(f"corpus: {len(hook_corpus.WRITES)} writes to protected files, {len(hook_corpus.READS)} other commands")
        for label, hook in hooks.items():
            missed, wrong = score(hook, repo)
            results[label] = {"writes_let_through": len(missed), "reads_denied": len(wrong)}
            print(f"{label:>15}: {len(missed):3d} of {len(hook_corpus.WRITES)} writes let through, "
                  f"{len(wrong):3d} of {len(hook_corpus.READS)} reads wrongly denied")
            if args.show:
                for c in missed:
                    print(f"    let through: {c!r}")
                for c in wrong:
                    print(f"    denied:      {c!r}")
        print(json.dumps(results))


if __name__ == "__main__":
    main()
