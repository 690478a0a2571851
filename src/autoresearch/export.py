"""`autoresearch export`: one segment of the log in the form another tool reads.

- `--tsv FILE`: karpathy/autoresearch's results.tsv (commit, val_bpb, memory_gb, status,
  description), shaped for his analysis notebook: the notebook takes the first row as the
  baseline, the lowest kept value as the best and keep / (keep + discard) as the keep rate.
- `--pi FILE`: pi-autoresearch's log (a config header and its run lines), for its dashboard
  page and its terminal widget; pi looks for it at `.auto/log.jsonl` in the repo.

Both read the log only through the typed records and the segment summary, so they give the
same baseline, best and counts as `autoresearch status`. references/run-files.md has the
mapping of every status and the rules each client applies.
"""

import argparse
import bisect
import json
import os
import sys

from autoresearch import cli, decide, log, output, research

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
                    "Statuses are mapped onto each tool's own (references/run-files.md).",
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
    records = log.read(repo.log, warn=output.warn)
    segs = log.segments(records)
    if not segs:
        raise cli.Refused(f"{log.LOG_NAME} has no runs to export")
    index = len(segs) - 1 if args.segment is None else args.segment
    if not 0 <= index < len(segs):
        raise cli.UsageError(f"--segment {args.segment}: the log has segments 0..{len(segs) - 1}")
    config, runs = segs[index]
    config = config or {}
    notes = []
    if args.tsv is not None:
        target, kind = args.tsv, "tsv"
        text = tsv(config, runs, as_val_bpb=args.as_val_bpb, notes=notes)
    else:
        if args.as_val_bpb:
            raise cli.UsageError("--as-val-bpb is for --tsv (pi reads the metric's own name)")
        target, kind = args.pi, "pi"
        text = pi_log(config, runs)
    for note in notes:
        output.warn(note)
    data = {"ok": True, "format": kind, "path": None, "rows": len(runs), "segment": index}
    if target == "-":
        if output.wants_json(args):   # stdout is the one JSON object: the export goes inside it
            output.emit(args, None, dict(data, **{"tsv" if kind == "tsv" else "jsonl": text}))
        else:
            sys.stdout.write(text)
        return cli.EXIT_OK
    path = _write(target, text)
    where = " (pi-autoresearch reads .auto/log.jsonl)" if kind == "pi" and not path.endswith(
        os.path.join(".auto", "log.jsonl")) else ""
    output.emit(args, f"wrote {len(runs)} runs of segment {index} to {target}{where}", dict(data, path=path))
    return cli.EXIT_OK


def _write(target, text):
    """Write whole or not at all (a reader sees the old file or the new one)."""
    path = os.path.abspath(target)
    if os.path.isdir(path):
        raise cli.UsageError(f"{target} is a folder; give a file name")
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        if os.path.basename(folder) != ".auto":
            raise cli.UsageError(f"folder {folder} does not exist; create it or pick another FILE")
        os.makedirs(folder, exist_ok=True)   # pi's own folder: made for it
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise cli.Failed(f"could not write {target}: {exc.strerror or exc}") from None
    return path


# --------------------------------------------------------------------------- results.tsv

def tsv(config, runs, as_val_bpb=False, notes=None):
    """karpathy's results.tsv for one segment; `notes` receives what the notebook will get wrong.

    Rows follow the runs. A kept row carries its code's value (the median of that code's
    measurements, as `status` reports it), so the notebook's lowest kept value is the best and
    its first row the baseline. Statuses: TSV_STATUS; a row without a value (crash, failed
    checks, timeout) never shows one: 0.000000 under `crash` (his convention, which the notebook
    drops), an empty cell under `discard` (pandas reads it as NaN and draws nothing).
    """
    notes = notes if notes is not None else []
    metric = config.get("metricName") or NOTEBOOK_METRIC
    higher = config.get("bestDirection") == "higher"
    if as_val_bpb and higher:
        raise cli.Refused(f"{metric} is higher-is-better, and karpathy's notebook takes the lowest value as "
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
    rows = [f"commit\t{column}\tmemory_gb\tstatus\tdescription"]
    codes = _measurements_by_code(runs)
    for r in runs:
        rows.append("\t".join(_tsv_row(runs, r, codes)))
    if not higher:
        notes.extend(_notebook_mismatch(runs, codes))
    return "\n".join(rows) + "\n"


def _measurements_by_code(runs):
    """Each code's measurements, in one pass (value_of per row would be quadratic at 50k runs)."""
    codes = {}
    for r in runs:
        if decide.is_measurement(r):
            codes.setdefault(decide.code_key(r), []).append(r["metric"])
    return codes


def _tsv_row(runs, r, codes):
    status = TSV_STATUS.get(r.get("status"), "crash")
    measured = codes.get(decide.code_key(r)) or []
    value = (decide.median(measured) if measured else r.get("metric")) if r.get("status") == "keep" \
        else r.get("metric")
    has_value = status != "crash" and r.get("status") != "timeout" and log._is_finite(value)
    memory = (r.get("metrics") or {}).get("peak_vram_mb")
    if status == "crash":
        shown_value, shown_memory = "0.000000", "0.0"
    else:
        shown_value = f"{value:.6f}" if has_value else ""
        shown_memory = f"{memory / 1024:.1f}" if has_value and log._is_finite(memory) else ""
    return [str(r.get("commit") or "0000000")[:7], shown_value, shown_memory, status,
            _tsv_description(runs, r, len(measured))]


def _tsv_description(runs, r, n):
    text = " ".join(str(r.get("description") or "").split())
    status = r.get("status")
    if status == "keep":
        if n > 1:
            text += f" (median of {n} measurements)"
    elif decide.is_remeasurement(runs, r):
        text += f" (re-measurement of run {r.get('repeat_of')})"
    if status not in ("keep", "discard", "crash"):
        text += f" [{status}]"
    return text


def _notebook_mismatch(runs, codes):
    """Where the notebook's own rules (first row = baseline, lowest kept value = best) would not
    give what `status` gives, say so rather than let the numbers differ silently."""
    notes = []
    base, best = decide.baseline(runs), decide.incumbent(runs)
    if base is None:
        return ["no run of this segment was kept yet: the notebook needs a kept first row as its baseline"]
    first = runs[0]
    if first is not base:
        notes.append(f"the notebook takes the first row as the baseline, but the first {runs.index(base)} "
                     f"row(s) are runs before the baseline (run {base.get('run')}): its baseline will read "
                     + ("0.000000" if TSV_STATUS.get(first.get("status"), "crash") == "crash"
                        else "empty and its chart cell will stop on NaN axis limits"))
    kept = [r for r in runs if r.get("status") == "keep" and decide.code_key(r) in codes]
    lowest = min(kept, key=lambda r: decide.median(codes[decide.code_key(r)])) if kept else best
    if decide.code_key(lowest) != decide.code_key(best):
        notes.append(f"the notebook's best (lowest kept value) is run {lowest.get('run')}, but the incumbent is "
                     f"run {best.get('run')} (kept by the {best.get('policy') or 'decision'} rule)")
    return notes


# --------------------------------------------------------------------------- pi-autoresearch

def pi_log(config, runs):
    """pi-autoresearch's log: its config header, then one run line per run, pi's fields only.

    - status: one of pi's four (PI_STATUSES); ours is kept as `autoresearch_status` when it
      differs. A run without a value is a crash with metric 0, pi's convention, which its page
      shows as "crash" (any other 0 reads as a score of 0.00).
    - metrics: the secondary metrics only (pi lists every key there as a secondary metric).
    - confidence: pi's meaning, |best - baseline| / MAD of the segment's values, as it stood
      after each run (null below 3 values, with no measured noise, or while the best is the
      baseline's code); never negative.
    - asi: ours, plus the engine's reason as `rollback_reason` and a crash's fix as
      `next_action_hint` when the agent gave none (pi's page shows those columns).
    """
    header = {"type": "config", "name": config.get("name") or "autoresearch",
              "metricName": config.get("metricName") or "metric", "metricUnit": config.get("metricUnit") or "",
              "bestDirection": "higher" if config.get("bestDirection") == "higher" else "lower"}
    lines = [_line(header)]
    confidences = pi_confidences(runs)
    for r, conf in zip(runs, confidences):
        lines.append(_line(_pi_run(runs, r, header["metricName"], conf)))
    return "\n".join(lines) + "\n"


def _line(record):
    return json.dumps(log.sanitise(record), ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _pi_run(runs, r, metric_name, confidence):
    ours = r.get("status")
    value = r.get("metric")
    status = ours if ours in PI_STATUSES else "crash"
    if not log._is_finite(value) or status == "crash":
        status, value = "crash", 0
    description = " ".join(str(r.get("description") or "").split())
    if decide.is_remeasurement(runs, r):
        description += f" (re-measurement of run {r.get('repeat_of')})"
    out = {
        "run": r.get("run"),
        "commit": str(r.get("commit") or "")[:7],
        "metric": value,
        "metrics": {k: v for k, v in (r.get("metrics") or {}).items() if k != metric_name and log._is_finite(v)},
        "status": status,
        "description": description,
        "timestamp": r.get("timestamp") if log._is_finite(r.get("timestamp")) else 0,
        "segment": 0,
        "confidence": confidence,
        "asi": _pi_asi(r),
    }
    if ours != status:
        out["autoresearch_status"] = ours
    return out


def _pi_asi(r):
    asi = dict(r.get("asi")) if isinstance(r.get("asi"), dict) else {}
    if r.get("status") != "keep" and r.get("reason") and "rollback_reason" not in asi:
        asi["rollback_reason"] = str(r["reason"])
    fix = (r.get("diagnosis") or {}).get("fix") if isinstance(r.get("diagnosis"), dict) else None
    if isinstance(fix, dict) and fix and "next_action_hint" not in asi:
        asi["next_action_hint"] = "fix: " + ", ".join(f"{k}={v}" for k, v in fix.items())
    return asi


def pi_confidences(runs):
    """pi's confidence after each run: |best - baseline| / MAD of every value so far.

    The baseline and the best are the summary's (the median of the baseline's code, the
    incumbent's value); the MAD is pi's: the median absolute deviation from the median of all
    values of the segment, of any status. Computed incrementally (sorted values, the MAD by
    selection in O(log n)) so that 50,000 runs export in well under a second.
    """
    values, groups, out = [], {}, []
    base_key = best_key = None
    for r in runs:
        metric = r.get("metric")
        if log._is_finite(metric):
            bisect.insort(values, metric)
        if decide.is_measurement(r):
            bisect.insort(groups.setdefault(decide.code_key(r), []), metric)
        if r.get("status") == "keep" and log._is_finite(metric):
            best_key = decide.code_key(r)
            base_key = base_key or best_key
        if len(values) < 3 or base_key is None or best_key == base_key:
            out.append(None)
            continue
        mad = sorted_mad(values)
        gap = abs(decide.median(groups[best_key]) - decide.median(groups[base_key]))
        out.append(round(gap / mad, 3) if mad > 0 else None)
    return out


def sorted_mad(s):
    """The median absolute deviation from the median of the sorted list `s` (not empty)."""
    n = len(s)
    m = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    if n % 2:
        return _kth_deviation(s, m, n // 2)
    return (_kth_deviation(s, m, n // 2 - 1) + _kth_deviation(s, m, n // 2)) / 2


def _kth_deviation(s, m, k):
    """The k-th smallest (0-based) of |x - m| over sorted `s`: a selection in two sorted runs,
    the distances below m (read leftwards from m) and above it (read rightwards)."""
    p = bisect.bisect_left(s, m)
    n_left, n_right = p, len(s) - p

    def left(i):
        return m - s[p - 1 - i]

    def right(j):
        return s[p + j] - m

    lo, hi = max(0, k + 1 - n_right), min(k + 1, n_left)
    while lo < hi:   # how many of the k+1 smallest come from the left
        i = (lo + hi) // 2
        if left(i) < right(k - i):
            lo = i + 1
        else:
            hi = i
    i, j = lo, k + 1 - lo
    return max(left(i - 1) if i > 0 else float("-inf"), right(j - 1) if j > 0 else float("-inf"))
