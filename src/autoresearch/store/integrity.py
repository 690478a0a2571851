"""The engine is the guard: what decides a run is recorded before the benchmark and verified after.

Before the benchmark (`record`) the engine notes what decides: the log and the engine's copy
of it, the chain's tip, the run-state files, the session file, every fixed file (in the work
tree and in the run's snapshot), HEAD, the branch and the run refs. A file is noted by its
content hash *and* its inode, size and change time, so a rewrite that puts the old content
back is still seen. After the benchmark and the checks (`verify`) any difference makes the run
`tampered`: never kept, whatever it measured. `restore` puts each thing back from the engine's
own copy (bytes held in memory, git objects), and the record says what was changed.

It also notes where git reads what it executes (gitsetup.py: `.git/config`, `.git/info/attributes`,
the hooks folder with each hook's name and content, the user's git config): a hook or a filter
planted there would run with the user's rights at the engine's next git command, outside any
sandbox. `verify` checks these first and puts them back at once, before it asks git anything;
the changed versions are kept aside in `.autoresearch/foreign/`.

Where the sandbox works (sandbox.py) the benchmark cannot write these at all; this check is
what holds everywhere else, and it also covers a benchmark that got around the sandbox.
"""

import hashlib
import json
import os
import time
from dataclasses import dataclass, field

from autoresearch.store import anchor, chain, gitops, gitsetup

KEEP_BYTES = 64 << 20   # files up to this size are held in memory to restore them


@dataclass
class FileState:
    path: str
    label: str
    exists: bool
    digest: str = ""
    stamp: tuple = ()           # (inode, size, mtime_ns, ctime_ns, mode)
    data: object = None         # the bytes, when small enough to restore from memory
    restore: bool = True        # False: checked only (the snapshot's copies)
    target: str = None          # a symlink's target

    @staticmethod
    def of(path, label, restore=True):
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            return FileState(path, label, False, restore=restore)
        data = None
        h = hashlib.sha256()
        if os.path.isfile(path) and not os.path.islink(path):
            try:
                with open(path, "rb") as f:
                    if st.st_size <= KEEP_BYTES:
                        data = f.read()
                        h.update(data)
                    else:
                        for block in iter(lambda: f.read(1 << 20), b""):
                            h.update(block)
            except PermissionError:   # a file we may not read (/etc/gitconfig): its stamp still counts
                h.update(b"unreadable")
        target = os.readlink(path) if os.path.islink(path) else None
        if target is not None:
            h.update(target.encode("utf-8", "surrogateescape"))
        return FileState(path, label, True, h.hexdigest(), _stamp(st), data if restore else None, restore, target)


def _stamp(st):
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)


@dataclass
class Folder:
    """A folder whose entries git runs (hooks): which names it held; each file is a FileState."""
    path: str
    label: str
    exists: bool
    names: frozenset

    @staticmethod
    def of(path, label):
        try:
            return Folder(path, label, True, frozenset(os.listdir(path)))
        except FileNotFoundError:
            return Folder(path, label, False, frozenset())
        except NotADirectoryError:
            return Folder(path, label, False, frozenset())


@dataclass
class Guard:
    root: str
    files: list
    head: str
    branch: object              # "refs/heads/NAME", or None when HEAD was detached
    refs: dict                  # refname -> sha, for refs/autoresearch/ and the branch
    snapshot_files: list = field(default_factory=list)
    git_files: list = field(default_factory=list)     # FileState: where git reads what it runs
    git_folders: list = field(default_factory=list)   # Folder: the hooks
    skip_refs: tuple = ()       # ref prefixes others may change meanwhile (a pool wave's candidates)


SNAPSHOT_SUFFIX = " (in the run's snapshot)"
NOT_STARTED = "the benchmark was not started"
CONCURRENT_REFS = ("refs/autoresearch/candidates/",)   # `submit` writes these while a wave runs
GIT_FILE = "git setup"          # the label of each: "git setup .git/config", "git setup .git/hooks/post-commit"


@dataclass
class Change:
    what: str                   # "fixed file prepare.py", "the log", "HEAD", "ref refs/..."
    how: str                    # "rewritten", "rewritten and put back", "appended to", ...
    restored: bool = False

    def text(self):
        return f"{self.what} {self.how}"


def record(repo, config, snapshot_dir=None, concurrent=False):
    """Note what decides, just before the benchmark starts. `concurrent`: a pool wave's run, beside
    which the agent goes on (it may submit candidates, its session file may change): those refs
    and that file are left out, the rest is guarded as for a single run."""
    root = repo.root
    files = [FileState.of(repo.log, "the log")]
    folder = chain.state_dir(repo.log)
    if folder:
        files += [FileState.of(os.path.join(folder, chain.COPY), "the engine's copy of the log"),
                  FileState.of(os.path.join(folder, chain.TIP), "the log's chain tip"),
                  FileState.of(anchor.anchor_path(root), "the chain's anchor")]   # outside the repo
    if not concurrent:
        files.append(FileState.of(repo.session, "the session file"))
    for name in config.fixed or {}:
        files.append(FileState.of(os.path.join(root, name), f"fixed file {name}"))
    snap = []
    if snapshot_dir:
        for name in config.fixed or {}:
            snap.append(FileState.of(os.path.join(snapshot_dir, name), f"fixed file {name}{SNAPSHOT_SUFFIX}",
                                     restore=False))
    git_files, git_folders = _record_git_setup(root)
    branch = gitops.branch_ref(root)
    refs = _refs_for(root, branch)
    skip = CONCURRENT_REFS if concurrent else ()
    return Guard(root, files, _head(root, branch, refs), branch, refs, snap, git_files, git_folders, skip)


def _record_git_setup(root):
    paths, folders = gitsetup.paths(root)
    files = [FileState.of(p, f"{GIT_FILE} {gitsetup.label(root, p)}") for p in paths]
    noted = []
    for path in folders:
        folder = Folder.of(path, f"{GIT_FILE} {gitsetup.label(root, path)}")
        noted.append(folder)
        files += [FileState.of(os.path.join(path, n), f"{folder.label}/{n}") for n in sorted(folder.names)]
    return files, noted


def check_git_setup(repo, guard):
    """What changed where git reads what it runs; each put back at once (no git is started
    here), the changed version kept aside. Returns a list of Change."""
    changes = []
    for before in guard.git_files:
        how = _file_change(before, FileState.of(before.path, before.label))
        if how:
            changes.append(Change(before.label, how))
    for folder in guard.git_folders:
        now = Folder.of(folder.path, folder.label)
        for name in sorted(now.names - folder.names):
            changes.append(Change(f"{folder.label}/{name}", "created"))
    by_label = {f.label: f for f in guard.git_files}
    for change in changes:
        try:
            path = _path_of(guard, change.what)
            _keep_aside(repo.root, path)
            state = by_label.get(change.what)
            if state is not None:
                _restore_file(repo, state, None)
            else:
                _remove(path)
            change.restored = True
        except (OSError, ValueError):
            pass   # said in the record as NOT restored
    for folder in guard.git_folders:
        if not folder.exists and os.path.isdir(folder.path) and not os.listdir(folder.path):
            os.rmdir(folder.path)
    return changes


def _path_of(guard, label):
    for f in guard.git_files:
        if f.label == label:
            return f.path
    for folder in guard.git_folders:
        if label.startswith(folder.label + "/"):
            return os.path.join(folder.path, label[len(folder.label) + 1:])
    raise ValueError(f"no path for {label}")


def _keep_aside(root, path):
    """A copy of what the benchmark wrote, for the person to look at (never read by the engine)."""
    if not os.path.isfile(path) or os.path.islink(path):
        return
    name = path.strip(os.sep).replace(os.sep, "_")
    aside = os.path.join(root, chain.FOREIGN, f"{name}.{time.strftime('%Y%m%d-%H%M%S')}.{os.getpid()}")
    os.makedirs(os.path.dirname(aside), exist_ok=True)
    with open(path, "rb") as src, open(aside, "wb") as dst:
        dst.write(src.read(KEEP_BYTES))


def snapshot_forged(guard, config):
    """Changes for each fixed file whose bytes in the run's snapshot are not the ones recorded at
    init (sha256), checked just before the benchmark starts: git gave other bytes for the
    commit (a replacement object, a smudge filter, an alternate object store)."""
    changes = []
    for state in guard.snapshot_files:
        name = state.label[len("fixed file "):-len(SNAPSHOT_SUFFIX)]
        digest = state.digest
        if state.exists and state.target is not None:   # a symlink: its content, as init hashed it
            digest = _content_digest(state.path)
        if not state.exists or digest != (config.fixed or {}).get(name):
            changes.append(Change(state.label, "differs from the sha256 recorded at init (git gave other bytes "
                                  f"for the commit); {NOT_STARTED}", restored=True))
    return changes


def _content_digest(path):
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    return h.hexdigest()


def _head(root, branch, refs):
    """HEAD's commit: the branch's, from the refs just read (one git call less), or git's."""
    return refs.get(branch) if branch and branch in refs else gitops.head(root)


def verify(repo, guard, current=None, state_copy=None):
    """What changed since `record` (a list of Change; empty when nothing did).

    `current` is the run-state the engine last wrote (a dict): .autoresearch/current.json and
    the engine's copy of it (`state_copy`, a path) must still hold exactly that. Where git
    reads what it runs is checked (and put back) first, before any git command."""
    changes = check_git_setup(repo, guard)
    for before in guard.files + guard.snapshot_files:
        how = _file_change(before, FileState.of(before.path, before.label, before.restore))
        if how:
            changes.append(Change(before.label, how))
    if current is not None:
        expected = _current_bytes(current)
        for path, label in ((repo.current, "the run-state file .autoresearch/current.json"),
                            (state_copy, "the engine's copy of the run-state")):
            if path and _read(path) != expected:
                changes.append(Change(label, "changed"))
    branch = gitops.branch_ref(guard.root)
    refs = _refs_for(guard.root, guard.branch)
    head = _head(guard.root, branch, refs) if branch == guard.branch else gitops.head(guard.root)
    if head != guard.head:
        changes.append(Change("HEAD", f"moved from {str(guard.head)[:7]} to {str(head)[:7]}"))
    if branch != guard.branch:
        changes.append(Change("the checked-out branch", f"switched from {guard.branch} to {branch or 'a detached HEAD'}"))
    for name in sorted(set(refs) | set(guard.refs)):
        if name.startswith(guard.skip_refs or ("\0",)):
            continue
        if refs.get(name) != guard.refs.get(name):
            how = ("created" if name not in guard.refs else "deleted" if name not in refs
                   else f"moved from {guard.refs[name][:7]} to {refs[name][:7]}")
            changes.append(Change(f"ref {name}", how))
    return changes


def _refs_for(root, branch):
    out = gitops.git(root, "for-each-ref", "--format=%(refname) %(objectname)", "refs/autoresearch/",
                     *([branch] if branch else []), check=False) or ""
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def _file_change(before, after):
    if before.exists != after.exists:
        return "deleted" if before.exists else "created"
    if not before.exists:
        return None
    if before.digest != after.digest:
        if before.label == "the log" and after.stamp[1] > before.stamp[1] and before.data is not None \
                and (_read(before.path) or b"").startswith(before.data):
            return "appended to"
        return "rewritten" if after.stamp[1] else "truncated"
    if before.stamp != after.stamp:
        same_inode = before.stamp[0] == after.stamp[0]
        return ("rewritten and put back (same content, new write time)" if same_inode
                else "replaced by another file with the same content")
    return None


def restore(repo, guard, changes, current=None, state_copy=None, measured_commit=None):
    """Put back what `changes` names, from the engine's own copies. Marks each Change restored;
    returns the texts of what could not be put back."""
    failed = []
    by_label = {f.label: f for f in guard.files}
    refs_changed = False
    for change in changes:
        if change.restored:
            continue   # put back by check_git_setup
        try:
            if change.what in by_label:
                _restore_file(repo, by_label[change.what], measured_commit)
                change.restored = True
            elif change.what.startswith("the run-state") or change.what.startswith("the engine's copy of the run"):
                data = _current_bytes(current)
                path = repo.current if change.what.startswith("the run-state") else state_copy
                chain.write_atomic(path, data)
                change.restored = True
            elif change.what.endswith(SNAPSHOT_SUFFIX):
                change.restored = True  # the snapshot is thrown away after the run
            else:
                refs_changed = True
        except (OSError, gitops.GitError, ValueError) as exc:
            failed.append(f"{change.what} ({exc})")
    if refs_changed:
        try:
            _restore_git(guard)
            for change in changes:
                if change.what in ("HEAD", "the checked-out branch") or change.what.startswith("ref "):
                    change.restored = True
        except gitops.GitError as exc:
            failed.append(f"HEAD and the refs ({exc})")
    return failed


def _restore_file(repo, state, measured_commit):
    root = repo.root
    if state.label == "the log" and os.path.exists(state.path):
        aside = os.path.join(root, chain.FOREIGN, f"autoresearch.jsonl.{time.strftime('%Y%m%d-%H%M%S')}.{os.getpid()}")
        os.makedirs(os.path.dirname(aside), exist_ok=True)
        with open(state.path, "rb") as src, open(aside, "wb") as dst:
            dst.write(src.read())
    if not state.exists:
        if os.path.lexists(state.path):
            os.unlink(state.path)
        return
    data = state.data
    if data is None and state.target is None:
        data = _fallback_bytes(repo, state, measured_commit)
    if os.path.lexists(state.path) and (os.path.islink(state.path) or os.path.isdir(state.path)):
        _remove(state.path)
    os.makedirs(os.path.dirname(state.path), exist_ok=True)
    if state.target is not None:
        os.symlink(state.target, state.path)
        return
    chain.write_atomic(state.path, data)
    os.chmod(state.path, state.stamp[4] & 0o7777)


def _fallback_bytes(repo, state, commit):
    """Bytes of a file too large to hold: the log from the engine's copy, a fixed file from git."""
    if state.label == "the log":
        copy = chain.read_copy(repo.log)
        if copy is not None and hashlib.sha256(copy).hexdigest() == state.digest:
            return copy
        raise ValueError("no copy with the content it had before the run")
    if state.label.startswith("fixed file ") and commit:
        name = os.path.relpath(state.path, repo.root)
        data = gitops.blob(repo.root, commit, name)
        if data is not None and hashlib.sha256(data).hexdigest() == state.digest:
            return data
    raise ValueError("no copy with the content it had before the run")


def _restore_git(guard):
    root = guard.root
    now = _refs_for(root, guard.branch)
    for name, sha in guard.refs.items():
        if now.get(name) != sha and not name.startswith(guard.skip_refs or ("\0",)):
            gitops.git(root, "update-ref", name, sha)
    for name in set(now) - set(guard.refs):
        if name.startswith("refs/autoresearch/") and not name.startswith(guard.skip_refs or ("\0",)):
            gitops.git(root, "update-ref", "-d", name)
    if gitops.branch_ref(root) != guard.branch and guard.branch:
        gitops.git(root, "symbolic-ref", "HEAD", guard.branch)
    elif guard.branch is None and gitops.head(root) != guard.head:
        gitops.git(root, "update-ref", "--no-deref", "HEAD", guard.head)


def _remove(path):
    import shutil
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def _current_bytes(current):
    """current.json exactly as state.write_current writes it."""
    return (json.dumps(current, indent=1, sort_keys=True) + "\n").encode("utf-8")


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def mark_tampered(verdict, changes, failed):
    """Make the verdict `tampered`: never kept, whatever it measured; the reason and the record
    say what was changed and that the engine restored it."""
    r = verdict.record
    r.status = "tampered"
    if all(NOT_STARTED in c.how for c in changes):
        r.reason = f"the run's snapshot is not the committed harness: {summary(changes)}; never kept"
    else:
        r.reason = (f"the run changed what decides: {summary(changes)}; restored by the engine, never kept"
                    + (f"; could not restore: {', '.join(failed)}" if failed else ""))
    r.metric = None
    r.confidence = r.value = r.policy = None
    r.tampered = [c.text() for c in changes]
    verdict.decision = None
    verdict.metric_hint = None


def summary(changes):
    """One line for the record's reason and the printed result."""
    return "; ".join(c.text() + ("" if c.restored else " (NOT restored)") for c in changes)
