"""Crash recovery: finish a run whose engine died (closed terminal, SIGKILL, power cut).

`.autoresearch/current.json` is written before a run touches git and removed once its record
is in the log. Found with the lock free, it means the engine died mid-run: `recover()` kills
what the benchmark left running, appends the pending record of a borderline win whose
confirmation was cut short, records the run as a crash, and puts HEAD back at the best commit.
Every engine command that reads the log calls it first (with the lock held), so the log never
misses a run and no kept commit is lost.
"""

import os
import time

from autoresearch.decision import decide
from autoresearch.isolation import runner, workspace
from autoresearch.store import gitops, log, state
from autoresearch.store import pending as pending_results
from autoresearch.store.research import now_ms


def recover(repo, records, runs, segment, warn):
    """Record an unfinished run as a crash and restore the best commit.

    Must be called with the lock held. Returns the crash `log.Run`, or None if there was
    nothing to recover. Idempotent: a run whose record made it into the log is only cleaned up.
    """
    workspace.sweep(repo)
    flushed = pending_results.flush(repo, warn)
    if flushed:
        loaded = log.load(repo.log, warn=lambda m: None)
        records = loaded.records
        runs = loaded.current.runs if loaded.current else []
    current = state.trusted_current(repo, warn)
    if current is None:
        state.clear_current(repo)   # unreadable: torn by a crash before the rename
        return flushed or None
    run = current.get("run")
    if not isinstance(run, int) or isinstance(run, bool) or run < 1:
        warn(f"{repo.rel(repo.current)} names no valid run ({run!r}); removed it")
        state.clear_current(repo)
        return None
    _kill_leftover(current)
    recorded = {r.run for r in records if isinstance(r, log.Run)}
    target = restore_target(repo, runs, current.get("base"))
    crash = None
    if run not in recorded:
        commit = _keep_commit(repo, run, current, warn)
        pending = current.get("pending")
        if isinstance(pending, dict) and pending.get("run") not in recorded:
            # A borderline win waiting for its confirmation: never confirmed, so never a keep.
            log.append(repo.log, log.Run.from_json(dict(pending, status="discard")), warn=warn)
        crash = _crash_record(repo, run, commit, current, segment)
        # Sanitised if need be (an --asi from an older engine): a record that cannot be written
        # would leave current.json behind and every later call failing here.
        log.append(repo.log, crash, warn=warn)
        warn(f"run {run} was interrupted ({crash.reason}); recorded it as a crash")
    try:
        _restore(repo, target, warn)
    except gitops.GitError as exc:
        warn(f"could not put HEAD back at the best commit ({exc}); check `git status`")
    state.clear_current(repo)
    return crash or flushed or None


def _kill_leftover(current):
    """Kill what the dead run left running, and nothing else: the recorded child only when it is
    the process the engine started (same kernel start time, leading its own process group,
    carrying the run's token), and any process carrying the run's token (setsid daemons)."""
    child = current.get("child_pid")
    token = current.get("token")
    if isinstance(child, int) and not isinstance(child, bool) and child > 1 and current.get("child_start") \
            and state.process_start_time(child) == current.get("child_start") and _leads_group(child) \
            and (not token or runner.has_token(child, token)):
        runner.kill_group(child)
    if isinstance(token, str) and len(token) >= 16:
        runner.kill_orphans(token)


def _leads_group(pid):
    try:
        return os.getpgid(pid) == pid
    except OSError:
        return False


def _keep_commit(repo, run, current, warn):
    """The interrupted run's commit, kept under its ref (None when there is none)."""
    head = gitops.head(repo.root)
    commit = current.get("commit") or (head if head and head != current.get("base") else None)
    if not commit:
        return None
    try:
        gitops.set_run_ref(repo.root, run, str(commit))
    except gitops.GitError as exc:  # the commit is gone: record the crash without it
        warn(f"run {run}: could not keep its commit {str(commit)[:7]} ({exc})")
        return None
    return str(commit)


def _crash_record(repo, run, commit, current, segment):
    started = current.get("started")
    started = started if log.is_finite(started) else now_ms()
    asi = current.get("asi")
    return log.Run(
        run=run,
        commit=gitops.short(commit) if commit else None,
        status="crash",
        description=current.get("description") if isinstance(current.get("description"), str) else "",
        timestamp=now_ms(),
        segment=segment,
        asi=asi if isinstance(asi, dict) else {},
        duration_s=round(max(0.0, time.time() - started / 1000), 3),
        reason=f"engine stopped mid-run (pid {current.get('pid')}, during {current.get('phase')}); "
               "recorded as a crash by the next engine call",
        run_dir=repo.rel(repo.run_dir(run)),
        ref=f"{gitops.runs_ref(repo.root)}/{run}" if commit else None,
        scope_hash=current.get("scope_hash"),
        scope_lines=current.get("scope_lines"),
        repeat_of=current.get("repeat_of"),
    )


def _restore(repo, target, warn):
    """Put HEAD back at `target`; keep edits made after the crash instead of wiping them."""
    head = gitops.head(repo.root)
    if not target or head == target:
        return
    if gitops.changed_tracked(repo.root, "HEAD"):
        # The work tree moved on since the interrupted run (the agent kept editing): move HEAD
        # and the index only, so those edits become the next run's change.
        gitops.git(repo.root, "reset", "-q", "--mixed", target)
        warn("HEAD is back at the best commit; your uncommitted edits are kept in the work tree")
    else:
        gitops.reset_hard(repo.root, target)


def restore_target(repo, runs, fallback):
    """Where HEAD belongs: the incumbent's commit, else `fallback` (the commit a run started from)."""
    best = decide.incumbent(runs)
    if best is not None:
        full = gitops.commit_of_run(repo.root, best.run, best.commit)
        if full:
            return full
    return fallback
