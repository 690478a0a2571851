"""A run's own copy of its commit: the benchmark executes this tree, never the live work tree.

What is measured is then exactly what is recorded (the agent may go on editing `train.py`
while a run is in flight; those edits stay in the work tree, uncommitted), and runs can go
in parallel, each in its own tree.

- `export_commit(repo, commit, dest)` writes the commit's files into `dest` through a
  throw-away index (`git read-tree -u` with `GIT_INDEX_FILE`): one git call, no worktree
  registered in `.git`, nothing left to prune after a crash. (`git archive | tar -x` honours
  `export-ignore`/`export-subst` attributes, so it can differ from a checkout; measured on a
  37-file tree: read-tree 3 ms, `git archive | tar` 8 ms, `git worktree add` 11 ms.)
- `link_untracked(repo, dest, skip)` makes what the commit does not hold but the benchmark may
  need (an ignored `.venv/`, a data file nobody committed) reachable in the copy, as symlinks
  into the live tree.
- `commit_files` / `materialize` carry a snapshot as bytes to another machine.
- `remove(dest)` / `sweep(folder)` clean up, also after a SIGKILL.
"""

import os
import shutil
import stat
import subprocess
from pathlib import Path

from autoresearch.store import gitops

NEVER_LINKED = (".git", "__pycache__")


class SnapshotError(RuntimeError):
    """git could not produce the snapshot; the message has git's own words."""


def _git(repo, *args, env=None, input=None):
    proc = subprocess.run(gitops.command(*args), cwd=repo, capture_output=True, env=env, input=input)
    if proc.returncode != 0:
        raise SnapshotError(f"git {' '.join(args[:2])}: {proc.stderr.decode('utf-8', 'replace').strip()}")
    return proc.stdout


def export_commit(repo: Path, commit: str, dest: Path) -> Path:
    """Materialise the tree of `commit` (work files only, no .git) into `dest`; return `dest`.

    `dest` must not exist or be empty. File modes (the executable bit) and symlinks are as a
    checkout makes them, with the repository's own filters (git-lfs smudge and the like).
    """
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    index = dest.parent / f".{dest.name}.index"
    env = dict(os.environ, GIT_INDEX_FILE=str(index))
    try:
        _git(repo, f"--work-tree={dest}", "read-tree", "-u", "--reset", commit, env=env)
    except SnapshotError:
        remove(dest)
        raise
    finally:
        try:
            os.unlink(index)
        except FileNotFoundError:
            pass
    return dest


def link_untracked(repo, dest, skip=()):
    """Symlink into `dest` what the live work tree has beyond the commit: untracked and ignored
    files and folders (a `.venv/`, prepared data), so the benchmark finds them where it would.

    `skip` holds repo-relative paths (a file, or a folder with a trailing or without) never to
    link: the engine's state, the log. `.git` and `__pycache__` are never linked (bytecode of
    the live tree must not stand for the snapshot's sources). Returns the linked paths.
    """
    out = _git(repo, "ls-files", "-z", "--others", "--directory", "--no-empty-directory")
    prefixes = [s.strip("/") for s in skip]
    linked = []
    for rel in (p.rstrip("/") for p in out.decode("utf-8", "surrogateescape").split("\0")):
        if not rel or any(part in NEVER_LINKED for part in rel.split("/")):
            continue
        if any(rel == p or rel.startswith(p + "/") or p.startswith(rel + "/") for p in prefixes):
            continue
        target = Path(dest) / rel
        if os.path.lexists(target) or not target.parent.is_dir():
            continue
        os.symlink(os.path.join(os.path.abspath(repo), rel), target)
        linked.append(rel)
    return linked


def commit_files(repo, commit, paths=None) -> dict:
    """{repo-relative path: content} of the regular files of `commit` (under `paths`, if given).

    Symlinks and submodules are left out: bytes alone cannot carry them. `materialize` writes
    the result back into a folder, on this machine or another.
    """
    listing = _git(repo, "ls-tree", "-r", "-z", "--full-tree", commit, "--", *(paths or []))
    entries = []
    for item in listing.split(b"\0"):
        if not item:
            continue
        meta, name = item.split(b"\t", 1)
        mode, kind, sha = meta.split(b" ")
        if kind == b"blob" and mode in (b"100644", b"100755"):
            entries.append((name.decode("utf-8", "surrogateescape"), sha))
    if not entries:
        return {}
    raw = _git(repo, "cat-file", "--batch", input=b"".join(sha + b"\n" for _, sha in entries))
    files, pos = {}, 0
    for name, _ in entries:
        header_end = raw.index(b"\n", pos)
        size = int(raw[pos:header_end].split(b" ")[2])
        start = header_end + 1
        files[name] = raw[start:start + size]
        pos = start + size + 1
    return files


def materialize(files: dict, dest: Path, executable=()) -> Path:
    """Write `files` ({relative path: bytes}) under `dest`; return `dest`.

    Paths that are absolute or climb out of `dest` (`..`) are refused: the bytes may come
    from another machine. Names in `executable` get mode 0755, the rest 0644.
    """
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    root = os.path.realpath(dest)
    for name, data in files.items():
        parts = Path(name).parts
        if not parts or Path(name).is_absolute() or ".." in parts:
            raise ValueError(f"snapshot path {name!r} leaves the snapshot folder")
        path = dest / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if not os.path.realpath(path.parent).startswith(root):
            raise ValueError(f"snapshot path {name!r} leaves the snapshot folder")
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, 0o755 if name in executable else 0o644)
    return dest


def remove(dest):
    """Delete a snapshot folder (read-only files and folders included); no error if it is gone.
    Symlinks inside are removed, never followed."""
    def writable(func, path, _exc):
        try:
            parent = os.path.dirname(path)
            os.chmod(parent, os.stat(parent).st_mode | stat.S_IWUSR | stat.S_IXUSR)
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode | stat.S_IWUSR | stat.S_IXUSR)
            func(path)
        except OSError:
            pass
    if os.path.lexists(dest):
        if os.path.islink(dest) or not os.path.isdir(dest):
            os.unlink(dest)
        else:
            shutil.rmtree(dest, onerror=writable)


def sweep(folder, keep=()):
    """Remove every snapshot under `folder` except the names in `keep` (left by killed runs)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if name not in keep:
            remove(os.path.join(folder, name))
