"""`autoresearch night` checks what would make the whole night fail before it detaches, and ends
the night at once on an error that waiting will not heal; with the real Claude Code CLI.

Before: Claude Code on PATH, logged in or holding a key (`claude auth status`, offline), the
agent's sandbox able to start, the research repo ready. A failure is one line with the fix and a
non-zero exit in the person's terminal, in seconds, and nothing is started (no tmux session, no
night log). During the night: an invalid key or a spent credit balance ends the night after the
first answer that says so, with the fix in the night log; an overload is waited out (see
test_plugin_night.py for rate limits and resumes).
"""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from conftest import ROOT, require_tool
from mock_messages_api import APIError, MessagesAPI
from test_plugin_night import CLAUDE, HINT, autoresearch, init_in_shell, night_env, research_repo  # noqa: F401

PREFLIGHT_LIMIT_S = 5.0


def _night(repo, env, *extra, timeout=60):
    started = time.monotonic()
    done = autoresearch(["night", *extra], repo, env, timeout=timeout)
    return done, time.monotonic() - started


def _one_line(done):
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr + done.stdout
    return lines[0]


def _nothing_started(repo, env):
    assert not (repo / ".autoresearch" / "night.jsonl").exists()
    tmux = shutil.which("tmux", path=env["PATH"])
    if tmux:
        sessions = subprocess.run([tmux, "ls"], capture_output=True, text=True, env=env).stdout
        assert "autoresearch-night-" not in sessions


def _logged_out(tmp_path, api_url="http://127.0.0.1:9"):
    env = night_env(tmp_path, api_url)
    env.pop("ANTHROPIC_API_KEY")   # HOME is an empty folder: no login either
    env.pop("TMUX", None)
    return env


def test_no_login_is_refused_before_it_detaches(tmp_path, research_repo):
    require_tool(CLAUDE, HINT)
    env = _logged_out(tmp_path)
    init_in_shell(research_repo, env)
    done, took = _night(research_repo, env, "--hours", "8")   # no --foreground, not in tmux: would detach
    assert done.returncode == 3, done.stdout + done.stderr
    line = _one_line(done)
    assert "not logged in" in line and "/login" in line and "ANTHROPIC_API_KEY" in line, line
    assert took < PREFLIGHT_LIMIT_S, took
    _nothing_started(research_repo, env)


def test_a_key_is_enough_to_pass_the_login_check(tmp_path, research_repo):
    """With ANTHROPIC_API_KEY set, `night` gets past the checks and starts (here in the foreground,
    against an API that refuses the key: the night then ends on the first answer)."""
    require_tool(CLAUDE, HINT)
    served = []

    def refuse(body):
        served.append(body)
        return APIError(401, "authentication_error", "invalid x-api-key")

    with MessagesAPI(refuse) as api:
        env = night_env(tmp_path, api.url)
        init_in_shell(research_repo, env)
        done, took = _night(research_repo, env, "--foreground", "--backoff", "30", "--", "--plugin-dir", str(ROOT))
    assert done.returncode == 3, done.stdout[-2000:] + done.stderr[-2000:]
    events = [json.loads(line) for line in (research_repo / ".autoresearch" / "night.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events] == ["start", "exit", "end"], events
    end = events[-1]
    assert "API key" in end["reason"] and "ANTHROPIC_API_KEY" in end["fix"], end
    assert end["permanent"] is True
    assert "resuming" not in done.stdout
    assert took < 30, took   # no backoff wait: waiting would not heal it
    assert 1 <= len(served) <= 2   # the first try and at most Claude Code's own retry
    status = autoresearch(["status"], research_repo, env).stdout
    assert "ANTHROPIC_API_KEY" in status


def test_a_spent_credit_balance_ends_the_night_with_the_fix(tmp_path, research_repo):
    require_tool(CLAUDE, HINT)

    def broke(body):
        return APIError(400, "invalid_request_error", "Your credit balance is too low to access the Anthropic API. "
                        "Please go to Plans & Billing to upgrade or purchase credits.")

    with MessagesAPI(broke) as api:
        env = night_env(tmp_path, api.url)
        init_in_shell(research_repo, env)
        done, took = _night(research_repo, env, "--foreground", "--backoff", "30", "--", "--plugin-dir", str(ROOT))
    assert done.returncode == 3, done.stdout[-2000:] + done.stderr[-2000:]
    events = [json.loads(line) for line in (research_repo / ".autoresearch" / "night.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events] == ["start", "exit", "end"], events
    assert "credit" in events[-1]["reason"].lower() and "Plans & Billing" in events[-1]["fix"]
    assert took < 30, took


def test_an_overload_is_waited_out(tmp_path, research_repo):
    """529 heals by waiting: the night resumes the session after the backoff, and does not end."""
    require_tool(CLAUDE, HINT)
    answered = []

    def overloaded_then_stop(body):
        answered.append(1)
        if len(answered) <= 2:
            return APIError(529, "overloaded_error", "Overloaded")
        return [{"type": "text", "text": "Stopping."}]

    with MessagesAPI(overloaded_then_stop) as api:
        env = night_env(tmp_path, api.url)
        init_in_shell(research_repo, env)
        night = subprocess.Popen([sys.executable, "-m", "autoresearch", "night", "--foreground", "--backoff", "1",
                                  "--", "--plugin-dir", str(ROOT)], cwd=research_repo, env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        log = research_repo / ".autoresearch" / "night.jsonl"
        deadline = time.time() + 90
        while time.time() < deadline and night.poll() is None:
            if log.exists() and '"resume"' in log.read_text():
                break
            time.sleep(0.2)
        running = night.poll() is None
        if running:
            night.send_signal(2)
        out, _ = night.communicate(timeout=90)
    assert running, out[-3000:]
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert events[1]["event"] == "exit" and "529" in events[1]["error"]
    assert events[2]["event"] == "resume"
    assert not any(e.get("permanent") for e in events)


def test_claude_missing_is_one_line(tmp_path, research_repo):
    env = _logged_out(tmp_path)
    (tmp_path / "bin" / "claude").unlink()
    init_in_shell(research_repo, env)
    done, took = _night(research_repo, env)
    assert done.returncode == 3
    line = _one_line(done)
    assert "`claude` (Claude Code) is not on PATH" in line and "npm install" in line
    assert took < PREFLIGHT_LIMIT_S
    _nothing_started(research_repo, env)


def test_no_sandbox_is_refused_before_it_detaches(tmp_path, research_repo):
    """Claude Code's Bash sandbox on Linux needs bubblewrap and socat: a PATH without them is refused."""
    require_tool(CLAUDE, HINT)
    if sys.platform != "linux":
        pytest.skip("bubblewrap and socat are what Claude Code's sandbox needs on Linux")
    env = night_env(tmp_path, "http://127.0.0.1:9")
    init_in_shell(research_repo, env)
    # Only what the night itself needs on PATH: claude, python3, git.
    bindir = tmp_path / "bin"
    for tool in ("git", "tmux"):
        found = shutil.which(tool)
        if found:
            (bindir / tool).symlink_to(found)
    env["PATH"] = os.pathsep.join([str(bindir), os.path.dirname(sys.executable)])
    done, took = _night(research_repo, env)
    assert done.returncode == 3, done.stdout + done.stderr
    line = _one_line(done)
    assert "bubblewrap" in line and "socat" in line and "apt-get install" in line, line
    assert took < PREFLIGHT_LIMIT_S
    _nothing_started(research_repo, env)
