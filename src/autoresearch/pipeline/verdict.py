"""Step 3 of an experiment, the decision: a `Measurement` becomes a `log.Run` with its status.

A failed measurement is a crash (the benchmark exited non-zero, printed no valid value of the
metric, or the engine was interrupted), a timeout, or checks_failed; a crash or timeout is
diagnosed. A measured one is decided by the rule (decide.py) against the segment's earlier runs;
an implausible gain is diagnosed too. Nothing is written to the log here: the record step does.
"""

import difflib
import json
import os
import signal
from dataclasses import dataclass, field, replace

from autoresearch import output
from autoresearch.decision import decide
from autoresearch.store import log
from autoresearch.pipeline.measure import succeeded
from autoresearch.store.files import read_text, write_atomic
from autoresearch.pipeline.plan import reinit_command

TAIL_LINES = 20


@dataclass
class Verdict:
    record: log.Run
    decision: object = None                    # decide.Decision for a measured run
    tail: list = field(default_factory=list)   # the last lines of the log that explains a failure
    tail_of: str = None                        # "output.log" or "checks.log"
    diagnosis_line: str = None                 # the diagnosis in one line, for the result
    metric_hint: str = None                    # what to do when the metric was never printed


def judge(config, runs, m, template, workdir, scope_lines=None, confirmed=False):
    """Decide for measurement `m`. `template` is the run's `log.Run` with its identity (run,
    commit, description, paths, scope); `runs` the segment's earlier records; `workdir` where
    the benchmark ran (its train.py is the run's), for the diagnoser."""
    record = replace(template, metric=m.found.get(config.metric_name), metrics=dict(m.found),
                     duration_s=round(m.duration_s, 3), exit_code=m.exit_code)
    v = Verdict(record)
    failure = _failure(config, m) or _not_comparable(runs, m.found)
    if failure is None:
        v.decision = decide.decide(runs, record, decide.Rules.from_config(config), scope_lines,
                                   confirmed=confirmed)
        _apply(record, v.decision)
        if v.decision.implausible:
            _diagnose(v, config, "implausible", workdir, m.run_dir)
        return v
    status, reason, log_name = failure
    best = decide.incumbent(runs)
    record.status, record.reason = status, reason
    if status != "checks_failed":
        record.metric = None
    record.best_before = decide.value_of(runs, best) if best else None
    rules = decide.Rules.from_config(config)
    stats = decide.noise(runs, rules)
    record.threshold, record.rule = stats["threshold"], decide.rule_record(rules, stats)
    if m.stopped is not None and m.stopped.abort is not None:
        record.early_abort = early_abort_record(m.stopped.abort, record.duration_s, best)
        return v   # behind the best: nothing failed, nothing to diagnose
    v.tail, v.tail_of = tail(os.path.join(m.run_dir, log_name)), log_name
    if m.interrupted is None and succeeded(m) and not _printed(config, m):
        v.metric_hint = metric_hint(config, m)   # it exited 0 without the metric: the benchmark's fault
    if status in ("crash", "timeout"):
        _diagnose(v, config, status, workdir, m.run_dir)
    return v


def _failure(config, m):
    """(status, reason, log name) when the measurement failed, else None."""
    if m.interrupted is not None:
        return "crash", f"engine interrupted by {m.interrupted} during the {m.interrupted_in}", "output.log"
    if m.stopped is not None:   # the watcher ended it: stalled (timeout) or early abort (discard)
        return m.stopped.status, m.stopped.reason, "output.log"
    if m.timed_out:
        return "timeout", f"timed out after {m.timeout_s:g} s (process group killed)", "output.log"
    if m.exit_code != 0:
        return "crash", exit_text(m.exit_code), "output.log"
    if not _printed(config, m):
        return "crash", missing_metric_reason(config.metric_name, m.found, m.warnings), "output.log"
    c = m.checks
    if c is not None and c.timed_out:
        return "checks_failed", f"checks timed out after {c.timeout_s:g} s", "checks.log"
    if c is not None and not c.passed:
        return "checks_failed", f"checks failed ({exit_text(c.exit_code)})", "checks.log"
    return None


def _not_comparable(runs, found):
    """A metric named `...fingerprint` is an identity, not a measurement (the ML template's
    settings_fingerprint: its data, tokenizer and evaluation settings): a run that prints another
    value than the segment's first run did measured something else. It is recorded with its
    value (status checks_failed, never kept), not compared."""
    for name, value in found.items():
        if not name.endswith("fingerprint"):
            continue
        first = next((r.metrics[name] for r in runs if name in r.metrics), None)
        if first is not None and value != first:
            return ("checks_failed", f"not comparable: {name} is {value:.0f}, the segment's first run printed "
                    f"{first:.0f} (its data or evaluation settings changed since); put them back as they were "
                    "(e.g. rerun prepare.py with the baseline's settings) or start a new segment "
                    "(`autoresearch init ...`)", "output.log")
    return None


def early_abort_record(abort, duration_s, best):
    """What the log keeps of an early abort: where, against which run, the time saved (the best's
    duration less this run's, an estimate of what running on would have cost)."""
    full = best.duration_s if best is not None and best.duration_s else None
    saved = max(0.0, full - (duration_s or 0.0)) if full else None
    return {"progress": round(abort.progress, 4), "loss": abort.loss, "best_loss": abort.best_loss,
            "margin": abort.margin, "against": abort.against,
            "saved_s": None if saved is None else round(saved, 3)}


def _printed(config, m):
    return config.metric_name in m.found


def missing_metric_reason(name, found, warnings):
    """Why the metric is missing, naming what the benchmark did print."""
    bad = [w for w in warnings if f"METRIC {name}=" in w or f"METRIC {name} " in w]
    if bad:
        return f"no valid METRIC {name}=<number> line in the output ({bad[-1]})"
    if not found:
        return f"no valid METRIC {name}=<number> line in the output"
    printed = ", ".join(f"`{n}`" for n in sorted(found)[:5]) + (" and more" if len(found) > 5 else "")
    guess = difflib.get_close_matches(name, list(found), n=1, cutoff=0.0) if len(found) > 1 else list(found)
    mean = f"; did you mean `{guess[0]}`?" if guess else ""
    return f"the benchmark printed METRIC {printed} but not `{name}`, the metric of this segment{mean}"


def metric_hint(config, m):
    """The next step when the metric was never printed: the benchmark, not the scope."""
    name = config.metric_name
    fixed = [f for f in config.fixed if f in (config.command or "")]
    where = f"the benchmark (`{config.command}`)"
    if not m.found:
        what = f"{where} must print a line `METRIC {name}=<number>`; see the end of the output above"
    else:
        what = f"{where} prints other METRIC names; it must print `METRIC {name}=<number>`"
    if fixed:
        return (f"{what}. {fixed[0]} is fixed: to repair it, commit the fix and start a new segment "
                f"(`{reinit_command(config)}`)")
    return f"{what}, or start a new segment with the metric it prints (`autoresearch init --metric NAME ...`)"


def _apply(record, d):
    record.status, record.reason = d.status, d.reason
    record.best_before, record.threshold = d.best_before, d.threshold
    record.confidence, record.policy, record.value = d.confidence, d.policy, d.value
    record.rule = d.rule


def _diagnose(v, config, status, workdir, run_dir):
    """Explain a crash, timeout or implausible result; never lose a run to the diagnoser."""
    record = v.record
    try:
        result = diagnose_record(workdir, run_dir, status, record, config)
        try:
            from autoresearch.pipeline import diagnosis
            v.diagnosis_line = diagnosis.short(result)
        except Exception as exc:  # the short line is cosmetic; the dict is what matters
            v.diagnosis_line = f"diagnosis: {result.get('family', 'UNKNOWN')} (short() failed: {exc})"
    except Exception as exc:  # noqa: BLE001 - never lose a run to the diagnoser
        result = {"family": "UNKNOWN", "codes": [], "intermediates": {}, "fix": {},
                  "explanation": "the diagnoser could not run", "error": f"{type(exc).__name__}: {exc}"}
        v.diagnosis_line = f"diagnosis: UNKNOWN (diagnoser unavailable: {type(exc).__name__}: {exc})"
    record.diagnosis = result
    try:
        write_atomic(os.path.join(run_dir, "diagnosis.json"),
                     json.dumps(result, indent=1, ensure_ascii=False, default=str) + "\n")
    except (OSError, TypeError, ValueError) as exc:
        output.warn(f"could not write diagnosis.json: {exc}")


def diagnose_record(workdir, run_dir, status, record, config):
    """The diagnosis of a recorded run from what the record and its segment's `log.Config`
    hold: `workdir` has the run's train.py, `run_dir` its output. `autoresearch diagnose N`
    calls this with the same inputs."""
    from autoresearch.pipeline import diagnosis
    result = diagnosis.for_run(workdir, run_dir, status, record.metrics, record.best_before,
                               config.direction, record.reason)
    if not isinstance(result, dict):
        raise TypeError(f"for_run returned {type(result).__name__}, not a dict")
    return result


def exit_text(code):
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit {code}"


def tail(path, n=TAIL_LINES):
    text = read_text(path)
    lines = [line.rsplit("\r", 1)[-1] if "\r" in line.rstrip("\r") else line.rstrip("\r")
             for line in text.split("\n")]
    while lines and not lines[-1].strip():
        lines.pop()
    return [line[:300] for line in lines[-n:]]
