"""`autoresearch report`: the morning review as one self-contained HTML file.

The page answers "what happened overnight, and what should I merge?": a summary, the
progress chart (every run over its number, kept runs joined by the running best), a
sortable table of runs, and for each run its diff, training curves, output tail, text
sample, energy and diagnosis, overlaid against the best run.

Everything read from the log and the run folders is untrusted. It reaches the page only
as JSON inside <script type="application/json"> (with <, >, &, U+2028/9 escaped), and the
page builds its DOM with textContent. A Content-Security-Policy that allows only the
page's own script (by hash) is the second wall.

Standard library only at module level; matplotlib is imported for `--png` alone.
"""

import argparse
import base64
import dataclasses
import hashlib
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import autoresearch
from autoresearch import errors
from autoresearch.decision import decide
from autoresearch.store import gitops, runfiles
from autoresearch.store import log as arlog
from autoresearch.store.files import write_atomic

STATIC = Path(autoresearch.PACKAGE_DIR) / "static"
DEFAULT_OUTPUT = os.path.join(".autoresearch", "report.html")
# The page with the hidden holdout, for the person (the PreToolUse hook hides .autoresearch/holdout*).
HOLDOUT_OUTPUT = os.path.join(".autoresearch", "holdout-report.html")
RUNS_DIR = os.path.join(".autoresearch", "runs")
CURRENT_FILE = os.path.join(".autoresearch", "current.json")

# Caps that keep a 1,000-run report small and fast; the live view asks for more points.
REPORT_POINTS = 100
# Runs whose details (curves, diff, output, sample) go into the static page; every run is in
# the table and the chart. Beyond this many, the kept runs, the baselines and the latest runs
# are chosen (detail_runs), so a night of 50,000 runs stays a page of bounded size; `serve`
# gives any run's details on request.
REPORT_DETAILS_MAX = 2000
LIVE_POINTS = 600
TAIL_BYTES = 12_000
TAIL_LINES = 80
DIFF_MAX_CHARS = 60_000   # a rewrite of train.py fits; a vendored blob does not
SAMPLE_MAX_CHARS = 6_000
# The steps.jsonl keys the page draws (progress is elapsed_s over the budget, so it is left out);
# energy_j is read for the energy figure and then dropped from the page.
STEP_KEYS = ("step", "elapsed_s", "loss", "lr_mult", "grad_norm", "tok_per_s", "mfu", "mem_mb", "power_w",
             "energy_j")
FAILED = ("crash", "timeout", "checks_failed", "tampered")
RATE_MIN_HOURS, RATE_MIN_RUNS = 0.5, 4   # runs per hour is shown over at least this span and runs
_NUMBER = (int, float)
_PLAIN = {int, float, type(None)}
DEFAULT_KWH_PRICE = 0.30
PNG_HINT = "pip install matplotlib (into the Python that runs autoresearch)"


# ---------------------------------------------------------------- command line

def add_parsers(sub):
    p = sub.add_parser(
        "report", help="write the morning report: one self-contained HTML file",
        description="Write the experiment report (progress chart, runs table, diffs, curves, "
                    "diagnoses) as one HTML file that opens offline.",
        epilog="examples:\n"
               "  autoresearch report                                # .autoresearch/report.html\n"
               "  autoresearch report -o night.html --png progress.png\n"
               "  autoresearch report -o - > night.html              # the page on stdout\n"
               "  autoresearch report --json                         # the summary for a program",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("-o", "--output", metavar="FILE",
                   help=f"HTML file to write, - for stdout (default {DEFAULT_OUTPUT} next to the log)")
    p.add_argument("--png", metavar="FILE", help="also write the progress chart as a PNG (needs matplotlib)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object: the files written, the summary and the segments")
    p.add_argument("--holdout", action="store_true",
                   help=f"show the hidden holdout of the kept runs (the default in a terminal); the page "
                        f"then goes to {HOLDOUT_OUTPUT} unless -o says otherwise: the agent may not read it")
    add_common_arguments(p)
    p.set_defaults(func=cmd_report)


def add_common_arguments(p):
    p.add_argument("--log", default=arlog.LOG_NAME, help="the experiment log (default autoresearch.jsonl)")
    p.add_argument("--kwh-price", type=float, default=DEFAULT_KWH_PRICE, metavar="PRICE",
                   help=f"electricity price per kWh for the cost column (default {DEFAULT_KWH_PRICE})")


def check_price(price):
    if not arlog.is_finite(price) or price < 0:
        raise errors.UsageError(f"--kwh-price must be a non-negative number, not {price}")


def cmd_report(args):
    root = repo_root(args.log)
    check_price(args.kwh_price)
    to_stdout = args.output == "-"
    if to_stdout and args.json:
        raise errors.UsageError("-o - writes the page to stdout, which --json needs for its object; use -o FILE")
    with_holdout = wants_holdout(args)
    out = Path(args.output) if args.output and not to_stdout else \
        root / (HOLDOUT_OUTPUT if with_holdout else DEFAULT_OUTPUT)
    png = Path(args.png) if args.png else None
    for path, flag in ((out, "-o"), (png, "--png")):   # check every target before writing any
        if path is not None and path.is_dir():
            raise errors.UsageError(f"{path} is a folder; give {flag} a file name")
        if path is not None and not path.parent.exists() and path not in (root / DEFAULT_OUTPUT,
                                                                            root / HOLDOUT_OUTPUT):
            raise errors.UsageError(f"folder {path.parent} does not exist; create it or pick another {flag} FILE")
    plt = _import_pyplot() if png else None
    started = time.perf_counter()
    model, night = build_model(root, Path(args.log), kwh_price=args.kwh_price, warn=_warn, with_log=True)
    details = all_details(root, model, REPORT_POINTS)
    add_energy_totals(model, details.values())
    add_ledger(model, root, details, night)
    if with_holdout:
        add_holdout(model, root, night)
    page = render_html(model, details).encode("utf-8")
    if to_stdout:
        sys.stdout.buffer.write(page)
        sys.stdout.flush()
    else:
        out.parent.mkdir(parents=True, exist_ok=True)   # only ever .autoresearch/ (checked above)
        write_atomic(out, page)
    if plt is not None:
        write_atomic(png, progress_png(model, plt))
    took = time.perf_counter() - started
    runs = len(model["runs"])
    where = "the page to stdout" if to_stdout else str(out)
    print(f"autoresearch: wrote {where} ({runs} runs, {len(page) // 1024} KiB, {took:.2f} s)"
          + ("" if to_stdout else f"; open {out.resolve().as_uri()}"), file=sys.stderr)
    if png:
        print(f"autoresearch: wrote {png}", file=sys.stderr)
    if model.get("detailsOmitted"):
        print(f"autoresearch: the page carries the details of {runs - model['detailsOmitted']} of the {runs} runs "
              "(the kept runs, the baselines and the latest); `autoresearch serve` shows any run's", file=sys.stderr)
    if args.json:
        best = model["segments"][-1] if model["segments"] else None
        print(json.dumps({"output": str(out), "png": args.png, "runs": runs, "best": best,
                          "status": model["status"], "summary": model["summary"], "segments": model["segments"],
                          "waves": model["waves"], "warnings": model["warningCount"]}, allow_nan=False))
    return errors.EXIT_OK


def wants_holdout(args):
    """The hidden holdout goes into the page for a person: --holdout, or a terminal on stdout
    or stderr (an agent's Bash tool is a pipe); never under --json."""
    if getattr(args, "json", False):
        return False
    if getattr(args, "holdout", False):
        return True
    try:
        return sys.stdout.isatty() or sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def add_holdout(model, root, night):
    """The current segment's validation and holdout table and warning (holdout.py); nothing
    when no kept run has a holdout value (a night without the holdout: no empty section)."""
    from autoresearch.decision import holdout
    from autoresearch.store import research
    seg = night.current if night is not None else None
    if seg is None or seg.config is None:
        return
    result = holdout.check(seg.config, seg.runs, research.Repo(root).run_dir)
    if result.measured:
        model["holdout"] = _clean(result.to_json())


def repo_root(log_path):
    """The research repo is the folder holding the log; refuse when there is nothing to show."""
    log = Path(log_path)
    root = log.resolve().parent
    if not log.exists() and str(log_path) != arlog.LOG_NAME:
        raise errors.Refused(f"--log {log_path}: no such file; give the path of an autoresearch.jsonl")
    if not log.exists() and not (root / ".autoresearch").is_dir():
        raise errors.Refused(f"no {log} here; run this in a research repo after `autoresearch init` "
                          f"(or pass --log PATH)")
    return root


def _warn(message):
    print(f"autoresearch: warning: {message}", file=sys.stderr)


# ---------------------------------------------------------------- the model

def build_model(root, log_path, kwh_price=DEFAULT_KWH_PRICE, warn=_warn, with_log=False):
    """Read the log into what the page shows: runs (normalised), segments and the summary.

    Every number about a segment (baseline, best, change, counts, streaks, the running best)
    comes from `summary.summarise`, the one summary `status` prints; `status` is the very object
    `status --json` prints for the current segment (None for a log without a config header)."""
    from autoresearch.decision import summary as arsummary
    warnings = []

    def collect(message):
        warnings.append(message)
        warn(message)

    night = arlog.load(str(root / log_path.name), warn=collect)
    segments, runs, summaries = [], [], []
    for seg in night.segments:
        s = arsummary.summarise(seg.config, seg.runs, seg.index)
        summaries.append(s)
        segments.append(_segment_info(seg.index, seg.config, s))
        before = None
        higher = seg.config is not None and seg.config.direction == "higher"
        for record, best in zip(seg.runs, s.running_best):
            run = normalise_run(record, seg.index)
            _annotate(run, before, best)
            run["cells"] = table_cells(run, higher)
            before = best
            runs.append(run)
    current = read_current(root)
    config = segments[-1] if segments else _segment_info(0, None, None)
    status = None
    if night.current is not None and night.current.config is not None:
        from autoresearch.store import research
        # the same object `status --json` prints, its text shown as on the rest of the page
        status = _clean(arsummary.status_object(research.Repo(root), night, summarised=summaries[-1]))
    model = {
        "title": config["name"] or "autoresearch",
        "metricName": config["metricName"],
        "metricUnit": config["metricUnit"],
        "direction": config["direction"],
        "generated": int(time.time() * 1000),
        "segments": segments,
        "runs": runs,
        "tableColumns": [list(c) for c in TABLE_COLUMNS],
        "status": status,
        "summary": overall_summary(runs, summaries[-1] if summaries else None, kwh_price),
        "waves": _clean(arsummary.waves(night.runs)),
        "current": current,
        "kwhPrice": kwh_price,
        "yRange": y_range(runs, config["direction"]),
        "warnings": warnings[-50:],
        "warningCount": len(warnings),
    }
    return (model, night) if with_log else model


def _segment_info(index, config, s):
    """A segment as the page shows it: its header's names and its summary's numbers."""
    info = {
        "index": index,
        "name": _text(config.name) if config else "",
        "metricName": _text(config.metric_name) if config else "metric",
        "metricUnit": _text(config.metric_unit) if config else "",
        "direction": config.direction if config else "lower",
        "runs": 0, "baseline": None, "baselineRun": None, "best": None, "bestRun": None, "kept": 0,
        "gainPct": None, "change": None,
    }
    if s is not None:
        info.update(runs=s.runs, kept=s.counts["keep"], baseline=s.baseline_value, best=s.best_value,
                    baselineRun=s.baseline.run if s.baseline else None,
                    bestRun=s.best.run if s.best else None,
                    gainPct=s.change.percent if s.change else None,
                    change=s.change.to_json() if s.change else None,
                    currentNoKeep=s.consecutive_non_keeps, longestNoKeep=s.longest_non_keeps,
                    counts=s.counts, remeasured=sorted(s.remeasured))
    return info


def normalise_run(record, segment):
    """A `log.Run` as the page shows it: its known fields (listed by the Run dataclass alone)
    with safe types, text for text fields, finite numbers or null, bounded objects."""
    out = {}
    for name, kind in _run_fields():
        value = getattr(record, name)
        if kind == "text":
            out[name] = _text(value)
        elif kind == "number":
            out[name] = _num(value)
        else:
            out[name] = _clean(value) if value is not None else None
    out["segment"] = segment   # the segment the run sits in, whatever the record says
    out["status"] = out["status"] or "unknown"
    out["commit"] = out["commit"][:40]
    out["wave"] = _num(record.extra.get("wave"))          # runs of a pool's waves
    out["role"] = _text(record.extra.get("role")) or None
    return out


_RUN_FIELDS = []


def _run_fields():
    """(name, kind) of the Run dataclass's fields the page shows, worked out once (not per run)."""
    if not _RUN_FIELDS:
        for f in dataclasses.fields(arlog.Run):
            if f.name not in ("extra", "segment"):
                _RUN_FIELDS.append((f.name, "text" if f.type is str else "number" if f.type in (int, float)
                                    else "value"))
    return _RUN_FIELDS


def _annotate(run, before, best):
    """The best at the time of the run (the incumbent's value after the previous run), the
    change against it (positive = worse for lower-is-better: the raw relative difference of
    the metric) and the running best after the run, as the summary computed them."""
    run["best_then"] = before
    metric = run["metric"]
    run["delta_pct"] = decide.percent(decide.difference(metric, before), before) \
        if metric is not None and before is not None else None
    run["running_best"] = best


def overall_summary(runs, last, kwh_price):
    """The night's totals over every run (counts for the table's filter, rates, GPU hours);
    the streaks are the current segment's, from its summary."""
    counts = {}
    for r in runs:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    stamps = sorted(r["timestamp"] for r in runs if r["timestamp"] is not None)
    span_h = (stamps[-1] - stamps[0]) / 3.6e6 if len(stamps) >= 2 else None
    durations = [r["duration_s"] for r in runs if r["duration_s"] is not None]
    aborts = [r["early_abort"] for r in runs if isinstance(r.get("early_abort"), dict)]
    return {
        "runs": len(runs),
        "counts": counts,
        "failed": sum(counts.get(s, 0) for s in FAILED),
        "spanHours": span_h,
        # a rate only over a span where it means something (not "94.7 per hour over 0.0 h")
        "runsPerHour": (len(stamps) - 1) / span_h if span_h and span_h >= RATE_MIN_HOURS
        and len(stamps) >= RATE_MIN_RUNS else None,
        "gpuHours": sum(durations) / 3600 if durations else None,
        # runs the engine stopped early behind the best (init --early-abort), and the time that saved
        "earlyAborts": len(aborts),
        "earlyAbortSavedHours": sum(a.get("saved_s") or 0 for a in aborts) / 3600 if aborts else None,
        "runsWithDuration": len(durations),
        "longestNoKeep": last.longest_non_keeps if last else 0,
        "currentNoKeep": last.consecutive_non_keeps if last else 0,
        "kwhPrice": kwh_price,
    }


def read_current(root):
    """`.autoresearch/current.json` names the running run, if any."""
    try:
        data = json.loads((root / CURRENT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    number = data.get("run")
    if isinstance(number, bool) or not isinstance(number, int):
        return None
    return {"run": number, "description": _text(data.get("description")), "phase": _text(data.get("phase")),
            "started": _num(data.get("started", data.get("timestamp"))),
            "run_dir": _text(data.get("run_dir"))}


# ---------------------------------------------------------------- per-run files

def run_dir(root, run):
    """The run's folder (a real folder in .autoresearch/runs, no link on the way), or None.

    The log and the run folders are untrusted: a run_dir that climbs out (`../..`, an absolute
    path) or a folder that is a link is not read into the page (runfiles.py).
    """
    return runfiles.folder(root, run["run"], run.get("run_dir"))


def detail_runs(model, limit=REPORT_DETAILS_MAX):
    """The runs whose details the page carries: all of them up to `limit`; beyond, each
    segment's baseline and best, every kept run, the failed ones with a diagnosis, then the
    latest runs, up to `limit` in all (in log order)."""
    runs = model["runs"]
    if len(runs) <= limit:
        return list(runs)
    chosen, order = set(), []

    def take(r):
        if len(chosen) < limit and id(r) not in chosen:
            chosen.add(id(r))
            order.append(r)
    wanted = {(s["index"], s.get("baselineRun")) for s in model["segments"]} | \
        {(s["index"], s.get("bestRun")) for s in model["segments"]}
    for r in runs:
        if (r["segment"], r["run"]) in wanted:
            take(r)
    for group in ([r for r in reversed(runs) if r["status"] == "keep"],
                  [r for r in reversed(runs) if r["status"] in FAILED and r.get("diagnosis")], list(reversed(runs))):
        for r in group:
            if len(chosen) >= limit:
                break
            take(r)
    position = {id(r): i for i, r in enumerate(runs)}
    return sorted(order, key=lambda r: position[id(r)])


def all_details(root, model, max_points, limit=REPORT_DETAILS_MAX):
    """run_details of the page's runs (detail_runs), keyed by run number as text; missing diffs
    come from git in one batch. model["detailsOmitted"] counts the runs left out."""
    runs = detail_runs(model, limit)
    model["detailsOmitted"] = len(model["runs"]) - len(runs)
    folders = {r["run"]: run_dir(root, r) for r in runs}
    missing = {r["run"]: _ref(r) for r in runs if not runfiles.exists(folders[r["run"]], "diff.patch")}
    diffs = git_diffs(root, missing)
    return {str(r["run"]): run_details(root, r, max_points, model, diffs, folders[r["run"]]) for r in runs}


def run_details(root, run, max_points, model=None, diffs=None, folder=None):
    """Everything the page shows for one run, read from its folder (all parts optional)."""
    folder = folder or run_dir(root, run)
    steps = read_steps(folder, max_points)
    diagnosis = run.get("diagnosis") or _read_json(folder, "diagnosis.json")
    diff = _read_text(folder, "diff.patch", DIFF_MAX_CHARS + 1)
    if diff is None:
        diff = diffs.get(run["run"]) if diffs is not None else git_diffs(root, {run["run"]: _ref(run)}).get(run["run"])
    truncated = diff is not None and len(diff) > DIFF_MAX_CHARS
    if truncated:
        diff = diff[:DIFF_MAX_CHARS]
    summary = _read_json(folder, "summary.json")
    price = model["kwhPrice"] if model else DEFAULT_KWH_PRICE
    used = energy(steps, price)
    if steps:
        steps["cols"].pop("energy_j", None)   # counted into `energy`; the page does not draw it
    return {
        "steps": steps,
        "diff": diff,
        "diffTruncated": f"git show {_ref(run)}" if truncated else None,
        "tail": read_tail(folder, "output.log"),
        "checksTail": read_tail(folder, "checks.log") if run.get("status") == "checks_failed" else None,
        "sample": _read_text(folder, "sample.txt", SAMPLE_MAX_CHARS),
        "summary": summary if isinstance(summary, dict) else None,
        "diagnosis": diagnosis if isinstance(diagnosis, dict) else None,
        "energy": used,
    }


def add_ledger(model, root, details=None, night=None):
    """The cost panel: the segment's ledger totals (the `ledger` of the status object, the one
    summary), each run's cost and the cumulative cost curve, and the last night's log."""
    from autoresearch.store import ledger, night_log, research, state  # noqa: PLC0415
    status = model.get("status")
    if not status or not status.get("ledger"):
        return
    repo = research.Repo(root)
    if night is not None and night.current is not None:   # the log build_model read: not twice
        config, runs = night.current.config, night.current.runs
    else:
        _, config, runs, _ = research.load(repo, warn=lambda m: None)
    try:
        built = ledger.build(repo, config, runs, state.read_session(repo) or {}, per_run=True)
    except OSError:
        return
    total, curve = 0.0, []
    for row in built.per_run:
        total += row["cost_usd"]
        used = ((details or {}).get(str(row["run"])) or {}).get("energy") or {}
        curve.append({"run": row["run"], "cost": row["cost_usd"], "tokens": row["tokens"], "cumulative": total,
                      "gpu_s": row["gpu_s"], "wall_s": row["wall_s"], "energy_kwh": used.get("kwh")})
    model["summary"]["ledger"] = status["ledger"]
    model["ledger"] = {"totals": status["ledger"], "perRun": curve, "night": _clean(night_log.summary(repo))}


def add_energy_totals(model, details):
    """The night's energy, summed over the runs whose GPU reported power."""
    measured = [d["energy"] for d in details if d and d.get("energy")]
    model["summary"]["runsWithEnergy"] = len(measured)
    model["summary"]["energyKwh"] = sum(e["kwh"] for e in measured) if measured else None


def read_steps(folder, max_points):
    """The run folder's steps.jsonl as columns, thinned to at most max_points rows (first and last kept)."""
    raw = runfiles.read_bytes(folder, "steps.jsonl")
    if raw is None:
        return None
    lines = [line for line in raw.split(b"\n") if line.strip()]
    if lines and not raw.endswith(b"\n") and not _parses(lines[-1]):
        lines.pop()   # the writer is mid-line: a torn step is no step
    if not lines:
        return None
    total = len(lines)
    if total > max_points:
        picks = sorted({round(i * (total - 1) / (max_points - 1)) for i in range(max_points)})
        lines = [lines[i] for i in picks]
    text = b"[" + b",".join(lines) + b"]"
    try:   # one C-speed parse for the common case; line by line when something is torn
        rows = json.loads(text)
    except ValueError:
        rows = []
        for line in lines:
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue
    rows = [r for r in rows if isinstance(r, dict)]
    if not rows:
        return None
    # Python's json reads NaN and Infinity, which strict JSON (and the page) cannot carry. Only
    # when the text has them, or a value is not a number, is each value checked (the slow path).
    suspect = b"NaN" in text or b"Infinity" in text
    cols = {}
    for key in STEP_KEYS:
        values = [r.get(key) for r in rows]
        if suspect or not set(map(type, values)) <= _PLAIN:   # map/set/count run at C speed
            # `v - v == 0` is False for NaN and ±inf; bool is not a number here
            values = [v if type(v) in _NUMBER and v - v == 0 else None for v in values]
        if values.count(None) != len(values):
            cols[key] = values
    nonfinite = next((r.get("step") for r in rows if _nonfinite(r.get("loss"))), None) if suspect else None
    return {"total": total, "cols": cols, "lossNonFiniteAt": nonfinite}


def _parses(line):
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def energy(steps, kwh_price):
    """Joules from the GPU's counter, else power integrated over elapsed time; None when unknown."""
    if not steps:
        return None
    cols = steps["cols"]
    joules = None
    if "energy_j" in cols:
        known = [v for v in cols["energy_j"] if v is not None]
        joules = max(known) if known else None
    elif "power_w" in cols and "elapsed_s" in cols:
        pairs = [(t, p) for t, p in zip(cols["elapsed_s"], cols["power_w"]) if t is not None and p is not None]
        joules = sum((t2 - t1) * (p1 + p2) / 2 for (t1, p1), (t2, p2) in zip(pairs, pairs[1:])) or None
    if joules is None:
        return None
    power = [v for v in cols.get("power_w", []) if v is not None]
    kwh = joules / 3.6e6
    return {"joules": joules, "kwh": kwh, "cost": kwh * kwh_price,
            "avgPowerW": sum(power) / len(power) if power else None}


def read_tail(folder, name="output.log"):
    """The last lines of output.log (the end is where a crash explains itself)."""
    got = runfiles.read_tail(folder, name, TAIL_BYTES)
    if got is None:
        return None
    data, size = got
    text = runfiles.visible(data.decode("utf-8", errors="replace"))
    lines = text.split("\n")
    if size > TAIL_BYTES:
        lines = lines[1:]   # the first line is cut
    return "\n".join(lines[-TAIL_LINES:])


def _ref(run):
    """The run's git ref: the record's when it is one of ours, else refs/autoresearch/runs/N."""
    given = run.get("ref") or ""
    return given if given.startswith("refs/autoresearch/") else f"refs/autoresearch/runs/{run['run']}"


def git_diffs(root, refs):
    """Diffs of many runs with two git calls: resolve the refs, then one diff-tree --stdin."""
    if not refs or not (root / ".git").exists():
        return {}
    try:
        names = subprocess.run(
            gitops.command("for-each-ref", "--format=%(refname) %(objectname)", "refs/autoresearch/"),
            cwd=root, capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    sha_of = dict(line.split(" ", 1) for line in names.splitlines() if " " in line)
    wanted = {}
    for run, ref in refs.items():
        sha = sha_of.get(ref)
        if sha:
            wanted.setdefault(sha, []).append(run)
    if not wanted:
        return {}
    try:
        out = subprocess.run(
            gitops.command("diff-tree", "--stdin", "-p", "--no-color", *gitops.NO_DIFF_PROGRAMS, "--first-parent", "--root"),
            cwd=root, input=("\n".join(wanted) + "\n").encode(), capture_output=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    result, current, chunk = {}, None, []
    for line in out.decode("utf-8", errors="replace").split("\n"):
        if line in wanted:   # diff-tree prints each commit's sha on its own line before its diff
            _store(result, wanted, current, chunk)
            current, chunk = line, []
        elif current:
            chunk.append(line)
    _store(result, wanted, current, chunk)
    return result


def _store(result, wanted, sha, chunk):
    if sha:
        text = "\n".join(chunk).strip("\n")
        for run in wanted[sha]:
            result[run] = runfiles.visible(text[:DIFF_MAX_CHARS + 1])


def _read_text(folder, name, limit):
    data = runfiles.read_bytes(folder, name, limit * 4)
    if data is None:
        return None
    return runfiles.visible(data.decode("utf-8", errors="replace")[:limit])


def _read_json(folder, name):
    data = runfiles.read_bytes(folder, name, 1 << 22)
    if data is None:
        return None
    try:
        return _clean(json.loads(data.decode("utf-8")))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None


# ---------------------------------------------------------------- value hygiene

def _text(value):
    """Text for the page: bidi controls shown, not obeyed (runfiles.visible)."""
    if value is None:
        return ""
    return runfiles.visible(value if isinstance(value, str) else json.dumps(_clean(value), ensure_ascii=False))


def _num(value):
    return value if arlog.is_finite(value) else None


def _nonfinite(value):
    return isinstance(value, float) and not math.isfinite(value)


def _clean(value, depth=0):
    """A JSON value without NaN/Infinity (which Python's json accepts), bounded in depth."""
    if depth > 20:
        return None
    if isinstance(value, dict):
        return {runfiles.visible(str(k)): _clean(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v, depth + 1) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, str):
        return runfiles.visible(value)
    return value


# ---------------------------------------------------------------- the page

def safe_json(value):
    """JSON that cannot end its <script> element or start HTML inside it."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def page_script():
    """uPlot then the page's own code, checked so neither can close the script element."""
    code = (STATIC / "uPlot.iife.min.js").read_text(encoding="utf-8") + "\n" + \
        (STATIC / "report.js").read_text(encoding="utf-8")
    if "</script" in code.lower() or "<!--" in code:
        raise RuntimeError("inline script contains a sequence that would end the script element")
    return code


def render_html(model, details=None, live=False):
    """The whole page; `details` maps run number (str) to run_details (static report)."""
    script = page_script()
    csp = content_policy(script)
    css = (STATIC / "uPlot.min.css").read_text(encoding="utf-8") + "\n" + \
        (STATIC / "report.css").read_text(encoding="utf-8")
    boot = {"live": live, "model": None if live else model, "details": None if live else details}
    template = (STATIC / "report.html").read_text(encoding="utf-8")
    title = "autoresearch report" if live else f"autoresearch report: {model['title']}"
    parts = {
        "__CSP__": csp,
        "__TITLE__": _html_escape(title),
        "__CSS__": css,
        "__DATA__": safe_json(boot),
        "__SCRIPT__": script,
        "__RUNS__": "" if live else runs_table_html(model),
    }
    out = template
    for key, value in parts.items():
        head, sep, tail = out.partition(key)
        out = head + value + tail
    return out


# The runs table is rendered here, once: every cell's text comes from `table_cells` (each run of
# the model carries its `cells`), and the page's script only adds behaviour to those rows (sorting,
# filtering, the badge and colours) with the same text. The table is also written into the page
# as HTML, so the page reads without its script: a mail preview, a text browser, a parser.
STATIC_ROWS_MAX = 2000
TABLE_COLUMNS = (("run", "#"), ("status", "status"), ("metric", "metric"), ("delta", "Δ vs best then"),
                 ("confidence", "confidence"), ("description", "description"), ("asi", "ASI"),
                 ("diagnosis", "diagnosis"), ("duration", "duration"), ("commit", "commit"))


def table_cells(r, higher):
    """The text of each column of the runs table for one run of the model (TABLE_COLUMNS' keys)."""
    conf = r.get("confidence")
    return {"run": str(r["run"]), "status": r["status"], "metric": _fmt(r.get("metric")),
            "delta": _delta_text(r.get("delta_pct"), higher),
            "confidence": f"{conf:.2f}" if isinstance(conf, _NUMBER) else "",
            "description": r.get("description") or "", "asi": _asi_text(r.get("asi")),
            "diagnosis": _diag_text(r.get("diagnosis")), "duration": _duration(r.get("duration_s")),
            "commit": (r.get("commit") or "")[:8]}


def runs_table_html(model):
    """<thead> and <tbody> of the runs table (the newest STATIC_ROWS_MAX runs), every text escaped."""
    runs = [r for r in model["runs"] if not r.get("partial")]
    shown = runs[-STATIC_ROWS_MAX:]
    head = "".join(f'<th data-key="{key}">{_html_escape(label)}</th>' for key, label in TABLE_COLUMNS)
    rows = []
    if len(shown) < len(runs):
        rows.append(f'<tr><td colspan="{len(TABLE_COLUMNS)}">{len(runs) - len(shown)} earlier runs: in the '
                    "interactive table</td></tr>")
    for r in shown:
        rows.append(f'<tr data-run="{int(r["run"])}">'
                    + "".join(f"<td>{_cell_escape(r['cells'][key])}</td>" for key, _ in TABLE_COLUMNS) + "</tr>")
    return f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody>"


def _cell_escape(text):
    # U+2028/2029 too: harmless in HTML, but the page keeps them out of its source everywhere.
    return _html_escape(text).replace("\u2028", "&#x2028;").replace("\u2029", "&#x2029;")


# The table's words and numbers (the page's script shows these texts; it does not format them again).

def _fmt(v):
    if not isinstance(v, _NUMBER) or isinstance(v, bool) or not math.isfinite(v):
        return ""
    if v != 0 and (abs(v) < 1e-3 or abs(v) >= 1e6):
        mantissa, _, exp = f"{v:.3e}".partition("e")
        return f"{mantissa}e{int(exp):+d}"
    shown = float(f"{v:.7g}")
    return str(int(shown)) if shown.is_integer() else repr(shown)


def _delta_text(v, higher):
    if not isinstance(v, _NUMBER) or not math.isfinite(v):
        return ""
    if v == 0:
        return "equal to the best"
    return f"{abs(v):.2f}% " + ("better" if (v > 0) == higher else "worse")


def _duration(s):
    if not isinstance(s, _NUMBER) or not math.isfinite(s):
        return ""
    if s < 60:
        return f"{s:.1f} s"
    m, sec = int(s // 60), round(s % 60)
    return f"{m}m {sec:02d}s" if m < 60 else f"{m // 60}h {m % 60}m"


def _as_text(v):
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def _asi_text(asi):
    if asi is None or asi == "":
        return ""
    if not isinstance(asi, dict):
        return _as_text(asi)
    return "; ".join(f"{k}={_as_text(v)}" for k, v in asi.items())


def _diag_text(d):
    if not isinstance(d, dict):
        return ""
    codes = d.get("codes")
    if isinstance(codes, list) and codes:
        return ", ".join(_as_text(c) for c in codes)
    return _as_text(d["family"]) if d.get("family") else ""


def content_policy(script):
    """The page's Content-Security-Policy: its own script (by hash) and nothing else runs.
    (`serve` also sends it as a header, with frame-ancestors, which a <meta> cannot carry.)"""
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    return (f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; "
            f"img-src data: blob:; connect-src 'self'; base-uri 'none'; form-action 'none'")


def _html_escape(text):
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("'", "&#x27;"))


# ---------------------------------------------------------------- PNG

def _import_pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise errors.Refused(f"--png needs matplotlib, which is not installed; run: {PNG_HINT}") from None
    return plt


# The chart's statuses as the page draws them: (status, colour, marker size, label).
PNG_STATUSES = (("discard", "#9a9a9a", 16, "discarded"), ("keep", "#2ca02c", 30, "kept"),
                ("crash", "#d62728", 20, "crash"), ("timeout", "#9467bd", 20, "timeout"),
                ("checks_failed", "#e377c2", 20, "checks failed"))


def progress_png(model, plt):
    """karpathy's progress.png: discards grey, keeps green, the running best as a step line."""
    import io
    runs = model["runs"]
    fig, ax = plt.subplots(figsize=(12, 6), dpi=120)
    xs = list(range(1, len(runs) + 1))
    lo, hi = model["yRange"]
    edge = ax.get_xaxis_transform()   # x in data, y in axes fractions: for the edge markers
    for status, color, size, label in PNG_STATUSES + tuple(
            (st, "#8c564b", 20, st) for st in sorted({r["status"] for r in runs} - {p[0] for p in PNG_STATUSES})):
        mine = [(x, r["metric"]) for x, r in zip(xs, runs) if r["status"] == status]
        if not mine:
            continue
        inside = [(x, m) for x, m in mine if m is not None and (lo is None or lo <= m <= hi)]
        above = [(x, m) for x, m in mine if m is not None and lo is not None and m > hi]
        below = [(x, m) for x, m in mine if m is not None and lo is not None and m < lo]
        lost = [x for x, m in mine if m is None]
        ax.scatter([x for x, _ in inside] or [], [m for _, m in inside] or [], s=size, color=color,
                   edgecolors="#555555" if status == "discard" else color, linewidths=0.5, zorder=3,
                   label=f"{label} ({len(mine)})")
        for points, y, marker in ((above, 0.985, "^"), (below, 0.015, "v")):   # off the scale: on the edge, with the value
            for x, m in points:
                ax.scatter([x], [y], marker=marker, s=40, color=color, edgecolors="#333333", linewidths=0.5,
                           transform=edge, clip_on=False, zorder=4)
                ax.annotate(f"{m:.6g}", (x, y), xycoords=edge, xytext=(6, 0), textcoords="offset points",
                            fontsize=7, va="center", color="#333333")
        if lost:   # no value (crash, timeout): a cross along the bottom in the status's colour
            ax.scatter(lost, [0.03] * len(lost), marker="x", color=color, s=24, transform=edge, clip_on=False, zorder=3)
    for seg in model["segments"]:
        seg_pts = [(x, r["running_best"]) for x, r in zip(xs, runs)
                   if r["segment"] == seg["index"] and r["running_best"] is not None]
        if seg_pts:
            ax.step(*zip(*seg_pts), where="post", color="#2ca02c", linewidth=1.5, zorder=2)
        first = next((x for x, r in zip(xs, runs) if r["segment"] == seg["index"]), None)
        if first and seg["index"] > 0:
            ax.axvline(first - 0.5, color="#888888", linestyle="--", linewidth=1)
    for x, r in zip(xs, runs):
        if r["status"] == "keep" and r["metric"] is not None:
            ax.annotate(r["description"][:40], (x, r["metric"]), xytext=(4, 4), textcoords="offset points",
                        fontsize=7, rotation=30, color="#1a6e1a", annotation_clip=True, clip_on=True)
    if lo is not None:
        ax.set_ylim(lo, hi)
    unit = f" ({model['metricUnit']})" if model["metricUnit"] else ""
    ax.set_xlabel("experiment")
    ax.set_ylabel(f"{model['metricName']}{unit}, {model['direction']} is better")
    s = model["segments"][-1] if model["segments"] else {}
    kept = sum(1 for r in runs if r["status"] == "keep")
    ax.set_title(f"{model['title']}: {len(runs)} experiments, {kept} kept"
                 + (f", best {s['best']:.6g} ({s['gainPct']:+.2f}%)" if s.get("gainPct") is not None else ""))
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def y_range(runs, direction):
    """A y range that shows every kept run and most other measurements: the worst outliers and a
    failed run's value (not a result) would squash the chart; the page marks those at the edge."""
    values = sorted(r["metric"] for r in runs if r["metric"] is not None and r["status"] in ("keep", "discard")) \
        or sorted(r["metric"] for r in runs if r["metric"] is not None)
    if not values:
        return None, None
    kept = [r["metric"] for r in runs if r["status"] == "keep" and r["metric"] is not None] or values
    higher = direction == "higher"
    q = values[int(0.1 * (len(values) - 1))] if higher else values[int(0.9 * (len(values) - 1))]
    lo = min(min(kept), q) if higher else min(values)
    hi = max(values) if higher else max(max(kept), q)
    pad = decide.difference(hi, lo) * 0.06 or abs(hi) * 0.01 or 1.0
    lo, hi = decide.clamp(lo - pad), decide.clamp(hi + pad)
    if hi - lo - (hi - lo) != 0:
        # values near +-1e308 on both sides: the span itself would overflow (inf, so no pixel
        # position is a number); halve the range's ends, what lies beyond is marked at the edge
        lo, hi = max(lo, -decide.FLOAT_MAX / 2), min(hi, decide.FLOAT_MAX / 2)
    return lo, hi
