"""`autoresearch run`: one whole experiment, decided and recorded by the engine.

The steps, each in its own module and passing typed values: take the lock and recover an
unfinished run (recovery.py); plan (plan.py: refuse, exit 3 with nothing run or recorded, or
say what to measure); commit the scope change and keep it under refs/autoresearch/runs/N;
measure (measure.py: the benchmark in its own process group under the timeout, its METRIC
lines, the checks); decide (verdict.py: the rule of decide.py, or the failure, diagnosed);
record and reset (record.py: append the record, put HEAD back at the best commit unless kept);
print a short result.
"""

import argparse
import json
import os
import re
import shutil
import signal
import sys
from dataclasses import dataclass, field

from autoresearch import errors, output
from autoresearch.decision import decide, holdout, logcache, summary
from autoresearch.pipeline import earlyabort, guarded, preflight, recovery
from autoresearch.store import gitops, integrity, log, research, state
from autoresearch.errors import Interrupted
from autoresearch.store.files import write_atomic
from autoresearch.pipeline.measure import run_env
from autoresearch.pipeline.plan import Request, make_plan
from autoresearch.pipeline.record import TRAPPED, record
from autoresearch.store.research import now_ms
from autoresearch.pipeline.verdict import judge

EXAMPLES = """examples:
  autoresearch run -m "baseline"
  autoresearch run -m "double the learning rate" --asi '{"hypothesis": "LR is too low"}'
  autoresearch run --baseline --repeat 3 -m "measure noise"
"""


def add_parsers(sub):
    p = sub.add_parser("run", help="run, decide and record one experiment", description=__doc__,
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-m", "--message", required=True, metavar="TEXT", help="what this experiment changes")
    p.add_argument("--asi", metavar="JSON", help="free-form JSON object stored with the run (hypothesis, ...)")
    p.add_argument("--baseline", action="store_true",
                   help="measure the current best code (the first run of a segment is the baseline anyway)")
    p.add_argument("--repeat", type=errors.positive_int, metavar="K", help="with --baseline: run it K times (noise)")
    p.add_argument("--force", action="store_true", help="run even if the scope repeats an earlier run")
    p.add_argument("-q", "--quiet", action="store_true", help="don't stream the benchmark's output")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="stream the benchmark's output even when stdout is not a terminal (by default "
                        "a pipe, like an agent's Bash tool, gets only the verdict; the output is in the run's files)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_run)


def request_from(args):
    """The `run` request, checked whole before anything runs (the pool's `run` checks it too)."""
    # Text that is not valid UTF-8 (a mis-encoded argv) must not break the JSON log.
    description = args.message.strip().encode("utf-8", "replace").decode("utf-8")
    if not description:
        raise errors.UsageError("-m needs a description of the experiment")
    asi = parse_asi(args.asi)
    if args.repeat and not args.baseline:
        raise errors.UsageError("--repeat needs --baseline (it measures the same code K times)")
    return Request(description, asi, baseline=args.baseline, repeat=args.repeat, force=args.force)


def cmd_run(args):
    """`run` on this machine. While a pool serves the repo, cli.py routes `run` to the pool first."""
    request = request_from(args)
    repo = research.find()
    lock = state.Lock(repo.lock)
    if not lock.acquire(wait_s=2.0):
        current = state.read_current(repo) or {}
        raise errors.Refused(f"run {current.get('run', '?')} is already going (pid {current.get('pid', '?')}); "
                          "wait for it to finish, one run at a time")
    handlers = _trap_signals()
    try:
        records, config, runs, segment = research.load(repo, warn=output.warn)
        research.require_config(config)
        preflight.check(repo, config)
        if recovery.recover(repo, records, runs, segment, output.warn):
            records, config, runs, segment = research.load(repo, warn=lambda m: None)
        plan = make_plan(repo, config, runs, request)
        experiment = Experiment(repo, config, records, runs, segment, request,
                                echo=None if args.quiet else _echo_stream(args), args=args)
        experiment.execute(plan)
    except BaseException:
        errors.restore(handlers)
        raise
    finally:
        lock.release()
    try:
        code = experiment.finish(args)
        logcache.refresh(repo)   # after the result is printed: the next status and hooks read the cache's view
    finally:
        if errors.STOP.signum is None:
            errors.restore(handlers)
        else:   # already stopping: later signals stay moot until the engine has exited
            errors.restore({sig: signal.SIG_IGN for sig in handlers})
    return code


def parse_asi(text):
    """The --asi object, checked whole before anything runs: it must go into the log as it is."""
    if text is None:
        return {}
    def reject(constant):
        raise errors.Refused(f"--asi may not contain {constant}: the log is strict JSON")
    try:
        asi = json.loads(text, parse_constant=reject)
    except json.JSONDecodeError as exc:
        raise errors.UsageError(f"--asi is not valid JSON ({exc.msg} at char {exc.pos}); "
                             "pass an object like '{\"hypothesis\": \"...\"}'") from None
    except RecursionError:
        raise errors.Refused("--asi is nested too deeply; pass a flat object like '{\"hypothesis\": \"...\"}'") from None
    if not isinstance(asi, dict):
        raise errors.UsageError("--asi must be a JSON object, like '{\"hypothesis\": \"...\"}'")
    # 1e999 parses to inf and "\ud800" to a lone surrogate: valid JSON text that the strict,
    # UTF-8 log cannot hold. Found after the benchmark ran, it would lose the run.
    try:
        json.dumps(asi, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except ValueError as exc:  # UnicodeEncodeError is a ValueError too
        what = ("a number too large for a float (it reads as infinity)" if "Out of range" in str(exc)
                else "text that is not valid Unicode (a lone surrogate)" if isinstance(exc, UnicodeError)
                else str(exc))
        raise errors.Refused(f"--asi contains {what}; the log is strict UTF-8 JSON, fix the value") from None
    except RecursionError:
        raise errors.Refused("--asi is nested too deeply; pass a flat object like '{\"hypothesis\": \"...\"}'") from None
    return asi


def _trap_signals():
    """Take SIGTERM/SIGHUP/SIGINT in hand so the run in progress is recorded, not lost: the first
    one ends the benchmark (an Interrupted, recorded as a crash) or, outside it, the invocation
    after the run it is recording (errors.Stop). One the engine was started ignoring stays ignored."""
    errors.STOP = errors.Stop()
    return errors.trap(TRAPPED, errors.STOP.handler)


def _echo_stream(args):
    """Where the benchmark's output streams: the terminal, or with --verbose any stdout. A pipe (an
    agent's Bash tool) gets only the verdict: the output is in the run's output.log."""
    if output.wants_json(args):   # --json: the one object and nothing else; the output is in output.log
        return None
    if not (getattr(args, "verbose", False) or lean(args) is False):
        return None
    return getattr(sys.stdout, "buffer", None)


def lean(args):
    """True when the result is for a program reading a pipe: stdout is not a terminal and no
    --verbose. Then only the verdict block is printed, with a short tail on a failure."""
    if getattr(args, "verbose", False):
        return False
    try:
        return not sys.stdout.isatty()
    except (AttributeError, ValueError):
        return True


@dataclass
class Outcome:
    """One recorded run and what its result says beyond the record."""
    record: log.Run
    tail: list = field(default_factory=list)
    tail_of: str = None
    diagnosis_line: str = None
    metric_hint: str = None


class Experiment:
    """One `run` invocation: one or more measurements (baseline repeats, a confirmation), each
    through the steps prepare -> measure -> decide -> record."""

    def __init__(self, repo, config, records, runs, segment, request, echo=None, args=None):
        self.repo, self.config = repo, config
        self.records, self.runs, self.segment = records, runs, segment
        self.request, self.echo, self.args = request, echo, args
        self.done = []          # Outcomes of this invocation
        self.notes = []         # lines for the result (edits kept while a run was in flight)
        self.interrupted = None

    def execute(self, plan):
        commit = None
        repeat_of = plan.repeat_of
        for _ in range(plan.count):
            verdict, commit = self.one(plan, commit, repeat_of)
            self._note_stop()
            decision = verdict.decision
            if decision is not None and decision.needs_confirmation and self.interrupted is None:
                self._confirm(plan, commit, verdict)
            else:
                self._record(verdict)
            self._note_stop()
            # Repeats go on while they measure; a crash, timeout or failed check ends them.
            if self.interrupted is not None or not self.done[-1].record.measured:
                break
            if repeat_of is None:
                repeat_of = verdict.record.run
        state.clear_current(self.repo)

    def _note_stop(self):
        """A signal that came outside the benchmark (while this run was judged or recorded) ends
        the invocation once the run is recorded whole."""
        if self.interrupted is None and errors.STOP.signum is not None:
            self.interrupted = Interrupted(errors.STOP.signum)

    def one(self, plan, commit, repeat_of, pending=None):
        """Prepare, measure and decide one run; return (Verdict, the full commit measured)."""
        repo = self.repo
        run = research.next_run_number(self.records + ([pending] if pending else []), repo)
        run_dir = repo.run_dir(run)
        current = {"run": run, "pid": os.getpid(), "started": now_ms(), "phase": "commit",
                   "base": plan.base, "description": self.request.description, "asi": self.request.asi,
                   "repeat_of": repeat_of, "scope_hash": plan.scope_hash, "scope_lines": plan.scope_lines,
                   "commit": commit, "pending": pending.to_json() if pending else None}
        state.write_current(repo, current)
        if os.path.isdir(run_dir):
            shutil.rmtree(run_dir)  # left by a run that never got a record
        os.makedirs(run_dir)
        if commit is None:
            commit = self._commit(plan, run)
            current["commit"] = commit
        gitops.set_run_ref(repo.root, run, commit)
        write_atomic(os.path.join(run_dir, "diff.patch"), gitops.diff_patch(repo.root, commit), durable=False)

        def started(pid):
            current.update(child_pid=pid, child_start=state.process_start_time(pid))
            state.write_current(repo, current)

        def phase(name):
            current["phase"] = name
            state.write_current(repo, current)

        def workspace_open(ws):
            current.update(phase="benchmark", token=ws.token)
            state.write_current(repo, current)

        self._announce(run, repeat_of, pending)
        # The run executes its own snapshot of the commit, sandboxed, under the integrity guard
        # and the watcher: the one way every run path starts a benchmark (guarded.py).
        with guarded.run(self.config, run, run_dir, run_env(run, run_dir), repo=repo, commit=commit,
                         echo=self.echo, on_start=started, on_phase=phase, on_workspace=workspace_open,
                         checker=self._abort_checker(repeat_of, pending), current=current,
                         state_copy=state.current_copy(repo), warn=output.warn) as g:
            holdout.hide(repo, run, run_dir, g.measurement, output.warn, confined=g.sandbox != "none")
            return self._judge(plan, run, run_dir, commit, repeat_of, pending, g), commit

    def _judge(self, plan, run, run_dir, commit, repeat_of, pending, g):
        m, changes, failed = g.measurement, g.changes, g.failed
        repo = self.repo
        for w in m.warnings:
            output.warn(f"run {run}: {w}")
        if m.interrupted is not None:
            self.interrupted = m.interrupted
        prior = self.runs + ([log.Run.from_json(dict(pending.to_json(), status="discard"))] if pending else [])
        template = log.Run(run=run, commit=gitops.short(commit), description=self.request.description,
                           timestamp=now_ms(), segment=self.segment, asi=self.request.asi,
                           run_dir=repo.rel(run_dir), ref=f"{gitops.runs_ref(repo.root)}/{run}",
                           scope_hash=plan.scope_hash, scope_lines=plan.scope_lines, repeat_of=repeat_of,
                           sandbox=g.sandbox, output_cut_bytes=m.output_cut or None)
        verdict = judge(self.config, prior, m, template, g.tree, plan.scope_lines,
                        confirmed=pending is not None)
        if changes:
            integrity.mark_tampered(verdict, changes, failed)
        return verdict

    def _abort_checker(self, repeat_of, pending):
        """The early-abort check for a candidate (never for a baseline, a repeat or a confirmation),
        when the segment turned it on and the best run left a curve; else None."""
        rule = earlyabort.rule_of(self.config)
        if rule is None or repeat_of is not None or pending is not None or self.request.baseline:
            return None
        reference = earlyabort.reference_for(self.runs, self.repo.run_dir)
        return earlyabort.Checker(reference, rule) if reference is not None else None

    def _commit(self, plan, run):
        root = self.repo.root
        scope = self.config.scope
        if plan.commit_scope and gitops.scope_status(root, scope):
            message = f"{self.request.description}\n\nautoresearch run {run}"
            return gitops.commit_paths(root, message, scope)
        return gitops.head(root)

    def _confirm(self, plan, commit, verdict):
        """A borderline win: measure it once more, then one decision on both."""
        first = verdict.record
        if self._budget_left() < 2:
            first.status, first.policy = "discard", "confirm"
            first.reason = "borderline win; no iteration left to confirm it with a re-run"
            self._record(verdict)
            return
        pending = log.Run.from_json(dict(first.to_json(), status="discard", policy="confirm",
                                         reason="borderline win; its confirmation re-run was interrupted"))
        second, _ = self.one(plan, commit, first.run, pending=pending)
        self._settle_confirmed(verdict, second)

    def _budget_left(self):
        budget = self.config.max_iterations
        return budget - decide.iterations_used(self.runs) if budget else 1 << 30

    def _settle_confirmed(self, first_verdict, second_verdict):
        """A borderline win and its re-run: one decision on both, at most one keep.

        The first record carries the decision (keep or discard); the re-run is a measurement of
        the same code, so it is a noise sample (discard) whatever the outcome, like any other
        re-measurement: an accepted change gets exactly one `keep`.
        """
        first, second, decision = first_verdict.record, second_verdict.record, second_verdict.decision
        first.policy = second.policy = "confirm"
        if decision is not None:
            first.status, first.value, first.confidence = decision.status, decision.value, decision.confidence
            first.reason = f"{decision.reason} (with re-run {second.run}: value {decision.value:.6g})"
            second.status = "discard"
            second.reason = (f"{decide.remeasurement_reason(first.run)}: confirmation re-run; run {first.run} "
                             f"{'kept' if decision.status == 'keep' else 'discarded'} on the value {decision.value:.6g}")
        else:
            first.status = "discard"
            first.reason = f"borderline win not confirmed: re-run {second.run} ended in {second.status}"
        self._record(first_verdict)
        self._record(second_verdict)

    def _record(self, verdict):
        record(self.repo, verdict.record, self.runs, (state.read_current(self.repo) or {}).get("base"),
               notes=self.notes)
        self.records.append(verdict.record)
        self.done.append(Outcome(verdict.record, verdict.tail, verdict.tail_of, verdict.diagnosis_line,
                                 verdict.metric_hint))

    def _announce(self, run, repeat_of, pending):
        what = (f"confirming run {pending.run}" if pending else
                f"measuring run {repeat_of}'s code again" if repeat_of else "")
        output.say(self.args, f"autoresearch: run {run} started{': ' + what if what else ''} "
                              f"({self.config.command})")

    def finish(self, args):
        s = summary.summarise(self.config, self.runs, self.segment)   # the best and noise every view shows
        text = self.result_text(s)
        last = self.done[-1].record if self.done else None
        data = {"ok": self.interrupted is None, "status": last.status if last else None,
                "record": last.to_json() if last else None, "records": [o.record.to_json() for o in self.done],
                "best": summary.point(s.best, s.best_value), "message": text}
        output.emit(args, text, data)
        return 130 if self.interrupted is not None else errors.EXIT_OK

    def result_text(self, s):
        unit = self.config.metric_unit
        name = self.config.metric_name
        lines = []
        short = lean(self.args) if self.args is not None else False
        for o in self.done:
            lines += outcome_lines(o, name, unit, self.config.direction, short=short)
        if s.best:
            lines.append(f"best: run {s.best.run} ({s.best.commit}) {name}={s.best_value:.6g}: {s.best.description}")
        else:
            lines.append("best: none yet (no successful baseline in this segment)")
        noise = s.noise
        if s.noise_measured:
            lines.append(f"noise: threshold {noise['threshold']:.4g} (MAD {noise['mad']:.4g} "
                         f"from {noise['samples']} repeated measurements)")
        lines.extend(self.notes)
        hint = next((o.metric_hint for o in reversed(self.done) if o.metric_hint), None)
        if self.interrupted is not None:
            lines.append(f"interrupted by {self.interrupted}: recorded, HEAD at the best commit")
        elif hint:
            lines.append(f"next: {hint}")
        elif not s.best and self.done and self.done[-1].record.status != "keep":
            lines.append("next: " + baseline_next_step(self.done[-1], " ".join(self.config.scope)))
        else:
            lines.append(f"next: edit {' '.join(self.config.scope)}, then "
                         'autoresearch run -m "what you changed"')
        return "\n".join(lines)


def baseline_next_step(o, scope):
    """What to do when the baseline failed: there is nothing to improve on yet, so the step is
    the one that lets the code run (the diagnosis's: the environment, the set-up, or the line an
    edit broke), then the baseline again; a new idea would be measured against nothing. The
    engine has already put the scope back as committed (the tried code stays in the run's
    commit), which the line says, so a person does not hunt for an edit that is gone."""
    step = None
    if o.diagnosis_line:
        first = o.diagnosis_line.splitlines()[0]
        step = first.split(" - fix: ", 1)[1] if " - fix: " in first else None
        if step and step.startswith("none"):
            step = None
        elif step and "=" in step and " " not in step.split("=")[0]:
            step = f"set {step} in {scope}"
    what = step or "fix what stopped it (its output and diagnosis above: usually the environment or the set-up)"
    return (f"the baseline did not run: {what} ({scope} is back as committed: the engine undid the run's "
            f"edit), then record the baseline again: autoresearch run -m \"baseline\"")


LEAN_TAIL_LINES = 8      # the end of a failed run's output, for a program reading the result
LEAN_LINE_CHARS = 200
PROGRESS_LINE = re.compile(r"^\s*step \d+ \(")   # the harness's per-step progress lines


def lean_tail(lines):
    """The last lines of a failure that matter: no step progress lines, no blanks, short lines."""
    kept = [line for line in lines if line.strip() and not PROGRESS_LINE.match(line)]
    return [line if len(line) <= LEAN_LINE_CHARS else line[:LEAN_LINE_CHARS] + "..."
            for line in kept[-LEAN_TAIL_LINES:]]


def outcome_lines(o, name, unit, direction, short=False):
    """The verdict of one run: status, value against the best (with better/worse), reason,
    and for a failure the end of its log and the diagnosis (`short`: fewer, shorter lines)."""
    r = o.record
    head = f"run {r.run}: {r.status.upper()}"
    if r.metric is not None:
        head += f"  {name}={r.metric:.6g}{' ' + unit if unit else ''}"
        if r.best_before is not None:
            g = decide.gain(direction, r.best_before, r.metric)
            word = "better" if g > 0 else "worse" if g < 0 else "equal to"
            head += f" ({abs(g):.6g} {word} than the best {r.best_before:.6g})" if g else \
                f" (equal to the best {r.best_before:.6g})"
    if r.confidence is not None and r.confidence > 0:
        head += f", confidence {r.confidence:.2f} sigma"
    lines = [head, f"  reason: {r.reason}"]
    tail = lean_tail(o.tail) if short else o.tail
    if tail:
        lines.append(f"  last lines of {r.run_dir}/{o.tail_of}:")
        lines.extend("  | " + line for line in tail)
    if o.diagnosis_line:
        lines.append("  " + o.diagnosis_line)
    return lines

