"""Reading a run's folder (`.autoresearch/runs/N/`) for the report and `serve`: only what the
engine wrote there, never what a link points at.

The benchmark runs the agent's code, and that code can leave anything in its run folder:
`ln -s /etc/passwd output.log`, a folder swapped for a link, a FIFO that blocks a reader
forever, a hard link to a file elsewhere. So:

- a run folder counts only when it is a real directory `<repo>/.autoresearch/runs/<name>`,
  no link on the way (its real path is exactly that path, inside the repo's real path);
- each file is opened relative to the folder's descriptor with O_NOFOLLOW and O_NONBLOCK and
  read only when it is a regular file with one link. Anything else reads as absent.

Text shown to a person goes through `visible()`: bidirectional-override and isolate controls
(which can make `keep` read as `peek`, or hide part of a line) are replaced by a visible
`[U+202E]` marker, so what the page shows is what the file holds.
"""

import os
import re
import stat

RUNS = os.path.join(".autoresearch", "runs")
_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = _FLAGS | getattr(os, "O_DIRECTORY", 0)
# U+061C, U+200E/F, U+202A-E, U+2066-9: the controls that reorder or isolate text.
BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible(text):
    """`text` with every bidi control shown as [U+XXXX] (fast when there is none)."""
    if not isinstance(text, str) or not BIDI.search(text):
        return text
    return BIDI.sub(lambda m: f"[U+{ord(m.group(0)):04X}]", text)


_RUNS = {}


def runs_folder(root):
    """The real path of <root>/.autoresearch/runs, or None when a link is on the way (looked up
    once per root: a report reads thousands of run folders)."""
    key = str(root)
    if key not in _RUNS:
        real_root = os.path.realpath(root)
        path = os.path.join(real_root, RUNS)
        _RUNS[key] = (real_root, path if os.path.realpath(path) == path else None)
    return _RUNS[key][1]


def folder(root, number, given=None):
    """The run's folder (its real path), or None when it is not a real folder of this repo.

    `given` is the record's run_dir (repo-relative); the log is untrusted, so it counts only when
    it names a folder directly inside .autoresearch/runs, else the default runs/N is used."""
    runs = runs_folder(root)
    if runs is None:
        return None
    real_root = _RUNS[str(root)][0]
    for candidate in ([given] if given else []) + [str(number)]:
        path = os.path.normpath(os.path.join(real_root, candidate)) if candidate == given \
            else os.path.join(runs, candidate)
        if os.path.dirname(path) != runs:
            continue
        try:
            st = os.lstat(path)   # its parent is real, so a real directory here is real all the way
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            return path
    return None


def _open(folder_path, name):
    """A descriptor for a regular, singly linked file `name` in the folder, or None."""
    if folder_path is None or "/" in name:
        return None
    try:
        dir_fd = os.open(folder_path, _DIR_FLAGS)
    except OSError:
        return None
    try:
        fd = os.open(name, _FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    finally:
        os.close(dir_fd)
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        return None
    return fd


def read_bytes(folder_path, name, limit=None):
    """The file's bytes (the first `limit` of them), or None when it is absent or not the engine's."""
    fd = _open(folder_path, name)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as f:
        return f.read() if limit is None else f.read(limit)


def read_tail(folder_path, name, nbytes):
    """(the last `nbytes` bytes, the file's size), or None."""
    fd = _open(folder_path, name)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(max(0, size - nbytes))
        return f.read(), size


def exists(folder_path, name):
    fd = _open(folder_path, name)
    if fd is None:
        return False
    os.close(fd)
    return True
