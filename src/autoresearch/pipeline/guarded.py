"""One run of the benchmark under every guard, the same for a single run and a pool wave's runs.

`run()` is the one way the engine starts a benchmark:
1. the workspace (workspace.py): the commit's own snapshot (or, on a pool worker away from the
   repo, the commit's files shipped as bytes), the environment without handles to the outside,
   the sandbox (bubblewrap and Landlock, deny by default);
2. the integrity guard (integrity.py), where the research repo is on this machine: what decides
   is noted before the benchmark, checked after it, and put back if it changed; the fixed files
   in the snapshot are checked against init's sha256 first, and on a mismatch nothing runs;
3. the watcher (watch.py): stall detection, and early abort when the caller gives a checker;
4. the measurement (measure.py): the benchmark and its checks, METRIC lines parsed while its
   main process lives; the live output shows neither this run's holdout values (once written)
   nor, when the run is not sandboxed (it could read them), earlier runs' (holdout.Redacting).

It yields a `Guarded` while the snapshot still exists (the caller judges the run, and the
diagnoser reads the snapshot), then removes the snapshot and the run's temporary folder.
"""

import contextlib
import os
from dataclasses import dataclass, field

from autoresearch.decision import holdout
from autoresearch.isolation import workspace
from autoresearch.isolation.watch import Watch
from autoresearch.pipeline.measure import Measurement, measure
from autoresearch.store import integrity
from autoresearch.store.files import write_atomic


@dataclass
class Guarded:
    measurement: object         # measure.Measurement
    sandbox: str                # the workspace's mode: "bwrap+landlock-7", "landlock-7", "none", ...
    tree: str                   # where the benchmark ran (still there inside the `with`)
    changes: list = field(default_factory=list)   # integrity.Change: what the run changed that decides
    failed: list = field(default_factory=list)    # what could not be put back


@contextlib.contextmanager
def run(config, run_no, run_dir, env, repo=None, commit=None, tree=None, echo=None, on_start=None,
        on_phase=None, on_workspace=None, checker=None, current=None, state_copy=None, concurrent=False,
        warn=None):
    """Run the benchmark of `config` for run `run_no` under every guard; yield a Guarded.

    The code: `commit` exported from `repo` (research.Repo), or `tree`, a folder already written
    (then `repo` may be None: no research repo on this machine, nothing of it to guard).
    `on_workspace(ws)` is called once the workspace exists (the run-state records its token).
    `current`/`state_copy`: the run-state the engine wrote, checked by the guard. `concurrent`:
    other runs and the agent go on beside this one (a pool wave): the guard leaves out what they
    legitimately change (integrity.record)."""
    if tree is None:
        ws = workspace.open_for(repo, config, run_no, commit, run_dir, env, warn=warn)
    else:
        ws = workspace.open_tree(tree, config, run_no, run_dir, env, repo_root=repo.root if repo else None,
                                 warn=warn, owned=False)
    try:
        if on_workspace:
            on_workspace(ws)
        guard = integrity.record(repo, config, ws.cwd, concurrent=concurrent) if repo is not None else None
        forged = integrity.snapshot_forged(guard, config) if guard is not None else []
        if forged:   # the fixed files measured must be the ones init recorded: nothing runs
            yield Guarded(not_started(run_no, run_dir, forged), ws.mode, ws.cwd, changes=forged)
            return
        watcher = Watch(run_dir, checker)
        hidden = holdout.known_values(repo) if repo is not None and ws.mode == "none" else []
        shown = echo if echo is None else holdout.Redacting(echo, hidden, os.path.join(run_dir, holdout.HOLDOUT_FILE))
        m = measure(config, run_no, run_dir, ws.cwd, echo=shown, on_start=on_start, on_phase=on_phase,
                    env=ws.env, preexec=ws.preexec, wrap=ws.wrap, watch=watcher)
        if shown is not echo:
            shown.finish()
        result = Guarded(m, ws.mode, ws.cwd)
        if guard is not None:
            result.changes = integrity.verify(repo, guard, current, state_copy)
            if result.changes:
                result.failed = integrity.restore(repo, guard, result.changes, current, state_copy, commit)
        yield result
    finally:
        ws.close()


def not_started(run, run_dir, forged):
    """The Measurement of a run whose benchmark was not started (its snapshot's fixed files
    were not the recorded ones); output.log says why."""
    text = "autoresearch: the benchmark was not started: " + integrity.summary(forged) + "\n"
    write_atomic(os.path.join(run_dir, "output.log"), text, durable=False)
    return Measurement(run, run_dir, None, False, 0.0, None)
