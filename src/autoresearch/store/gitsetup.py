"""Where git reads what it executes: the files the guard notes before a benchmark.

git runs programs that its configuration names: hooks, `core.fsmonitor`, `gpg.program`, filter
and diff drivers (named per path by attributes files). A benchmark that changes one of these
files gets its code run by the next git command, outside the run. The engine's own git commands
switch most of it off (gitops.NEUTRAL), but not filters (git-lfs needs them) and not the user's
own git; so integrity.py notes these files and folders before the benchmark and puts them back
after it, before the engine runs git again.

`paths(root)` says which, without starting git in the common case:
- per git directory (a linked worktree's own and the common one): `config`, `config.worktree`,
  `info/attributes`, and the `hooks/` folder;
- the user's and the system's git config and attributes (`~/.gitconfig`,
  `$XDG_CONFIG_HOME/git/config` and `.../git/attributes`, or `$GIT_CONFIG_GLOBAL`; `/etc/gitconfig`,
  `/etc/gitattributes`, or `$GIT_CONFIG_SYSTEM`);
- where a config file sets `core.hooksPath`, `core.attributesFile` or includes another file, those
  too (asked of git: `git config --list --show-origin`).
"""

import os

from autoresearch.store import chain, gitops

# Words in a config file that make git read or run something from another path.
ELSEWHERE = (b"hookspath", b"attributesfile", b"include")


def git_dirs(root):
    """The git directory of the work tree at `root` and, for a linked worktree, the common one."""
    own = chain.git_dir(root)
    if not own:
        return []
    dirs = [own]
    try:
        with open(os.path.join(own, "commondir"), encoding="utf-8") as f:
            common = f.read().strip()
        dirs.append(common if os.path.isabs(common) else os.path.normpath(os.path.join(own, common)))
    except OSError:
        pass
    return dirs


def paths(root):
    """(files, folders): absolute paths of what names programs git runs for `root`."""
    files, folders = [], []
    for folder in git_dirs(root):
        files += [os.path.join(folder, "config"), os.path.join(folder, "config.worktree"),
                  os.path.join(folder, "info", "attributes")]
        folders.append(os.path.join(folder, "hooks"))
    files += _user_and_system()
    if any(_mentions_elsewhere(p) for p in files):
        more_files, more_folders = _named_elsewhere(root)
        files += [p for p in more_files if p not in files]
        folders += [p for p in more_folders if p not in folders]
    return files, folders


def _user_and_system():
    env = os.environ
    home = os.path.expanduser("~")
    xdg = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    found = [env["GIT_CONFIG_GLOBAL"]] if env.get("GIT_CONFIG_GLOBAL") else \
        [os.path.join(home, ".gitconfig"), os.path.join(xdg, "git", "config")]
    found.append(os.path.join(xdg, "git", "attributes"))
    if not env.get("GIT_CONFIG_NOSYSTEM"):
        found.append(env.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig")
    found.append("/etc/gitattributes")
    return [p for p in found if p and p != os.devnull]


def _mentions_elsewhere(path):
    try:
        with open(path, "rb") as f:
            text = f.read(1 << 20).lower()
    except OSError:
        return False
    return any(word in text for word in ELSEWHERE)


def _named_elsewhere(root):
    """Config files git reads (includes too), the hooks folder and attributes file they name."""
    out = gitops.git(root, "config", "--list", "--show-origin", "-z", check=False) or ""
    files, folders = [], []
    items = out.split("\0")
    for origin, entry in zip(items[0::2], items[1::2]):
        if not origin.startswith("file:"):
            continue   # the engine's own `-c` (NEUTRAL), the environment
        path = os.path.abspath(os.path.join(root, origin[len("file:"):]))
        if path not in files:
            files.append(path)
        key, _, value = entry.partition("\n")
        if key == "core.hookspath" and value:
            folders.append(os.path.abspath(os.path.join(root, os.path.expanduser(value))))
        elif key == "core.attributesfile" and value:
            files.append(os.path.abspath(os.path.join(root, os.path.expanduser(value))))
    return files, folders


def label(root, path):
    """How the record names one of these paths: relative to the repository, or to the home folder."""
    root = os.path.abspath(root)
    home = os.path.expanduser("~")
    if path.startswith(root + os.sep):
        return os.path.relpath(path, root)
    if home not in ("", "/") and path.startswith(home + os.sep):
        return "~/" + os.path.relpath(path, home)
    return path
