"""`status` and `brief`: the state of the research, computed from the log alone.

`summarise()` is the one summary of a segment (baseline, best, change, counts, streaks, noise,
confidence, iterations left, the running best at every run); `status_object()` is what
`status --json` prints and `report --json` carries as "status"; `brief` condenses it for a
fresh context (the hooks inject it); the report and serve read the same summary. Only
`active`, `owner_session` and `running` look beyond the log (session.json and the lock).
The meaning of each number is written in references/decision-rule.md.
"""

import argparse
import bisect
import os
from dataclasses import dataclass

from autoresearch import cli, decide, ledger, log, night_log, output, recovery, research, state

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


@dataclass
class Change:
    """The best against the baseline, in one sign convention: `value` and `percent` are the
    improvement (positive = better), `word` says which way, `text` is what every view prints."""

    value: float
    percent: object        # None when the baseline is 0
    word: object           # "better", "worse", or None while the incumbent is the baseline's code
    text: str

    def to_json(self):
        return {"value": self.value, "percent": self.percent, "word": self.word, "text": self.text}


@dataclass
class Summary:
    """One segment, summarised: what every view shows (status, brief, hooks, report, serve, export)."""

    segment: int
    runs: int
    counts: dict
    remeasured: set          # run numbers of the discards that re-measured kept code (noise samples)
    baseline: object         # log.Run of the baseline, or None
    baseline_value: object   # the median of the baseline code's measurements
    best: object             # log.Run of the incumbent, or None
    best_value: object       # the median of the incumbent code's measurements
    change: object           # Change, or None before a baseline
    noise: dict              # decide.noise()
    confidence: object       # best against baseline in noise sigmas; None unless noise was measured
    consecutive_non_keeps: int
    longest_non_keeps: int
    max_iterations: object
    iterations_left: object
    running_best: list       # the incumbent's value after each run (None before the baseline)

    @property
    def noise_measured(self):
        return self.noise["source"] == "repeats"


def summarise(config, runs, segment=0):
    """The one summary of a segment: its `log.Config` (or None) and its `log.Run`s, in order.

    - baseline: the first kept run; its value is the median of its code's measurements;
    - best: the incumbent (the run that introduced the code HEAD holds); its value likewise;
    - change: exactly 0 and "no improvement yet" while the incumbent is the baseline's code;
    - streaks count ideas: re-measurements of kept code neither count nor end one;
    - confidence only when noise was measured (some code measured at least twice).
    One pass over the runs (plus sorting per code), so it stays fast at 50,000 runs.
    """
    rules = decide.Rules.from_config(config)
    keys = decide.code_keys(runs)
    counts = {s: 0 for s in STATUSES}
    for r in runs:
        if r.status in counts:
            counts[r.status] += 1
    remeasured = decide.remeasurements(runs, keys)
    base = decide.baseline(runs)
    best = decide.incumbent(runs, keys)
    base_value = decide.value_of(runs, base, keys) if base else None
    best_value = decide.value_of(runs, best, keys) if best else None
    stats = decide.noise(runs, rules, keys)
    same = base is not None and keys[base.run] == keys[best.run]
    change = _change(rules.direction, base_value, best_value, same) if base else None
    confidence = None
    if change is not None and not same and stats["source"] == "repeats":
        confidence = decide.confidence(change.value, stats["sigma"])
    current, longest = _streaks(runs, remeasured)
    budget = config.max_iterations if config else None
    return Summary(
        segment=segment, runs=len(runs), counts=counts, remeasured=remeasured,
        baseline=base, baseline_value=base_value, best=best, best_value=best_value, change=change,
        noise=stats, confidence=confidence, consecutive_non_keeps=current, longest_non_keeps=longest,
        max_iterations=budget, iterations_left=max(0, budget - len(runs)) if budget else None,
        running_best=_running_best(runs, keys))


def _change(direction, base_value, best_value, same_code):
    if same_code or base_value is None or best_value is None:
        return Change(0.0, 0.0, None, "no improvement yet")
    value = decide.gain(direction, base_value, best_value)
    percent = value / abs(base_value) * 100 if base_value else None
    if value == 0:
        return Change(0.0, 0.0 if percent is not None else None, None, "no change")
    word = "better" if value > 0 else "worse"
    amount = f"{abs(percent):.2f}%" if percent is not None else f"{abs(value):.6g}"
    return Change(value, percent, word, f"{amount} {word} than the baseline")


def _streaks(runs, remeasured):
    """(current, longest) runs of ideas without a keep."""
    current = longest = 0
    for r in runs:
        if r.status == "keep":
            current = 0
        elif r.run not in remeasured:
            current += 1
            longest = max(longest, current)
    return current, longest


def _running_best(runs, keys):
    """The incumbent's value after each run: the median of its code's measurements so far."""
    seen, out, incumbent, fallback = {}, [], None, None
    for r in runs:
        key = keys[r.run]
        if r.measured:
            bisect.insort(seen.setdefault(key, []), r.metric)
        if r.status == "keep" and key != incumbent:
            incumbent, fallback = key, r.metric
        values = seen.get(incumbent) if incumbent is not None else None
        out.append(_sorted_median(values) if values else fallback)
    return out


def _sorted_median(ordered):
    n = len(ordered)
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def status_object(repo, night, warn=None):
    """What `status --json` prints (and `report --json` carries as "status"): the current
    segment's summary, its config's essentials, and the session (session.json and the lock)."""
    seg = night.current
    config = seg.config if seg else None
    runs = seg.runs if seg else []
    s = summarise(config, runs, seg.index if seg else 0)
    session = state.read_session(repo) or {}
    c = config or log.Config()
    costs, budgets, spent = ledger.figures(repo, config, runs, session,
                                           improvements=max(0, s.counts.get("keep", 0) - 1))
    return {
        "segment": s.segment,
        "name": c.name or None,
        "metric_name": c.metric_name,
        "metric_unit": c.metric_unit,
        "direction": c.direction,
        "runs": s.runs,
        "total_runs": len(night.runs),
        "counts": s.counts,
        # Discards that re-measured kept code (noise samples), included in counts["discard"].
        "remeasurements": len(s.remeasured),
        "keep_rate": keep_rate(s.counts),
        "baseline": _point(s.baseline, s.baseline_value),
        "best": _point(s.best, s.best_value),
        "change": s.change.to_json() if s.change else None,
        "noise": ({"threshold": s.noise["threshold"], "mad": s.noise["mad"], "samples": s.noise["samples"]}
                  if s.noise_measured else None),
        "noise_measured": s.noise_measured,
        "threshold": s.noise["threshold"],
        "confidence": s.confidence,
        "last_runs": [_compact(r) for r in runs[-LAST_RUNS:]],
        "consecutive_non_keeps": s.consecutive_non_keeps,
        "longest_non_keeps": s.longest_non_keeps,
        "max_iterations": s.max_iterations,
        "iterations_left": s.iterations_left,
        "active": state.is_active(session),
        "owner_session": session.get("owner_session", c.owner_session),
        "running": _running(repo),
        "scope": c.scope,
        "fixed": sorted(c.fixed),
        "command": c.command,
        "policies": c.policies,
        "ledger": costs.to_dict(),
        "budgets": budgets.to_dict(),
        "budget_spent": spent,
        "night": night_log.summary(repo),
    }


def keep_rate(counts):
    """Kept runs over decided ones, as karpathy's notebook counts them: a timeout is a discard
    (his program.md), a crash or a failed check is not decided. None before any decision."""
    decided = counts.get("keep", 0) + counts.get("discard", 0) + counts.get("timeout", 0)
    return counts.get("keep", 0) / decided if decided else None


def compute(repo, warn=None):
    """The status dict (the keys are a contract: hooks and the report read them)."""
    night = log.load(repo.log, warn=warn or (lambda m: None))
    research.require_config(night.current.config if night.current else None)
    return status_object(repo, night)


def _point(record, value):
    if record is None:
        return None
    return {"run": record.run, "commit": record.commit, "metric": value, "description": record.description}


def _compact(r):
    out = {"run": r.run, "commit": r.commit, "status": r.status, "metric": r.metric,
           "description": r.description}
    if r.reason:
        out["reason"] = r.reason
    if r.repeat_of:
        out["repeat_of"] = r.repeat_of
    return out


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
        records, _, runs, segment = research.load(repo, warn=lambda m: None)
        recovery.recover(repo, records, runs, segment, output.warn)
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


NOISE_COMMAND = 'autoresearch run --baseline --repeat 3 -m "measure noise"'


def noise_warning(threshold):
    """The one-line warning while noise is not measured (status and init print it)."""
    over = f" larger than the minimum {threshold:.4g}" if threshold else ""
    return (f"warning: noise not measured, so any gain{over} will keep; measure it with `{NOISE_COMMAND}`")


def _change_text(s):
    change = s.get("change")
    if not change:
        return ""
    conf = f", confidence {s['confidence']:.2f} sigma" if s["confidence"] is not None else ""
    return f" ({change['text']}{conf})"


def status_text(s):
    unit = s["metric_unit"] or ""
    c = s["counts"]
    lines = [f"{s['name'] or 'autoresearch'} — segment {s['segment']}, {s['direction']} "
             f"{s['metric_name']} is better",
             f"runs: {s['runs']} this segment ({s['total_runs']} total): " +
             ", ".join(f"{k} {v}" for k, v in c.items()) + _remeasured(s)
             + (f"; keep rate {s['keep_rate']:.1%} (kept of kept, discarded and timed out)"
                if s.get("keep_rate") is not None else "")]
    if s["baseline"]:
        b = s["baseline"]
        lines.append(f"baseline: run {b['run']} ({b['commit']}) {_fmt(b['metric'], unit)}")
    best = s["best"]
    if best:
        lines.append(f"best: run {best['run']} ({best['commit']}) {_fmt(best['metric'], unit)}"
                     f"{_change_text(s)}: {_short(best['description'], 70)}")
    else:
        lines.append("best: none yet")
    n = s["noise"]
    if n:
        lines.append(f"noise: threshold {n['threshold']:.4g} (MAD {n['mad']:.4g}, {n['samples']} samples)")
    else:
        lines.append("noise: not measured")
        lines.append(noise_warning(s["threshold"]))
    for r in s["last_runs"]:
        lines.append(f"  #{r['run']} {r['status']:<13} {_fmt(r['metric']):>10}  {_short(r['description'], 60)}")
    left = "unlimited" if s["iterations_left"] is None else f"{s['iterations_left']} of {s['max_iterations']}"
    lines.append(f"consecutive non-keeps: {s['consecutive_non_keeps']} (longest {s['longest_non_keeps']}); "
                 f"iterations left: {left}")
    if s.get("ledger"):
        lines.extend(ledger.text(s["ledger"]))
    if s.get("budget_spent"):
        lines.append(f"budget: {s['budget_spent']}; the loop ends here")
    lines.extend(night_log.text(s.get("night")))
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
        lines.append(f"Best: run {best['run']} {_fmt(best['metric'], unit)}{_change_text(s)}: "
                     f"{_short(best['description'], 60)}")
        lines.append(f"Baseline: run {b['run']} {_fmt(b['metric'], unit)}."
                     + ("" if s["noise"] else " Noise not measured: any gain keeps."))
    else:
        lines.append("No baseline yet: the first successful run is the baseline.")
    if s["last_runs"]:
        lines.append("Last runs:")
        for r in s["last_runs"][-LAST_RUNS:]:
            lines.append(f"  #{r['run']} {r['status']} {_fmt(r['metric'])} {_short(r['description'], 50)}")
    left = "unlimited" if s["iterations_left"] is None else str(s["iterations_left"])
    lines.append(f"Consecutive non-keeps: {s['consecutive_non_keeps']}. Iterations left: {left}."
                 + ("" if s["active"] else " Session STOPPED (`autoresearch resume` to continue)."))
    if s.get("budget_spent"):
        lines.append(f"Budget: {s['budget_spent']}; the loop is over.")
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
