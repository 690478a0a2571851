"""The plugin in the real Claude Code CLI, end to end, with a scripted model on loopback.

`claude -p … --plugin-dir <repo root>` runs against mock_messages_api.MessagesAPI: the
"model" sets up autoresearch in a tiny research repo, records a baseline, tries to edit the
fixed prepare.py, and then, every time the plugin's Stop hook sends it back to work, edits
train.py and runs the next experiment. Nothing but the model is simulated: the CLI, its
permission checks, the plugin loader, the hooks, the engine, git and the benchmark are real.
"""

import json
import os
import re
import subprocess
import sys
import uuid

import pytest

from conftest import ROOT, require_tool
from mock_messages_api import MessagesAPI, has_tool_result, is_agent_request, text_of
from gitrepo import git_repo

CLAUDE = os.environ.get("CLAUDE_BIN", str(ROOT / ".tools" / "node_modules" / ".bin" / "claude"))
BUDGET = 3  # --max-iterations: the baseline and two experiments
SETUP_PROMPT = "Set up autoresearch on train.py: lower loss is better."
STATUS_PROMPT = "Where do we stand?"
CONTINUE_MARK = "the research session is still active"  # the Stop hook's reason
INIT = ('autoresearch init --metric loss --direction lower --command "python3 train.py" '
        f'--scope train.py --fixed prepare.py --timeout 60 --max-iterations {BUDGET}')

TRAIN_PY = """\
# A stand-in benchmark: the "training loss" is a constant the agent edits.
OFFSET = 1.0
print(f"METRIC loss={2.0 + OFFSET:.4f}")
"""
PREPARE_PY = "# The fixed harness: the agent must never change this file.\nEVAL = 'fixed'\n"


def offset_for(experiment):
    return round(1.0 - 0.25 * experiment, 2)


def bash(command, description):
    return [{"type": "tool_use", "name": "Bash", "input": {"command": command, "description": description}}]


def researcher(repo, idle=False):
    """The scripted model: a function of the conversation so far, like a real one.

    `idle`: after the baseline it only talks, never runs another experiment (a stuck loop).
    """

    def plan_for(trigger_text, experiment):
        if SETUP_PROMPT in trigger_text:
            return [bash(INIT, "start the research session"),
                    bash('autoresearch run -m "baseline"', "record the baseline"),
                    [{"type": "tool_use", "name": "Read", "input": {"file_path": str(repo / "prepare.py")}}],
                    [{"type": "tool_use", "name": "Edit", "input": {
                        "file_path": str(repo / "prepare.py"), "old_string": "EVAL = 'fixed'",
                        "new_string": "EVAL = 'easier'"}}],
                    [{"type": "text", "text": "Baseline recorded."}]]
        if CONTINUE_MARK in trigger_text and idle:
            return [[{"type": "text", "text": "I believe the work is complete."}]]
        if CONTINUE_MARK in trigger_text:
            value = offset_for(experiment)
            return [bash(f"sed -i 's/^OFFSET = .*/OFFSET = {value}/' train.py", "try a smaller offset"),
                    bash(f'autoresearch run -m "offset {value}"', "run the experiment"),
                    [{"type": "text", "text": f"Experiment {experiment} recorded."}]]
        return [[{"type": "text", "text": "The loop has finished its budget."}]]

    def script(body):
        if not is_agent_request(body):
            return [{"type": "text", "text": "autoresearch session"}]  # titles and other side calls
        messages = body["messages"]
        prompts = [i for i, m in enumerate(messages) if m.get("role") == "user" and not has_tool_result(m)
                   and (SETUP_PROMPT in text_of(m) or STATUS_PROMPT in text_of(m) or CONTINUE_MARK in text_of(m))]
        last = prompts[-1]
        experiment = sum(CONTINUE_MARK in text_of(messages[i]) for i in prompts)
        step = sum(m.get("role") == "assistant" for m in messages[last:])
        plan = plan_for(text_of(messages[last]), experiment)
        return plan[min(step, len(plan) - 1)]

    return script


def all_strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from all_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from all_strings(v)


def claude_env(tmp_path, api_url):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CLAUDE", "ANTHROPIC", "AUTORESEARCH"))}
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env.update({
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": api_url,
        "ANTHROPIC_API_KEY": "sk-ant-dummy-key-for-the-loopback-mock",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        # The hooks and the engine run with `python3`: make that the interpreter running the tests.
        "PATH": os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""),
    })
    return env


def run_claude(claude, prompt, repo, env, *extra):
    cmd = [claude, "-p", prompt, "--plugin-dir", str(ROOT), "--output-format", "stream-json", "--verbose",
           "--include-hook-events", "--allowedTools", "Bash", "Read", "Edit", *extra]
    proc = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=240)
    events = []
    for line in proc.stdout.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            pass
    return proc, events


def hook_responses(events, event_name):
    return [e for e in events if e.get("type") == "system" and e.get("subtype") == "hook_response"
            and e.get("hook_event") == event_name]


def read_log(repo):
    return [json.loads(line) for line in (repo / "autoresearch.jsonl").read_text().splitlines() if line.strip()]


@pytest.fixture
def research_repo(tmp_path):
    repo = tmp_path / "research"
    repo.mkdir()
    (repo / "train.py").write_text(TRAIN_PY)
    (repo / "prepare.py").write_text(PREPARE_PY)
    git_repo(repo, {}, message="a tiny research repo")
    return repo


def test_stop_hook_drives_the_loop_to_the_budget_in_the_real_cli(tmp_path, research_repo):
    claude = require_tool(CLAUDE, "run `make tools` (scripts/install-test-tools.sh) or set CLAUDE_BIN")
    repo = research_repo
    session = str(uuid.uuid4())
    with MessagesAPI(researcher(repo), record_path=tmp_path / "requests.jsonl") as api:
        env = claude_env(tmp_path, api.url)
        first, events = run_claude(claude, SETUP_PROMPT, repo, env, "--session-id", session)
        first_requests = [b for b in api.requests if is_agent_request(b)]
        assert not api.errors
        assert first.returncode == 0, first.stderr[-2000:]

        # The plugin loaded without errors.
        init = next(e for e in events if e.get("type") == "system" and e.get("subtype") == "init")
        assert any(str(p.get("name", p)).startswith("autoresearch") for p in init.get("plugins", [])), init
        assert not init.get("plugin_errors"), init.get("plugin_errors")

        # init ran inside the session, so this session owns the research.
        records = read_log(repo)
        header = records[0]
        assert header["type"] == "config" and header["owner_session"] == session

        # The log holds exactly BUDGET runs: the baseline and one per Stop-hook continuation.
        runs = [r for r in records if "run" in r]
        assert [r["run"] for r in runs] == list(range(1, BUDGET + 1))
        assert [r["status"] for r in runs] == ["keep"] * BUDGET
        assert [r["metric"] for r in runs] == [2.0 + offset_for(k) for k in range(BUDGET)]

        # The Stop hook blocked BUDGET - 1 times, then let the session end at the budget.
        stops = hook_responses(events, "Stop")
        assert len(stops) == BUDGET
        decisions = [json.loads(s["stdout"]) if s["stdout"].strip() else {} for s in stops]
        assert [d.get("decision") for d in decisions] == ["block"] * (BUDGET - 1) + [None]
        assert "iteration budget spent" in decisions[-1]["systemMessage"]
        continuations = [b for b in first_requests if CONTINUE_MARK in text_of(b["messages"][-1])]
        assert len(continuations) == BUDGET - 1
        # The reason the model got carries the brief state and the next command.
        reason = text_of(continuations[0]["messages"][-1])
        assert "(2 iteration(s) left)" in reason and 'autoresearch run -m "' in reason
        result = events[-1]
        assert result.get("type") == "result" and result.get("subtype") == "success", result

        # The edit of the fixed prepare.py was denied, with the reason, and the file is intact.
        denials = [text_of(m) for b in first_requests for m in b["messages"][-1:]
                   if has_tool_result(m) and "is a fixed file" in text_of(m)]
        assert denials and "prepare.py is a fixed file of the research repo" in denials[0]
        assert (repo / "prepare.py").read_text() == PREPARE_PY
        assert f"OFFSET = {offset_for(BUDGET - 1)}" in (repo / "train.py").read_text()

        # A resumed session starts with the brief in its context, and may stop: the budget is spent.
        before = len(api.requests)
        second, events2 = run_claude(claude, STATUS_PROMPT, repo, env, "--resume", session)
        assert second.returncode == 0, second.stderr[-2000:]
        resumed = [b for b in api.requests[before:] if is_agent_request(b)]
        assert len(resumed) == 1  # one answer, no Stop-hook continuation
        brief = subprocess.run([str(ROOT / "bin" / "autoresearch"), "brief"], cwd=repo, env=env,
                               capture_output=True, text=True, check=True).stdout.strip()
        context = "\n".join(all_strings(resumed[0]))
        assert brief and brief in context
        assert "spent its iteration budget" in context
        init2 = next(e for e in events2 if e.get("type") == "system" and e.get("subtype") == "init")
        assert init2["session_id"] == session  # --resume keeps the owner's id (references/overnight.md)

        # After a compaction the SessionStart hook hands the brief to the fresh context again.
        third, events3 = run_claude(claude, "/compact", repo, env, "--resume", session)
        assert third.returncode == 0, third.stderr[-2000:]
        compacts = [e for e in hook_responses(events3, "SessionStart") if e.get("hook_name") == "SessionStart:compact"]
        assert len(compacts) == 1 and compacts[0]["exit_code"] == 0
        assert brief in json.loads(compacts[0]["stdout"])["hookSpecificOutput"]["additionalContext"]
        assert not api.errors


def test_a_stuck_loop_is_let_go_after_three_blocks_in_the_real_cli(tmp_path, research_repo):
    claude = require_tool(CLAUDE, "run `make tools` (scripts/install-test-tools.sh) or set CLAUDE_BIN")
    repo = research_repo
    with MessagesAPI(researcher(repo, idle=True)) as api:
        proc, events = run_claude(claude, SETUP_PROMPT, repo, claude_env(tmp_path, api.url),
                                  "--session-id", str(uuid.uuid4()))
        assert not api.errors
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [r["run"] for r in read_log(repo) if "run" in r] == [1]  # the baseline only
    # Three blocks without a new run, then the hook lets the turn end (before Claude Code's own cap of 8).
    stops = [json.loads(s["stdout"]) for s in hook_responses(events, "Stop")]
    assert [d.get("decision") for d in stops] == ["block", "block", "block", None]
    assert "looks stuck" in stops[-1]["systemMessage"]
    assert "No new run was recorded since the last 2 stop(s)" in stops[2]["reason"]
    assert events[-1].get("subtype") == "success"


def version_check(body):
    """A model that asks for the engine's version once, then answers."""
    if not is_agent_request(body):
        return [{"type": "text", "text": "title"}]
    if not any(m.get("role") == "assistant" for m in body["messages"]):
        return bash("autoresearch --version", "check the engine")
    return [{"type": "text", "text": "done"}]


@pytest.mark.parametrize("skill,argument", [("autoresearch", "make the tests faster"),
                                            ("autoresearch-ml", "on my 4090, 8 hours")])
def test_a_skill_expands_with_its_links_and_pre_approves_the_engine(tmp_path, skill, argument):
    claude = require_tool(CLAUDE, "run `make tools` (scripts/install-test-tools.sh) or set CLAUDE_BIN")
    work = tmp_path / "work"
    work.mkdir()
    with MessagesAPI(version_check) as api:
        env = claude_env(tmp_path, api.url)
        cmd = [claude, "-p", f"/autoresearch:{skill} {argument}", "--plugin-dir", str(ROOT),
               "--output-format", "stream-json", "--verbose"]
        proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=120)
        control = subprocess.run([*cmd[:2], "check the engine version", *cmd[3:]], cwd=work, env=env,
                                 capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and control.returncode == 0, proc.stderr + control.stderr
    agent = [b for b in api.requests if is_agent_request(b)]
    expanded = "\n".join(text_of(m) for m in agent[0]["messages"])
    assert f"Base directory for this skill: {ROOT / 'skills' / skill}" in expanded
    assert argument in expanded  # $ARGUMENTS
    # Links to the shared references resolve to files that exist in the plugin.
    links = {str(ROOT / "references" / name) for name in ("overnight.md",)}
    assert all(link in expanded for link in links) and "${CLAUDE_PLUGIN_ROOT}" not in expanded
    assert (ROOT / "references" / "overnight.md").is_file()
    # The skill's allowed-tools let `autoresearch` run without a prompt; without the skill, -p refuses it.
    result = json.loads(proc.stdout.splitlines()[-1])
    control_result = json.loads(control.stdout.splitlines()[-1])
    assert result["permission_denials"] == []
    assert [d["tool_input"]["command"] for d in control_result["permission_denials"]] == ["autoresearch --version"]
    assert re.match(r"autoresearch \d", text_of(agent[1]["messages"][-1]))
