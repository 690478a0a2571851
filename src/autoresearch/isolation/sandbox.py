"""The benchmark writes only where it may: Linux Landlock, through ctypes, deny by default.

Landlock needs no privileges (Linux 5.13 or newer, enabled in most distributions). The engine
builds a rule set before the benchmark starts; the child applies it to itself just before it
execs the command, and everything the command starts inherits it. Under it the benchmark may
write only:

- its snapshot, except the fixed files in it and new entries at its top (a `prepare/` package or
  a `__pycache__` there could stand in for a fixed file); what the commit holds stays writable,
- its run folder `.autoresearch/runs/N/`, its private temporary folder ($TMPDIR), the caches the
  template declares (caches.py), and /dev (the GPU's device nodes, /dev/null, /dev/shm).

Everything else of the user's is read-only to it: the research repo's work tree, `.git`, the log,
the engine's state, the engine's and the plugin's source, the user's site folder, the shell's
startup files. Landlock grants rights beneath paths; "only these" is the rule set itself, and
"this folder but not that file in it" is built by granting the file's siblings one by one.

From ABI 6 the scopes close two handles to the outside: the benchmark cannot signal a process
outside its sandbox (the engine, the user's shell, a tmux server) nor connect to an abstract unix
socket made outside it (an X server, a D-Bus or IDE socket). Pathname sockets (tmux's, ssh-agent's)
are a file-system matter Landlock does not cover; bubblewrap (bubblewrap.py) hides them.

It also cannot read (nor write) the files of the engine's state folder outside the repo (anchor.py:
the chain's anchor, results waiting to be appended, the hidden holdout of every run): `hidden`
folders. Reads are granted everywhere else, by the same walk; listing folders stays allowed
(READ_DIR is not handled), so a program that builds its own rules by listing folders (the ML
harness seals train.py that way) still can.

Where Landlock is missing, the engine says so once at `init` and relies on detection alone
(integrity.py): each change is found after the run, undone, and the run recorded `tampered`.
"""

import os
import stat
import struct
from dataclasses import dataclass

SYS_CREATE, SYS_ADD_RULE, SYS_RESTRICT = 444, 445, 446   # the same on x86_64 and arm64
PR_SET_NO_NEW_PRIVS = 38
RULE_PATH_BENEATH = 1
CREATE_RULESET_VERSION = 1

WRITE_FILE, READ_FILE, REMOVE_DIR, REMOVE_FILE = 1 << 1, 1 << 2, 1 << 4, 1 << 5
MAKE = sum(1 << b for b in range(6, 13))     # char, dir, reg, sock, fifo, block, sym
REFER, TRUNCATE = 1 << 13, 1 << 14
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
SCOPES_ABI = 6
ALWAYS_WRITABLE = ("/dev",)   # device nodes: a GPU is opened read-write; /dev/null, /dev/shm


def _libc():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def abi():
    """The Landlock ABI version of this kernel, or 0 when there is none (or not Linux)."""
    if not os.path.isdir("/proc"):
        return 0
    import ctypes
    try:
        version = _libc().syscall(SYS_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(0, int(version))


def describe():
    """One line for `init`: what protects the harness on this machine."""
    from autoresearch.isolation import bubblewrap
    version = abi()
    jail = bubblewrap.usable()
    if not version and not jail:
        return ("sandbox: none on this system (Landlock needs Linux 5.13+, bubblewrap is not installed): a "
                "benchmark that changes the log, the run-state, a fixed file, HEAD or the run refs is caught "
                "after the run, undone and recorded as tampered, not prevented; install bubblewrap "
                "(apt-get install bubblewrap) for a sandbox")
    parts = []
    if jail:
        parts.append("bubblewrap (private /tmp, its own pids and IPC, read-only outside its folders)")
    if version:
        parts.append(f"Landlock (ABI {version})" + ("" if version >= SCOPES_ABI else
                     ": it can still signal other processes (needs ABI 6)"))
    return ("sandbox: " + " + ".join(parts) + ": the benchmark writes only its snapshot, its run folder, "
            "a private temporary folder and the declared caches")


@dataclass
class Confinement:
    ruleset_fd: int
    version: int
    files: bool = True      # False: scopes only (under bubblewrap, which must still mount)

    def preexec(self):
        """In the child, before exec: no new privileges, then the rule set."""
        import ctypes
        libc = _libc()
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


def _ruleset(libc, version, handled):
    import ctypes
    scopes = SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET if version >= SCOPES_ABI else 0
    if version >= SCOPES_ABI:
        attr = struct.pack("=QQQ", handled, 0, scopes)
    elif version >= 4:
        attr = struct.pack("=QQ", handled, 0)
    else:
        attr = struct.pack("=Q", handled)
    buf = ctypes.create_string_buffer(attr, len(attr))
    return libc.syscall(SYS_CREATE, buf, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))


def scopes_only():
    """A Confinement with the scopes alone (no signals out, no abstract sockets out), for a
    benchmark that bubblewrap confines on the file system (a Landlock file rule set would forbid
    bubblewrap's mounts). None below ABI 6."""
    version = abi()
    if version < SCOPES_ABI:
        return None
    fd = _ruleset(_libc(), version, 0)
    return Confinement(fd, version, files=False) if fd >= 0 else None


def confine(writable, protected=(), closed=(), hidden=()):
    """A Confinement under which only the `writable` folders (and /dev) can be written, and in them
    neither the `protected` paths (files or folders, and all beneath) nor new entries of the
    `closed` folders (their existing entries stay writable unless protected). Symlinks inside a
    writable folder are not followed: what they point to keeps its own rights. None when
    Landlock is unavailable. Files beneath the `hidden` folders cannot be read either."""
    version = abi()
    if not version:
        return None
    handled = WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE
    if version >= 2:
        handled |= REFER
    if version >= 3:
        handled |= TRUNCATE
    file_rights = handled & (WRITE_FILE | TRUNCATE)
    unreadable = {os.path.realpath(p) for p in hidden if os.path.lexists(p)}
    writes = handled
    if unreadable:
        handled |= READ_FILE
    libc = _libc()
    fd = _ruleset(libc, version, handled)
    if fd < 0:
        return None
    guarded = {os.path.realpath(p) for p in protected}
    stops = guarded | ({os.path.realpath(p) for p in closed} - guarded)
    for root in [os.path.realpath(p) for p in writable] + list(ALWAYS_WRITABLE):
        for path in _grants(root, stops, guarded):
            _add(libc, fd, path, writes, file_rights)
    if unreadable:   # reads: a second set of grants, everywhere but the hidden folders
        for path in _grants("/", unreadable, unreadable):
            _add(libc, fd, path, READ_FILE, READ_FILE)
    return Confinement(fd, version)


def _grants(root, stops, guarded):
    """The paths to grant so that all of `root` is writable but the `stops` (and what is beneath
    the guarded ones): `root` itself when no stop lies in it, else its entries, walking down
    towards each stop."""
    inside = {s for s in stops if s == root or s.startswith(root.rstrip("/") + "/")}
    if not inside:
        return [root]
    out = []

    def on_the_way(path):
        prefix = path.rstrip("/") + "/"
        return path in inside or any(s.startswith(prefix) for s in inside)

    def walk(folder):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return
        for entry in entries:
            path = os.path.join(folder, entry.name)
            if path in guarded or entry.is_symlink():
                continue
            if on_the_way(path):
                if entry.is_dir(follow_symlinks=False):
                    walk(path)
                continue
            out.append(path)

    if root not in guarded:
        walk(root)
    return out


def _add(libc, ruleset, path, handled, file_rights):
    import ctypes
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
        attr = struct.pack("=Qi", handled if is_dir else file_rights, fd)
        buf = ctypes.create_string_buffer(attr, len(attr))
        libc.syscall(SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH), buf, ctypes.c_uint32(0))
    finally:
        os.close(fd)
