"""The engine starts isolated: nothing in the research repo, in PYTHONPATH or in the user's site
folder runs in front of it. Each attack is planted for real and checked to work on a plain
`python3` first (the same plant, the same environment), so the test can fail."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
from helpers_engine import make_repo  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "bin" / "autoresearch"
FORGED = "FORGED-BY-SHADOW best 0.001"
SESSION = "6f1d3c1e-0000-4000-8000-00000000abcd"

# A shadow package as the agent could leave it in the research repo: every `autoresearch` that
# imports it prints a forged status (and `python -m autoresearch` runs its __main__).
SHADOW_CLI = f"import sys\ndef main(argv=None):\n    print({FORGED!r})\n    return 0\n"
SHADOW_MAIN = f"print({FORGED!r})\n"


def plant_shadow(folder):
    pkg = Path(folder) / "autoresearch"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(f"print({FORGED!r})\n")
    (pkg / "cli.py").write_text(SHADOW_CLI)
    (pkg / "__main__.py").write_text(SHADOW_MAIN)
    return pkg


def hook_argv(name):
    """The hook's command line exactly as hooks/hooks.json gives it to Claude Code."""
    hooks = json.loads((ROOT / "hooks" / "hooks.json").read_text())["hooks"]
    for entries in hooks.values():
        for h in entries[0]["hooks"]:
            if h["args"][-1].endswith(f"/{name}.py"):
                return [h["command"], *[a.replace("${CLAUDE_PLUGIN_ROOT}", str(ROOT)) for a in h["args"]]]
    raise AssertionError(f"no hook {name} in hooks.json")


HOOK_INPUTS = {
    "session_start": {"hook_event_name": "SessionStart", "source": "startup"},
    "stop": {"hook_event_name": "Stop", "stop_hook_active": False, "last_assistant_message": "Done."},
    "pre_tool_use": {"hook_event_name": "PreToolUse", "tool_name": "Bash",
                     "tool_input": {"command": "cat autoresearch.jsonl"}},
}


def run_hook(name, repo, env):
    payload = dict(HOOK_INPUTS[name], session_id=SESSION, transcript_path="/nonexistent/t.jsonl", cwd=str(repo))
    return subprocess.run(hook_argv(name), input=json.dumps(payload), cwd=repo, env=env, capture_output=True,
                          text=True, timeout=60)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(extra)
    return env


def test_a_shadow_package_in_the_repo_changes_nothing(tmp_path):
    repo = make_repo(tmp_path / "research")
    repo.experiment("1.0")
    plant_shadow(repo.root)
    # The plant works: `python3 -m autoresearch` in the repo (the working folder first) runs it,
    # and so would anything started with PYTHONPATH pointing at the repo.
    env = clean_env(PYTHONPATH=str(repo.root))
    shadowed = subprocess.run(["python3", "-m", "autoresearch", "status"], cwd=repo.root, env=clean_env(),
                              capture_output=True, text=True)
    assert FORGED in shadowed.stdout
    proc = subprocess.run([str(BIN), "status"], cwd=repo.root, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert FORGED not in proc.stdout + proc.stderr and "best: run 1 (" in proc.stdout, proc.stdout
    for name in HOOK_INPUTS:
        out = run_hook(name, repo.root, env)
        assert FORGED not in out.stdout + out.stderr, (name, out.stdout, out.stderr)
    # The hooks still do their work there: SessionStart gives the real state of the session.
    start = run_hook("session_start", repo.root, env)
    assert start.returncode == 0 and "loss" in start.stdout, start.stdout


def test_a_usercustomize_in_the_user_site_folder_does_not_run(tmp_path):
    repo = make_repo(tmp_path / "research")
    repo.experiment("1.0")
    home, base = tmp_path / "home", tmp_path / "userbase"
    home.mkdir()
    env = clean_env(HOME=str(home), PYTHONUSERBASE=str(base))
    site = subprocess.run(["python3", "-c", "import site; print(site.getusersitepackages())"], env=env,
                          capture_output=True, text=True, check=True).stdout.strip()
    assert site.startswith(str(base))
    Path(site).mkdir(parents=True)
    marker = tmp_path / "ran"
    (Path(site) / "usercustomize.py").write_text(f"open({str(marker)!r}, 'a').write('ran\\n')\n")
    # The plant works: a plain python3 with that user site runs it.
    subprocess.run(["python3", "-c", "pass"], env=env, check=True)
    assert marker.read_text() == "ran\n"
    marker.unlink()
    proc = subprocess.run([str(BIN), "status"], cwd=repo.root, env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and "best: run 1 (" in proc.stdout, proc.stderr
    for name in HOOK_INPUTS:
        out = run_hook(name, repo.root, env)
        assert out.returncode == 0, (name, out.stderr)
    assert not marker.exists()


def test_the_engine_relaunches_itself_isolated(tmp_path):
    """night (in tmux) and the pool runner start the engine again: the same bootstrap as
    bin/autoresearch, from any working folder, with a shadow package there."""
    sys.path.insert(0, str(ROOT / "src"))
    from autoresearch import launch
    plant_shadow(tmp_path)
    bash_boot = re.search(r"-I -c '([^']+)'", BIN.read_text()).group(1)
    assert bash_boot == launch.BOOT
    proc = subprocess.run(launch.engine_argv("--version"), cwd=tmp_path, env=clean_env(PYTHONPATH=str(tmp_path)),
                          capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("autoresearch") and FORGED not in proc.stdout, proc
    proc = subprocess.run(launch.module_argv("autoresearch", "--version"), cwd=tmp_path,
                          env=clean_env(PYTHONPATH=str(tmp_path)), capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("autoresearch") and FORGED not in proc.stdout, proc


def test_python_m_still_runs_the_engine(tmp_path):
    """Outside a repo that plants one, `python -m autoresearch` (PYTHONPATH=src) still works."""
    proc = subprocess.run([sys.executable, "-m", "autoresearch", "--version"], cwd=tmp_path,
                          env=clean_env(PYTHONPATH=str(ROOT / "src")), capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("autoresearch"), proc.stderr
