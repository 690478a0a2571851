"""The benchmark runs where it cannot write what decides: Linux Landlock, through ctypes.

Landlock needs no privileges (Linux 5.13 or newer, enabled in most distributions). The engine
builds a rule set before the benchmark starts; the child applies it to itself just before it
execs the command, and everything the command starts inherits it. Under it the benchmark may
write anywhere except:

- the git directory (refs, objects, the log's chain tip and the engine's copies),
- the log `autoresearch.jsonl` and `.autoresearch/` (the run-state, the session, other runs;
  its own run folder `.autoresearch/runs/N/` stays writable),
- the fixed files, in the work tree and in the run's snapshot,
- new entries at the top of the work tree or of the snapshot (a `prepare/` package or a
  `__pycache__` there could stand in for a fixed file); files and folders already there, and
  everything in sub-folders, stay writable. Scratch space: $TMPDIR is a fresh folder per run.

Landlock grants rights beneath paths and cannot subtract, so "everything except P" is built by
walking from / towards each protected path and granting every sibling on the way. From ABI 6 the
benchmark also cannot signal processes outside its sandbox (the engine, the user's programs).

Where Landlock is missing, the engine says so once at `init` and relies on detection alone
(integrity.py): each change is found after the run, undone, and the run recorded `tampered`.
"""

import os
import struct
from dataclasses import dataclass

SYS_CREATE, SYS_ADD_RULE, SYS_RESTRICT = 444, 445, 446   # the same on x86_64 and arm64
PR_SET_NO_NEW_PRIVS = 38
RULE_PATH_BENEATH = 1
CREATE_RULESET_VERSION = 1

WRITE_FILE, REMOVE_DIR, REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
MAKE = sum(1 << b for b in range(6, 13))     # char, dir, reg, sock, fifo, block, sym
REFER, TRUNCATE = 1 << 13, 1 << 14
SCOPE_SIGNAL = 1 << 1


def _libc():
    import ctypes
    return ctypes.CDLL(None, use_errno=True)


def abi():
    """The Landlock ABI version of this kernel, or 0 when there is none (or not Linux)."""
    if not os.path.isdir("/proc"):
        return 0
    import ctypes
    try:
        libc = _libc()
        libc.syscall.restype = ctypes.c_long
        version = libc.syscall(SYS_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(0, int(version))


def describe():
    """One line for `init`: what protects the harness on this machine."""
    version = abi()
    if version:
        return (f"sandbox: Landlock (ABI {version}): the benchmark cannot write the log, .git, "
                ".autoresearch/ or the fixed files" + ("" if version >= 6 else
                "; it can still signal other processes (needs ABI 6)"))
    return ("sandbox: none on this system (Landlock needs Linux 5.13+): a benchmark that changes the log, "
            "the run-state, a fixed file, HEAD or the run refs is caught after the run, undone and "
            "recorded as tampered, not prevented")


@dataclass
class Confinement:
    ruleset_fd: int
    version: int

    def preexec(self):
        """In the child, before exec: no new privileges, then the rule set."""
        import ctypes
        libc = _libc()
        libc.syscall.restype = ctypes.c_long
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.syscall(SYS_RESTRICT, ctypes.c_int(self.ruleset_fd), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")

    def close(self):
        if self.ruleset_fd is not None:
            try:
                os.close(self.ruleset_fd)
            except OSError:
                pass
            self.ruleset_fd = None


def confine(protected, closed_dirs, writable):
    """A Confinement that denies writes to `protected` paths (files or folders, and all beneath),
    denies new entries in `closed_dirs` (their existing entries stay writable unless protected),
    and grants `writable` folders (inside either) in full. None when Landlock is unavailable."""
    version = abi()
    if not version:
        return None
    import ctypes
    handled = WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE
    if version >= 2:
        handled |= REFER
    if version >= 3:
        handled |= TRUNCATE
    file_rights = handled & (WRITE_FILE | TRUNCATE)
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    if version >= 6:
        attr = struct.pack("=QQQ", handled, 0, SCOPE_SIGNAL)
    elif version >= 4:
        attr = struct.pack("=QQ", handled, 0)
    else:
        attr = struct.pack("=Q", handled)
    buf = ctypes.create_string_buffer(attr, len(attr))
    fd = libc.syscall(SYS_CREATE, buf, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if fd < 0:
        return None
    guarded = {os.path.realpath(p) for p in protected}
    closed = {os.path.realpath(p) for p in closed_dirs} - guarded
    open_dirs = [os.path.realpath(p) for p in writable]
    for path in _grants(guarded | closed, guarded, open_dirs):
        _add(libc, fd, path, handled, file_rights)
    for path in open_dirs:
        _add(libc, fd, path, handled, file_rights)
    return Confinement(fd, version)


def _grants(stops, guarded, open_dirs):
    """Every path to grant so that all but `stops` (and what is beneath the guarded ones) is
    writable: siblings along the way from / to each stop, and the entries of closed folders."""
    out = []
    seen = set()

    def ancestor_of_stop(path):
        prefix = path.rstrip("/") + "/"
        return any(s.startswith(prefix) for s in stops) or path == "/"

    def walk(folder):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return
        for entry in entries:
            path = os.path.join(folder, entry.name)
            if path in guarded or path in seen:
                continue
            if entry.is_symlink():
                real = os.path.realpath(path)
                # A symlink: grant its target only when that is neither protected nor on the way.
                if real in stops or _beneath(real, guarded) or ancestor_of_stop(real):
                    continue
            if path in stops or ancestor_of_stop(path):
                seen.add(path)
                if entry.is_dir(follow_symlinks=False):
                    walk(path)
                continue
            if any(_beneath(path, d) or path == d for d in open_dirs):
                continue
            out.append(path)

    walk("/")
    return out


def _beneath(path, folders):
    if isinstance(folders, str):
        folders = (folders,)
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def _add(libc, ruleset, path, handled, file_rights):
    import ctypes
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        import stat
        is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
        attr = struct.pack("=Qi", handled if is_dir else file_rights, fd)
        buf = ctypes.create_string_buffer(attr, len(attr))
        libc.syscall(SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH), buf, ctypes.c_uint32(0))
    finally:
        os.close(fd)
