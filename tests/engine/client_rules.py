"""The parsing rules of the two clients our export feeds, re-implemented here (not their code).

Read from the clients themselves:
- pi-autoresearch's dashboard page, https://github.com/davebcn87/pi-autoresearch/blob/00062fb/assets/template.html
  (parseJsonLines, normalizePayload, normalizeRun, findBestRun, isCrashRun, metricDisplay,
  isDrawableRun, formatConfidence);
- pi-autoresearch's session reader, extensions/pi-autoresearch/jsonl.ts at the same commit
  (reconstructJsonlState, statusFrom, runFrom, registerSecondaryMetrics), and its
  computeConfidence and findBaselineMetric in extensions/pi-autoresearch/index.ts;
- karpathy's analysis notebook, https://github.com/karpathy/autoresearch/blob/228791f/analysis.ipynb
  (the cells that load results.tsv, count outcomes, plot the progress and print the summary).
"""

import csv
import io
import json
import math

PI_STATUSES = ("keep", "discard", "crash", "checks_failed")


def _js_number(value, fallback):
    """JavaScript's Number(value), then Number.isFinite, else the fallback (pi's toNumber)."""
    if value is None:
        return 0.0   # Number(null) is 0, which is finite; a missing key falls back to 0 here too
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else fallback
    if isinstance(value, str):
        try:
            parsed = float(value.strip() or 0)
        except ValueError:
            return fallback
        return parsed if math.isfinite(parsed) else fallback
    return fallback


class PiPageError(Exception):
    """The page shows "Invalid embedded data: …" and nothing else."""


def pi_page(text):
    """What pi's dashboard page makes of a file: the header cards, the table rows, the chart points."""
    lines = [line.strip() for line in text.strip().split("\n")]
    objects = []
    for line in filter(None, lines):
        try:
            objects.append(json.loads(line))
        except ValueError:
            raise PiPageError("One JSONL line is invalid JSON.") from None
    config = next((o for o in objects if isinstance(o, dict) and o.get("type") == "config"), None) or {}
    raw = [o for o in objects if isinstance(o, dict) and o.get("run") is not None]
    if not raw:
        raise PiPageError("No runs found.")
    direction = "higher" if config.get("bestDirection") == "higher" else "lower"
    runs = []
    for i, r in enumerate(raw):
        metric = _js_number(r.get("metric"), 0.0)
        status = r.get("status") if r.get("status") in PI_STATUSES else "discard"
        crash = metric == 0 and status == "crash"
        runs.append({"run": _js_number(r.get("run"), i + 1), "metric": metric, "status": status,
                     "shown": "crash" if crash else f"{metric:.2f}",
                     "drawn": metric > 0 or crash,
                     "confidence": r.get("confidence"),
                     "confidence_shown": _pi_confidence_text(r.get("confidence")),
                     "asi": r.get("asi") or {}})
    better = (lambda a, b: a > b) if direction == "higher" else (lambda a, b: a < b)
    best = None
    for r in runs:
        if r["metric"] > 0 and (best is None or better(r["metric"], best)):
            best = r["metric"]
    return {"name": config.get("name") or "Autoresearch", "metricName": config.get("metricName") or "metric",
            "direction": direction, "baseline": runs[0]["metric"], "best": best, "runs": runs,
            "kept": sum(1 for r in runs if r["status"] == "keep")}


def _pi_confidence_text(value):
    if value is None or value is False:
        return "—"
    if isinstance(value, (int, float)):
        return f"{value:.1f}×"
    return str(value)


def pi_session(text):
    """What pi's extension rebuilds from the file (jsonl.ts): segments, statuses, secondary metrics."""
    state = {"name": None, "metricName": "metric", "direction": "lower", "segment": 0, "results": [],
             "secondary": []}
    segment = 0
    for line in filter(None, text.split("\n")):
        try:
            entry = json.loads(line)
        except ValueError:
            continue   # jsonl.ts skips a line it cannot parse
        if not isinstance(entry, dict):
            continue
        if entry.get("type") == "config":
            if isinstance(entry.get("name"), str):
                state["name"] = entry["name"]
            if isinstance(entry.get("metricName"), str):
                state["metricName"] = entry["metricName"]
            state["direction"] = "higher" if entry.get("bestDirection") == "higher" else "lower"
            if state["results"]:
                state["secondary"] = []
                segment += 1
            state["segment"] = segment
            continue
        if not isinstance(entry.get("run"), (int, float)) or isinstance(entry.get("run"), bool):
            continue
        status = entry.get("status")
        status = status if status in ("discard", "crash", "checks_failed") else "keep"   # anything else reads as keep
        metrics = {k: v for k, v in (entry.get("metrics") or {}).items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool)} \
            if isinstance(entry.get("metrics"), dict) else {}
        metric = entry.get("metric")
        state["results"].append({"run": entry["run"], "status": status, "segment": segment, "metrics": metrics,
                                 "metric": metric if isinstance(metric, (int, float)) and not isinstance(metric, bool)
                                 else 0})
        for name in metrics:
            if name not in state["secondary"]:
                state["secondary"].append(name)
    return state


def pi_confidence(session):
    """pi's own session confidence (index.ts computeConfidence) over the current segment."""
    cur = [r for r in session["results"] if r["segment"] == session["segment"]]
    values = [r["metric"] for r in cur if r["metric"] > 0]
    if len(values) < 3:
        return None
    centre = _median(values)
    mad = _median([abs(v - centre) for v in values])
    if mad == 0:
        return None
    baseline = cur[0]["metric"] if cur else None
    better = (lambda a, b: a > b) if session["direction"] == "higher" else (lambda a, b: a < b)
    best = None
    for r in cur:
        if r["status"] == "keep" and r["metric"] > 0 and (best is None or better(r["metric"], best)):
            best = r["metric"]
    if best is None or best == baseline:
        return None
    return abs(best - baseline) / mad


def _median(values):
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


class NotebookError(Exception):
    """A cell of the notebook raised (KeyError on the column, NaN axis limits, ...)."""


def notebook(text):
    """What karpathy's notebook computes from results.tsv: counts, keep rate, baseline, best, plot limits."""
    rows = list(csv.DictReader(io.StringIO(text), delimiter="\t"))
    if rows and "val_bpb" not in rows[0]:
        raise NotebookError("KeyError: 'val_bpb'")

    def number(cell):   # pd.to_numeric(errors="coerce"): an empty or non-numeric cell is NaN
        try:
            return float(cell)
        except (TypeError, ValueError):
            return math.nan

    for r in rows:
        r["val_bpb"] = number(r["val_bpb"])
        r["memory_gb"] = number(r["memory_gb"])
        r["status"] = (r["status"] or "").strip().upper()
    counts = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    keep, discard = counts.get("KEEP", 0), counts.get("DISCARD", 0)
    kept = [r for r in rows if r["status"] == "KEEP"]
    valid = [r for r in rows if r["status"] != "CRASH"]
    plot_baseline = valid[0]["val_bpb"] if valid else math.nan
    kept_values = [r["val_bpb"] for r in kept if not math.isnan(r["val_bpb"])]
    best = min(kept_values) if kept_values else math.nan   # pandas' min skips NaN
    limits = (best - (plot_baseline - best) * 0.15, plot_baseline + (plot_baseline - best) * 0.15)
    if any(math.isnan(x) or math.isinf(x) for x in limits):
        raise NotebookError(f"ax.set_ylim: Axis limits cannot be NaN or Inf ({limits})")
    return {"total": len(rows), "counts": counts, "keep_rate": keep / (keep + discard) if keep + discard else None,
            "baseline": rows[0]["val_bpb"], "best": best, "rows": rows,
            "plotted": [r for r in valid if r["val_bpb"] <= plot_baseline + 0.0005]}
