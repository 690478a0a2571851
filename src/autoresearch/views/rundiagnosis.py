"""`autoresearch diagnose`: a log, or a recorded run diagnosed again from its own files.

The engine diagnoses a crash while HEAD still holds the run's commit; by the morning it has
rolled `./train.py` back to the best. So `diagnose N` reads the run's output from its folder,
`train.py` and `prepare.py` from the run's own commit (refs/autoresearch/runs/N), and the
settings the engine recorded (status, reason, metrics, the best at the time), and gives exactly
the diagnosis the engine recorded. `diagnose LOG` on a run's output inside a research repo
warns when `./train.py` is not that run's.
"""

import argparse
import json
import os
import re
import sys
import tempfile

from gpu_train_debug import config as config_reader
from gpu_train_debug import diagnose as diagnose_text

from autoresearch.errors import Refused, UsageError
from autoresearch.pipeline.diagnosis import build_profile, harness_constants, read_log, short
from autoresearch.store import gitops, log, research

HARNESS = ("train.py", "prepare.py", "harness.py")   # what the diagnoser reads constants from
RUN_LOG = re.compile(r"(?:^|/)\.autoresearch/runs/(\d+)/[^/]+$")


def find_run(repo, number):
    """The run's `log.Run` and its segment's `log.Config`, or Refused."""
    night = log.load(repo.log, warn=lambda m: None)
    for seg in night.segments:
        for run in seg.runs:
            if run.run == number:
                return run, seg.config
    raise Refused(f"no run {number} in {log.LOG_NAME}; `autoresearch status` lists the last runs")


def status_of(run):
    """The status the engine diagnosed the run under."""
    recorded = (run.diagnosis or {}).get("status")
    if isinstance(recorded, str):
        return recorded
    return run.status if run.status in ("crash", "timeout") else "implausible"


def diagnose_run(repo, number):
    """(diagnosis dict, run) for run `number`, from its folder, its commit and its record."""
    from autoresearch.pipeline import verdict
    run, config = find_run(repo, number)
    run_dir = os.path.join(repo.root, run.run_dir) if run.run_dir else repo.run_dir(number)
    if not os.path.isfile(os.path.join(run_dir, "output.log")):
        raise Refused(f"run {number} has no output.log in {repo.rel(run_dir)}; nothing to diagnose")
    commit = gitops.commit_of_run(repo.root, number, run.commit)
    if commit is None:
        raise Refused(f"the commit of run {number} ({run.commit}) is not in git; "
                      f"`autoresearch diagnose {repo.rel(os.path.join(run_dir, 'output.log'))}` reads ./train.py instead")
    with tempfile.TemporaryDirectory(prefix=f"autoresearch-run{number}-") as tree:
        for name in HARNESS:
            text = gitops.git(repo.root, "show", f"{commit}:{name}", check=False)
            if text is not None:
                with open(os.path.join(tree, name), "w", encoding="utf-8") as f:
                    f.write(text + "\n")
        result = verdict.diagnose_record(tree, run_dir, status_of(run), run, config or log.Config())
    return result, run


def stale_train_py(logfile):
    """A warning when `logfile` is a run's output in a research repo whose ./train.py is not
    that run's (None when it is, or when the log is not a run's)."""
    path = os.path.abspath(logfile)
    root = gitops.toplevel(os.path.dirname(path))
    match = RUN_LOG.search(path.replace(os.sep, "/"))
    if root is None or match is None or not os.path.isfile(os.path.join(root, log.LOG_NAME)):
        return None
    number = int(match.group(1))
    repo = research.Repo(root)
    commit = gitops.commit_of_run(root, number)
    if commit is None:
        return None
    theirs = gitops.git(root, "show", f"{commit}:train.py", check=False)
    try:
        with open(os.path.join(root, "train.py"), encoding="utf-8") as f:
            ours = f.read()
    except OSError:
        ours = None
    if theirs is None or ours is None or ours.rstrip("\n") == theirs.rstrip("\n"):
        return None
    return (f"./train.py is not run {number}'s (the engine put HEAD back at the best commit); "
            f"`autoresearch diagnose {number}` reads the run's own train.py and recorded settings"
            + ("" if repo.root == os.getcwd() else f" (in {repo.root})"))


def add_parsers(sub):
    parser = sub.add_parser(
        "diagnose", help="explain a crashed or suspicious training log and propose the minimal fix",
        description="Read a training log (and train.py's constants) and print the failure family, "
                    "codes, the computed intermediates and the minimal fix of train.py constants.",
        epilog="examples:\n  autoresearch diagnose 7          (run 7: its output, its commit's train.py, its record)\n"
               "  autoresearch diagnose .autoresearch/runs/7/output.log\n"
               "  autoresearch diagnose run.log --config train.py --json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("logfile", metavar="LOGFILE|RUN",
                        help="the training output to diagnose, or a run number of this research repo")
    parser.add_argument("--config", metavar="FILE",
                        help="train.py whose constants to read (default: ./train.py if present); "
                             "a prepare.py next to it is read too")
    parser.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    parser.set_defaults(func=_cmd_diagnose)


def _cmd_diagnose(args):
    if args.logfile.isdigit() and not os.path.isfile(args.logfile):
        return _cmd_diagnose_run(args)
    if not os.path.isfile(args.logfile):
        raise UsageError(f"diagnose: no such log file: {args.logfile} (pass the run's output.log)")
    config_path = args.config or ("train.py" if os.path.isfile("train.py") else None)
    if args.config and not os.path.isfile(args.config):
        raise UsageError(f"diagnose: no such config file: {args.config} (pass your train.py)")
    config = {}
    if config_path:
        config = harness_constants(os.path.join(os.path.dirname(config_path) or ".", "prepare.py"))
        config.update(config_reader.read_constants(config_path))
    run_dir = os.path.dirname(os.path.abspath(args.logfile))
    profile = build_profile(run_dir)
    result = diagnose_text(read_log(args.logfile), config, profile)
    stale = stale_train_py(args.logfile) if not args.config else None
    _print(args, result, stale)
    return 0


def _cmd_diagnose_run(args):
    """`diagnose N`: the run's own output, commit and recorded settings."""
    if args.config:
        raise UsageError("diagnose N reads the run's own train.py; --config goes with a LOGFILE")
    result, _ = diagnose_run(research.find(), int(args.logfile))
    _print(args, result, None)
    return 0


def _print(args, result, warning):
    if args.json:
        print(json.dumps(dict(result, warning=warning) if warning else result, sort_keys=False))
        return
    if warning:
        print(f"autoresearch: warning: {warning}", file=sys.stderr)
    print(short(result).splitlines()[0])
    for key, value in result["intermediates"].items():
        print(f"  {key}: {value}")
    print(result["explanation"])
