"""`autoresearch night` with the real Claude Code CLI against a scripted API on loopback.

The contract as a user runs it: `autoresearch init` in a plain shell, then
`autoresearch night --foreground --backoff 1 -- --plugin-dir <plugin>` with `claude` on PATH.
Mid-night the API fails: first an overload (529) until the session gives up, then, after
`night` resumes it, a usage limit (429 with retry-after and a reset time); both heal by waiting
(the errors that do not end the night at once: test_night_checks.py). `night` must
resume the same session each time (its history intact), wait out the reset, let the loop go on,
log every start, exit and resume, and end at the iteration budget. The ledger's token figures
must equal the usage in the session's transcript.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import ROOT, SRC, require_tool
from mock_messages_api import APIError, MessagesAPI, blocks_of, is_agent_request, text_of
from gitrepo import git_repo

CLAUDE = os.environ.get("CLAUDE_BIN", str(ROOT / ".tools" / "node_modules" / ".bin" / "claude"))
HINT = "run `make tools` (scripts/install-test-tools.sh) or set CLAUDE_BIN"
BUDGET = 3
START_MARK = "Start the research loop"              # night's first prompt
RESUME_MARK = "Continue the autoresearch loop"      # night's prompt when it resumes the session
STOP_MARK = "the research session is still active"  # the Stop hook's reason
RESET_S = 12.0                                      # the usage limit resets this long after it hits
TRAIN_PY = 'import time\nOFFSET = 1.0\nSLEEP = 0\ntime.sleep(SLEEP)\nprint(f"METRIC loss={2.0 + OFFSET:.4f}")\n'
PREPARE_PY = "EVAL = 'fixed'\n"


def offset_for(experiment):
    return round(1.0 - 0.25 * experiment, 2)


def bash(command):
    return [{"type": "tool_use", "name": "Bash", "input": {"command": command, "description": command[:40]}}]


def runs_in(repo):
    try:
        lines = (repo / "autoresearch.jsonl").read_text().splitlines()
    except FileNotFoundError:
        return []
    return [r for r in map(json.loads, filter(None, lines)) if "run" in r]


class Outage:
    """When the API fails: from the first Stop-hook continuation after two runs, "overloaded" (529)
    until `night` resumes the session; then a usage limit until RESET_S after it began."""

    def __init__(self, repo):
        self.repo, self.phase, self.reset_at, self.lock = repo, "ok", None, threading.Lock()
        self.phases = []   # (phase, time) as they began
        self.served = {"529": 0, "429": 0}

    def _enter(self, phase):
        self.phase = phase
        self.phases.append((phase, time.time()))

    def error_for(self, body, trigger):
        with self.lock:
            if self.phase == "ok" and self.reset_at is None and STOP_MARK in trigger \
                    and len(runs_in(self.repo)) == 2:
                self._enter("529")
            elif self.phase == "529" and RESUME_MARK in trigger:
                self._enter("429")
                self.reset_at = time.time() + RESET_S
            elif self.phase == "429" and time.time() >= self.reset_at:
                self._enter("ok")
            if self.phase in self.served:
                self.served[self.phase] += 1
            if self.phase == "529":
                return APIError(529, "overloaded_error", "Overloaded")
            if self.phase == "429":
                return APIError(429, "rate_limit_error", "This request would exceed your account's rate limit.",
                                {"retry-after": "1", "anthropic-ratelimit-unified-status": "rejected",
                                 "anthropic-ratelimit-unified-reset": str(int(self.reset_at)),
                                 "anthropic-ratelimit-unified-representative-claim": "five_hour"})
            return None


def researcher(repo, outage=None, slow_second=False):
    """The scripted model: the baseline, then one experiment (read, edit, run) per continuation."""

    def plan_for(trigger):
        if START_MARK in trigger:
            return [bash('autoresearch run -m "baseline"'), [{"type": "text", "text": "Baseline recorded."}]]
        if STOP_MARK in trigger or RESUME_MARK in trigger:
            k = len(runs_in(repo))
            lines = (repo / "train.py").read_text().splitlines()
            current = "\n".join(line for line in lines if line.startswith(("OFFSET", "SLEEP")))
            sleep = 30 if slow_second and k == 1 else 0
            return [[{"type": "tool_use", "name": "Read", "input": {"file_path": str(repo / "train.py")}}],
                    [{"type": "tool_use", "name": "Edit", "input": {
                        "file_path": str(repo / "train.py"), "old_string": current,
                        "new_string": f"OFFSET = {offset_for(k)}\nSLEEP = {sleep}"}}],
                    bash(f'autoresearch run -m "offset {offset_for(k)}"'),
                    [{"type": "text", "text": f"Experiment {k} recorded."}]]
        return [[{"type": "text", "text": "Nothing to do."}]]

    def script(body):
        if not is_agent_request(body):
            return [{"type": "text", "text": "autoresearch night"}]
        messages = body["messages"]
        # Prompts come as user messages (a prompt after an interrupted turn joins the tool result
        # before it), the hooks' words (the Stop hook's reason) as system messages.
        triggers = [i for i, m in enumerate(messages) if m.get("role") in ("user", "system")
                    and any(mark in prompt_text(m) for mark in (START_MARK, RESUME_MARK, STOP_MARK))]
        last = triggers[-1]
        trigger = prompt_text(messages[last])
        if outage is not None:
            error = outage.error_for(body, trigger)
            if error is not None:
                return error
        step = sum(m.get("role") == "assistant" for m in messages[last:])
        plan = plan_for(trigger)
        return plan[min(step, len(plan) - 1)]

    return script


def prompt_text(message):
    """The text blocks of a message, not what tools returned."""
    return "\n".join(b.get("text", "") for b in blocks_of(message) if b.get("type") == "text")


def billed(body):
    """Each answer bills different figures, so a double count or a missed answer shows."""
    n = len(body.get("messages") or [])
    return {"input_tokens": 3000 + n, "output_tokens": 400 + n, "cache_read_input_tokens": 20000 + n,
            "cache_creation_input_tokens": 1000 + n}


def night_env(tmp_path, api_url):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "ANTHROPIC", "AUTORESEARCH", "TMUX"))}
    home, bindir = tmp_path / "home", tmp_path / "bin"
    home.mkdir(exist_ok=True)
    bindir.mkdir(exist_ok=True)
    if not (bindir / "claude").exists():
        (bindir / "claude").symlink_to(os.path.realpath(CLAUDE))
    env.update({
        "HOME": str(home), "ANTHROPIC_BASE_URL": api_url, "ANTHROPIC_API_KEY": "sk-ant-dummy-key-for-the-loopback-mock",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1",
        "CLAUDE_CODE_MAX_RETRIES": "1",   # Claude Code's own retries: one, so an outage ends a turn quickly
        "PYTHONPATH": str(SRC),
        # `claude` is found on PATH (not in .tools); hooks and the engine run with this python3.
        "PATH": os.pathsep.join([str(bindir), os.path.dirname(sys.executable), "/usr/bin", "/bin"]),
    })
    return env


def autoresearch(args, repo, env, **kw):
    return subprocess.run([sys.executable, "-m", "autoresearch", *args], cwd=repo, env=env, capture_output=True,
                          text=True, **kw)


@pytest.fixture
def research_repo(tmp_path):
    repo = tmp_path / "research"
    repo.mkdir()
    (repo / "train.py").write_text(TRAIN_PY)
    (repo / "prepare.py").write_text(PREPARE_PY)
    git_repo(repo, {}, message="a tiny research repo")
    return repo


def init_in_shell(repo, env, *extra):
    proc = autoresearch(["init", "--metric", "loss", "--command", "python3 train.py", "--scope", "train.py",
                         "--fixed", "prepare.py", "--timeout", "60", "--max-iterations", str(BUDGET), *extra], repo, env)
    assert proc.returncode == 0, proc.stderr


def transcript_usage(path):
    """The usage in a transcript, summed independently of the ledger: one count per message id."""
    seen = {}
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        message = entry.get("message") if entry.get("type") == "assistant" else None
        if message and message.get("model") != "<synthetic>" and not entry.get("isApiErrorMessage"):
            seen[message["id"]] = message["usage"]
    keys = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    return len(seen), {k: sum(u.get(k, 0) for u in seen.values()) for k in keys}


def tokens_by_run(path, runs):
    """All tokens of the answers between one run's record and the one before, from the transcript."""
    from datetime import datetime
    first = {}
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        message = entry.get("message") if entry.get("type") == "assistant" else None
        if message and message.get("model") != "<synthetic>" and message["id"] not in first:
            ms = datetime.fromisoformat(entry["timestamp"].replace("Z", "+00:00")).timestamp() * 1000
            u = message["usage"]
            first[message["id"]] = (ms, sum(u.get(k, 0) for k in ("input_tokens", "output_tokens",
                                                                   "cache_read_input_tokens",
                                                                   "cache_creation_input_tokens")))
    bounds = [r["timestamp"] for r in runs]
    return [sum(t for ms, t in first.values() if (i == 0 or ms > bounds[i - 1]) and ms <= bounds[i])
            for i in range(len(runs))]


def test_night_survives_api_errors_and_ends_at_the_budget(tmp_path, research_repo):
    require_tool(CLAUDE, HINT)
    repo = research_repo
    outage = Outage(repo)
    with MessagesAPI(researcher(repo, outage), usage=billed, record_path=tmp_path / "requests.jsonl") as api:
        env = night_env(tmp_path, api.url)
        init_in_shell(repo, env)
        started = time.time()
        night = autoresearch(["night", "--foreground", "--backoff", "1", "--", "--plugin-dir", str(ROOT)],
                             repo, env, timeout=int(os.environ.get("NIGHT_TEST_TIMEOUT", "400")))
        took = time.time() - started
        assert not api.errors
    assert night.returncode == 0, night.stdout[-3000:] + night.stderr[-3000:]
    assert "the iteration budget is spent (3 of 3 runs)" in night.stdout

    # The loop went on to the budget through both outages.
    runs = runs_in(repo)
    assert [r["run"] for r in runs] == [1, 2, 3] and [r["status"] for r in runs] == ["keep"] * 3
    assert [p for p, _ in outage.phases] == ["529", "429", "ok"]

    # One Claude Code session throughout, started by night and owning the research session.
    events = [json.loads(line) for line in (repo / ".autoresearch" / "night.jsonl").read_text().splitlines()]
    kinds = [e["event"] for e in events]
    sid = events[0]["session"]
    assert kinds == ["start", "exit", "resume", "exit", "resume", "exit", "end"], kinds
    assert {e["session"] for e in events} == {sid}
    assert json.loads((repo / ".autoresearch" / "session.json").read_text())["owner_session"] == sid
    exits = [e for e in events if e["event"] == "exit"]
    assert "529 overloaded" in exits[0]["error"].lower() and exits[0]["runs"] == 2
    assert "429" in exits[1]["error"] and exits[1]["runs"] == 0 and exits[1]["reset_at"] == int(outage.reset_at) * 1000
    assert exits[2]["error"] is None and exits[2]["runs"] == 1
    resumes = [e for e in events if e["event"] == "resume"]
    # the backoff (1 s), or Claude Code's own retry delay plus a second when that is longer
    assert 1 <= resumes[0]["wait_s"] < 5 and "overloaded" in resumes[0]["why"].lower()
    # The usage limit was waited out: the resume came after its reset, and no request before it.
    assert "rate limit resets at" in resumes[1]["why"]
    assert resumes[1]["timestamp"] >= int(outage.reset_at) * 1000
    assert events[-1]["reason"] == "the iteration budget is spent (3 of 3 runs)"

    # Each resume continued the same conversation: its first request carries the earlier history.
    agent = [b for b in api.requests if is_agent_request(b)]
    first_resumed = next(b for b in agent if any(RESUME_MARK in prompt_text(m) for m in b["messages"]))
    history = "\n".join(text_of(m) for m in first_resumed["messages"])
    assert START_MARK in history and "Baseline recorded." in history
    assert 'autoresearch run -m \\"offset 0.75\\"' in json.dumps(first_resumed["messages"])

    # What ends a session in Claude Code 2.1.332: an API error ends `claude -p` at once (exit 1, a
    # synthetic "API Error" answer, no Stop hook). The 529 and the 429 were each asked once plus Claude
    # Code's own retry (CLAUDE_CODE_MAX_RETRIES=1 here; 10 by default, honouring retry-after).
    assert outage.served == {"529": 2, "429": 2}
    assert [e["rc"] for e in exits] == [1, 1, 0]
    stream = (repo / ".autoresearch" / "night" / f"{sid}.stream.jsonl").read_text().splitlines()
    results = [e for e in map(json.loads, stream) if e.get("type") == "result"]
    assert [r["is_error"] for r in results] == [True, True, False]

    # The ledger: token figures equal the transcript's usage, exactly; cost per kept improvement shown.
    transcript = next((tmp_path / "home" / ".claude" / "projects").glob(f"*/{sid}.jsonl"))
    answers, usage = transcript_usage(transcript)
    served = [u for b, u in api.served if is_agent_request(b)]
    status = json.loads(autoresearch(["status", "--json"], repo, env).stdout)
    agent_usage = status["ledger"]["agent"]
    assert agent_usage["messages"] == answers == len(served)
    assert agent_usage["input_tokens"] == usage["input_tokens"] == sum(u["input_tokens"] for u in served)
    assert agent_usage["output_tokens"] == usage["output_tokens"] == sum(u["output_tokens"] for u in served)
    assert agent_usage["cache_read_tokens"] == usage["cache_read_input_tokens"]
    assert agent_usage["cache_write_tokens"] == usage["cache_creation_input_tokens"]
    expected = (usage["input_tokens"] * 4 + usage["output_tokens"] * 20 + usage["cache_read_input_tokens"] * 0.2
                + usage["cache_creation_input_tokens"] * 5) / 1e6       # claude-opus-5-5 list prices
    assert agent_usage["cost_usd"] == pytest.approx(expected, abs=1e-6)
    assert status["ledger"]["improvements"] == 2
    assert status["ledger"]["cost_per_improvement_usd"] == pytest.approx(expected / 2, abs=1e-6)
    text = autoresearch(["status"], repo, env).stdout
    assert f"cost per kept improvement: ${expected / 2:.2f}" in text
    assert "night: started" in text and "2 resume(s)" in text and "ended: the iteration budget is spent" in text
    report = json.loads(autoresearch(["report", "--json", "-o", str(tmp_path / "r.html")], repo, env).stdout)
    assert report["summary"]["ledger"]["cost_per_improvement_usd"] == pytest.approx(expected / 2, abs=1e-6)
    # Each run's share of the tokens, as the page carries them, from the transcript's timestamps.
    page = (tmp_path / "r.html").read_text()
    data = json.loads(page.split('id="report-data">', 1)[1].split("</script>", 1)[0])
    per_run = data["model"]["ledger"]["perRun"]
    shares = tokens_by_run(transcript, runs)
    assert [r["run"] for r in per_run] == [1, 2, 3] and all(shares)
    assert [r["tokens"] for r in per_run] == shares
    assert sum(shares) + status["ledger"]["since_last_run"]["tokens"] == agent_usage["tokens"]
    assert per_run[-1]["cumulative"] == pytest.approx(sum(r["cost"] for r in per_run))

    # The page in real Chromium: the cost panel with the figure, the cumulative cost curve, no errors.
    sys.path.insert(0, str(ROOT / "tests" / "report"))
    from report_browser import dump_dom, root_attributes
    dom, _ = dump_dom((tmp_path / "r.html").as_uri(), tmp_path / "profile")
    panel = dom[dom.index('id="cost-panel"'):dom.index('id="current-box"')]
    assert "hidden" not in panel[:40] and "cost per kept improvement" in panel
    assert f"${expected / 2:.2f}" in panel and "2 resume(s)" in panel and "resumed after" in panel
    assert "<canvas" in panel[panel.index('id="cost-curve"'):]
    assert root_attributes(dom).get("data-errors") in (None, "[]")
    print(f"night e2e: {took:.1f} s, {len(agent)} agent requests, {answers} billed answers")


def test_ctrl_c_ends_the_night_with_the_run_in_progress_recorded(tmp_path, research_repo):
    require_tool(CLAUDE, HINT)
    repo = research_repo
    with MessagesAPI(researcher(repo, slow_second=True)) as api:
        env = night_env(tmp_path, api.url)
        init_in_shell(repo, env)
        night = subprocess.Popen([sys.executable, "-m", "autoresearch", "night", "--foreground", "--backoff", "1",
                                  "--", "--plugin-dir", str(ROOT)], cwd=repo, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
        current = repo / ".autoresearch" / "current.json"
        deadline = time.time() + 120
        while time.time() < deadline and night.poll() is None:
            try:
                if json.loads(current.read_text()).get("phase") == "benchmark" and len(runs_in(repo)) == 1:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.2)
        assert night.poll() is None, night.stdout.read()
        interrupted = time.time()
        night.send_signal(signal.SIGINT)
        out, _ = night.communicate(timeout=120)
        took = time.time() - interrupted
    assert night.returncode == 130, out[-3000:]
    # The run in progress is recorded whole (as a crash: the engine was interrupted), nothing is left half-done.
    runs = runs_in(repo)
    assert [r["run"] for r in runs] == [1, 2] and runs[1]["status"] == "crash", runs
    assert "interrupted" in runs[1]["reason"]
    assert not current.exists()
    head = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], cwd=repo, capture_output=True, text=True).stdout
    assert head.strip() == runs[0]["commit"]
    events = [json.loads(line) for line in (repo / ".autoresearch" / "night.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events] == ["start", "exit", "end"]
    assert events[-1]["reason"] == "interrupted by SIGINT"
    assert took < 60, f"the night took {took:.0f} s to end after Ctrl-C"
    # A new night can start: the lock went with the process.
    status = json.loads(autoresearch(["status", "--json"], repo, env).stdout)
    assert status["running"] is None and status["active"]


def test_night_refuses_clearly(tmp_path, research_repo):
    env = night_env(tmp_path, "http://127.0.0.1:9")
    plain = tmp_path / "plain"
    plain.mkdir()
    proc = autoresearch(["night", "--foreground"], plain, env)
    assert proc.returncode == 3 and "is not in a git repository" in proc.stderr
    proc = autoresearch(["night", "--foreground"], research_repo, env)
    assert proc.returncode == 3 and "no autoresearch.jsonl" in proc.stderr and "init" in proc.stderr
    init_in_shell(research_repo, env)
    no_claude = dict(env, PATH=os.pathsep.join([os.path.dirname(sys.executable), "/usr/bin", "/bin"]))
    proc = autoresearch(["night", "--foreground"], research_repo, no_claude)
    assert proc.returncode == 3 and "`claude` (Claude Code) is not on PATH" in proc.stderr
    for bypass in (["--dangerously-skip-permissions"], ["--permission-mode", "bypassPermissions"]):
        proc = autoresearch(["night", "--foreground", "--", *bypass], research_repo, env)
        assert proc.returncode == 2 and "never bypasses permissions" in proc.stderr
    assert autoresearch(["stop", "--reason", "enough for today"], research_repo, env).returncode == 0
    proc = autoresearch(["night", "--foreground"], research_repo, env)
    assert proc.returncode == 3
    assert "the research session is stopped (enough for today); `autoresearch resume` reopens it" in proc.stderr
    assert not (research_repo / ".autoresearch" / "night.jsonl").exists()   # nothing started, nothing logged


def test_a_cost_budget_ends_the_night_and_refuses_the_next_run(tmp_path, research_repo):
    require_tool(CLAUDE, HINT)
    repo = research_repo
    prices = tmp_path / "prices.json"
    prices.write_text('{"claude-opus-5-5": {"input": 10, "output": 50}}')   # cache prices follow: 12.5, 20, 1
    with MessagesAPI(researcher(repo), usage=billed) as api:
        env = night_env(tmp_path, api.url)
        init_in_shell(repo, env, "--prices", str(prices), "--max-cost", "0.16")
        night = autoresearch(["night", "--foreground", "--backoff", "1", "--max-cost", "0.15", "--",
                              "--plugin-dir", str(ROOT)], repo, env, timeout=300)
    assert night.returncode == 0, night.stdout[-3000:]
    # Each answer costs about $0.083: the baseline ran, then the second answer spent the night's $0.15.
    assert [r["run"] for r in runs_in(repo)] == [1]
    served = [u for b, u in api.served if is_agent_request(b)]
    cost = sum(u["input_tokens"] * 10 + u["output_tokens"] * 50 + u["cache_read_input_tokens"] * 1.0
               + u["cache_creation_input_tokens"] * 12.5 for u in served) / 1e6
    events = [json.loads(line) for line in (repo / ".autoresearch" / "night.jsonl").read_text().splitlines()]
    assert events[-1]["reason"] == f"the cost budget is spent (${cost:.2f} of $0.15 on the agent's tokens)"
    assert [e["event"] for e in events] == ["start", "exit", "end"]
    # The night's own limit ended with it; init's $0.16 is spent too, and `run` says so.
    (repo / "train.py").write_text(TRAIN_PY.replace("OFFSET = 1.0", "OFFSET = 0.5"))
    proc = autoresearch(["run", "-m", "one more"], repo, env)
    assert proc.returncode == 3
    assert f"the cost budget is spent (${cost:.2f} of $0.16 on the agent's tokens)" in proc.stderr


def test_outside_tmux_night_starts_itself_in_tmux_and_says_how_to_attach(tmp_path, research_repo):
    require_tool(CLAUDE, HINT)
    tmux = require_tool("tmux", "install tmux (scripts/install-test-tools.sh)")
    repo = research_repo
    sockets = tmp_path / "tmux"          # a tmux server of this test's own
    sockets.mkdir()
    with MessagesAPI(researcher(repo)) as api:
        env = dict(night_env(tmp_path, api.url), TMUX_TMPDIR=str(sockets))
        init_in_shell(repo, env)
        try:
            proc = autoresearch(["night", "--backoff", "1", "--", "--plugin-dir", str(ROOT)], repo, env, timeout=60)
            assert proc.returncode == 0, proc.stderr
            assert "tmux attach -t autoresearch-night-research" in proc.stdout
            log = repo / ".autoresearch" / "night.jsonl"
            deadline = time.time() + 180
            while time.time() < deadline and '"event":"end"' not in (log.read_text() if log.exists() else ""):
                time.sleep(0.5)
            events = [json.loads(line) for line in log.read_text().splitlines()]
            assert events[-1]["event"] == "end" and "iteration budget is spent" in events[-1]["reason"]
            # The window prints its last lines just after the night log's end event: read it until
            # they are there (whole history, wrapped lines joined: the pane is 80 columns wide).
            wanted = ("ended: the iteration budget is spent", "autoresearch night ended (exit 0)")
            deadline = time.time() + 30
            while True:
                window = subprocess.run([tmux, "capture-pane", "-p", "-J", "-S", "-", "-t",
                                         "autoresearch-night-research"], env=env, capture_output=True, text=True).stdout
                if all(w in window for w in wanted) or time.time() > deadline:
                    break
                time.sleep(0.5)
            assert all(w in window for w in wanted), window
            again = autoresearch(["night", "--", "--plugin-dir", str(ROOT)], repo, env)
            assert again.returncode == 3   # the budget is spent: nothing to do, whatever the window holds
        finally:
            subprocess.run([tmux, "kill-server"], env=env, capture_output=True)
    assert [r["status"] for r in runs_in(repo)] == ["keep"] * BUDGET
