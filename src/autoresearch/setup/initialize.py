"""`autoresearch init`: set up a research repo and start a segment of the log.

Writes a config header (a second `init` starts a new segment with a new baseline), records
the sha256 of each fixed file, the owner session and a hardware fingerprint, makes git ignore
the log and the state folder, and marks the session active. `--template ml` first copies the
ML research template (assets/ and autoresearch.sh) and fills in the ML defaults.
"""

import argparse
import os
import shutil

from autoresearch import agent_sandbox, errors, metrics, output
from autoresearch.decision import decide
from autoresearch.isolation import caches
from autoresearch.pipeline import recovery
from autoresearch.setup import torch_route
from autoresearch.store import gitops, log, research, state
from autoresearch.store.research import now_ms

ML_DEFAULTS = {
    "metric": "val_bpb", "direction": "lower", "unit": "bpb", "scope": ["train.py"],
    "fixed": ["prepare.py", "harness.py", "autoresearch.sh"], "command": "bash autoresearch.sh", "timeout": 900.0,
    "implausible_gain": decide.ML_IMPLAUSIBLE_GAIN, "name": "LLM pretraining: lower val_bpb",
}
ML_NOISE_RUNS = 3
DEFAULT_TIMEOUT = 600.0
DEFAULT_CHECKS_TIMEOUT = 300.0

EXAMPLES = """examples:
  autoresearch init --metric seconds --unit s --command "bash bench.sh" --scope src/ --fixed bench.sh
  autoresearch init --template ml --max-iterations 100
  autoresearch init --template ml --max-hours 8 --max-cost 25 --max-gpu-hours 8
  autoresearch init --metric loss --command "python train.py" --scope train.py --noise-runs 3 --confirm-borderline
"""


def add_parsers(sub):
    p = sub.add_parser("init", help="set up the research repo and start a segment of the log",
                       description=__doc__, epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--metric", help="name of the primary metric (as in `METRIC name=value`)")
    p.add_argument("--direction", choices=["lower", "higher"], help="which way is better (default lower)")
    p.add_argument("--unit", help="unit of the metric, for display")
    p.add_argument("--name", help="a title for this session")
    p.add_argument("--command", help="the benchmark command, run by bash in the repo root "
                   "(default: bash autoresearch.sh, if it exists)")
    p.add_argument("--scope", nargs="+", metavar="PATH",
                   help="files or folders the agent may change (default: train.py, if it exists)")
    p.add_argument("--fixed", nargs="*", metavar="PATH",
                   help="files that must not change (default: prepare.py and autoresearch.sh, if they exist)")
    p.add_argument("--timeout", type=_positive, metavar="S", help="seconds before a run is killed (default 600)")
    p.add_argument("--output-cap", type=_non_negative, metavar="MB", default=None,
                   help="most of a run's output kept in output.log: its head and tail, the cut marked "
                        "(default 32; 0 = no cap)")
    p.add_argument("--checks", metavar="CMD", help="a command that must pass after a successful benchmark")
    p.add_argument("--checks-timeout", type=_positive, metavar="S", default=DEFAULT_CHECKS_TIMEOUT,
                   help="seconds the checks command may take (default %(default)s)")
    p.add_argument("--max-iterations", type=errors.positive_int, metavar="N", help="stop after N runs in this segment")
    p.add_argument("--max-hours", type=_positive, metavar="H", help="stop H hours after init (wall clock)")
    p.add_argument("--max-gpu-hours", type=_positive, metavar="G",
                   help="stop when the runs have held the GPU(s) for G hours")
    p.add_argument("--max-cost", type=_positive, metavar="USD",
                   help="stop when the agent's tokens have cost USD dollars (read from its transcripts)")
    p.add_argument("--prices", metavar="FILE",
                   help="JSON price table for the ledger, USD per million tokens by model-id prefix "
                        "(default: Anthropic's list prices, see references/overnight.md)")
    p.add_argument("--template", choices=["ml"], help="copy the LLM pretraining template and use its defaults")
    p.add_argument("--noise-runs", type=errors.positive_int, metavar="K", default=None,
                   help="run the baseline K times to measure noise (default 1: no measurement; "
                        f"{ML_NOISE_RUNS} with --template ml, so the keep threshold is never 0 on a real night)")
    p.add_argument("--min-delta", type=_non_negative, metavar="X", default=0.0,
                   help="smallest gain that can keep a run, in metric units (default 0)")
    p.add_argument("--noise-z", type=_positive, metavar="Z", default=decide.DEFAULT_Z,
                   help="threshold = max(min-delta, Z * noise sigma) (default 2)")
    p.add_argument("--implausible-gain", type=_non_negative, metavar="F",
                   help="never keep a gain larger than F times the best (0 = off; ml default 0.3)")
    p.add_argument("--confirm-borderline", type=_positive, nargs="?", const=decide.DEFAULT_CONFIRM_WITHIN,
                   metavar="X", help="policy: re-run a win smaller than X thresholds before keeping it")
    p.add_argument("--early-abort", type=_fraction, nargs="?", const=0.4, metavar="AT",
                   help="stop a candidate whose smoothed training loss is clearly behind the best's from "
                        "progress AT on (default 0.4; needs a steps file, as the ML template writes; "
                        "see references/early-abort.md)")
    p.add_argument("--cache", action="append", metavar="PATH", default=None,
                   help="a folder the sandboxed benchmark may write besides its own (a tool's cache, e.g. "
                        "~/.cache/mytool; repeatable; `~` and $VARS expand at each run; --template ml adds its own)")
    p.add_argument("--simplicity", action="store_true",
                   help="policy: keep a change within noise that makes the scope smaller")
    p.add_argument("--session", metavar="ID", help="owner session (default: $CLAUDE_CODE_SESSION_ID)")
    p.add_argument("--git-init", action="store_true", help="create the git repository if there is none")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_init)


def _positive(text):
    value = _float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _non_negative(text):
    value = _float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"not a finite number: {text}")
    return value


def _check_caches(entries, root):
    """Refuse a --cache that would open what decides to the benchmark (caches.py), before anything is made."""
    for cache in caches.resolve([e for e in entries or [] if e.strip()], dict(os.environ), os.path.realpath(root)):
        if cache.why:
            raise errors.UsageError(f"--cache {cache.declared}: {cache.why}; name a folder of the tool's own "
                                    "(e.g. ~/.cache/TOOL)")


def _fraction(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a fraction of the budget between 0 and 1 (e.g. 0.4)")
    return value


def cmd_init(args):
    cwd = os.getcwd()
    route = None
    if args.template == "ml":
        _template_home()   # refuse before anything is created
        route = _torch_route(gitops.toplevel(cwd) or cwd)
    root = gitops.toplevel(cwd)
    _check_caches(args.cache, root or cwd)
    if root is not None:
        return _init_in(research.Repo(root), args, route)
    if not args.git_init:
        raise errors.Refused(f"{cwd} is not a git repository; run `git init` first, or pass --git-init "
                          "to let `autoresearch init` create it")
    gitops.init_repo(cwd)
    repo = research.Repo(gitops.toplevel(cwd))
    try:
        return _init_in(repo, args, route)
    except (errors.Refused, errors.UsageError):
        # A refusal records nothing: take back the repository this call created.
        shutil.rmtree(os.path.join(repo.root, ".git"), ignore_errors=True)
        shutil.rmtree(os.path.join(repo.root, ".autoresearch"), ignore_errors=True)
        raise


def _init_in(repo, args, route=None):
    settings = _settings(args, repo)
    settings["prices"] = _prices(args.prices)
    lock = state.Lock(repo.lock)
    if not lock.acquire(wait_s=2.0):
        current = state.read_current(repo) or {}
        raise errors.Refused(f"run {current.get('run', '?')} is in progress; wait for it to finish, then init")
    try:
        records, config, runs, segment = research.load(repo, warn=output.warn)
        if config is not None or runs:
            recovery.recover(repo, records, runs, segment, output.warn)
        copied = _copy_template(repo) if args.template == "ml" else []
        locked = _write_torch_route(repo, route) if route and "pyproject.toml" in copied else None
        _check_paths(repo, settings)
        research.ensure_ignored(repo)
        committed = _commit_start(repo, settings, copied + (["uv.lock"] if locked and locked.locked else []))
        segment = sum(1 for r in log.load(repo.log, warn=output.warn).records if isinstance(r, log.Config))
        header = _header(repo, args, settings, segment)
        log.append(repo.log, header)
        state.write_session(repo, active=True, owner_session=header.owner_session, segment=segment,
                            started=header.timestamp, stopped=None)
        agent_settings = agent_sandbox.write_project_settings(repo.root, header.fixed)
    finally:
        lock.release()
    text = _summary(header, copied, committed, segment, route, locked) + "\n  " + \
        agent_sandbox.mode_line(checked=False) + \
        f"\n  Claude Code settings for the agent: {repo.rel(str(agent_settings))} (a running session applies them " \
        "after a moment)"
    dirty = [p for p in gitops.changed_tracked(repo.root, "HEAD") if not research.in_scope(p, settings["scope"])]
    if dirty:
        output.warn(f"files outside the scope have uncommitted changes ({', '.join(dirty[:5])}); "
                    "commit or revert them, or `run` will refuse")
    output.emit(args, text, {"ok": True, "segment": segment, "config": header.to_json(), "copied": copied,
                             "torch": route.to_json() if route else None, "lock": vars(locked) if locked else None,
                             "committed": committed})
    return errors.EXIT_OK


def _settings(args, repo):
    ml = args.template == "ml"
    d = ML_DEFAULTS if ml else {}
    metric = args.metric or d.get("metric")
    if not metric:
        raise errors.UsageError("init needs --metric NAME (the METRIC line your benchmark prints), "
                             "or --template ml")
    if not metrics.valid_name(metric):
        raise errors.UsageError(f"--metric {metric!r} is not a METRIC name ([A-Za-z_][A-Za-z0-9_.]*)")
    command = args.command or d.get("command")
    if not command:
        if not _exists(repo, "autoresearch.sh"):
            raise errors.UsageError("init needs --command CMD (the benchmark that prints METRIC lines)")
        command = "bash autoresearch.sh"
    scope = args.scope or d.get("scope")
    if not scope:
        # The product's convention: the agent edits train.py.
        if not _exists(repo, "train.py"):
            raise errors.UsageError("init needs --scope PATH... (the files the agent may change)")
        scope = ["train.py"]
    if args.fixed is not None:
        fixed = list(args.fixed)
    else:
        # The harness files of the convention are fixed when present and not in the scope.
        # (harness.py is part of the ML template's harness where the copy has it.)
        if d:
            fixed = [f for f in d["fixed"] if f != "harness.py" or _exists(repo, f)
                     or (research.project_home() / "assets" / f).is_file()]
        else:
            fixed = [f for f in ("prepare.py", "autoresearch.sh") if _exists(repo, f)
                     and not research.in_scope(f, [_norm(repo, p) for p in scope])]
    implausible = args.implausible_gain if args.implausible_gain is not None else d.get("implausible_gain")
    return {
        "metric": metric,
        "direction": args.direction or d.get("direction", "lower"),
        "unit": args.unit if args.unit is not None else d.get("unit", ""),
        "name": args.name or d.get("name") or f"{os.path.basename(repo.root)}: "
                f"{args.direction or 'lower'} {metric}",
        "command": command,
        "scope": [_norm(repo, p) for p in scope],
        "fixed": [_norm(repo, p) for p in fixed],
        "timeout": args.timeout or d.get("timeout", DEFAULT_TIMEOUT),
        "implausible_gain": implausible or None,
    }


def _prices(path):
    """The --prices table, checked whole before anything is written."""
    if path is None:
        return None
    from autoresearch.store import ledger  # noqa: PLC0415 - only init with --prices needs it
    try:
        return {prefix: list(row) for prefix, row in ledger.load_prices(path).items()}
    except OSError as exc:
        raise errors.UsageError(f"--prices {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise errors.UsageError(f"--prices {path}: {exc}") from None


def _exists(repo, name):
    return os.path.isfile(os.path.join(repo.root, name))


def _norm(repo, path):
    """A path relative to the repo root, whether given relative to cwd or absolute."""
    absolute = os.path.abspath(path)
    rel = os.path.relpath(absolute, repo.root)
    if rel.startswith(".."):
        raise errors.UsageError(f"{path} is outside the repository {repo.root}")
    return "." if rel == "." else rel.replace(os.sep, "/") + ("/" if path.endswith("/") and rel != "." else "")


def _check_paths(repo, settings):
    for name in settings["fixed"]:
        if research.in_scope(name, settings["scope"]):
            raise errors.UsageError(f"{name} is both fixed and in the scope; a file is one or the other")
        if not os.path.isfile(os.path.join(repo.root, name)):
            raise errors.Refused(f"fixed file {name} does not exist; create it or drop it from --fixed")
    # A fixed file's sha256 is recorded now and checked before every run: recording an
    # uncommitted edit would make every later run refuse with advice that cannot work.
    if settings["fixed"] and gitops.head(repo.root):
        tracked = set(gitops.git(repo.root, "ls-files", "-z", "--", *settings["fixed"]).split("\0"))
        dirty = [name for name in gitops.changed_tracked(repo.root, "HEAD")
                 if name in settings["fixed"] and name in tracked]
        if dirty:
            raise errors.Refused(f"fixed file {' '.join(dirty)} has uncommitted changes; commit or revert "
                              f"{' '.join(dirty)} before init (`git commit -- {dirty[0]}` or "
                              f"`git checkout -- {dirty[0]}`)")
    for name in (log.LOG_NAME, research.STATE_DIR):
        if research.in_scope(name, settings["scope"]) and settings["scope"] != ["."]:
            raise errors.UsageError(f"the scope may not include {name}")


def _template_home():
    home = research.project_home()
    if not (home / "assets").is_dir() or not (home / "autoresearch.sh").is_file():
        raise errors.Refused(f"the ML template is not at {home} (needs assets/ and autoresearch.sh); "
                          "set AUTORESEARCH_HOME to the autoresearch checkout")
    return home


def _copy_template(repo):
    home = _template_home()
    assets = home / "assets"
    script = home / "autoresearch.sh"
    sources = [(p, p.relative_to(assets)) for p in sorted(assets.rglob("*"))
               if p.is_file() and "__pycache__" not in p.parts]
    sources.append((script, script.relative_to(home)))
    copied = []
    for src, rel in sources:
        dest = os.path.join(repo.root, str(rel))
        if os.path.exists(dest):
            continue  # never overwrite: a second init keeps the research done so far
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copy2(src, dest)
        copied.append(str(rel).replace(os.sep, "/"))
    return copied


def _torch_route(root):
    """The torch build for this machine's NVIDIA driver (None when the repo keeps a pyproject.toml of
    its own); a driver too old for the pinned torch is refused here, before anything is written."""
    if os.path.exists(os.path.join(root, "pyproject.toml")):
        return None
    gpu, problem = torch_route.query_gpu()
    if problem:
        output.warn(f"{problem}; torch comes from the package index")
    try:
        return torch_route.decide(gpu)
    except torch_route.DriverTooOld as exc:
        raise errors.Refused(str(exc)) from None


def _write_torch_route(repo, route):
    """The copied pyproject.toml as this machine needs it, then `uv lock` where uv is installed
    (uv.lock joins the template's commit, so every run of the night syncs the same versions)."""
    path = os.path.join(repo.root, "pyproject.toml")
    with open(path, encoding="utf-8") as f:
        template = f.read()
    text = torch_route.pyproject_text(template, route)
    if text != template:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    if os.path.exists(os.path.join(repo.root, "uv.lock")):
        return None   # the repo's own lock: never replaced
    result = torch_route.lock(repo.root)
    if not result.locked and shutil.which("uv"):
        output.warn(result.problem)
    return result


def _commit_start(repo, settings, copied):
    """Commit copied template files and untracked fixed files, so HEAD holds the harness."""
    tracked = set(gitops.git(repo.root, "ls-files", "-z").split("\0"))
    to_add = [p for p in copied + settings["fixed"] if p not in tracked]
    head = gitops.head(repo.root)
    if not to_add and head:
        return None
    if not to_add:
        return gitops.commit_all_staged(repo.root, "autoresearch: start", [], allow_empty=True)
    return gitops.commit_all_staged(repo.root, "autoresearch init: add the research template and harness",
                                    sorted(set(to_add)))


def _header(repo, args, s, segment):
    from autoresearch import hardware  # platform and nvidia-smi: only init needs them
    fixed = {name: research.sha256_file(os.path.join(repo.root, name)) for name in s["fixed"]}
    confirm = {"within": args.confirm_borderline} if args.confirm_borderline else None
    return log.Config(
        name=s["name"],
        metric_name=s["metric"],
        metric_unit=s["unit"],
        direction=s["direction"],
        segment=segment,
        timestamp=now_ms(),
        command=s["command"],
        scope=s["scope"],
        fixed=fixed,
        timeout_s=s["timeout"],
        checks=args.checks,
        checks_timeout_s=args.checks_timeout,
        output_cap_mb=args.output_cap if args.output_cap is not None else 32,
        max_iterations=args.max_iterations,
        max_hours=args.max_hours,
        max_gpu_hours=args.max_gpu_hours,
        max_cost=args.max_cost,
        prices=s["prices"],
        noise_runs=args.noise_runs or (ML_NOISE_RUNS if args.template == "ml" else 1),
        rule={"min_delta": args.min_delta, "z": args.noise_z, "implausible_gain": s["implausible_gain"]},
        policies={"confirm": confirm, "simplicity": bool(args.simplicity)},
        owner_session=args.session or os.environ.get("CLAUDE_CODE_SESSION_ID") or None,
        hardware=hardware.fingerprint(),
        template=args.template,
        start_commit=gitops.head(repo.root),
        engine=f"autoresearch {__import__('autoresearch').__version__}",
        early_abort={"at": args.early_abort} if args.early_abort else None,
        caches=caches.TEMPLATES.get(args.template, []) + [c for c in getattr(args, "cache", None) or [] if c.strip()],
    )


def _summary(h, copied, committed, segment, route=None, locked=None):
    lines = [f"autoresearch: segment {segment} started: {h.name}",
             f"  metric {h.metric_name} ({h.direction} is better{', ' + h.metric_unit if h.metric_unit else ''})",
             f"  command: {h.command}  (timeout {h.timeout_s:g} s)",
             f"  scope (what may change): {' '.join(h.scope)}"]
    if h.fixed:
        lines.append(f"  fixed (checked before every run): {' '.join(h.fixed)}")
    if copied:
        lines.append(f"  copied the template: {' '.join(copied)}")
    if route:
        lines.append(f"  torch: {route.why}")
    if locked:
        lines.append(f"  locked the environment: uv.lock ({locked.seconds:.1f} s)" if locked.locked
                     else f"  not locked: {locked.problem}")
    if committed:
        lines.append(f"  committed {committed[:7]}")
    from autoresearch.isolation import sandbox
    lines.append("  " + sandbox.describe())
    limits = [f"{h.max_iterations} runs" if h.max_iterations else None,
              f"{h.max_hours:g} h" if h.max_hours else None,
              f"{h.max_gpu_hours:g} GPU-hours" if h.max_gpu_hours else None,
              f"${h.max_cost:.2f} of agent tokens" if h.max_cost else None]
    if any(limits):
        lines.append(f"  budget: {', '.join(x for x in limits if x)} (the loop stops at the first spent)")
    if h.noise_runs > 1:
        lines.append(f"  the baseline will run {h.noise_runs} times to measure noise")
    else:
        from autoresearch.views.status import noise_warning
        lines.append("  " + noise_warning(h.rule.get("min_delta")) + " (or `init --noise-runs 3`)")
    if h.early_abort:
        lines.append(f"  early abort: a candidate clearly behind the best from {100 * h.early_abort['at']:.0f}% "
                     "of its budget is stopped and discarded")
    if h.template == "ml":
        lines.append("next: prepare data and size the baseline (program.md): `uv sync && uv run prepare.py && "
                     "uv run prepare.py --fit-baseline` in your own terminal (the agent's sandbox has no network "
                     "and no GPU), then `autoresearch run --baseline -m \"baseline\"`")
    else:
        lines.append('next: autoresearch run -m "baseline"')
    return "\n".join(lines)
