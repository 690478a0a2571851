"""`status`, `brief` and `export`: the state of the research, computed from the log alone.

`compute()` is the one source: `status --json` prints it, `brief` condenses it for a fresh
context (the hooks inject it), and the report and the Stop hook read the same keys. Only
`active`, `owner_session` and `running` look beyond the log (session.json and the lock).
"""

import argparse
import os
import sys

from autoresearch import cli, decide, log, output, research, state

STATUSES = log.STATUSES
LAST_RUNS = 5


def add_parsers(sub):
    p = sub.add_parser("status", help="where the research stands (from the log)",
                       description="Segment, counts by status, baseline, best, noise, confidence, last runs, "
                                   "consecutive non-keeps, iterations left, whether the session is active.",
                       epilog="examples:\n  autoresearch status\n"
                              "  autoresearch status --json | jq .best",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_status)
    p = sub.add_parser("brief", help="the compact state a fresh context needs to continue",
                       description="A short plain-text state for the agent: goal, best, last runs, "
                                   "the rules and the exact next command. The hooks inject it.",
                       epilog="examples:\n  autoresearch brief\n"
                              "  autoresearch brief --json   (the text, the next command and the full state)",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_brief)
    p = sub.add_parser("export", help="export the results (karpathy's results.tsv)",
                       description="Write the segment's runs as results.tsv with karpathy/autoresearch's "
                                   "five columns: commit, <metric>, memory_gb, status, description.",
                       epilog="example:\n  autoresearch export --tsv results.tsv",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tsv", required=True, metavar="FILE", help="output file (- for stdout)")
    p.add_argument("--segment", type=int, metavar="K", help="which segment (default: the current one)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_export)


def compute(repo, warn=None):
    """The status dict (the keys are a contract: hooks and the report read them)."""
    records, config, runs, segment = research.load(repo, warn=warn or (lambda m: None))
    research.require_config(config)
    rules = decide.Rules.from_config(config)
    counts = {s: 0 for s in STATUSES}
    for r in runs:
        if r.get("status") in counts:
            counts[r["status"]] += 1
    base = decide.baseline(runs)
    best = decide.incumbent(runs)
    stats = decide.noise(runs, rules)
    budget = config.get("max_iterations")
    session = state.read_session(repo) or {}
    return {
        "segment": segment,
        "name": config.get("name"),
        "metric_name": config.get("metricName"),
        "metric_unit": config.get("metricUnit"),
        "direction": config.get("bestDirection"),
        "runs": len(runs),
        "total_runs": len(research.all_runs(records)),
        "counts": counts,
        # Discards that re-measured kept code (noise samples), included in counts["discard"].
        "remeasurements": sum(1 for r in runs if decide.is_remeasurement(runs, r)),
        "baseline": _summary(runs, base),
        "best": _summary(runs, best),
        "noise": ({"threshold": stats["threshold"], "mad": stats["mad"], "samples": stats["samples"]}
                  if stats["source"] == "repeats" else None),
        "threshold": stats["threshold"],
        "confidence": _best_confidence(runs, base, best, rules, stats),
        "last_runs": [_compact(r) for r in runs[-LAST_RUNS:]],
        "consecutive_non_keeps": _non_keeps(runs),
        "max_iterations": budget,
        "iterations_left": max(0, budget - decide.iterations_used(runs)) if budget else None,
        "active": state.is_active(session),
        "owner_session": session.get("owner_session", config.get("owner_session")),
        "running": _running(repo),
        "scope": config.get("scope") or [],
        "fixed": sorted((config.get("fixed") or {}).keys()),
        "command": config.get("command"),
        "policies": config.get("policies") or {},
    }


def _summary(runs, record):
    if record is None:
        return None
    return {"run": record.get("run"), "commit": record.get("commit"),
            "metric": decide.value_of(runs, record), "description": record.get("description")}


def _best_confidence(runs, base, best, rules, stats):
    if base is None or best is None or decide.code_key(base) == decide.code_key(best):
        return None
    g = decide.gain(rules.direction, decide.value_of(runs, base), decide.value_of(runs, best))
    return decide.confidence(g, stats["sigma"])


def _compact(r):
    out = {"run": r.get("run"), "commit": r.get("commit"), "status": r.get("status"),
           "metric": r.get("metric"), "description": r.get("description")}
    if r.get("reason"):
        out["reason"] = r["reason"]
    if r.get("repeat_of"):
        out["repeat_of"] = r["repeat_of"]
    return out


def _non_keeps(runs):
    """Ideas tried since the last keep: re-measurements of kept code are not ideas, so they
    neither count nor end the streak."""
    n = 0
    for r in reversed(runs):
        if r.get("status") == "keep":
            break
        if not decide.is_remeasurement(runs, r):
            n += 1
    return n


def _running(repo):
    if not state.is_locked(repo.lock):
        return None
    current = state.read_current(repo) or {}
    return {"run": current.get("run"), "pid": current.get("pid"), "started": current.get("started")}


def _recover_if_needed(repo):
    """A dead run (current.json with the lock free) is recorded before anything reads the log."""
    if not os.path.exists(repo.current):
        return
    lock = state.Lock(repo.lock)
    if not lock.acquire():
        return  # a run is going: it is not unfinished
    try:
        records, config, runs, segment = research.load(repo, warn=lambda m: None)
        state.recover(repo, records, config, runs, segment, output.warn)
    finally:
        lock.release()


def cmd_status(args):
    repo = research.find()
    _recover_if_needed(repo)
    status = compute(repo, warn=output.warn)
    output.emit(args, status_text(status), status)
    return cli.EXIT_OK


def _fmt(value, unit=""):
    if value is None:
        return "-"
    return f"{value:.6g}{' ' + unit if unit else ''}"


def _pct(best, base):
    if best is None or base in (None, 0):
        return ""
    return f" ({(best - base) / abs(base):+.2%} vs baseline)"


def status_text(s):
    unit = s["metric_unit"] or ""
    c = s["counts"]
    lines = [f"{s['name'] or 'autoresearch'} — segment {s['segment']}, {s['direction']} "
             f"{s['metric_name']} is better",
             f"runs: {s['runs']} this segment ({s['total_runs']} total): " +
             ", ".join(f"{k} {v}" for k, v in c.items()) + _remeasured(s)]
    if s["baseline"]:
        b = s["baseline"]
        lines.append(f"baseline: run {b['run']} ({b['commit']}) {_fmt(b['metric'], unit)}")
    best = s["best"]
    if best:
        conf = f", confidence {s['confidence']:.2f} sigma" if s["confidence"] is not None else ""
        base_metric = s["baseline"]["metric"] if s["baseline"] else None
        lines.append(f"best: run {best['run']} ({best['commit']}) {_fmt(best['metric'], unit)}"
                     f"{_pct(best['metric'], base_metric)}{conf}: {_short(best['description'], 70)}")
    else:
        lines.append("best: none yet")
    n = s["noise"]
    lines.append(f"noise: threshold {n['threshold']:.4g} (MAD {n['mad']:.4g}, {n['samples']} samples)" if n
                 else f"noise: not measured (threshold {s['threshold']:.4g}; "
                      "`autoresearch run --baseline --repeat 3` measures it)")
    for r in s["last_runs"]:
        lines.append(f"  #{r['run']} {r['status']:<13} {_fmt(r['metric']):>10}  {_short(r['description'], 60)}")
    left = "unlimited" if s["iterations_left"] is None else f"{s['iterations_left']} of {s['max_iterations']}"
    lines.append(f"consecutive non-keeps: {s['consecutive_non_keeps']}; iterations left: {left}")
    lines.append(f"session: {'active' if s['active'] else 'stopped'}"
                 + (f" (owner {s['owner_session']})" if s["owner_session"] else ""))
    if s["running"]:
        lines.append(f"running: run {s['running']['run']} (pid {s['running']['pid']})")
    return "\n".join(lines)


def _remeasured(s):
    n = s.get("remeasurements")
    return f"; {n} of the discards re-measured kept code (noise samples)" if n else ""


def _short(text, n):
    text = " ".join(str(text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def brief_text(s):
    """The compact state for a fresh context (kept well under 1,500 characters)."""
    unit = s["metric_unit"] or ""
    scope = " ".join(s["scope"]) or "(none)"
    fixed = " ".join(s["fixed"] + [log.LOG_NAME])
    lines = [f"AUTORESEARCH — {_short(s['name'], 80)}",
             f"Goal: {s['direction']} {s['metric_name']}{' (' + unit + ')' if unit else ''} is better. "
             f"Segment {s['segment']}, {s['runs']} runs (" +
             ", ".join(f"{k} {v}" for k, v in s["counts"].items() if v) + _remeasured(s) + ")."]
    b, best = s["baseline"], s["best"]
    if best:
        conf = f", {s['confidence']:.1f} sigma" if s["confidence"] is not None else ""
        lines.append(f"Best: run {best['run']} {_fmt(best['metric'], unit)}{_pct(best['metric'], b and b['metric'])}"
                     f"{conf}: {_short(best['description'], 60)}")
        lines.append(f"Baseline: run {b['run']} {_fmt(b['metric'], unit)}.")
    else:
        lines.append("No baseline yet: the first successful run is the baseline.")
    if s["last_runs"]:
        lines.append("Last runs:")
        for r in s["last_runs"][-LAST_RUNS:]:
            lines.append(f"  #{r['run']} {r['status']} {_fmt(r['metric'])} {_short(r['description'], 50)}")
    left = "unlimited" if s["iterations_left"] is None else str(s["iterations_left"])
    lines.append(f"Consecutive non-keeps: {s['consecutive_non_keeps']}. Iterations left: {left}."
                 + ("" if s["active"] else " Session STOPPED (`autoresearch resume` to continue)."))
    lines.append(f"Rules: edit only {scope}; never edit {fixed}. The engine commits, decides keep/discard "
                 "and resets git; don't commit or reset yourself.")
    lines.append(f"Next: edit {scope}, then run: {next_command()}")
    return "\n".join(lines)


def next_command():
    return 'autoresearch run -m "<what you changed and why>"'


def cmd_brief(args):
    repo = research.find()
    _recover_if_needed(repo)
    s = compute(repo, warn=output.warn)
    text = brief_text(s)
    if output.wants_json(args):
        output.emit(args, None, {"text": text, "next": next_command(), "state": s})
    else:
        print(text)
    return cli.EXIT_OK


# --- export ---

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
    text = tsv(config, runs)
    if args.tsv == "-":
        if output.wants_json(args):  # stdout is the one JSON object: the TSV goes inside it
            output.emit(args, None, {"ok": True, "path": None, "tsv": text, "rows": len(runs), "segment": index})
        else:
            sys.stdout.write(text)
        return cli.EXIT_OK
    path = os.path.abspath(args.tsv)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
    output.emit(args, f"wrote {len(runs)} runs to {args.tsv}",
                {"ok": True, "path": path, "rows": len(runs), "segment": index})
    return cli.EXIT_OK


def tsv(config, runs):
    """karpathy's results.tsv: commit, <metric>, memory_gb, status (keep|discard|crash), description."""
    metric = (config or {}).get("metricName") or "val_bpb"
    rows = [f"commit\t{metric}\tmemory_gb\tstatus\tdescription"]
    for r in runs:
        status = r.get("status")
        tsv_status = {"keep": "keep", "discard": "discard", "checks_failed": "discard"}.get(status, "crash")
        crashed = tsv_status == "crash"
        value = r.get("metric")
        memory = (r.get("metrics") or {}).get("peak_vram_mb")
        rows.append("\t".join([
            str(r.get("commit") or "0000000")[:7],
            f"{0.0 if crashed or not isinstance(value, (int, float)) else value:.6f}",
            f"{0.0 if crashed or not isinstance(memory, (int, float)) else memory / 1024:.1f}",
            tsv_status,
            " ".join(str(r.get("description") or "").split()) + (
                f" (re-measurement of run {r.get('repeat_of')})" if decide.is_remeasurement(runs, r) else ""),
        ]))
    return "\n".join(rows) + "\n"
