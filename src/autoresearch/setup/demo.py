"""`autoresearch demo`: the whole loop on whatever machine this is, in a few minutes.

It makes a scratch research repo from the ML template, prepares data, sets a deliberately poor
baseline (every learning rate 100x too small), then drives the real engine through the baseline
and three scripted experiments (the repair, which wins by many noise widths on any machine, a
regression, and a crash that gets diagnosed), printing each verdict right after its run, and
writes the morning report.

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
import tempfile
import time
from pathlib import Path

import autoresearch
from autoresearch.store import gitops
from autoresearch.errors import Refused

EXAMPLES = """\
examples:
  autoresearch demo                      # scratch repo ./autoresearch-demo, offline data on CPU
  autoresearch demo --dir /tmp/ar-demo   # somewhere else
  autoresearch demo --force              # replace an earlier demo folder
  autoresearch demo --profile full       # real data and the 5-minute budget (needs a GPU and network)
"""

# The demo starts from a deliberately poor setting, made by its own scripted set-up (not by the
# template): every learning rate 100x too small, so the optimizer barely moves in the budget.
# The first scripted experiment repairs it, a change that wins by many noise widths on any
# machine, however slow or loaded; the second regresses (learning rates 10x too small), the
# third crashes (a device batch of 7 cannot divide the total batch) and gets diagnosed.
LEARNING_RATES = ("EMBEDDING_LR", "UNEMBEDDING_LR", "MATRIX_LR", "SCALAR_LR")
POOR = ("every learning rate 100x too small", 0.01)
EXPERIMENTS = [
    ("repair the learning rates (back to the template's)", 1.0),
    ("cut every learning rate 10x", 0.1),
    ("device batch that does not divide the total batch", {"DEVICE_BATCH_SIZE": "7"}),
]
STEPS = 7

# On the synthetic smoke data repairing the learning rates cuts val_bpb by ~90%: on real text
# that would be a bug (the ML default refuses gains over 30% in one run), here it is the point.
SMOKE_IMPLAUSIBLE_GAIN = "0"   # off


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

    _step(1, "init: copy the ML template and record the fixed harness")
    _git(target, "init", "-q")
    (target / ".git" / "info" / "exclude").write_text(".cache/\nreport.html\nprogress.png\n")
    # Two baseline runs measure the noise, so a win must beat the spread of the same code.
    init = ["init", "--template", "ml", "--name", "autoresearch demo", "--max-iterations", "10",
            "--noise-runs", "2"]
    if profile == "smoke":
        init += ["--implausible-gain", SMOKE_IMPLAUSIBLE_GAIN]
    config = _quiet_json(target, env, *init)["config"]
    _say(f"  segment {config['segment']}: {config['metricName']} ({config['bestDirection']} is better), "
         f"scope {' '.join(config['scope'])}, fixed {' '.join(config['fixed'])}")

    _step(2, "prepare data and tokenizer, size the baseline to this machine")
    _say("  " + _quiet(target, env, [sys.executable, "prepare.py", *_prepare_args(profile)], "prepare.py"))

    template_rates = _read_constants(target / "train.py", LEARNING_RATES)
    _step(3, f"baseline, measured twice for the noise threshold, from a deliberately poor setting: {POOR[0]}")
    _edit_constants(target / "train.py", _scaled(template_rates, POOR[1]))
    results = _experiment(target, env, f"baseline with {POOR[0]}", baseline=True)
    for number, (description, change) in enumerate(EXPERIMENTS, start=4):
        _step(number, f"experiment: {description}")
        _edit_constants(target / "train.py", _scaled(template_rates, change) if isinstance(change, float) else change)
        results += _experiment(target, env, description)

    _step(STEPS, "the morning report")
    report = target / "report.html"
    _quiet(target, env, [sys.executable, "-m", "autoresearch", "report", "-o", str(report)], "report")
    status = json.loads(subprocess.run([sys.executable, "-m", "autoresearch", "status", "--json"], cwd=target,
                                       env=env, capture_output=True, text=True).stdout)
    _summarise(results, status, report, profile, time.time() - t0)
    return 0


def _scaled(rates, factor):
    """The learning rates `factor` times the template's, written as plain numbers."""
    return {name: repr(float(f"{value * factor:.6g}")) for name, value in rates.items()}


def _read_constants(path, names):
    import ast
    values = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id in names and isinstance(node.value, ast.Constant):
            values[node.targets[0].id] = float(node.value.value)
    missing = [n for n in names if n not in values]
    if missing:
        raise Refused(f"train.py has no constant {missing[0]}; the template changed, update autoresearch/setup/demo.py")
    return values


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
    src = autoresearch.SRC_DIR
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
    """One `autoresearch run`, quiet, with a progress line while it trains and its verdict
    right after; returns its records."""
    args = ["run", "-q", "-m", description, "--json"] + (["--baseline"] if baseline else [])
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-m", "autoresearch", *args], cwd=repo, env=env,
                                stdout=out, stderr=err, text=True)
        _progress(repo, proc)
        out.seek(0)
        err.seek(0)
        text, errors = out.read(), err.read()
    try:
        records = json.loads(text).get("records")
    except (json.JSONDecodeError, AttributeError):
        records = None
    if proc.returncode != 0 or not records:
        sys.stderr.write(errors)
        raise Refused(f"`autoresearch {' '.join(args)}` failed (exit {proc.returncode}); "
                      f"its output is above and in {repo}/.autoresearch/runs")
    for record in records:
        _verdict(repo, record)
    return records


def _progress(repo, proc):
    """While the run trains: one line that updates in place on a terminal (nothing in a log)."""
    tty = sys.stderr.isatty()
    shown = False
    while proc.poll() is None:
        time.sleep(1.0)
        if not tty:
            continue
        step = _last_step(repo)
        if step:
            line = f"  training run {step[0]}: step {step[1].get('step')}, loss {step[1].get('loss', 0):.4f}, " \
                   f"{step[1].get('elapsed_s', 0):.0f} s"
            sys.stderr.write("\r" + line[:100].ljust(100))
            sys.stderr.flush()
            shown = True
    if shown:
        sys.stderr.write("\r" + " " * 100 + "\r")
        sys.stderr.flush()


def _last_step(repo):
    try:
        current = json.loads((repo / ".autoresearch" / "current.json").read_text())
        lines = (repo / ".autoresearch" / "runs" / str(current["run"]) / "steps.jsonl").read_bytes().splitlines()
        return current["run"], json.loads(lines[-1])
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None


def _verdict(repo, raw):
    """The engine's verdict on one run, as `autoresearch run` prints it, without the output tail."""
    from autoresearch.pipeline import diagnosis
    from autoresearch.store import log
    from autoresearch.pipeline.experiment import Outcome, outcome_lines
    record = log.Run.from_json(raw)
    line = diagnosis.short(record.diagnosis).splitlines()[0] if record.diagnosis else None
    for text in outcome_lines(Outcome(record, diagnosis_line=line), "val_bpb", "", "lower"):
        _say("  " + text)
    steps = record.metrics.get("num_steps")
    if steps is not None:
        _say(f"    ({steps:.0f} optimizer steps; the output is in {record.run_dir}/output.log)")


def _edit_constants(path, changes):
    """Rewrite `NAME = value` lines of train.py, as the agent would with its editor."""
    text = path.read_text()
    for name, value in changes.items():
        text, count = re.subn(rf"^({re.escape(name)}\s*=\s*)[^#\n]*?(\s*(#.*)?)$",
                              lambda m: f"{m.group(1)}{value}{m.group(2)}", text, count=1, flags=re.M)
        if count != 1:
            raise Refused(f"train.py has no constant {name}; the template changed, update autoresearch/setup/demo.py")
    path.write_text(text)


def _quiet_json(repo, env, *args):
    """An engine command with --json: its object (its text is shown only when it fails)."""
    proc = subprocess.run([sys.executable, "-m", "autoresearch", *args, "--json"], cwd=repo, env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr + proc.stdout)
        raise Refused(f"`autoresearch {' '.join(args)}` failed with exit {proc.returncode} in {repo}; its output is above")
    return json.loads(proc.stdout)


def _quiet(repo, env, cmd, name):
    """A set-up command: its last line on success, all of its output when it fails."""
    proc = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise Refused(f"`{name}` failed with exit {proc.returncode} in {repo}; its output is above")
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    return lines[-1].strip() if lines else "done"


def _git(repo, *args):
    subprocess.run(gitops.command(*args), cwd=repo, check=True)


def _step(number, text):
    _say(f"\n== demo {number}/{STEPS} {text}")


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
    best, change = status.get("best") or {}, status.get("change") or {}
    if best:
        _say(f"  best: run {best['run']} val_bpb {best['metric']:.6f} ({change.get('text', '')}): {best['description']}")
    if profile == "smoke":
        _say("  These are smoke-run numbers (offline synthetic data, tiny model, short budget on this machine):"
             " they show the loop works, not what a GPU reaches.")
    _say(f"  report: {report}")
    _say(f"  log:    {report.parent / 'autoresearch.jsonl'}")
