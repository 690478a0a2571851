"""`autoresearch export`: one segment of the log in the form another tool reads.

- `--tsv FILE`: karpathy/autoresearch's results.tsv (commit, val_bpb, memory_gb, status,
  description), shaped for his analysis notebook: the notebook takes the first row as the
  baseline, the lowest kept value as the best and keep / (keep + discard) as the keep rate.
- `--pi FILE`: pi-autoresearch's log (a config header and its run lines), for its dashboard
  page and its terminal widget; pi looks for it at `.auto/log.jsonl` in the repo. pi takes the
  first run's value as the baseline; a kept run carries its code's value, so that is the
  baseline's value as `status` has it.

Both read the log only through the typed records and the segment summary, so they give the
same baseline, best and counts as `autoresearch status`. references/run-files.md has the
mapping of every status and the rules each client applies.
"""

import argparse
import bisect
import json
import os
import sys

from autoresearch import errors, output
from autoresearch.decision import decide, summary
from autoresearch.store import log, research
from autoresearch.store.files import write_atomic

NOTEBOOK_METRIC = "val_bpb"
# Our statuses in karpathy's three (his program.md: a run over the time limit is a discard;
# a failed check or a tampered harness means the code is broken, which his log calls a crash).
TSV_STATUS = {"keep": "keep", "discard": "discard", "timeout": "discard"}
# pi knows four statuses: anything else (timeout, tampered, and any future status) is a crash.
PI_STATUSES = ("keep", "discard", "crash", "checks_failed")


def add_parsers(sub):
    p = sub.add_parser(
        "export", help="write a segment for karpathy's notebook (--tsv) or pi-autoresearch (--pi)",
        description="Write one segment of the log (default: the current one) as karpathy/autoresearch's "
                    "results.tsv for his analysis notebook, or as pi-autoresearch's log for its dashboard. "
                    "Statuses are mapped onto each tool's own (references/run-files.md). Both tools take "
                    "the first row as the baseline: there the export puts the baseline as `status` has it "
                    "(every kept row carries its code's value, the median of its measurements, so a "
                    "baseline measured 3 times shows its median, not its first measurement). Where a "
                    "tool's own rules will still show another baseline or best (pi's page takes the best "
                    "value of any run, a failed check's too), the export warns.",
        epilog="examples:\n  autoresearch export --tsv results.tsv\n"
               "  autoresearch export --tsv results.tsv --as-val-bpb   (another metric, column named val_bpb)\n"
               "  autoresearch export --pi .auto/log.jsonl             (where pi-autoresearch looks)\n"
               "  autoresearch export --pi - --segment 0",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--tsv", metavar="FILE", help="karpathy's results.tsv (- for stdout)")
    what.add_argument("--pi", metavar="FILE", help="pi-autoresearch's log, e.g. .auto/log.jsonl (- for stdout)")
    p.add_argument("--segment", type=int, metavar="K", help="which segment (default: the current one)")
    p.add_argument("--as-val-bpb", action="store_true",
                   help="--tsv: name the value column val_bpb, as the notebook needs, whatever the metric "
                        "(refused for a higher-is-better metric: the notebook takes the lowest value as the best)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_export)


def cmd_export(args):
    repo = research.find()
    night = log.load(repo.log, warn=output.warn)
    if not night.segments:
        raise errors.Refused(f"{log.LOG_NAME} has no runs to export")
    index = len(night.segments) - 1 if args.segment is None else args.segment
    if not 0 <= index < len(night.segments):
        raise errors.UsageError(f"--segment {args.segment}: the log has segments 0..{len(night.segments) - 1}")
    seg = night.segments[index]
    config, runs = seg.config or log.Config(), seg.runs
    notes = []
    if args.tsv is not None:
        target, kind = args.tsv, "tsv"
        text = tsv(config, runs, as_val_bpb=args.as_val_bpb, notes=notes)
    else:
        if args.as_val_bpb:
            raise errors.UsageError("--as-val-bpb is for --tsv (pi reads the metric's own name)")
        target, kind = args.pi, "pi"
        text = pi_log(config, runs, notes=notes)
    for note in notes:
        output.warn(note)
    data = {"ok": True, "format": kind, "path": None, "rows": len(runs), "segment": index}
    if target == "-":
        if output.wants_json(args):   # stdout is the one JSON object: the export goes inside it
            output.emit(args, None, dict(data, **{"tsv" if kind == "tsv" else "jsonl": text}))
        else:
            sys.stdout.write(text)
        return errors.EXIT_OK
    path = _write(target, text)
    where = " (pi-autoresearch reads .auto/log.jsonl)" if kind == "pi" and not path.endswith(
        os.path.join(".auto", "log.jsonl")) else ""
    output.emit(args, f"wrote {len(runs)} runs of segment {index} to {target}{where}", dict(data, path=path))
    return errors.EXIT_OK


def _write(target, text):
    """Write whole or not at all (a reader sees the old file or the new one)."""
    path = os.path.abspath(target)
    if os.path.isdir(path):
        raise errors.UsageError(f"{target} is a folder; give a file name")
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        if os.path.basename(folder) != ".auto":
            raise errors.UsageError(f"folder {folder} does not exist; create it or pick another FILE")
        os.makedirs(folder, exist_ok=True)   # pi's own folder: made for it
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise errors.Failed(f"could not write {target}: {exc.strerror or exc}") from None
    return path


# --------------------------------------------------------------------------- results.tsv

def tsv(config, runs, as_val_bpb=False, notes=None):
    """karpathy's results.tsv for one segment (a `log.Config` and its `log.Run`s); `notes`
    receives what the notebook will get wrong.

    Rows follow the runs. A kept row carries its code's value (the median of that code's
    measurements, as `status` reports it), so the notebook's lowest kept value is the best and
    its first row the baseline. Statuses: TSV_STATUS; a row without a value (crash, failed
    checks, timeout) never shows one: 0.000000 under `crash` (his convention, which the notebook
    drops), an empty cell under `discard` (pandas reads it as NaN and draws nothing).
    """
    notes = notes if notes is not None else []
    metric = config.metric_name or NOTEBOOK_METRIC
    higher = config.direction == "higher"
    if as_val_bpb and higher:
        raise errors.Refused(f"{metric} is higher-is-better, and karpathy's notebook takes the lowest value as "
                          "the best: it would report the worst run as the best. Export without --as-val-bpb "
                          "for the five columns under the metric's own name")
    column = NOTEBOOK_METRIC if as_val_bpb else metric
    if column != NOTEBOOK_METRIC:
        notes.append(f"karpathy's notebook reads a column named {NOTEBOOK_METRIC} (it stops with KeyError on "
                     f"'{metric}') and takes the lowest value as the best; --as-val-bpb names the column "
                     f"{NOTEBOOK_METRIC}")
    if higher:
        notes.append(f"{metric} is higher-is-better, but the notebook takes the lowest kept value as the best "
                     "and draws the running minimum: its best and its chart will be wrong for this segment")
    s = summary.summarise(config, runs)
    rows = [f"commit\t{column}\tmemory_gb\tstatus\tdescription"]
    for r in runs:
        rows.append("\t".join(_tsv_row(r, s)))
    if not higher:
        notes.extend(_notebook_mismatch(runs, s))
    return "\n".join(rows) + "\n"


def _tsv_row(r, s):
    status = TSV_STATUS.get(r.status, "crash")
    value = s.value_of(r) if r.status == "keep" else r.metric
    memory = r.metrics.get("peak_vram_mb")
    if status == "crash":
        shown_value, shown_memory = "0.000000", "0.0"
    elif r.status == "timeout" or not log.is_finite(value):
        shown_value = shown_memory = ""
    else:
        shown_value = _tsv_number(value)
        shown_memory = _tsv_number(memory / 1024, "{:.1f}") if log.is_finite(memory) else ""
    return [str(r.commit or "0000000")[:7], shown_value, shown_memory, status, _tsv_description(r, s)]


def _tsv_number(value, fixed="{:.6f}"):
    """karpathy's fixed-point cell, or the shortest exact float text (1e-300, 2e+306) where
    fixed point would show a measured tiny value as 0 or a huge one as 300 digits of noise
    (pandas reads both forms)."""
    return fixed.format(value) if value == 0 or 1e-6 <= abs(value) < 1e16 else repr(float(value))


def _description(r, s):
    """The run's description on one line, saying what its value is: a kept row carries its
    code's value (the median of its measurements), a re-measurement says which run it measured."""
    text = " ".join(r.description.split())
    n = len(s.measurements(r))
    if r.status == "keep" and n > 1:
        text += f" (median of {n} measurements)"
    elif r.run in s.remeasured:
        text += f" (re-measurement of run {r.repeat_of})"
    return text


def _tsv_description(r, s):
    text = _description(r, s)
    if r.status not in ("keep", "discard", "crash"):
        text += f" [{r.status}]"
    return text


def _notebook_mismatch(runs, s):
    """Where the notebook's own rules (first row = baseline, lowest kept value = best) would not
    give what `status` gives, say so rather than let the numbers differ silently."""
    if s.baseline is None:
        return ["no run of this segment was kept yet: the notebook needs a kept first row as its baseline"]
    notes = []
    first = runs[0]
    if first is not s.baseline:
        notes.append(f"the notebook takes the first row as the baseline, but the first {runs.index(s.baseline)} "
                     f"row(s) are runs before the baseline (run {s.baseline.run}): its baseline will read "
                     + ("0.000000" if TSV_STATUS.get(first.status, "crash") == "crash"
                        else "empty and its chart cell will stop on NaN axis limits"))
    kept = [r for r in runs if r.status == "keep" and s.measurements(r)]
    lowest = min(kept, key=s.value_of) if kept else s.best
    if s.codes[lowest.run] != s.codes[s.best.run]:
        notes.append(f"the notebook's best (lowest kept value) is run {lowest.run}, but the incumbent is "
                     f"run {s.best.run} (kept by the {s.best.policy or 'decision'} rule)")
    return notes


# --------------------------------------------------------------------------- pi-autoresearch

def pi_log(config, runs, notes=None):
    """pi-autoresearch's log: its config header, then one run line per run, pi's fields only.

    - metric: pi takes the first run's value as the baseline, so a kept run carries its code's
      value (the median of its measurements, as `status` has the baseline and the best); any
      other run its own measurement. A run without a value is a crash with metric 0, pi's
      convention, which its page shows as "crash" (any other 0 reads as a score of 0.00).
    - status: one of pi's four (PI_STATUSES); ours is kept as `autoresearch_status` when it
      differs.
    - metrics: the secondary metrics only (pi lists every key there as a secondary metric).
    - confidence: pi's meaning, |best - baseline| / MAD of the values pi reads, as it stood after
      each run (null below 3 values, with no spread, or while the best is the baseline's code);
      never negative.
    - asi: ours, plus the engine's reason as `rollback_reason` and a crash's fix as
      `next_action_hint` when the agent gave none (pi's page shows those columns).
    `notes` receives where pi's own rules will show another baseline or best than `status`.
    """
    header = {"type": "config", "name": config.name or "autoresearch", "metricName": config.metric_name,
              "metricUnit": config.metric_unit or "", "bestDirection": config.direction}
    s = summary.summarise(config, runs)
    shown = [_pi_value(r, s) for r in runs]
    lines = [_line(header)]
    for r, (status, value), conf in zip(runs, shown, pi_confidences(runs, s, shown)):
        lines.append(_line(_pi_run(r, status, value, config.metric_name, conf, s)))
    if notes is not None:
        notes.extend(_pi_mismatch(runs, shown, s, config.direction))
    return "\n".join(lines) + "\n"


def _line(record):
    return json.dumps(log.sanitise(record), ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _pi_value(r, s):
    """(pi's status, the value pi reads) of a run: PI_STATUSES, a kept run at its code's value,
    a run without a value (or one pi must count as a crash) at pi's crash convention, 0."""
    status = r.status if r.status in PI_STATUSES else "crash"
    value = s.value_of(r) if r.status == "keep" else r.metric
    if not log.is_finite(value) or status == "crash":
        return "crash", 0
    return status, value


def _pi_run(r, status, value, metric_name, confidence, s):
    out = {
        "run": r.run,
        "commit": str(r.commit or "")[:7],
        "metric": value,
        "metrics": {k: v for k, v in r.metrics.items() if k != metric_name},
        "status": status,
        "description": _description(r, s),
        "timestamp": r.timestamp if log.is_finite(r.timestamp) else 0,
        "segment": 0,
        "confidence": confidence,
        "asi": _pi_asi(r),
    }
    if r.status != status:
        out["autoresearch_status"] = r.status
    return out


def _pi_asi(r):
    asi = dict(r.asi)
    if r.status != "keep" and r.reason and "rollback_reason" not in asi:
        asi["rollback_reason"] = r.reason
    fix = (r.diagnosis or {}).get("fix")
    if isinstance(fix, dict) and fix and "next_action_hint" not in asi:
        asi["next_action_hint"] = "fix: " + ", ".join(f"{k}={v}" for k, v in fix.items())
    return asi


def _pi_mismatch(runs, shown, s, direction):
    """Where pi's readers, by their own rules, will not show the baseline and best of `status`:
    its baseline is the first run's value, its page's best the best value of any run whatever
    its status, its widget's best the best kept value."""
    if s.baseline is None:
        return ["no run of this segment was kept yet: pi takes the first run's value as the baseline"]
    notes = []
    if runs[0] is not s.baseline:
        notes.append(f"pi takes the first run's value as the baseline, but the first {runs.index(s.baseline)} "
                     f"run(s) come before the baseline (run {s.baseline.run}): pi's baseline will read "
                     f"{shown[0][1]} and its improvement nothing")
    better = (lambda a, b: a > b) if direction == "higher" else (lambda a, b: a < b)
    page = None
    for r, (status, value) in zip(runs, shown):
        if value > 0 and (page is None or better(value, page[2])):
            page = (r, status, value)
    if page is not None and page[2] != s.best_value:
        r, status, value = page
        what = {"checks_failed": "failed its checks", "discard": "was discarded (a single measurement)",
                "keep": "was kept but is not the incumbent"}[status]
        notes.append(f"pi's page takes the best value of any run as the best: it will show run {r.run} "
                     f"({value:.6g}, which {what}), where the best is run {s.best.run} ({s.best_value:.6g}); "
                     "pi's session widget counts kept runs only")
    return notes


def pi_confidences(runs, s=None, shown=None):
    """pi's confidence after each run: |best - baseline| / MAD of the values pi reads so far.

    The baseline and the best are the summary's: the baseline's value and the running best
    (the incumbent's value after each run); the MAD is pi's: the median absolute deviation from
    the median of every value the export gives (`shown`, _pi_value), of any status, crashes
    left out. Incremental (sorted values, the MAD by selection in O(log n)): 50,000 runs
    export in about a second.
    """
    s = s or summary.summarise(None, runs)
    shown = shown or [_pi_value(r, s) for r in runs]
    base_key = s.codes[s.baseline.run] if s.baseline else None
    values, out, last_kept = [], [], None
    for r, (status, value), best in zip(runs, shown, s.running_best):
        if status != "crash":
            bisect.insort(values, value)
        if r.status == "keep":
            last_kept = s.codes[r.run]
        if len(values) < 3 or best is None or last_kept == base_key:
            out.append(None)
            continue
        mad = sorted_mad(values)
        gap = abs(decide.difference(best, s.baseline_value))
        out.append(round(decide.ratio(gap, mad), 3) if mad > 0 else None)
    return out


def sorted_mad(s):
    """The median absolute deviation from the median of the sorted list `s` (not empty)."""
    n, m = len(s), decide.sorted_median(s)
    if n % 2:
        return _kth_deviation(s, m, n // 2)
    return decide.midpoint(_kth_deviation(s, m, n // 2 - 1), _kth_deviation(s, m, n // 2))


def _kth_deviation(s, m, k):
    """The k-th smallest (0-based) of |x - m| over sorted `s`: a selection in two sorted runs,
    the distances below m (read leftwards from m) and above it (read rightwards)."""
    p = bisect.bisect_left(s, m)
    n_left, n_right = p, len(s) - p

    def left(i):
        return decide.difference(m, s[p - 1 - i])

    def right(j):
        return decide.difference(s[p + j], m)

    lo, hi = max(0, k + 1 - n_right), min(k + 1, n_left)
    while lo < hi:   # how many of the k+1 smallest come from the left
        i = (lo + hi) // 2
        if left(i) < right(k - i):
            lo = i + 1
        else:
            hi = i
    i, j = lo, k + 1 - lo
    return max(left(i - 1) if i > 0 else float("-inf"), right(j - 1) if j > 0 else float("-inf"))
