"""`status` and `brief`: the state of the research, as decision/summary.py computes it from the log.

`compute()` reads the summary through the log cache (decision/logcache.py), so the hooks'
`brief` and `status` read the log once between changes.
"""

import argparse

from autoresearch import agent_sandbox, errors, output
from autoresearch.decision import logcache, summary
from autoresearch.decision.summary import LAST_RUNS, NOISE_COMMAND, status_from
from autoresearch.store import ledger, log, night_log, research, state


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


def compute(repo, warn=None):
    """The status dict (the keys are a contract: hooks and the report read them)."""
    v = logcache.view(repo, warn=warn)
    research.require_config(v.config)
    return status_from(repo, v.config, v.summary, v.last_runs, v.total_runs, v.totals)


def recover_if_needed(repo):
    """A dead run (current.json with the lock free) is recorded before anything reads the log."""
    if not state.needs_recovery(repo):
        return
    lock = state.Lock(repo.lock)
    if not lock.acquire():
        return  # a run is going: it is not unfinished
    try:
        from autoresearch.pipeline import recovery  # noqa: PLC0415 - only for a dead run: off the hot path of status and the hooks
        records, _, runs, segment = research.load(repo, warn=lambda m: None)
        recovery.recover(repo, records, runs, segment, output.warn)
    finally:
        lock.release()


def cmd_status(args):
    repo = research.find()
    recover_if_needed(repo)
    status = compute(repo, warn=output.warn)
    text = status_text(status) + "\n" + _agent_side(status)
    output.emit(args, text, status)
    return errors.EXIT_OK


def _agent_side(status):
    """Which mode the agent's side runs in (the status object's agent_sandbox)."""
    side = status["agent_sandbox"]
    text = agent_sandbox.mode_line(side["problem"])
    if side["problem"] is None and not side["settings_current"]:
        text += (f"\n  {agent_sandbox.SETTINGS_FILE} does not hold the boundary for today's fixed files: a plain "
                 "Claude Code session here is not sandboxed as it should be (`night` passes its own settings)")
    return text


def _fmt(value, unit=""):
    if value is None:
        return "-"
    return f"{value:.6g}{' ' + unit if unit else ''}"


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
    held = s.get("anchor") or {}
    lines = [held["text"]] if held.get("state") == "disagrees" else []
    lines += [f"{s['name'] or 'autoresearch'} — segment {s['segment']}, {s['direction']} "
              f"{s['metric_name']} is better",
             f"runs: {s['runs']} this segment ({s['total_runs']} total): " +
             ", ".join(f"{k} {v}" for k, v in c.items())]
    e = s.get("experiments")
    if e:
        lines.append("experiments: " + summary.experiments_text(e)
                     + (f"; keep rate {e['keep_rate']:.1%} (kept of kept and discarded)"
                        if e["keep_rate"] is not None else ""))
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
    if s["running"] and s["running"].get("wave"):
        lines.append(f"running: wave {s['running']['wave']} on the pool (`autoresearch wait` for it)")
    elif s["running"]:
        lines.append(f"running: run {s['running']['run']} (pid {s['running']['pid']})")
    if s.get("pool"):
        lines.append(pool_line(s["pool"]))
    if held.get("state") == "none":
        lines.append(held["text"])
    return "\n".join(lines)


def pool_line(p):
    if not p["up"]:
        return f"pool: down ({p['queued']} candidate(s) queued)" if p["queued"] else "pool: down"
    return (f"pool: {p['gpus']} GPU(s) ({', '.join(p['classes'])}), {p['busy']} busy, {p['queued']} candidate(s) "
            "queued" + (f", wave {p['wave_running']} running" if p["wave_running"] else ""))


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
             ", ".join(f"{k} {v}" for k, v in s["counts"].items() if v) + ")"
             + (f"; experiments: {summary.experiments_text(s['experiments'])}" if s.get("experiments") else "")
             + "."]
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
    if s.get("pool") and s["pool"]["up"]:
        lines.append(pool_line(s["pool"]) + ".")
    lines.append(f"Next: edit {scope}, then run: {next_command(s)}")
    return "\n".join(lines)


def next_command(s=None):
    p = (s or {}).get("pool")
    if p and p["up"]:
        if p["wave_running"]:
            return "autoresearch wait"
        free = max(1, p["gpus"] - 1 - p["queued"])
        return (f'autoresearch submit -m "<what and why>" (up to {free} more diverse candidate(s)), '
                "then autoresearch wait")
    return 'autoresearch run -m "<what you changed and why>"'


def cmd_brief(args):
    repo = research.find()
    recover_if_needed(repo)
    s = compute(repo, warn=output.warn)
    text = brief_text(s)
    if output.wants_json(args):
        output.emit(args, None, {"text": text, "next": next_command(s), "state": s})
    else:
        print(text)
    return errors.EXIT_OK
