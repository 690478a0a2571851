"""`autoresearch run`: one whole experiment, decided and recorded by the engine.

In order: take the lock; recover an unfinished run; refuse (exit 3, nothing run, nothing
recorded) when the session is stopped, the budget is spent, a fixed file changed, a tracked
file outside the scope changed, nothing in the scope changed, or the scope repeats an earlier
run; commit the scope change; run the benchmark in its own process group under the timeout;
parse METRIC lines; run the checks; decide by the rule (decide.py); on anything but keep,
reset to the best commit; keep the run's commit under refs/autoresearch/runs/N; append the
record; print a short result.
"""

import argparse
import json
import os
import shutil
import signal
import sys
from dataclasses import dataclass

from autoresearch import cli, decide, gitops, log, metrics, output, research, runner, state
from autoresearch.research import now_ms

TAIL_LINES = 20

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
    p.add_argument("--repeat", type=cli.positive_int, metavar="K", help="with --baseline: run it K times (noise)")
    p.add_argument("--force", action="store_true", help="run even if the scope repeats an earlier run")
    p.add_argument("-q", "--quiet", action="store_true", help="don't stream the benchmark's output")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_run)


TRAPPED = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


class Interrupted(KeyboardInterrupt):
    """A signal that asks the engine to stop: the run in progress is recorded as a crash."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclass
class Plan:
    base: str            # full sha to reset to when there is no best yet
    best_full: object    # full sha of the incumbent, or None
    commit_scope: bool   # the scope has changes to commit
    repeat_of: object    # run number whose code this measures again, or None
    count: int           # how many measurements
    scope_hash: str
    scope_lines: int


def cmd_run(args):
    # Text that is not valid UTF-8 (a mis-encoded argv) must not break the JSON log.
    description = args.message.strip().encode("utf-8", "replace").decode("utf-8")
    if not description:
        raise cli.UsageError("-m needs a description of the experiment")
    asi = _parse_asi(args.asi)
    if args.repeat and not args.baseline:
        raise cli.UsageError("--repeat needs --baseline (it measures the same code K times)")
    repo = research.find()
    if os.path.exists(os.path.join(repo.state, "pool", "pool.json")):
        from autoresearch import pool   # a pool is up: the run is a wave of one, run by the pool
        if pool.is_up(repo):
            return pool.run_through_pool(args, repo)
    lock = state.Lock(repo.lock)
    if not lock.acquire(wait_s=2.0):
        current = state.read_current(repo) or {}
        raise cli.Refused(f"run {current.get('run', '?')} is already going (pid {current.get('pid', '?')}); "
                          "wait for it to finish, one run at a time")
    handlers = _trap_signals()
    try:
        records, config, runs, segment = research.load(repo, warn=output.warn)
        research.require_config(config)
        if state.recover(repo, records, config, runs, segment, output.warn):
            records, config, runs, segment = research.load(repo, warn=lambda m: None)
        plan = _plan(repo, config, runs, args)
        session = Session(repo, args, config, records, runs, segment, description, asi)
        session.execute(plan)
    finally:
        _restore_signals(handlers)
        lock.release()
    return session.finish()


def _parse_asi(text):
    """The --asi object, checked whole before anything runs: it must go into the log as it is."""
    if text is None:
        return {}
    def reject(constant):
        raise cli.Refused(f"--asi may not contain {constant}: the log is strict JSON")
    try:
        asi = json.loads(text, parse_constant=reject)
    except json.JSONDecodeError as exc:
        raise cli.UsageError(f"--asi is not valid JSON ({exc.msg} at char {exc.pos}); "
                             "pass an object like '{\"hypothesis\": \"...\"}'") from None
    except RecursionError:
        raise cli.Refused("--asi is nested too deeply; pass a flat object like '{\"hypothesis\": \"...\"}'") from None
    if not isinstance(asi, dict):
        raise cli.UsageError("--asi must be a JSON object, like '{\"hypothesis\": \"...\"}'")
    # 1e999 parses to inf and "\ud800" to a lone surrogate: valid JSON text that the strict,
    # UTF-8 log cannot hold. Found after the benchmark ran, it would lose the run.
    try:
        json.dumps(asi, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except ValueError as exc:  # UnicodeEncodeError is a ValueError too
        what = ("a number too large for a float (it reads as infinity)" if "Out of range" in str(exc)
                else "text that is not valid Unicode (a lone surrogate)" if isinstance(exc, UnicodeError)
                else str(exc))
        raise cli.Refused(f"--asi contains {what}; the log is strict UTF-8 JSON, fix the value") from None
    except RecursionError:
        raise cli.Refused("--asi is nested too deeply; pass a flat object like '{\"hypothesis\": \"...\"}'") from None
    return asi


def _trap_signals():
    """Turn SIGTERM/SIGHUP/SIGINT into an exception so the run is recorded, not lost."""
    def handler(signum, frame):
        raise Interrupted(signum)
    saved = {}
    for sig in TRAPPED:
        saved[sig] = signal.signal(sig, handler)
    return saved


def _restore_signals(saved):
    for sig, old in saved.items():
        signal.signal(sig, old)


# --- refusals ---

def _plan(repo, config, runs, args):
    session = state.read_session(repo)
    if not state.is_active(session):
        why = "is stopped" if session else f"file {repo.rel(repo.session)} is missing or unreadable"
        raise cli.Refused(f"the session {why}; run `autoresearch resume` to continue")
    budget = config.get("max_iterations")
    if budget and decide.iterations_used(runs) >= budget:
        raise cli.Refused(f"the iteration budget is spent ({decide.iterations_used(runs)} of {budget} runs in this segment); "
                          "`autoresearch init` starts a new segment with a new budget")
    root = repo.root
    head = gitops.head(root)
    if head is None:
        raise cli.Refused("the repository has no commit; run `autoresearch init` again")
    best = decide.incumbent(runs)
    best_full = _full_commit(repo, best) if best else None
    if best and best_full is None:
        raise cli.Refused(f"the best commit {best.get('commit')} (run {best.get('run')}) is missing from git; "
                          "restore it or `autoresearch init` a new segment")
    base = best_full or head
    if best_full and head != best_full and not gitops.is_ancestor(root, best_full, head):
        raise cli.Refused(f"HEAD is not at the best commit {best.get('commit')} (run {best['run']}) or after it; "
                          f"`git checkout {best.get('commit')}` and make your change there")
    _check_fixed(repo, config, best_full or config.get("start_commit") or head, head)
    scope = config.get("scope") or []
    changed = gitops.changed_tracked(root, base)
    outside = [p for p in changed if not research.in_scope(p, scope)]
    if outside:
        shown = ", ".join(outside[:5]) + (f" and {len(outside) - 5} more" if len(outside) > 5 else "")
        raise cli.Refused(f"files outside the scope ({' '.join(scope)}) changed: {shown}; revert them "
                          f"(`git checkout {base[:7]} -- FILE`) or `autoresearch init` with a wider --scope")
    in_scope = [p for p in changed if research.in_scope(p, scope)] + gitops.untracked(root, scope)
    commit_scope = bool(in_scope) or head != base
    scope_hash, scope_lines = research.scope_fingerprint(repo, scope)
    count = args.repeat or 1
    repeat_of = None
    if best is None:
        count = args.repeat or config.get("noise_runs") or 1   # the baseline of the segment
    elif args.baseline or (args.force and not commit_scope):
        if commit_scope:
            raise cli.Refused(f"--baseline measures the best code (run {best['run']}) again, but the scope has "
                              f"changes: {', '.join(in_scope[:5]) or 'new commits'}; run without --baseline, "
                              f"or revert them (`git checkout {best.get('commit')} -- {' '.join(scope)}`)")
        repeat_of = best["run"]
    elif not commit_scope:
        raise cli.Refused(f"nothing in the scope ({' '.join(scope)}) changed since the best commit "
                          f"{best.get('commit')} (run {best['run']}); edit it first, or `--baseline` to measure "
                          "the best code again")
    else:
        earlier = next((r for r in runs if r.get("scope_hash") == scope_hash), None)
        if earlier is not None:
            if not args.force:
                raise cli.Refused(f"the scope is identical to run {earlier['run']} ({earlier.get('status')}: "
                                  f"{earlier.get('description', '')!s:.80}); try something else, or --force "
                                  "to measure it again")
            repeat_of = earlier["run"]
    if budget:
        count = min(count, budget - decide.iterations_used(runs))
    return Plan(base, best_full, commit_scope, repeat_of, count, scope_hash, scope_lines)


def _check_fixed(repo, config, source, head):
    """Refuse when a fixed file differs from init; the advice restores it from `source` (the best
    commit, else init's), which works whether the change is staged, unstaged or committed."""
    root = repo.root
    for name, digest in (config.get("fixed") or {}).items():
        path = os.path.join(root, name)
        if os.path.isfile(path) and research.sha256_file(path) == digest:
            continue
        what = "is missing" if not os.path.isfile(path) else "changed since init"
        restore = f"git checkout {source[:7]} -- {name}"
        if source != head and gitops.changed_between(root, source, head, name):
            # The change is in a commit after `source`: restoring the file is not enough, the
            # restore must be committed too or the next run's commit would carry the change.
            raise cli.Refused(f"fixed file {name} {what} (changed in a commit after {source[:7]}); restore it "
                              f"with `{restore} && git commit -m 'restore {name}' -- {name}` "
                              "(the harness must stay the same for results to compare)")
        raise cli.Refused(f"fixed file {name} {what}; restore it with `{restore}` "
                          "(the harness must stay the same for results to compare)")


def _full_commit(repo, record):
    full = gitops.run_ref(repo.root, record.get("run"))
    if full:
        return full
    if record.get("commit"):
        return gitops.git(repo.root, "rev-parse", "--verify", "-q", f"{record['commit']}^{{commit}}",
                          check=False)
    return None


# --- the experiment ---

class Session:
    """One `run` invocation: one or more measurements (baseline repeats, a confirmation)."""

    def __init__(self, repo, args, config, records, runs, segment, description, asi):
        self.repo, self.args, self.config = repo, args, config
        self.records, self.runs, self.segment = records, runs, segment
        self.description, self.asi = description, asi
        self.rules = decide.Rules.from_config(config)
        self.done = []          # records appended by this invocation
        self.notes = []         # lines for the result
        self.interrupted = None

    def execute(self, plan):
        commit = None
        repeat_of = plan.repeat_of
        for i in range(plan.count):
            record, decision, commit = self._measure(plan, commit, repeat_of)
            if decision is not None and decision.needs_confirmation and self.interrupted is None:
                if self._budget_left() >= 2:
                    pending = dict(_clean(record), status="discard", policy="confirm",
                                   reason="borderline win; its confirmation re-run was interrupted")
                    second, d2, _ = self._measure(plan, commit, record["run"], pending=pending)
                    self._settle_confirmed(record, second, d2)
                else:
                    record.update(status="discard", policy="confirm",
                                  reason="borderline win; no iteration left to confirm it with a re-run")
                    self._append(record)
            else:
                self._append(record)
            # Repeats go on while they measure; a crash, timeout or failed check ends them.
            if self.interrupted is not None or not decide.is_measurement(self.done[-1]):
                break
            if repeat_of is None:
                repeat_of = record["run"]
        state.clear_current(self.repo)

    def _budget_left(self):
        budget = self.config.get("max_iterations")
        if not budget:
            return 1 << 30
        return budget - decide.iterations_used(self.runs)

    def _measure(self, plan, commit, repeat_of, pending=None):
        """Run the benchmark once; return (record, decision or None, commit)."""
        repo, config = self.repo, self.config
        run = research.next_run_number(self.records + ([pending] if pending else []), repo)
        run_dir = repo.run_dir(run)
        current = {"run": run, "pid": os.getpid(), "started": now_ms(), "phase": "commit",
                   "base": plan.base, "description": self.description, "asi": self.asi,
                   "repeat_of": repeat_of, "scope_hash": plan.scope_hash, "scope_lines": plan.scope_lines,
                   "commit": commit, "pending": pending}
        state.write_current(repo, current)
        if os.path.isdir(run_dir):
            shutil.rmtree(run_dir)  # left by a run that never got a record
        os.makedirs(run_dir)
        if commit is None:
            commit = self._commit(plan, run)
            current["commit"] = commit
        gitops.set_run_ref(repo.root, run, commit)
        _write_text(os.path.join(run_dir, "diff.patch"), gitops.diff_patch(repo.root, commit))
        current["phase"] = "benchmark"
        state.write_current(repo, current)
        out_path = os.path.join(run_dir, "output.log")
        env = dict(os.environ)
        env.update({"AUTORESEARCH_RUN": str(run), "AUTORESEARCH_RUN_DIR": os.path.abspath(run_dir),
                    "AUTORESEARCH_STEPS_FILE": os.path.abspath(os.path.join(run_dir, "steps.jsonl"))})
        env.setdefault("PYTHONUNBUFFERED", "1")

        def started(pid):
            current.update(child_pid=pid, child_start=state.process_start_time(pid))
            state.write_current(repo, current)

        self._announce(run, repeat_of, pending)
        timeout = float(config.get("timeout_s") or 0) or None
        try:
            result = runner.run(config["command"], repo.root, env, out_path, timeout,
                                echo=self._echo(), on_start=started)
        except Interrupted as exc:
            self.interrupted = exc
            result = runner.Result(None, False, (now_ms() - current["started"]) / 1000)
        text = _read_text(out_path)
        found, warnings = metrics.parse(text)
        for w in warnings:
            output.warn(f"run {run}: {w}")
        record = self._base_record(run, commit, plan, repeat_of, found, result, run_dir)
        decision = None
        name = config.get("metricName")
        if self.interrupted is not None:
            self._fail(record, "crash", f"engine interrupted by {self.interrupted} during the benchmark")
        elif result.timed_out:
            self._fail(record, "timeout", f"timed out after {timeout:g} s (process group killed)")
        elif result.exit_code != 0:
            self._fail(record, "crash", _exit_text(result.exit_code))
        elif name not in found:
            bad = [w for w in warnings if f"METRIC {name}=" in w or f"METRIC {name} " in w]
            self._fail(record, "crash", f"no valid METRIC {name}=<number> line in the output"
                       + (f" ({bad[-1]})" if bad else ""))
        elif not self._checks(record, run_dir, env, current):
            pass
        else:
            prior = self.runs + ([dict(pending, status="discard")] if pending else [])
            decision = decide.decide(prior, record, self.rules, plan.scope_lines, confirmed=pending is not None)
            self._apply(record, decision)
        return record, decision, commit

    def _commit(self, plan, run):
        root = self.repo.root
        scope = self.config.get("scope") or []
        if plan.commit_scope and gitops.scope_status(root, scope):
            message = f"{self.description}\n\nautoresearch run {run}"
            return gitops.commit_paths(root, message, scope)
        return gitops.head(root)

    def _checks(self, record, run_dir, env, current):
        """Run the checks command; True when there is none or it passes."""
        command = self.config.get("checks")
        if not command:
            return True
        current["phase"] = "checks"
        state.write_current(self.repo, current)
        path = os.path.join(run_dir, "checks.log")
        timeout = float(self.config.get("checks_timeout_s") or 300)
        try:
            result = runner.run(command, self.repo.root, env, path, timeout, echo=None)
        except Interrupted as exc:
            self.interrupted = exc
            self._fail(record, "crash", f"engine interrupted by {exc} during the checks")
            return False
        record["duration_s"] = round(record["duration_s"] + result.duration_s, 3)
        if result.timed_out:
            self._fail(record, "checks_failed", f"checks timed out after {timeout:g} s", log_name="checks.log")
            return False
        if result.exit_code != 0:
            self._fail(record, "checks_failed", f"checks failed ({_exit_text(result.exit_code)})",
                       log_name="checks.log")
            return False
        return True

    def _base_record(self, run, commit, plan, repeat_of, found, result, run_dir):
        name = self.config.get("metricName")
        return {
            "run": run,
            "commit": gitops.short(commit),
            "metric": found.get(name),
            "metrics": found,
            "status": None,
            "description": self.description,
            "timestamp": now_ms(),
            "segment": self.segment,
            "confidence": None,
            "asi": self.asi,
            "duration_s": round(result.duration_s, 3),
            "reason": None,
            "best_before": None,
            "threshold": None,
            "diagnosis": None,
            "run_dir": self.repo.rel(run_dir),
            "ref": f"{gitops.RUNS_REF}/{run}",
            "scope_hash": plan.scope_hash,
            "scope_lines": plan.scope_lines,
            "repeat_of": repeat_of,
            "exit_code": result.exit_code,
            "policy": None,
        }

    def _fail(self, record, status, reason, log_name="output.log"):
        record["status"] = status
        record["reason"] = reason
        record["metric"] = None if status in ("crash", "timeout") else record["metric"]
        best = decide.incumbent(self.runs)
        record["best_before"] = decide.value_of(self.runs, best) if best else None
        record["threshold"] = decide.noise(self.runs, self.rules)["threshold"]
        record["_tail"] = _tail(os.path.join(self.repo.root, record["run_dir"], log_name))
        if status in ("crash", "timeout"):
            self._diagnose(record, status)

    def _apply(self, record, d):
        record["status"] = d.status
        record["reason"] = d.reason
        record["best_before"] = d.best_before
        record["threshold"] = d.threshold
        record["confidence"] = d.confidence
        record["policy"] = d.policy
        record["value"] = d.value
        if d.implausible:
            self._diagnose(record, "implausible")

    def _diagnose(self, record, status):
        run_dir = os.path.join(self.repo.root, record["run_dir"])
        best = decide.incumbent(self.runs)
        best_metric = decide.value_of(self.runs, best) if best else None
        short_text = None
        try:
            from autoresearch import diagnosis
            result = diagnosis.for_run(self.repo.root, run_dir, status, record.get("metrics") or {},
                                       best_metric, self.config.get("bestDirection", "lower"), record["reason"])
            if not isinstance(result, dict):
                raise TypeError(f"for_run returned {type(result).__name__}, not a dict")
            try:
                short_text = diagnosis.short(result)
            except Exception as exc:  # the short line is cosmetic; the dict is what matters
                short_text = f"diagnosis: {result.get('family', 'UNKNOWN')} (short() failed: {exc})"
        except Exception as exc:  # never lose a run to the diagnoser
            result = {"family": "UNKNOWN", "codes": [], "intermediates": {}, "fix": {},
                      "explanation": "the diagnoser could not run", "error": f"{type(exc).__name__}: {exc}"}
            short_text = f"diagnosis: UNKNOWN (diagnoser unavailable: {type(exc).__name__}: {exc})"
        record["diagnosis"] = result
        record["_short"] = short_text
        try:
            _write_text(os.path.join(run_dir, "diagnosis.json"),
                        json.dumps(result, indent=1, ensure_ascii=False, default=str) + "\n")
        except (OSError, TypeError, ValueError) as exc:
            output.warn(f"could not write diagnosis.json: {exc}")

    def _settle_confirmed(self, first, second, decision):
        """A borderline win and its re-run: one decision on both, at most one keep.

        The first record carries the decision (keep or discard); the re-run is a measurement of
        the same code, so it is a noise sample (discard) whatever the outcome, like any other
        re-measurement: an accepted change gets exactly one `keep`.
        """
        first["policy"] = second["policy"] = "confirm"
        if decision is not None:
            first.update(status=decision.status, value=decision.value, confidence=decision.confidence,
                         reason=f"{decision.reason} (with re-run {second['run']}: value {decision.value:.6g})")
            second.update(status="discard",
                          reason=f"{decide.remeasurement_reason(first['run'])}: confirmation re-run; "
                                 f"run {first['run']} {'kept' if decision.status == 'keep' else 'discarded'}"
                                 f" on the value {decision.value:.6g}")
        else:
            first.update(status="discard", reason=f"borderline win not confirmed: re-run {second['run']} "
                                                   f"ended in {second['status']}")
        self._append(first)
        self._append(second)

    def _append(self, record):
        """Append the record, then restore the best commit (the run's ref already holds its commit).

        Signals wait until both are done, so an interrupt never splits them; a SIGKILL between
        the two leaves current.json, and the next engine call finishes the reset.
        """
        clean = _clean(record)
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, TRAPPED)
        try:
            log.append(self.repo.log, clean, warn=output.warn)
            self.records.append(clean)
            self.runs.append(clean)
            self.done.append(record)
            if record["status"] != "keep":
                self._restore_best()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)

    def _restore_best(self):
        best = decide.incumbent(self.runs)
        target = _full_commit(self.repo, best) if best else (state.read_current(self.repo) or {}).get("base")
        if target and gitops.head(self.repo.root) != target:
            gitops.reset_hard(self.repo.root, target)

    def _echo(self):
        if self.args.quiet:
            return None
        stream = sys.stderr if output.wants_json(self.args) else sys.stdout
        return getattr(stream, "buffer", None)

    def _announce(self, run, repeat_of, pending):
        what = (f"confirming run {pending['run']}" if pending else
                f"measuring run {repeat_of}'s code again" if repeat_of else "")
        output.say(self.args, f"autoresearch: run {run} started{': ' + what if what else ''} "
                              f"({self.config.get('command')})")

    def finish(self):
        text = self._result_text()
        last = self.done[-1] if self.done else None
        data = {"ok": self.interrupted is None, "status": last["status"] if last else None,
                "record": _clean(last) if last else None, "records": [_clean(r) for r in self.done],
                "best": _best_summary(self.repo, self.runs), "message": text}
        output.emit(self.args, text, data)
        return 130 if self.interrupted is not None else cli.EXIT_OK

    def _result_text(self):
        unit = self.config.get("metricUnit") or ""
        name = self.config.get("metricName")
        lines = []
        for r in self.done:
            head = f"run {r['run']}: {r['status'].upper()}"
            if r.get("metric") is not None:
                head += f"  {name}={r['metric']:.6g}{' ' + unit if unit else ''}"
                if r.get("best_before") is not None:
                    delta = r["metric"] - r["best_before"]
                    head += f" ({delta:+.6g} vs best {r['best_before']:.6g})"
            if r.get("confidence") is not None:
                head += f", confidence {r['confidence']:.2f} sigma"
            lines.append(head)
            lines.append(f"  reason: {r['reason']}")
            if r.get("_tail"):
                lines.append(f"  last lines of {r['run_dir']}/" + ("checks.log" if r["status"] == "checks_failed"
                                                                 else "output.log") + ":")
                lines.extend("  | " + line for line in r["_tail"])
            if r.get("_short"):
                lines.append("  " + r["_short"])
        best = decide.incumbent(self.runs)
        if best:
            lines.append(f"best: run {best['run']} ({best.get('commit')}) {name}="
                         f"{decide.value_of(self.runs, best):.6g}: {best.get('description', '')}")
        else:
            lines.append("best: none yet (no successful baseline in this segment)")
        noise = decide.noise(self.runs, self.rules)
        if noise["source"] == "repeats":
            lines.append(f"noise: threshold {noise['threshold']:.4g} (MAD {noise['mad']:.4g} "
                         f"from {noise['samples']} repeated measurements)")
        if self.interrupted is not None:
            lines.append(f"interrupted by {self.interrupted}: recorded, HEAD at the best commit")
        else:
            lines.append(f"next: edit {' '.join(self.config.get('scope') or [])}, then "
                         'autoresearch run -m "what you changed"')
        return "\n".join(lines)


def _clean(record):
    return {k: v for k, v in record.items() if not k.startswith("_")}


def _best_summary(repo, runs):
    best = decide.incumbent(runs)
    if not best:
        return None
    return {"run": best["run"], "commit": best.get("commit"), "metric": decide.value_of(runs, best),
            "description": best.get("description")}


def _exit_text(code):
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit {code}"


def _read_text(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""


def _tail(path, n=TAIL_LINES):
    text = _read_text(path)
    lines = [line.rsplit("\r", 1)[-1] if "\r" in line.rstrip("\r") else line.rstrip("\r")
             for line in text.split("\n")]
    while lines and not lines[-1].strip():
        lines.pop()
    return [line[:300] for line in lines[-n:]]


def _write_text(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
