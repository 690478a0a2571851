"""The benchmark in namespaces of its own, through bubblewrap (`bwrap`), where it is installed.

bubblewrap starts the command in new mount, pid and IPC namespaces, unprivileged (through a
user namespace) or as root. What the benchmark sees:

- the whole file system read-only, and writable only: its snapshot's entries (not the fixed
  files, no new entries at its top: the top is read-only and each entry the commit holds is
  bound writable over it), its run folder, its temporary folder and the declared caches;
- a private, empty /tmp and /var/tmp, and an empty /run/user: the pathname sockets kept there
  (tmux's server, ssh-agent, D-Bus, X11's /tmp/.X11-unix) are not there to connect to; the
  research repo, the home folder and the paths the environment names (AUTORESEARCH_CACHE, a
  PATH entry) are bound back in, read-only, when they live there (never a socket, nor a folder
  that holds one);
- its own /dev (null, zero, random, a private /dev/shm) plus the GPU's device nodes
  (/dev/nvidia*, /dev/dri) when present, and its own /proc: no process outside is visible,
  so none can be signalled or traced;
- its own pid namespace: when the command's main process ends, every process it started ends
  with it (the kernel kills the namespace), a `setsid` or double-forked daemon included; and
  `--die-with-parent`: if the engine dies, the sandbox dies.

`usable()` runs bubblewrap once per engine process to see that it can start here (it cannot in
some containers, or where unprivileged user namespaces are off); the engine falls back to
Landlock alone (sandbox.py) then, and the run's record names the mode it ran under.
"""

import glob
import os
import shutil
import stat
import subprocess

PROGRAM = "bwrap"
HIDDEN = ("/tmp", "/var/tmp", "/run/user")          # private and empty inside
GPU_DEVICES = ("/dev/nvidia*", "/dev/dri")   # nvidia0.., nvidiactl, nvidia-uvm, nvidia-caps/; DRM
_usable = {}


def path():
    return shutil.which(PROGRAM)


def usable():
    """True when bubblewrap is installed and can start a sandbox here (checked once a process)."""
    exe = path()
    if not exe:
        return False
    if exe not in _usable:
        try:
            probe = subprocess.run([exe, *_base(), "--", "/bin/sh", "-c", "exit 0"], stdin=subprocess.DEVNULL,
                                   capture_output=True, timeout=30)
            _usable[exe] = probe.returncode == 0
        except (OSError, subprocess.SubprocessError):
            _usable[exe] = False
    return _usable[exe]


def _base():
    return ["--die-with-parent", "--unshare-pid", "--unshare-ipc", "--ro-bind", "/", "/",
            "--dev", "/dev", "--proc", "/proc"]


def gpu_devices():
    """The GPU's device nodes present here, each once."""
    found = []
    for pattern in GPU_DEVICES:
        found += [p for p in sorted(glob.glob(pattern)) if p not in found]
    return found


def argv(cwd, writable, read_only=(), open_entries=(), visible=(), hidden=()):
    """The bwrap command line that runs what follows it (append `--` is included) in `cwd`.

    `writable`: folders the benchmark may write in full. `open_entries`: folders whose own
    entries (the ones present now, not symlinks) are writable while the folder itself is not
    (no new entries). `read_only`: paths inside those that stay read-only (the fixed files).
    `visible`: folders to keep in sight, read-only, when they lie in a hidden one (a research
    repo or a home folder under /tmp). `hidden`: folders the benchmark must not see at all (the
    engine's state outside the repo): an empty tmpfs is mounted over each."""
    args = [path(), *_base()]
    for dev in gpu_devices():
        args += ["--dev-bind", dev, dev]
    for folder in HIDDEN:
        if os.path.isdir(folder):
            args += ["--tmpfs", folder]
    for folder in sorted(set(visible), key=lambda f: f.count("/")):
        if any(_beneath(folder, h) for h in HIDDEN) and os.path.exists(folder) and not _holds_socket(folder):
            args += ["--ro-bind", folder, folder]
    shut = {os.path.realpath(p) for p in read_only}
    for folder in sorted(open_entries, key=lambda f: f.count("/")):
        if not os.path.isdir(folder):
            continue   # a fixed file's folder the commit does not hold
        args += ["--ro-bind", folder, folder]     # no new entries here, nor renames over the fixed
        for entry in sorted(os.listdir(folder)):
            full = os.path.join(folder, entry)
            if not os.path.islink(full) and full not in shut:
                args += ["--bind", full, full]
    for folder in writable:
        args += ["--bind", folder, folder]
    for p in sorted(shut):
        if os.path.lexists(p):
            args += ["--ro-bind", p, p]
    for folder in hidden:
        if os.path.isdir(folder):
            args += ["--tmpfs", folder]
    args += ["--chdir", cwd, "--"]
    return args


def _beneath(path, folder):
    return path.startswith(folder.rstrip("/") + "/")


def named_paths(env):
    """Existing absolute paths that the environment's values name (`AUTORESEARCH_CACHE`,
    `HF_HOME`, each entry of a PATH-like list), real: what a benchmark configured to read."""
    out = set()
    for value in env.values():
        for part in value.split(os.pathsep):
            if part.startswith("/") and "\n" not in part and os.path.exists(part):
                out.add(os.path.realpath(part))
    return out


def _holds_socket(path):
    """A socket or a named pipe (a read-only mount does not stop a write to either), or a folder
    with one directly in it (a server's: tmux-UID/, .X11-unix/)."""
    def handle(mode):
        return stat.S_ISSOCK(mode) or stat.S_ISFIFO(mode)
    try:
        if handle(os.lstat(path).st_mode):
            return True
        if not os.path.isdir(path):
            return False
        with os.scandir(path) as entries:
            return any(handle(e.stat(follow_symlinks=False).st_mode) for e in entries)
    except OSError:
        return True
