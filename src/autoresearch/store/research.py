"""The research repo: where things live, the active config, file hashes and the scope.

The config is the last `config` header of the log; everything the engine needs
to run an experiment is in it, so the log alone is enough to continue after any restart.
"""

import hashlib
import os
import time
from pathlib import Path

from autoresearch import errors
from autoresearch.store import gitops, log

STATE_DIR = ".autoresearch"
IGNORED = [log.LOG_NAME, "autoresearch.md", "autoresearch.ideas.md", STATE_DIR + "/"]


def now_ms():
    return int(time.time() * 1000)


class Repo:
    """Paths of one research repo (the git work tree holding `autoresearch.jsonl`)."""

    def __init__(self, root):
        self.root = str(root)
        self.log = os.path.join(self.root, log.LOG_NAME)
        self.state = os.path.join(self.root, STATE_DIR)
        self.lock = os.path.join(self.state, "lock")
        self.session = os.path.join(self.state, "session.json")
        self.current = os.path.join(self.state, "current.json")

    def run_dir(self, run):
        return os.path.join(self.state, "runs", str(run))

    def rel(self, path):
        return os.path.relpath(path, self.root)


def find(cwd=None, need_log=True):
    """The research repo around `cwd`; refuse with what to do when there is none."""
    cwd = cwd or os.getcwd()
    root = gitops.toplevel(cwd)
    if root is None:
        raise errors.Refused(f"{cwd} is not in a git repository; run `autoresearch init --git-init ...` "
                          "to create one, or cd into your research repo")
    repo = Repo(root)
    if need_log and not os.path.exists(repo.log):
        raise errors.Refused(f"no {log.LOG_NAME} in {root}; run `autoresearch init --metric NAME "
                          "--command CMD --scope PATH` first")
    return repo


def load(repo, warn=None):
    """(records, config, segment_runs, segment_index) from the log, typed: `log.Config` and
    `log.Run` records, the current segment's config (None without one) and its runs."""
    night = log.load(repo.log, warn=warn)
    seg = night.current
    if seg is None:
        return night.records, None, [], 0
    return night.records, seg.config, seg.runs, seg.index


def require_config(config):
    """Refuse (exit 3) when the log has no usable config header: every command says the same."""
    if config is None:
        raise errors.Refused(f"{log.LOG_NAME} has no valid config header (missing, torn or malformed); "
                          "run `autoresearch init --metric NAME --command CMD --scope PATH` to start a segment")
    return config


def all_runs(records):
    return [r for r in records if isinstance(r, log.Run)]


def next_run_number(records, repo=None):
    """One more than every run number in use: in the log and, given the repo, in
    refs/autoresearch/runs/N and .autoresearch/runs/N (a log moved aside must not make the
    next run overwrite the ref and files of an old run N)."""
    numbers = [r.run for r in all_runs(records)]
    if repo is not None:
        numbers += gitops.run_numbers(repo.root)
        try:
            numbers += [int(n) for n in os.listdir(os.path.join(repo.state, "runs")) if n.isdigit()]
        except OSError:
            pass
    return max(numbers, default=0) + 1


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def in_scope(path, scope):
    """True when repo-relative `path` is one of the scope paths or inside a scope folder."""
    path = path.strip("/")
    for entry in scope:
        entry = entry.strip("/")
        if entry in ("", "."):
            return True
        if path == entry or path.startswith(entry + "/"):
            return True
    return False


def scope_files(repo, scope):
    """Files of the scope as the work tree has them (tracked or new, not ignored, existing)."""
    files = gitops.listed_files(repo.root, scope)
    return [f for f in files if os.path.isfile(os.path.join(repo.root, f))]


def scope_fingerprint(repo, scope):
    """(hash, non-blank line count) of the scope's content: equal content, equal hash."""
    h = hashlib.sha256()
    lines = 0
    for name in scope_files(repo, scope):
        with open(os.path.join(repo.root, name), "rb") as f:
            data = f.read()
        h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
        lines += sum(1 for line in data.split(b"\n") if line.strip())
    return h.hexdigest()[:16], lines


def ensure_ignored(repo):
    """Make git ignore the log, the notes and the state folder (in .git/info/exclude).

    The exclude file is local to the clone, so nothing in the tree changes and the
    "tracked file outside the scope changed" check stays quiet.
    """
    path = gitops.git_path(repo.root, "info/exclude")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        with open(path, encoding="utf-8") as f:
            present = {line.strip() for line in f}
    except FileNotFoundError:
        present = set()
    missing = [p for p in IGNORED if p not in present and "/" + p not in present]
    if missing:
        with open(path, "a", encoding="utf-8") as f:
            f.write("\n# autoresearch: the log, the agent's notes and the engine's state\n")
            f.write("".join(p + "\n" for p in missing))


def project_home():
    """Where the project's files (assets/, autoresearch.sh) are: AUTORESEARCH_HOME or the checkout."""
    env = os.environ.get("AUTORESEARCH_HOME")
    if env:
        return Path(env)
    import autoresearch
    return Path(autoresearch.__file__).resolve().parents[2]
