"""The hook scripts, fed the stdin JSON that Claude Code sends, against real research repos.

Each hook runs as Claude Code runs it: a separate `python3 hooks/<name>.py` process, the input
on stdin, the answer on stdout, notes on stderr. The repos are made by the real engine.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, run_cli
from gitrepo import git_repo

HOOKS = ROOT / "hooks"
OWNER = "6f1d3c1e-0000-4000-8000-000000000001"
OTHER = "6f1d3c1e-0000-4000-8000-000000000002"
TRAIN_PY = "OFFSET = 1.0\nprint(f'METRIC loss={2.0 + OFFSET}')\n"


def hook(name, payload, env=None):
    """Run hooks/<name>.py with `payload` (a dict, or raw str/bytes) on stdin."""
    data = payload if isinstance(payload, (str, bytes)) else json.dumps(payload)
    data = data.encode() if isinstance(data, str) else data
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "AUTORESEARCH"))}
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, str(HOOKS / f"{name}.py")], input=data, env=full_env,
                          capture_output=True, timeout=60)
    out = proc.stdout.decode()
    return proc.returncode, (json.loads(out) if out.strip() else None), proc.stderr.decode()


def stop_input(repo, session=OWNER, **extra):
    return {"session_id": session, "transcript_path": "/nonexistent/t.jsonl", "cwd": str(repo),
            "permission_mode": "default", "hook_event_name": "Stop", "stop_hook_active": True,
            "last_assistant_message": "Done.", "background_tasks": [], "session_crons": [], **extra}


def start_input(repo, source, session=OWNER):
    return {"session_id": session, "transcript_path": "/nonexistent/t.jsonl", "cwd": str(repo),
            "hook_event_name": "SessionStart", "source": source}


def tool_input(repo, tool, **tool_args):
    return {"session_id": OWNER, "transcript_path": "/nonexistent/t.jsonl", "cwd": str(repo),
            "permission_mode": "acceptEdits", "hook_event_name": "PreToolUse", "tool_name": tool,
            "tool_input": tool_args, "tool_use_id": "toolu_test"}


def engine(repo, *args, session=OWNER):
    proc = run_cli(list(args), cwd=repo, env={"CLAUDE_CODE_SESSION_ID": session})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def make_repo(path, max_iterations=5, runs=1, owner=OWNER):
    path.mkdir()
    (path / "train.py").write_text(TRAIN_PY)
    (path / "prepare.py").write_text("EVAL = 'fixed'\n")
    (path / "sub").mkdir()
    (path / "sub" / "notes.txt").write_text("notes\n")
    git_repo(path)
    args = ["init", "--metric", "loss", "--direction", "lower", "--command", "python3 train.py",
            "--scope", "train.py", "--fixed", "prepare.py"]
    if max_iterations:
        args += ["--max-iterations", str(max_iterations)]
    engine(path, *args, session=owner)
    for k in range(runs):
        new_experiment(path, k)
    return path


def new_experiment(repo, k):
    if k:
        (repo / "train.py").write_text(TRAIN_PY.replace("1.0", str(1.0 - 0.1 * k)))
    engine(repo, "run", "-m", f"experiment {k}")


@pytest.fixture
def repo(tmp_path):
    return make_repo(tmp_path / "research")


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One repo for the tests that only read it (the denied commands are never run)."""
    return make_repo(tmp_path_factory.mktemp("shared") / "research")


def brief_of(repo):
    return engine(repo, "brief").strip()


# --- Stop ------------------------------------------------------------------------------------

def test_stop_blocks_the_owner_with_the_brief_and_the_next_step(repo):
    rc, out, _ = hook("stop", stop_input(repo))
    assert rc == 0 and out["decision"] == "block"
    assert brief_of(repo) in out["reason"]
    assert "(4 iteration(s) left)" in out["reason"] and 'autoresearch run -m "' in out["reason"]
    counter = json.loads((repo / ".autoresearch" / "stop-hook.json").read_text())
    assert counter == {"session_id": OWNER, "total_runs": 1, "blocks": 1}


def test_stop_finds_the_repo_from_a_subfolder_and_from_claude_project_dir(repo, tmp_path):
    assert hook("stop", stop_input(repo / "sub"))[1]["decision"] == "block"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    payload = stop_input(elsewhere)
    assert hook("stop", payload)[1] is None
    assert hook("stop", payload, env={"CLAUDE_PROJECT_DIR": str(repo)})[1]["decision"] == "block"


def test_stop_lets_another_session_stop(repo):
    rc, out, err = hook("stop", stop_input(repo, session=OTHER))
    assert rc == 0 and out is None
    assert "does not own" in err and "autoresearch resume" in err


def test_stop_lets_a_stopped_session_stop_and_resume_hands_it_over(repo):
    engine(repo, "stop")
    rc, out, err = hook("stop", stop_input(repo))
    assert rc == 0 and out is None and "stopped" in err
    engine(repo, "resume", session=OTHER)  # a new Claude Code session takes the loop over
    assert hook("stop", stop_input(repo, session=OTHER))[1]["decision"] == "block"
    assert hook("stop", stop_input(repo, session=OWNER))[1] is None


def test_a_session_set_up_outside_claude_code_has_no_owner_until_resume(tmp_path):
    repo = make_repo(tmp_path / "r", runs=0, owner="")  # init run outside Claude Code
    assert json.loads((repo / ".autoresearch" / "session.json").read_text())["owner_session"] is None
    rc, out, err = hook("stop", stop_input(repo))
    assert out is None and "no Claude Code session owns" in err
    context = hook("session_start", start_input(repo, "startup"))[1]["hookSpecificOutput"]["additionalContext"]
    assert "no Claude Code session owns it" in context
    engine(repo, "resume")
    assert hook("stop", stop_input(repo))[1]["decision"] == "block"


def test_stop_lets_the_session_end_when_the_budget_is_spent(tmp_path):
    repo = make_repo(tmp_path / "r", max_iterations=2, runs=2)
    rc, out, _ = hook("stop", stop_input(repo))
    assert rc == 0 and "decision" not in out
    assert "iteration budget spent" in out["systemMessage"]


def test_stop_without_a_budget_keeps_going(tmp_path):
    repo = make_repo(tmp_path / "r", max_iterations=None)
    rc, out, _ = hook("stop", stop_input(repo))
    assert out["decision"] == "block" and "no iteration limit" in out["reason"]


def test_stuck_loop_is_let_through_after_k_blocks_without_a_new_run(repo):
    decisions = [hook("stop", stop_input(repo))[1] for _ in range(4)]
    assert [d.get("decision") for d in decisions[:3]] == ["block"] * 3
    assert "No new run was recorded since the last 2 stop(s)" in decisions[2]["reason"]
    assert "decision" not in decisions[3] and "looks stuck" in decisions[3]["systemMessage"]
    # The count starts afresh: the next user turn gets K more tries.
    assert hook("stop", stop_input(repo))[1]["decision"] == "block"
    # A new run is progress: the count restarts from zero.
    hook("stop", stop_input(repo))
    new_experiment(repo, 1)
    out = hook("stop", stop_input(repo))[1]
    assert out["decision"] == "block" and "No new run" not in out["reason"]
    assert json.loads((repo / ".autoresearch" / "stop-hook.json").read_text())["total_runs"] == 2


def test_stuck_limit_comes_from_the_environment(repo):
    env = {"AUTORESEARCH_STOP_STUCK_BLOCKS": "1"}
    assert hook("stop", stop_input(repo), env)[1]["decision"] == "block"
    assert "decision" not in hook("stop", stop_input(repo), env)[1]
    rc, out, err = hook("stop", stop_input(repo), {"AUTORESEARCH_STOP_STUCK_BLOCKS": "many"})
    assert out["decision"] == "block" and "not an integer" in err


def test_a_run_in_progress_is_waited_for_without_counting_as_stuck(repo):
    (repo / "train.py").write_text("import time\ntime.sleep(60)\nprint('METRIC loss=1')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "AUTORESEARCH"))}
    env.update(PYTHONPATH=str(ROOT / "src"), CLAUDE_CODE_SESSION_ID=OWNER)
    run = subprocess.Popen([sys.executable, "-m", "autoresearch", "run", "-m", "slow"], cwd=repo, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    current = repo / ".autoresearch" / "current.json"
    try:
        deadline = time.monotonic() + 30
        while not current.exists() and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert current.exists(), "the engine never started the run"
        outs = [hook("stop", stop_input(repo))[1] for _ in range(4)]
    finally:
        child = (json.loads(current.read_text()).get("child_pid") if current.exists() else None)
        for pid in filter(None, (child, run.pid)):  # the benchmark runs in its own process group
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        run.wait(timeout=30)
    assert all(o["decision"] == "block" and "run 2 is still in progress" in o["reason"] for o in outs)
    assert not (repo / ".autoresearch" / "stop-hook.json").exists()


def test_a_corrupt_counter_file_is_treated_as_no_blocks_yet(repo):
    (repo / ".autoresearch" / "stop-hook.json").write_text("{torn")
    rc, out, _ = hook("stop", stop_input(repo))
    assert out["decision"] == "block" and "No new run" not in out["reason"]
    assert json.loads((repo / ".autoresearch" / "stop-hook.json").read_text())["blocks"] == 1


def test_stop_outside_a_research_repo_says_nothing(tmp_path):
    rc, out, err = hook("stop", stop_input(tmp_path))
    assert (rc, out, err) == (0, None, "")


def test_stop_lets_through_when_the_engine_cannot_read_the_repo(tmp_path):
    # A log in a folder that is not a git repository: the engine refuses, the hook must not block.
    (tmp_path / "autoresearch.jsonl").write_text('{"type":"config","metricName":"loss"}\n')
    rc, out, err = hook("stop", stop_input(tmp_path))
    assert rc == 0 and out is None
    assert "`autoresearch brief` exited 3" in err and "letting this through" in err


# --- SessionStart ----------------------------------------------------------------------------

@pytest.mark.parametrize("source", ["startup", "resume", "compact", "clear"])
def test_session_start_adds_the_brief_to_the_context(shared, source):
    rc, out, _ = hook("session_start", start_input(shared, source))
    context = out["hookSpecificOutput"]["additionalContext"]
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert brief_of(shared) in context and "you own the active research session" in context


def test_session_start_in_a_stopped_repo(repo):
    engine(repo, "stop")
    assert hook("session_start", start_input(repo, "startup"))[1] is None  # a plain start stays quiet
    context = hook("session_start", start_input(repo, "compact"))[1]["hookSpecificOutput"]["additionalContext"]
    assert "session is stopped" in context and brief_of(repo) in context


def test_session_start_tells_another_session_how_to_take_over(shared):
    context = hook("session_start", start_input(shared, "resume", session=OTHER))[1][
        "hookSpecificOutput"]["additionalContext"]
    assert "owned by another Claude Code session" in context and "autoresearch resume" in context


def test_session_start_outside_a_research_repo_says_nothing(tmp_path):
    assert hook("session_start", start_input(tmp_path, "compact")) == (0, None, "")


# --- PreToolUse --------------------------------------------------------------------------------

def assert_denied(result, name):
    rc, out, _ = result
    assert rc == 0 and out is not None, result
    decision = out["hookSpecificOutput"]
    assert decision["hookEventName"] == "PreToolUse" and decision["permissionDecision"] == "deny"
    assert name in decision["permissionDecisionReason"]


def assert_allowed(result):
    rc, out, _ = result
    assert rc == 0 and out is None, result


@pytest.mark.parametrize("tool,key", [("Edit", "file_path"), ("Write", "file_path"), ("MultiEdit", "file_path"),
                                      ("NotebookEdit", "notebook_path")])
def test_file_tools_may_not_touch_the_fixed_files_or_the_log(shared, tool, key):
    assert_denied(hook("pre_tool_use", tool_input(shared, tool, **{key: str(shared / "prepare.py")})),
                  "prepare.py is a fixed file")
    assert_denied(hook("pre_tool_use", tool_input(shared, tool, **{key: "autoresearch.jsonl"})),
                  "append-only experiment log")
    assert_allowed(hook("pre_tool_use", tool_input(shared, tool, **{key: str(shared / "train.py")})))


def test_a_path_from_elsewhere_or_through_a_symlink_is_caught(shared, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "alias.py").symlink_to(shared / "prepare.py")
    assert_denied(hook("pre_tool_use", tool_input(elsewhere, "Write", file_path=str(shared / "prepare.py"))),
                  "prepare.py")
    assert_denied(hook("pre_tool_use", tool_input(elsewhere, "Edit", file_path="alias.py")), "prepare.py")
    assert_denied(hook("pre_tool_use", tool_input(shared / "sub", "Edit", file_path="../prepare.py")), "prepare.py")


DENIED_COMMANDS = [
    "echo 'x = 1' > prepare.py",
    "echo '{}' >> autoresearch.jsonl",
    "python3 train.py 2> prepare.py",
    ": > autoresearch.jsonl",
    "cat train.py | tee -a prepare.py",
    "rm -f prepare.py",
    "mv prepare.py prepare_old.py",
    "cp train.py prepare.py",
    "cp sub/notes.txt sub/../prepare.py",
    "sed -i 's/fixed/easier/' prepare.py",
    "sed -i.bak -e 's/fixed/easier/' prepare.py",
    "perl -pi -e 's/fixed/easier/' prepare.py",
    "truncate -s 0 autoresearch.jsonl",
    "dd if=/dev/zero of=prepare.py count=1",
    "cd sub && rm ../prepare.py",
    "git status; rm -rf *",
    "ls\nrm prepare.py",
    "sudo rm prepare.py",
    "LC_ALL=C sed -i 's/a/b/' prepare.py",
    "sed --in-place=.orig 's/a/b/' prepare.py",
    "ln -sf train.py prepare.py",
    "echo x 2>>prepare.py",
]


@pytest.mark.parametrize("command", DENIED_COMMANDS)
def test_bash_writes_into_protected_files_are_denied(shared, command):
    assert_denied(hook("pre_tool_use", tool_input(shared, "Bash", command=command)), "autoresearch:")


ALLOWED_COMMANDS = [
    "sed -i 's/^OFFSET = .*/OFFSET = 0.5/' train.py",
    "cat prepare.py autoresearch.jsonl",
    "grep EVAL prepare.py > sub/found.txt",
    "autoresearch run -m 'moved the offset > prepare.py stays'",
    "git diff prepare.py && python3 train.py > sub/out.log 2>&1",
    "cp prepare.py sub/copy_of_prepare.py",
    "rm -f sub/notes.txt",
]


@pytest.mark.parametrize("command", ALLOWED_COMMANDS)
def test_bash_commands_that_leave_protected_files_alone_pass(shared, command):
    assert_allowed(hook("pre_tool_use", tool_input(shared, "Bash", command=command)))


def test_removing_the_whole_research_repo_is_denied(shared, tmp_path):
    assert_denied(hook("pre_tool_use", tool_input(tmp_path, "Bash", command=f"rm -rf {shared}")), "autoresearch:")
    assert_denied(hook("pre_tool_use", tool_input(shared, "Bash", command="rm -rf .")), "autoresearch:")


def test_a_log_without_a_config_header_still_protects_the_log(tmp_path):
    (tmp_path / "autoresearch.jsonl").write_text("not json at all\n")
    (tmp_path / "prepare.py").write_text("x\n")
    assert_denied(hook("pre_tool_use", tool_input(tmp_path, "Write", file_path="autoresearch.jsonl")), "log")
    assert_allowed(hook("pre_tool_use", tool_input(tmp_path, "Write", file_path="prepare.py")))


def test_unparseable_bash_is_let_through_with_a_note(shared):
    rc, out, err = hook("pre_tool_use", tool_input(shared, "Bash", command="echo 'unbalanced > prepare.py"))
    assert rc == 0 and out is None and "could not parse" in err


def test_other_tools_are_not_inspected(shared):
    assert_allowed(hook("pre_tool_use", tool_input(shared, "Read", file_path=str(shared / "prepare.py"))))


# --- malformed input never breaks a session ----------------------------------------------------

MALFORMED = [b"", b"not json", b"[1, 2, 3]", b'"a string"', b'{"session_id": ', b"\xff\xfe\x00garbage",
             b'{"session_id": 5, "cwd": ["x"], "tool_name": 7, "tool_input": "rm prepare.py"}',
             b'{"cwd": "/definitely/not/here", "tool_name": "Bash", "tool_input": {"command": 42}}']


@pytest.mark.parametrize("name", ["stop", "session_start", "pre_tool_use"])
@pytest.mark.parametrize("payload", MALFORMED)
def test_malformed_input_lets_everything_through(name, payload, shared):
    rc, out, err = hook(name, payload, env={"CLAUDE_PROJECT_DIR": str(shared)})
    assert rc == 0
    assert out is None or isinstance(out, dict)
    if name == "stop":  # no session id to match the owner: never block
        assert out is None
    if name == "pre_tool_use":  # nothing to judge: never deny
        assert out is None


def test_malformed_input_says_why_on_stderr():
    for name in ("stop", "session_start", "pre_tool_use"):
        rc, out, err = hook(name, b"{oops")
        assert (rc, out) == (0, None) and "not JSON" in err and "letting this through" in err
