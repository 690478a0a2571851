"""`autoresearch demo`: the whole loop on whatever machine this is, in a few minutes.

It makes a scratch research repo from the ML template, prepares data, then drives the real
engine through a baseline and three scripted experiments (one meant to win, one that
regresses, one that crashes and gets diagnosed), and writes the morning report.

Everything goes through the real CLI in subprocesses, exactly as the agent would use it,
so the demo is also an end-to-end check of the product. Standard library only at import.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from autoresearch.cli import Refused

EXAMPLES = """\
examples:
  autoresearch demo                      # scratch repo ./autoresearch-demo, offline data on CPU
  autoresearch demo --dir /tmp/ar-demo   # somewhere else
  autoresearch demo --force              # replace an earlier demo folder
  autoresearch demo --profile full       # real data and the 5-minute budget (needs a GPU and network)
"""

# The scripted experiments: (description, {train.py constant: new value as source text}).
# Chosen so the outcome does not depend on luck on a CPU smoke run: in a 20-second budget a
# halved batch buys twice the optimizer steps, the 100x smaller learning rates starve the
# optimizer, and a device batch of 7 cannot divide the total batch.
EXPERIMENTS = [
    ("halve the total batch: twice the optimizer steps in the budget", {"TOTAL_BATCH_SIZE": "2048"}),
    ("cut every learning rate 100x", {"MATRIX_LR": "0.0004", "EMBEDDING_LR": "0.006",
                                      "UNEMBEDDING_LR": "0.00004", "SCALAR_LR": "0.005"}),
    ("device batch that does not divide the total batch", {"DEVICE_BATCH_SIZE": "7"}),
]

# On the synthetic smoke data a good change can cut val_bpb by half, which the ML default
# (a gain over 30% in one run is implausible on real text) would refuse to keep.
SMOKE_IMPLAUSIBLE_GAIN = "0.9"


def add_parsers(sub):
    p = sub.add_parser(
        "demo",
        help="try the whole loop on this machine: template, data, experiments, report",
        description=(
            "Make a scratch research repo from the ML template, prepare data, run a baseline and "
            "three scripted experiments through the real engine (one meant to win, one regression, "
            "one crash that gets diagnosed), and write the report. On a CPU this is a smoke run "
            "of a few minutes: the numbers show the loop works, not what a GPU would reach."
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--dir", default="autoresearch-demo", help="scratch folder for the research repo (default: %(default)s)")
    p.add_argument("--force", action="store_true", help="delete the folder first if it already exists")
    p.add_argument("--profile", choices=["auto", "smoke", "full"], default="auto",
                   help="smoke: offline data, tiny model, short budget (CPU); full: real data, 5-minute runs; "
                        "auto: full only when a CUDA GPU and the network are there (default)")
    p.set_defaults(func=run_demo)


def run_demo(args):
    target = Path(args.dir).resolve()
    _check_torch()
    profile = args.profile if args.profile != "auto" else _auto_profile()
    _make_scratch(target, args.force)
    env = _demo_env(profile, target)
    t0 = time.time()
    _say(f"demo: research repo {target} (profile {profile})")

    _step("1/6 init: copy the ML template and record the fixed harness")
    _git(target, "init", "-q")
    (target / ".git" / "info" / "exclude").write_text(".cache/\nreport.html\nprogress.png\n")
    # Two baseline runs measure the noise, so a win must beat the spread of the same code.
    init = ["init", "--template", "ml", "--name", "autoresearch demo", "--max-iterations", "10",
            "--noise-runs", "2"]
    if profile == "smoke":
        init += ["--implausible-gain", SMOKE_IMPLAUSIBLE_GAIN]
    _cli(target, env, *init)

    _step("2/6 prepare data and tokenizer")
    _run([sys.executable, "prepare.py", *_prepare_args(profile)], target, env)

    _step("3/6 baseline, measured twice for the noise threshold")
    results = _experiment(target, env, "baseline", baseline=True)
    for number, (description, changes) in enumerate(EXPERIMENTS, start=4):
        _step(f"{number}/6 experiment: {description}")
        _edit_constants(target / "train.py", changes)
        results += _experiment(target, env, description)

    report = target / "report.html"
    _cli(target, env, "report", "-o", str(report))
    status = json.loads(subprocess.run([sys.executable, "-m", "autoresearch", "status", "--json"], cwd=target,
                                       env=env, capture_output=True, text=True).stdout)
    _summarise(results, status, report, profile, time.time() - t0)
    return 0


def _check_torch():
    probe = subprocess.run([sys.executable, "-c", "import torch, tiktoken, rustbpe, pyarrow"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        raise Refused(f"the demo trains a model and needs torch, tiktoken, rustbpe and pyarrow in {sys.executable}: "
                      "run `make setup` in the autoresearch checkout (or `pip install -e '.[ml]'` there) first")


def _auto_profile():
    has_gpu = subprocess.run([sys.executable, "-c", "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)"],
                             capture_output=True).returncode == 0
    if not has_gpu:
        return "smoke"
    online = subprocess.run([sys.executable, "-c",
                             "import urllib.request; urllib.request.urlopen('https://huggingface.co', timeout=5)"],
                            capture_output=True).returncode == 0
    return "full" if online else "smoke"


def _make_scratch(target, force):
    if target.exists() and any(target.iterdir()):
        if not force:
            raise Refused(f"{target} already exists and is not empty; pass --force to replace it "
                          "(with make: `make demo DEMO_ARGS=--force`) or --dir to pick another folder")
        shutil.rmtree(target)
    target.mkdir(parents=True, exist_ok=True)


def _demo_env(profile, target):
    env = dict(os.environ)
    # Data and tokenizer live inside the demo folder, so the demo never replaces data that a
    # real research repo on this machine prepared in ~/.cache/autoresearch.
    env["AUTORESEARCH_CACHE"] = str(target / ".cache")
    # The research repo uses this Python (it already has torch), so no `uv sync` is needed.
    env["AUTORESEARCH_PYTHON"] = sys.executable
    src = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    # A fresh machine may have no git identity; the engine commits each experiment.
    env.setdefault("GIT_AUTHOR_NAME", "autoresearch demo")
    env.setdefault("GIT_AUTHOR_EMAIL", "demo@autoresearch.invalid")
    env.setdefault("GIT_COMMITTER_NAME", env["GIT_AUTHOR_NAME"])
    env.setdefault("GIT_COMMITTER_EMAIL", env["GIT_AUTHOR_EMAIL"])
    return env


def _prepare_args(profile):
    if profile == "smoke":
        return ["--source", "synthetic", "--profile", "smoke", "--fit-baseline"]
    return ["--num-shards", "4", "--fit-baseline"]


def _experiment(repo, env, description, baseline=False):
    args = ["run", "-m", description, "--json"] + (["--baseline"] if baseline else [])
    proc = subprocess.run([sys.executable, "-m", "autoresearch", *args], cwd=repo, env=env,
                          stdout=subprocess.PIPE, text=True)
    try:
        records = json.loads(proc.stdout).get("records")
    except (json.JSONDecodeError, AttributeError):
        records = None
    if proc.returncode != 0 or not records:
        raise Refused(f"`autoresearch {' '.join(args)}` failed (exit {proc.returncode}); "
                      f"its output is above and in {repo}/.autoresearch/runs")
    return records


def _edit_constants(path, changes):
    """Rewrite `NAME = value` lines of train.py, as the agent would with its editor."""
    text = path.read_text()
    for name, value in changes.items():
        text, count = re.subn(rf"^({re.escape(name)}\s*=\s*)[^#\n]*?(\s*(#.*)?)$",
                              lambda m: f"{m.group(1)}{value}{m.group(2)}", text, count=1, flags=re.M)
        if count != 1:
            raise Refused(f"train.py has no constant {name}; the template changed, update autoresearch/demo.py")
    path.write_text(text)


def _cli(repo, env, *args):
    _run([sys.executable, "-m", "autoresearch", *args], repo, env)


def _run(cmd, cwd, env):
    proc = subprocess.run(cmd, cwd=cwd, env=env)
    if proc.returncode != 0:
        raise Refused(f"`{' '.join(cmd[1:])}` failed with exit {proc.returncode} in {cwd}; its output is above")


def _git(repo, *args):
    subprocess.run(["git", *args], cwd=repo, check=True)


def _step(text):
    _say(f"\n== demo {text}")


def _say(text):
    print(text, file=sys.stderr, flush=True)


def _summarise(results, status, report, profile, seconds):
    _say("\n== demo done in %.0f s" % seconds)
    noise = status.get("noise") or {}
    if noise.get("threshold") is not None:
        _say(f"  noise threshold {noise['threshold']:.4g} bpb from {noise.get('samples')} repeated measurements:"
             " a change is kept only when it beats the best by more than that")
    for r in results:
        metric = r.get("metric")
        shown = "-" if metric is None else f"{metric:.6f}"
        what = r.get("description", "") + (f" (again, run {r['repeat_of']}'s code)" if r.get("repeat_of") else "")
        line = f"  run {r.get('run', '?'):>2}  {r.get('status', '?'):<8} val_bpb {shown:<9} {what}"
        diag = r.get("diagnosis") or {}
        if diag.get("family"):
            line += f"  [diagnosis: {diag['family']}]"
        _say(line)
    if profile == "smoke":
        _say("  These are smoke-run numbers (offline synthetic data, tiny model, short budget on this machine):"
             " they show the loop works, not what a GPU reaches.")
    _say(f"  report: {report}")
    _say(f"  log:    {report.parent / 'autoresearch.jsonl'}")
