"""Git, through the `git` command: the few operations the engine needs, each one call.

Everything runs with a fixed identity fallback and with what the repository's configuration
would execute switched off (`NEUTRAL`, on every git command of the engine, here and in
snapshot, pool, report, demo): the engine's commits never run repository hooks
(`core.hooksPath` points at /dev/null, so no `pre-commit`, `post-commit`,
`reference-transaction`, `post-checkout`, `post-index-change` ...), no `core.fsmonitor`
program runs on an index refresh, nothing is signed (so no `gpg.program`), and diffs run
without external diff drivers or textconv (`--no-ext-diff --no-textconv`). The benchmark
runs as the user: without this, a hook or a config line it planted would run with the
user's rights when the engine runs git after the run, outside any sandbox (and a pre-commit
hook that rewrites files would make the measured code differ from the committed code).

Clean/smudge filters stay on: a repository whose data is in git-lfs needs its smudge filter in
the run's snapshot. A filter planted during a run is undone by the guard (integrity.py), which
restores `.git/config`, `.git/info/attributes`, the hooks and the user's git config before the
engine runs git again.
"""

import os
import subprocess
import time

from autoresearch import errors


RUNS_REF = "refs/autoresearch/runs"
LOCK_WAIT_S = 5.0
FALLBACK_IDENTITY = ["-c", "user.name=autoresearch", "-c", "user.email=autoresearch@localhost"]
# What git would otherwise execute from the repository's (or the user's) configuration. `-c`
# outranks every config file, and git hands it on to the git processes it starts (gc --auto).
NEUTRAL = ("-c", f"core.hooksPath={os.devnull}", "-c", "core.fsmonitor=false", "-c", "commit.gpgSign=false",
           "-c", "tag.gpgSign=false", "-c", "log.showSignature=false")
NO_DIFF_PROGRAMS = ("--no-ext-diff", "--no-textconv")


def command(*args):
    """The argv of one engine git command: `git`, NEUTRAL, then `args`."""
    return ["git", *NEUTRAL, *args]


class GitError(errors.Failed):
    """A git command failed; the message has git's own words."""


def git(repo, *args, check=True, input=None):
    """Run git in `repo`; return stdout (str, stripped of the final newline)."""
    env = dict(os.environ)
    env.setdefault("GIT_TERMINAL_PROMPT", "0")
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        proc = subprocess.run(command(*args), cwd=repo, capture_output=True, text=True,
                              input=input, env=env)
        # A git command of an engine that was just killed may still hold the index lock:
        # wait for it to finish rather than fail (it finishes on its own within milliseconds).
        if proc.returncode == 0 or ".lock': File exists" not in proc.stderr or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    if check and proc.returncode != 0:
        raise GitError(f"git {' '.join(args)}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.rstrip("\n") if proc.returncode == 0 else None


# Environment that changes where git finds the repository: then only git itself can say.
_DISCOVERY_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM",
                  "GIT_COMMON_DIR")


def toplevel(path):
    """The root of the work tree containing `path`, or None outside a git repository.

    The common case is found without starting git (status and the hooks ask on every call):
    the nearest folder up from `path` holding a `.git` folder (with HEAD, and no core.worktree
    in its config) or a `.git` file naming its git directory. Anything else asks git."""
    found = _nearest_work_tree(path)
    if found is not None:
        return found
    try:
        proc = subprocess.run(command("rev-parse", "--show-toplevel"), cwd=path,
                              capture_output=True, text=True)
    except FileNotFoundError:
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def _nearest_work_tree(path):
    if any(os.environ.get(name) for name in _DISCOVERY_ENV):
        return None
    try:
        folder = os.path.realpath(path)
    except (OSError, ValueError):
        return None
    if ".git" in folder.split(os.sep):
        return None   # inside a git directory: git says what that is
    while True:
        if all(os.path.exists(os.path.join(folder, name)) for name in ("HEAD", "objects", "refs")):
            return None   # a bare repository (or a git directory) on the way up
        dot = os.path.join(folder, ".git")
        if os.path.isdir(dot):
            if not os.path.isfile(os.path.join(dot, "HEAD")) or _sets_worktree(os.path.join(dot, "config")):
                return None
            return folder
        if os.path.isfile(dot):
            try:
                with open(dot, encoding="utf-8") as f:
                    first = f.read(4096)
            except (OSError, UnicodeDecodeError):
                return None
            return folder if first.startswith("gitdir:") else None
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _sets_worktree(config):
    try:
        with open(config, encoding="utf-8", errors="replace") as f:
            text = f.read(1 << 20)
    except OSError:
        return False
    return "worktree" in text.lower()


def head(repo):
    """Full sha of HEAD, or None in a repository without commits."""
    return git(repo, "rev-parse", "--verify", "-q", "HEAD", check=False)


def short(commit):
    """The 7-character form the log uses (as pi-autoresearch and karpathy's results.tsv)."""
    return commit[:7]


def has_identity(repo):
    if os.environ.get("GIT_AUTHOR_NAME") and os.environ.get("GIT_AUTHOR_EMAIL"):
        return True
    out = git(repo, "config", "--get-regexp", r"^user\.(name|email)$", check=False) or ""
    keys = {line.split(" ", 1)[0] for line in out.splitlines()}
    return {"user.name", "user.email"} <= keys


def scope_status(repo, pathspecs):
    """True when the work tree has uncommitted changes (tracked or new files) under pathspecs."""
    out = git(repo, "status", "--porcelain", "-z", "--untracked-files=all", "--", *pathspecs)
    return bool(out)


def commit_paths(repo, message, paths):
    """Stage `paths` (additions and deletions) and commit only them; return the new sha."""
    git(repo, "add", "-A", "--", *paths)
    identity = [] if has_identity(repo) else FALLBACK_IDENTITY
    git(repo, *identity, "commit", "--no-verify", "-q", "-m", message, "--only", "--", *paths)
    return head(repo)


def commit_all_staged(repo, message, paths, allow_empty=False):
    """Stage `paths` and commit the index (used by init, where nothing else is staged)."""
    if paths:
        git(repo, "add", "-A", "--", *paths)
    identity = [] if has_identity(repo) else FALLBACK_IDENTITY
    extra = ["--allow-empty"] if allow_empty else []
    git(repo, *identity, "commit", "--no-verify", "-q", "-m", message, *extra)
    return head(repo)


def changed_tracked(repo, base):
    """Tracked paths whose working-tree content differs from commit `base` (staged or not)."""
    out = git(repo, "diff", *NO_DIFF_PROGRAMS, "--name-only", "--no-renames", "-z", base, "--")
    return [p for p in out.split("\0") if p]


def changed_between(repo, a, b, *pathspecs):
    """Paths that differ between commits `a` and `b` (optionally limited to pathspecs)."""
    out = git(repo, "diff", *NO_DIFF_PROGRAMS, "--name-only", "--no-renames", "-z", a, b, "--", *pathspecs,
              check=False) or ""
    return [p for p in out.split("\0") if p]


def untracked(repo, pathspecs=()):
    """Untracked, not ignored files (optionally limited to pathspecs)."""
    out = git(repo, "ls-files", "--others", "--exclude-standard", "-z", "--", *pathspecs)
    return [p for p in out.split("\0") if p]


def listed_files(repo, pathspecs):
    """Tracked and untracked-not-ignored files under pathspecs, as they are in the work tree."""
    out = git(repo, "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", *pathspecs)
    return sorted({p for p in out.split("\0") if p})


def reset_hard(repo, commit):
    git(repo, "reset", "-q", "--hard", commit)


def branch_ref(repo):
    """"refs/heads/NAME" of the checked-out branch, or None on a detached HEAD (read from the
    HEAD file itself when it can be: no git process)."""
    from autoresearch.store import chain
    folder = chain.git_dir(repo)
    if folder:
        try:
            with open(os.path.join(folder, "HEAD"), encoding="utf-8") as f:
                text = f.read().strip()
            return text[len("ref:"):].strip() if text.startswith("ref:") else None
        except OSError:
            pass
    return git(repo, "symbolic-ref", "-q", "HEAD", check=False)


def runs_ref(repo):
    """Where run N's ref lives. Refs are shared by every worktree of a repository, logs are
    not: the main work tree keeps refs/autoresearch/runs/N, a linked worktree namespaces its
    runs by its research branch, refs/autoresearch/runs/BRANCH/N, so two worktrees never
    overwrite each other's runs (git checks a branch out in one worktree only)."""
    if os.path.isdir(os.path.join(repo, ".git")):
        return RUNS_REF
    branch = branch_ref(repo)
    if branch and branch.startswith("refs/heads/"):
        return f"{RUNS_REF}/{branch[len('refs/heads/'):]}"
    return RUNS_REF


def set_run_ref(repo, run, commit):
    git(repo, "update-ref", f"{runs_ref(repo)}/{run}", commit)


def run_numbers(repo):
    """The N of every run ref of this branch (and of the older, shared refs/autoresearch/runs/N)."""
    spaces = {runs_ref(repo), RUNS_REF}
    numbers = []
    for space in spaces:
        out = git(repo, "for-each-ref", "--format=%(refname)", space + "/", check=False) or ""
        numbers += [int(name.rsplit("/", 1)[1]) for name in out.split()
                    if name.rsplit("/", 1)[0] == space and name.rsplit("/", 1)[1].isdigit()]
    return numbers


def run_ref(repo, run, ref=None):
    """Full sha of run N's commit: from the record's own `ref` when given, else this branch's
    namespace, else the older shared one."""
    for name in dict.fromkeys([ref, f"{runs_ref(repo)}/{run}", f"{RUNS_REF}/{run}"]):
        if name:
            full = git(repo, "rev-parse", "--verify", "-q", f"{name}^{{commit}}", check=False)
            if full:
                return full
    return None


def blob(repo, commit, path):
    """The bytes of `path` in `commit`, or None."""
    proc = subprocess.run(command("cat-file", "blob", f"{commit}:{path}"), cwd=repo, capture_output=True)
    return proc.stdout if proc.returncode == 0 else None


OPERATIONS = (("MERGE_HEAD", "a merge", "git merge --continue` or `git merge --abort"),
              ("CHERRY_PICK_HEAD", "a cherry-pick", "git cherry-pick --continue` or `git cherry-pick --abort"),
              ("REVERT_HEAD", "a revert", "git revert --continue` or `git revert --abort"),
              ("rebase-merge", "a rebase", "git rebase --continue` or `git rebase --abort"),
              ("rebase-apply", "a rebase or `git am`", "git rebase --abort` or `git am --abort"),
              ("BISECT_LOG", "a bisect", "git bisect reset"))


def operation_in_progress(repo):
    """(what, how to end it) for a merge, rebase, cherry-pick, revert or bisect under way, or None."""
    from autoresearch.store import chain
    folder = chain.git_dir(repo)
    for name, what, how in OPERATIONS:
        if os.path.exists(os.path.join(folder, name) if folder else git_path(repo, name)):
            return what, how
    return None


def commit_of_run(repo, run, commit=None):
    """The one commit-of-run lookup: the full sha of run N's commit, from its ref
    (refs/autoresearch/runs/N), else from its recorded short `commit`; None when git has neither."""
    full = run_ref(repo, run)
    if full or not commit:
        return full
    return git(repo, "rev-parse", "--verify", "-q", f"{commit}^{{commit}}", check=False)


def diff_patch(repo, commit):
    """The patch of `commit` against its parent (against the empty tree for a root commit)."""
    return git(repo, "diff-tree", "-p", "--root", "--no-commit-id", "--no-color", *NO_DIFF_PROGRAMS, commit) + "\n"


def is_ancestor(repo, ancestor, descendant):
    proc = subprocess.run(command("merge-base", "--is-ancestor", ancestor, descendant),
                          cwd=repo, capture_output=True)
    return proc.returncode == 0


def exists(repo, commit):
    return git(repo, "cat-file", "-e", f"{commit}^{{commit}}", check=False) is not None


def git_path(repo, name):
    """Absolute path of a file inside the git directory (works in worktrees too)."""
    path = git(repo, "rev-parse", "--git-path", name)
    return path if os.path.isabs(path) else os.path.join(repo, path)


def init_repo(path):
    git(path, "init", "-q")
