"""Where one run executes: a snapshot of its commit, its environment, its sandbox.

- cwd: `.autoresearch/snapshots/N`, the commit's own tree (snapshot.py), with what the commit
  does not hold but the benchmark may need (an ignored `.venv/`, data nobody committed) linked
  in from the work tree. The work tree itself is never run, so the agent may go on editing it.
- env: the caller's, plus `AUTORESEARCH_RUN_TOKEN` (the run's processes are found by it) and
  a fresh `TMPDIR` removed after the run.
- the sandbox (sandbox.py) around exactly the files that decide.

The run's files (`output.log`, `steps.jsonl`, ...) still go to `.autoresearch/runs/N/`.
"""

import os
import shutil
import tempfile
from dataclasses import dataclass

from autoresearch.isolation import runner, sandbox, snapshot
from autoresearch.store import gitsetup

SNAPSHOTS = "snapshots"
SWITCH = "AUTORESEARCH_SANDBOX"   # "off": detection alone (to debug a benchmark; the record says so)
NOT_LINKED = ["autoresearch.jsonl", "autoresearch.md", "autoresearch.ideas.md", ".autoresearch/"]


@dataclass
class Workspace:
    cwd: str
    env: dict
    token: str
    tmp: str
    confinement: object = None

    @property
    def preexec(self):
        return self.confinement.preexec if self.confinement else None

    def close(self):
        if self.confinement:
            self.confinement.close()
        snapshot.remove(self.cwd)
        shutil.rmtree(self.tmp, ignore_errors=True)


def snapshots_dir(repo):
    return os.path.join(repo.state, SNAPSHOTS)


def open_for(repo, config, run, commit, run_dir, env):
    """Export `commit` for run `run` and set up its environment and sandbox."""
    dest = os.path.join(snapshots_dir(repo), str(run))
    snapshot.remove(dest)
    snapshot.export_commit(repo.root, commit, dest)
    scope = [s.rstrip("/") + ("/" if os.path.isdir(os.path.join(repo.root, s)) else "") for s in config.scope or []]
    try:
        snapshot.link_untracked(repo.root, dest, skip=NOT_LINKED + scope)
        tmp = tempfile.mkdtemp(prefix=f"autoresearch-run{run}-")
    except BaseException:
        snapshot.remove(dest)
        raise
    token = runner.new_token()
    env = dict(env, TMPDIR=tmp, **{runner.TOKEN_VAR: token})
    ws = Workspace(dest, env, token, tmp)
    if os.environ.get(SWITCH, "").lower() not in ("off", "0", "no"):
        try:
            ws.confinement = _confine(repo, config, dest, run_dir, tmp)
        except OSError:
            ws.confinement = None  # detection alone (integrity.py) still holds
    return ws


def sandbox_name(ws):
    """What the record says about the sandbox of its run."""
    return f"landlock-{ws.confinement.version}" if ws.confinement else "none"


def _confine(repo, config, dest, run_dir, tmp):
    fixed = list(config.fixed or {})
    protected = [os.path.join(repo.root, f) for f in fixed] + [os.path.join(dest, f) for f in fixed]
    protected += [repo.log] + gitsetup.git_dirs(repo.root)
    closed = [repo.root, dest, repo.state, snapshots_dir(repo)]
    closed += [os.path.dirname(p) for p in protected if os.path.isfile(p)]
    for name in _listdir(repo.state):
        if name != SNAPSHOTS:
            protected.append(os.path.join(repo.state, name))   # runs/, current.json, session.json, ...
    for name in _listdir(snapshots_dir(repo)):
        if name != os.path.basename(dest):
            protected.append(os.path.join(snapshots_dir(repo), name))
    return sandbox.confine(protected, closed, [run_dir, tmp])


def _listdir(path):
    try:
        return os.listdir(path)
    except OSError:
        return []


def sweep(repo):
    """Remove snapshots left by runs whose engine died (called with the run lock held)."""
    snapshot.sweep(snapshots_dir(repo))
