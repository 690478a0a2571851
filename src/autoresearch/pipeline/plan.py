"""Step 1 of an experiment, the plan: refuse what must not run, else say what to measure.

Refusals (exit 3, nothing run, nothing recorded): the session is stopped, the budget is spent,
the best commit is gone or HEAD is elsewhere, a fixed file changed, a tracked file outside the
scope changed, nothing in the scope changed, or the scope repeats an earlier run. Otherwise a
`Plan`: the commit to start from, whether the scope change needs a commit, which run's code
is measured again (noise), and how many measurements.
"""

import os
import shlex
from dataclasses import dataclass

from autoresearch.decision import decide
from autoresearch.store import gitops, research, state
from autoresearch.errors import Refused


@dataclass
class Request:
    """What the user asked `run` for."""
    description: str
    asi: dict
    baseline: bool = False
    repeat: object = None     # K, with --baseline
    force: bool = False


@dataclass
class Plan:
    base: str            # full sha to reset to when there is no best yet
    best_full: object    # full sha of the incumbent, or None
    commit_scope: bool   # the scope has changes to commit
    repeat_of: object    # run number whose code this measures again, or None
    count: int           # how many measurements
    scope_hash: str
    scope_lines: int


def check_budgets(repo, config, runs, session):
    """Refuse when the time, GPU-hour or cost budget is spent (ledger.py), with the figure."""
    from autoresearch.store import ledger  # noqa: PLC0415 - reads the agent's transcripts
    spent = ledger.figures(repo, config, runs, session)[2]
    if spent:
        raise Refused(f"{spent}; the loop ends here (`autoresearch init` starts a new segment with a new budget)")


def make_plan(repo, config, runs, request):
    """The plan of one `run` (what to measure, how often), or Refused with what to do."""
    session = state.read_session(repo)
    if not state.is_active(session):
        why = "is stopped" if session else f"file {repo.rel(repo.session)} is missing or unreadable"
        raise Refused(f"the session {why}; run `autoresearch resume` to continue")
    budget = config.max_iterations
    if budget and decide.iterations_used(runs) >= budget:
        raise Refused(f"the iteration budget is spent ({decide.iterations_used(runs)} of {budget} runs in this segment); "
                          "`autoresearch init` starts a new segment with a new budget")
    check_budgets(repo, config, runs, session)
    root = repo.root
    head = gitops.head(root)
    if head is None:
        raise Refused("the repository has no commit; run `autoresearch init` again")
    best = decide.incumbent(runs)
    best_full = gitops.commit_of_run(root, best.run, best.commit) if best else None
    if best and best_full is None:
        raise Refused(f"the best commit {best.commit} (run {best.run}) is missing from git; "
                          "restore it or `autoresearch init` a new segment")
    base = best_full or head
    if best_full and head != best_full and not gitops.is_ancestor(root, best_full, head):
        raise Refused(f"HEAD is not at the best commit {best.commit} (run {best.run}) or after it; "
                      f"`git reset --keep {best.commit}` (moves the branch back, keeps your edits) "
                      "and make your change there")
    if best_full and head != best_full:
        _refuse_failed_on_branch(root, runs, best_full, head)
    check_fixed(repo, config, best_full or config.start_commit or head, head)
    scope = config.scope
    changed = gitops.changed_tracked(root, base)
    outside = [p for p in changed if not research.in_scope(p, scope)]
    if outside:
        shown = ", ".join(outside[:5]) + (f" and {len(outside) - 5} more" if len(outside) > 5 else "")
        raise Refused(f"files outside the scope ({' '.join(scope)}) changed: {shown}; revert them "
                          f"(`git checkout {base[:7]} -- FILE`) or `autoresearch init` with a wider --scope")
    in_scope = [p for p in changed if research.in_scope(p, scope)] + gitops.untracked(root, scope)
    commit_scope = bool(in_scope) or head != base
    scope_hash, scope_lines = research.scope_fingerprint(repo, scope)
    count = request.repeat or 1
    repeat_of = None
    if best is None:
        count = request.repeat or config.noise_runs or 1   # the baseline of the segment
    elif request.baseline or (request.force and not commit_scope):
        if commit_scope:
            raise Refused(f"--baseline measures the best code (run {best.run}) again, but the scope has "
                              f"changes: {', '.join(in_scope[:5]) or 'new commits'}; run without --baseline, "
                              f"or revert them (`git checkout {best.commit} -- {' '.join(scope)}`)")
        repeat_of = best.run
    elif not commit_scope:
        raise Refused(f"nothing in the scope ({' '.join(scope)}) changed since the best commit "
                          f"{best.commit} (run {best.run}); edit it first, or `--baseline` to measure "
                          "the best code again")
    else:
        earlier = next((r for r in runs if r.scope_hash == scope_hash), None)
        if earlier is not None:
            if not request.force:
                raise Refused(f"the scope is identical to run {earlier.run} ({earlier.status}: "
                                  f"{earlier.description:.80}); try something else, or --force "
                                  "to measure it again")
            repeat_of = earlier.run
    if budget:
        count = min(count, budget - decide.iterations_used(runs))
    return Plan(base, best_full, commit_scope, repeat_of, count, scope_hash, scope_lines)


def _refuse_failed_on_branch(root, runs, best_full, head):
    """A commit of a run that was not kept (a crash whose reset failed) must not become part of
    the next experiment: refuse while one sits between the best commit and HEAD."""
    between = (gitops.git(root, "rev-list", f"{best_full}..{head}", check=False) or "").split()
    failed = {r.commit: r for r in runs if r.status != "keep" and r.commit}
    for full in between:
        r = failed.get(gitops.short(full))
        if r is not None:
            raise Refused(f"the branch holds the commit of run {r.run} ({r.status}), which was not kept; "
                          f"`git reset --keep {best_full[:7]}` to drop it (your uncommitted edits stay), "
                          "then run again")


def check_fixed(repo, config, source, head):
    """Refuse when a fixed file differs from init; the advice restores it from `source` (the best
    commit, else init's), which works whether the change is staged, unstaged or committed."""
    root = repo.root
    for name, digest in config.fixed.items():
        path = os.path.join(root, name)
        if os.path.isfile(path) and research.sha256_file(path) == digest:
            continue
        what = "is missing" if not os.path.isfile(path) else "changed since init"
        restore = f"git checkout {source[:7]} -- {name}"
        if source != head and gitops.changed_between(root, source, head, name):
            # The change is in a commit after `source`: restoring the file is not enough, the
            # restore must be committed too or the next run's commit would carry the change.
            raise Refused(f"fixed file {name} {what} (changed in a commit after {source[:7]}); restore it "
                          f"with `{restore} && git commit -m 'restore {name}' -- {name}` "
                          f"(the harness must stay the same for results to compare){_repair(config, name)}")
        raise Refused(f"fixed file {name} {what}; restore it with `{restore}` "
                      f"(the harness must stay the same for results to compare){_repair(config, name)}")


def _repair(config, name):
    return (f"; to repair {name} on purpose, commit the fix and start a new segment with a new baseline: "
            f"`{reinit_command(config)}`")


def reinit_command(config):
    """`autoresearch init` with this segment's settings: a new segment (and baseline) for a
    repaired harness."""
    if config.template == "ml":
        parts = ["autoresearch init --template ml"]
    else:
        parts = ["autoresearch init", "--metric", config.metric_name, "--direction", config.direction]
        if config.metric_unit:
            parts += ["--unit", shlex.quote(config.metric_unit)]
        if config.command:
            parts += ["--command", shlex.quote(config.command)]
        if config.scope:
            parts += ["--scope", *map(shlex.quote, config.scope)]
        if config.fixed:
            parts += ["--fixed", *map(shlex.quote, config.fixed)]
    if config.checks:
        parts += ["--checks", shlex.quote(config.checks)]
    if config.noise_runs and config.noise_runs > 1:
        parts += ["--noise-runs", str(config.noise_runs)]
    if config.max_iterations:
        parts += ["--max-iterations", str(config.max_iterations)]
    return " ".join(parts)
