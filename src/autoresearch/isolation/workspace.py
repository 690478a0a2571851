"""Where one run executes: a snapshot of its commit, its environment, its sandbox.

- cwd: `.autoresearch/snapshots/N`, the commit's own tree (snapshot.py), with what the commit
  does not hold but the benchmark may need (an ignored `.venv/`, data nobody committed) linked
  in from the work tree. The work tree itself is never run, so the agent may go on editing it.
  On a pool worker away from the repo: the commit's files, shipped as bytes (`open_tree`).
- env: the caller's without the handles to the outside (HANDLES), plus `AUTORESEARCH_RUN_TOKEN`
  (the run's processes are found by it), a fresh `TMPDIR` removed after the run, and a uv cache
  of the run's own (uv's shared cache hard-links the files of `.venv`: writing it would write
  the environment the evaluator runs in), and the repo's torch.compile cache (compile_cache_dir).
- the sandbox, deny by default: the benchmark writes its snapshot (not the fixed files, no new
  entries at its top), its run folder, its TMPDIR and the declared caches (caches.py), nothing
  else. The first of these that works here confines it, and the record names it (`sandbox`):
    1. `bwrap+landlock-N`: bubblewrap (bubblewrap.py: read-only file system but those folders,
       private /tmp, its own pids and IPC, dies with the engine) with Landlock's scopes (ABI 6+:
       no signals and no abstract sockets out); `bwrap` on a kernel without the scopes;
    2. `landlock-N`: Landlock alone (sandbox.py), the same writable folders; processes are found
       by the engine (subreaper, token) instead of a pid namespace;
    3. `none`: detection alone (integrity.py): a change to what decides is found after the run,
       undone, and the run recorded `tampered`.
  `AUTORESEARCH_SANDBOX=landlock` skips bubblewrap, `off` both (to debug a benchmark).

The run's files (`output.log`, `steps.jsonl`, ...) still go to `.autoresearch/runs/N/`.
"""

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass

from autoresearch.isolation import bubblewrap, caches, runner, sandbox, snapshot
from autoresearch.store import anchor

SNAPSHOTS = "snapshots"
SWITCH = "AUTORESEARCH_SANDBOX"   # "off": detection alone; "landlock": no bubblewrap
NOT_LINKED = ["autoresearch.jsonl", "autoresearch.md", "autoresearch.ideas.md", ".autoresearch/"]

# Variables that hand a process a way into the user's session: a terminal multiplexer's server,
# the desktop bus, an agent holding keys, a display, an editor's IPC. A deny-list, not an
# allow-list: a benchmark legitimately needs variables the engine cannot know (CUDA_*, HF_*,
# WANDB_*, proxies, its own settings), while the handles are few and named by convention.
HANDLES = {
    "TMUX", "TMUX_PANE", "TMUX_TMPDIR", "STY", "ZELLIJ", "ZELLIJ_SESSION_NAME", "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SYSTEM_BUS_ADDRESS", "SSH_AUTH_SOCK", "SSH_AGENT_PID", "SSH_ASKPASS", "GPG_AGENT_INFO",
    "GNOME_KEYRING_CONTROL", "XDG_RUNTIME_DIR", "DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY",
    "PULSE_SERVER", "KITTY_LISTEN_ON", "WEZTERM_UNIX_SOCKET", "NVIM", "NVIM_LISTEN_ADDRESS",
    "VSCODE_IPC_HOOK", "VSCODE_IPC_HOOK_CLI", "VSCODE_GIT_IPC_HANDLE", "GIT_ASKPASS", "DESKTOP_STARTUP_ID",
}
HANDLE_SUFFIXES = ("_SOCK", "_SOCKET", "_IPC_HOOK", "_IPC_HANDLE", "_LISTEN_ON", "_BUS_ADDRESS")


@dataclass
class Workspace:
    cwd: str
    env: dict
    token: str
    tmp: str
    confinement: object = None   # sandbox.Confinement (Landlock: files and scopes, or scopes only)
    wrap: list = None            # the bubblewrap command line the run starts through
    owned: bool = True           # the snapshot is ours to remove

    @property
    def preexec(self):
        return self.confinement.preexec if self.confinement else None

    @property
    def mode(self):
        """What the record says about the sandbox of its run."""
        landlock = f"landlock-{self.confinement.version}" if self.confinement else None
        if self.wrap:
            return "bwrap" + (f"+{landlock}" if landlock else "")
        return landlock or "none"

    def close(self):
        if self.confinement:
            self.confinement.close()
        if self.owned:
            snapshot.remove(self.cwd)
        shutil.rmtree(self.tmp, ignore_errors=True)


def snapshots_dir(repo):
    return os.path.join(repo.state, SNAPSHOTS)


def open_for(repo, config, run, commit, run_dir, env, warn=None):
    """Export `commit` for run `run` and set up its environment and sandbox."""
    dest = os.path.join(snapshots_dir(repo), str(run))
    snapshot.remove(dest)
    snapshot.export_commit(repo.root, commit, dest)
    scope = [s.rstrip("/") + ("/" if os.path.isdir(os.path.join(repo.root, s)) else "") for s in config.scope or []]
    try:
        snapshot.link_untracked(repo.root, dest, skip=NOT_LINKED + scope)
        return open_tree(dest, config, run, run_dir, env, repo_root=repo.root, warn=warn)
    except BaseException:
        snapshot.remove(dest)
        raise


def open_tree(tree, config, run, run_dir, env, repo_root=None, warn=None, owned=True):
    """The environment and sandbox of run `run` in `tree` (a snapshot already written)."""
    tmp = tempfile.mkdtemp(prefix=f"autoresearch-run{run}-")
    token = runner.new_token()
    env = dict(scrub(env), TMPDIR=tmp, UV_CACHE_DIR=os.path.join(tmp, "uv-cache"), **{runner.TOKEN_VAR: token})
    ws = Workspace(os.path.realpath(tree), env, token, tmp, owned=owned)
    try:
        writable = [os.path.realpath(run_dir), os.path.realpath(tmp)]
        writable += caches.folders(caches.declared(config), env, repo_root, warn)
        writable.append(_use_compile_cache(env, repo_root or tree))
        _confine(ws, config, writable, repo_root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return ws


# torch.compile caches under $TMPDIR by default, and each run gets a fresh one: a benchmark that
# compiles would start cold every run of the night. Its cache instead: one folder per repo under
# the user's cache, kept across runs and reboots, writable by the benchmark like a declared cache
# (a value the caller set wins). The ML template's harness.py (compile_cache_dir) names the same
# folder for the same repo.
def compile_cache_dir(root, env):
    """$AUTORESEARCH_CACHE/compile/<repo id>, else ${XDG_CACHE_HOME:-~/.cache}/autoresearch/compile/<repo id>,
    the repo id being `<folder name>-<first 12 hex of sha256(real path)>`."""
    base = env.get("AUTORESEARCH_CACHE") or os.path.join(
        env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "autoresearch")
    real = os.path.realpath(root)
    name = "".join(c if c.isalnum() or c in "_.-" else "_" for c in os.path.basename(real)) or "repo"
    return os.path.join(base, "compile", f"{name}-{hashlib.sha256(real.encode()).hexdigest()[:12]}")


def _use_compile_cache(env, root):
    """Sets the compile caches' variables in `env` (unless set) and makes the folder (a sandbox
    grants only folders that exist); returns it, real."""
    inductor = env.setdefault("TORCHINDUCTOR_CACHE_DIR", compile_cache_dir(root, env))
    env.setdefault("TRITON_CACHE_DIR", os.path.join(inductor, "triton"))
    os.makedirs(inductor, exist_ok=True)
    return os.path.realpath(inductor)


def scrub(env):
    """`env` without the handles to the user's session (HANDLES, and names ending like one)."""
    return {k: v for k, v in env.items() if k not in HANDLES and not k.endswith(HANDLE_SUFFIXES)}


def _confine(ws, config, writable, repo_root):
    how = os.environ.get(SWITCH, "").lower()
    if how in ("off", "0", "no"):
        return
    fixed = [os.path.join(ws.cwd, f) for f in config.fixed or {}]
    state_home = anchor.home()   # the anchor, waiting results, the holdout: neither read nor written
    closed = [ws.cwd] + sorted({os.path.dirname(p) for p in fixed} - {ws.cwd})
    if how != "landlock" and bubblewrap.usable():
        try:
            seen = [os.path.realpath(p) for p in (repo_root, ws.env.get("HOME")) if p]
            seen += bubblewrap.named_paths(ws.env)
            ws.wrap = bubblewrap.argv(ws.cwd, writable, read_only=fixed, open_entries=closed, visible=seen,
                                      hidden=[state_home])
            ws.confinement = sandbox.scopes_only()
            return
        except OSError:
            ws.wrap, ws.confinement = None, None   # next in the order: Landlock alone
    try:
        ws.confinement = sandbox.confine([ws.cwd] + writable, protected=fixed, closed=closed, hidden=[state_home])
    except OSError:
        ws.confinement = None   # detection alone (integrity.py) still holds


def sweep(repo):
    """Remove snapshots left by runs whose engine died (called with the run lock held)."""
    snapshot.sweep(snapshots_dir(repo))
