"""The agent's side of the trust boundary: Claude Code's own Bash sandbox and permission rules.

Claude Code runs each Bash command of the agent in an OS sandbox (bubblewrap on Linux, Seatbelt
on macOS) when its settings ask for it, and refuses its file tools (Edit, Write, NotebookEdit,
Read) on the paths its permission `deny` rules name. This module writes those settings for a
research repo (`init` puts them in `.claude/settings.local.json`; `night` passes the same JSON
with `--settings`, which outranks every settings file the agent could reach), says whether the
sandbox can start on this machine (`agent_sandbox_problem`), and tells the engine when it was
started from the agent's own session (`agent_session`), so that it runs there only the commands
that cannot change what decides (`refusal`, asked by cli.py before every command).

What the agent's Bash can write: the working folder (the scope, its notes, a .venv) and its
temporary folder; never the git directory, the log, the engine's state, the fixed files, these
settings, the prepared data or the user's state folder. What it cannot read: the holdout split
and the holdout results. Nothing falls back to running unsandboxed. The engine is the one
command run outside the sandbox (an `excludedCommands` pattern): Claude Code 2.1.332 runs an
excluded command unsandboxed only when the Bash call is that plain command (a redirection, a
pipe, `&&`, `$(...)` or a variable assignment in front make it run sandboxed) and a command with
arguments needs the pattern form `name:*`.
"""

import json
import os
import platform
import shutil
import subprocess
from pathlib import Path

ENGINE_PATTERN = "autoresearch:*"
SETTINGS_FILE = Path(".claude") / "settings.local.json"
INSTALL_LINE = "sudo apt-get install bubblewrap socat"   # Debian/Ubuntu; other distributions name them alike
# What the engine runs for the agent's session (unsandboxed, since it is the excluded command):
# the loop and what reads its state. Everything else (a new segment, a report or an export written
# to a path it names, the holdout, the pool's machines, the night itself) is the person's.
AGENT_COMMANDS = {"run", "status", "brief", "diagnose", "submit", "wait", "stop", "resume"}
AGENT_POOL_COMMANDS = {"status"}
# Environment Claude Code gives its Bash tool's commands (2.1.332): any one marks the agent's session.
# (Not CLAUDE_CODE_SESSION_ID alone: a person passes that to `init --session` and `resume` on purpose.)
SESSION_MARKERS = ("CLAUDECODE", "CLAUDE_CODE_CHILD_SESSION", "CLAUDE_PID")


def data_cache():
    return Path(os.environ.get("AUTORESEARCH_CACHE") or Path.home() / ".cache" / "autoresearch")


def state_folder():
    """The user's state folder (outside every research repo): the agent neither reads nor writes it."""
    base = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(base) / "autoresearch"


def _git_dirs(root):
    """The repository's git directory and, for a linked worktree, the common one."""
    dirs = []
    for flag in ("--absolute-git-dir", "--git-common-dir"):
        try:
            out = subprocess.run(["git", "-C", str(root), "rev-parse", flag], capture_output=True, text=True,
                                 timeout=30).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            out = ""
        if out:
            path = Path(out) if os.path.isabs(out) else (Path(root) / out)
            if path.resolve() not in dirs:
                dirs.append(path.resolve())
    return dirs or [Path(root).resolve() / ".git"]


def protected_paths(root, fixed):
    """(deny_write, deny_read): absolute paths the agent's Bash and file tools may not write / read."""
    root = Path(root).resolve()
    cache = data_cache().expanduser().resolve()
    deny_write = [*map(str, _git_dirs(root)), str(root / "autoresearch.jsonl"), str(root / ".autoresearch"),
                  str(root / ".claude"), str(root / ".mcp.json"),   # settings, hooks and MCP servers Claude Code runs
                  *(str(root / name) for name in sorted(fixed)),
                  str(cache), str(state_folder().expanduser().resolve()),
                  str(Path.home().resolve() / ".claude")]
    deny_read = [str(cache / "holdout*"), str(cache / "*" / "holdout*"),
                 str(root / ".autoresearch" / "holdout*"), str(root / ".autoresearch" / "runs" / "*" / "holdout*"),
                 str(state_folder().expanduser().resolve())]
    return _unique(deny_write), _unique(deny_read)


def _unique(items):
    return list(dict.fromkeys(items))


def settings_for(root, fixed):
    """The Claude Code settings (a dict) that hold the agent inside the boundary in this repo."""
    deny_write, deny_read = protected_paths(root, fixed)
    # Permission rules take `//` for an absolute path; a folder's rule covers what is under it.
    rules = []
    for path in deny_write:
        rules += [f"Edit(/{path})", f"Edit(/{path}/**)"]
    rules += [f"Read(/{path})" for path in deny_read]
    return {
        "sandbox": {
            "enabled": True,
            "failIfUnavailable": True,           # no sandbox: Claude Code refuses instead of running bare
            "allowUnsandboxedCommands": False,   # no retry outside the sandbox when a command fails in it
            "autoAllowBashIfSandboxed": True,
            "excludedCommands": [ENGINE_PATTERN],
            "filesystem": {"denyWrite": deny_write, "denyRead": deny_read},
        },
        "permissions": {"deny": rules},
    }


def write_project_settings(root, fixed):
    """Merge the boundary into the repo's local Claude Code settings (git-ignored by Claude Code:
    the paths are this machine's). Other keys the person set there are kept. Returns the path."""
    path = Path(root) / SETTINGS_FILE
    try:
        current = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(current, dict):
            current = {}
    except (OSError, ValueError):
        current = {}
    ours = settings_for(root, fixed)
    merged = dict(current)
    merged["sandbox"] = ours["sandbox"]
    permissions = dict(current.get("permissions") or {})
    old = [r for r in permissions.get("deny") or [] if r not in ours["permissions"]["deny"]]
    permissions["deny"] = old + ours["permissions"]["deny"]
    merged["permissions"] = permissions
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(merged, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    _ignore_locally(root, SETTINGS_FILE.as_posix())
    return path


def project_settings_current(root, fixed):
    """Whether the repo's local settings still hold the boundary for today's fixed files."""
    try:
        current = json.loads((Path(root) / SETTINGS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    ours = settings_for(root, fixed)
    deny = set((current.get("permissions") or {}).get("deny") or [])
    return current.get("sandbox") == ours["sandbox"] and set(ours["permissions"]["deny"]) <= deny


def _ignore_locally(root, name):
    """Keep the machine-specific settings out of `git status` (as Claude Code itself does)."""
    try:
        exclude = Path(subprocess.run(["git", "-C", str(root), "rev-parse", "--git-path", "info/exclude"],
                                      capture_output=True, text=True, timeout=30).stdout.strip())
        if not exclude.is_absolute():
            exclude = Path(root) / exclude
        lines = exclude.read_text(encoding="utf-8").splitlines() if exclude.exists() else []
        if f"/{name}" not in lines:
            exclude.parent.mkdir(parents=True, exist_ok=True)
            with open(exclude, "a", encoding="utf-8") as f:
                f.write(("\n" if lines and lines[-1] else "") + f"/{name}\n")
    except (OSError, subprocess.TimeoutExpired):
        pass


# --- can the sandbox start here? ----------------------------------------------------------------

def agent_sandbox_problem():
    """Why Claude Code's Bash sandbox cannot start on this machine (one line with the fix), or None."""
    system = platform.system()
    if system == "Darwin":
        return None if shutil.which("sandbox-exec") else "macOS without sandbox-exec: Claude Code's sandbox cannot start"
    if system != "Linux":
        return f"{system}: Claude Code's Bash sandbox runs on Linux, macOS and WSL2 only"
    missing = [name for name in ("bwrap", "socat") if shutil.which(name) is None]
    if missing:
        names = " and ".join("bubblewrap (bwrap)" if n == "bwrap" else n for n in missing)
        return f"{names} missing: Claude Code's Bash sandbox needs both on Linux; install them: {INSTALL_LINE}"
    try:
        probe = subprocess.run(["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-user", "--unshare-net",
                                "--unshare-pid", "--die-with-parent", "true"],
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap does not start ({exc}); Claude Code's Bash sandbox needs it"
    if probe.returncode != 0:
        why = (probe.stderr.strip().splitlines() or ["no message"])[-1]
        return (f"bubblewrap cannot create a sandbox here ({why}): unprivileged user namespaces are off "
                "(enable them: sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu 24.04+ "
                "kernel.apparmor_restrict_unprivileged_userns=0)")
    return None


def state(root, fixed):
    """The agent's side as status reports it: whether the sandbox can start here, and whether the
    repo's local settings hold the boundary for today's fixed files."""
    problem = agent_sandbox_problem()
    return {"available": problem is None, "problem": problem,
            "settings_current": project_settings_current(root, fixed)}


def mode_line(problem=None, *, checked=True):
    """The one line `init`, `status` and `night` show about the agent's side."""
    if not checked:
        problem = agent_sandbox_problem()
    if problem is None:
        return "agent sandbox: on (Claude Code's Bash sandbox; references/trust-boundary.md)"
    return (f"agent sandbox: unavailable ({problem}); `night` refuses to start without it, "
            "`night --no-agent-sandbox` runs with the PreToolUse hook as the only guard")


# --- is this engine process the agent's? --------------------------------------------------------

def agent_session(root=None):
    """True when this process was started from Claude Code's Bash tool (the agent), not by the person.

    The Bash tool's commands carry CLAUDECODE=1 and the session's id in their environment; a command
    can drop them (`env -u`), so the process's ancestors are asked too: the shell Claude Code
    started still carries them, and Claude Code itself is one of them. A Claude Code session elsewhere (a developer running the tests
    from another checkout) does not count: its folder must hold `root` or lie inside it.
    """
    if any(os.environ.get(name) for name in SESSION_MARKERS):
        return True
    return _claude_ancestor(root) is not None


def _claude_ancestor(root):
    pid = os.getppid()
    seen = 0
    while pid > 1 and seen < 64:
        seen += 1
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        if (any(entry.startswith(b"CLAUDECODE=1") for entry in environ) or _is_claude(pid)) and _overlaps(pid, root):
            return pid
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return None


def _is_claude(pid):
    """Claude Code itself (the native binary, or node running the npm package's script)."""
    try:
        exe = os.path.basename(os.path.realpath(f"/proc/{pid}/exe"))
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return exe in ("claude", "claude.exe") or any(b"@anthropic-ai/claude-code" in a for a in argv[:2])


def _overlaps(pid, root):
    if root is None:
        return True
    try:
        folder = Path(os.readlink(f"/proc/{pid}/cwd")).resolve()
    except OSError:
        return True
    root = Path(root).resolve()
    return folder == root or folder in root.parents or root in folder.parents


def repo_root_guess(start=None):
    """The nearest folder holding `.git` (no git call: this runs before every command), or None."""
    here = Path(start or os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return None


def refusal(command, args):
    """Why the engine will not run `command` for the agent's session, or None.

    `init` is the person's even in a repo without a log: it chooses the scope and the fixed files
    (what decides), and Claude Code applies the settings it writes only a moment later, so a
    session that ran it would go on unsandboxed for its next commands (measured with 2.1.332)."""
    if command == "pool" and getattr(args, "pool_command", None) in AGENT_POOL_COMMANDS:
        return None
    if command in AGENT_COMMANDS:
        return _diagnose_refusal(args) if command == "diagnose" else None
    what = {"init": "sets what decides (the scope, the fixed files, the metric) and starts a segment",
            "verify": "shows the hidden holdout", "report": "writes a file outside the sandbox or shows the holdout",
            "export": "writes a file outside the sandbox", "night": "starts Claude Code sessions",
            "pool": "starts or stops machines", "serve": "opens a server",
            "demo": "makes (and with --force deletes) a folder the agent names, outside the sandbox"}
    return (f"`autoresearch {command}` {what.get(command, 'is the person’s')}: from Claude Code's session the "
            "engine runs only run, submit, wait, status, brief, diagnose, stop, resume and `pool status`; "
            "the person runs it in their own terminal (references/trust-boundary.md)")


def _diagnose_refusal(args):
    """`diagnose FILE` runs outside the sandbox: it must not read for the agent what the sandbox hides."""
    import fnmatch  # noqa: PLC0415
    _, hidden = protected_paths(Path.cwd(), [])
    for value in (getattr(args, "logfile", None), getattr(args, "config", None)):
        if not value or str(value).isdigit():
            continue
        real = os.path.realpath(value)
        if any(fnmatch.fnmatch(real, pattern) or real.startswith(pattern.rstrip("*") + os.sep) for pattern in hidden) \
                or "holdout" in os.path.basename(real).lower():
            return (f"`autoresearch diagnose {value}`: that is the hidden holdout, which the engine never reads "
                    "for the agent (references/trust-boundary.md)")
    return None
