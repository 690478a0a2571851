"""Checks before a run starts: refuse in one line, before anything runs or is recorded.

- git: a merge, rebase, cherry-pick, revert or bisect under way; a detached HEAD (keeps would
  land off the branch).
- paths: a scope or fixed path that leaves the repository (`..`, a symlink pointing outside).
- storage: too little free space for the run's output and records; a log, state folder or git
  directory the engine cannot write (a finished result would have nowhere to go).
"""

import os
import tempfile

from autoresearch import errors
from autoresearch.store import chain, gitops

MIN_FREE_BYTES = 1 << 20


def check(repo, config):
    from autoresearch.pipeline.measure import output_cap
    _git_state(repo)
    _paths(repo, config)
    _storage(repo, output_cap(config))


def _git_state(repo):
    busy = gitops.operation_in_progress(repo.root)
    if busy:
        what, how = busy
        raise errors.Refused(f"{what} is in progress in this repository; finish it first (`{how}`), then run again")
    if gitops.branch_ref(repo.root) is None and gitops.head(repo.root):
        short = gitops.head(repo.root)[:7]  # (git is asked only on a detached HEAD)
        raise errors.Refused(f"HEAD is detached (at {short}): a kept run would land on no branch; "
                          f"`git switch -c research {short}` (or `git switch BRANCH`), then run again")


def _paths(repo, config):
    root = os.path.realpath(repo.root)
    for kind, names in (("scope", config.scope or []), ("fixed", list(config.fixed or {}))):
        for name in names:
            real = os.path.realpath(os.path.join(repo.root, name))
            if real != root and not real.startswith(root + os.sep):
                raise errors.Refused(f"{kind} path {name} leaves the repository (it resolves to {real}); "
                                  "`autoresearch init` with paths inside the repository")


def _storage(repo, cap_bytes):
    need = max(MIN_FREE_BYTES, int(cap_bytes or 0))
    try:
        st = os.statvfs(repo.root)
        free = st.f_bavail * st.f_frsize
    except OSError:
        free = None
    if free is not None and free < need:
        raise errors.Refused(f"only {_mib(free)} free on the disk of {repo.root}; a run needs {_mib(need)} "
                          "(its output.log and records); free space, or lower the cap with "
                          "`autoresearch init --output-cap MB`")
    for label, path in (("the log", repo.log),):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
            os.close(fd)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise errors.Refused(f"{label} {repo.rel(path)} cannot be written ({exc.strerror}); fix its "
                              "permissions (a finished result would have nowhere to go)") from None
    folders = [repo.state]
    state = chain.state_dir(repo.log)
    if state:
        folders.append(state)
    for folder in folders:
        try:
            os.makedirs(folder, exist_ok=True)
            fd, probe = tempfile.mkstemp(prefix=".probe-", dir=folder)
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise errors.Refused(f"{os.path.relpath(folder, repo.root)} cannot be written ({exc.strerror}); "
                              "free space or fix its permissions, then run again") from None


def _mib(n):
    return f"{n / (1 << 20):.1f} MiB"
