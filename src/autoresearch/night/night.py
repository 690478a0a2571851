"""`autoresearch night`: one command for the night.

Run in a research repo after `init`. It starts Claude Code headless (`claude -p`) with what an
unattended loop needs: the Stop hook's block cap off (CLAUDE_CODE_STOP_HOOK_BLOCK_CAP=0), Bash
timeouts above the run timeout, `--permission-mode acceptEdits` and an allow-list of the loop's
commands (never a permission bypass, so it works the same as root), and a first prompt that
starts or continues the loop. Its Claude Code session is made the owner of the research
session (it starts with `--session-id`), so `init` can be run before it in a plain shell.

When Claude Code exits while the research session is active and budget is left, `night`
resumes the same session (`--resume`, history intact) after a wait: `--backoff` seconds,
doubled after each exit that recorded no new run (up to 30 minutes), and at least until a
rate limit's stated reset time. It ends when the session is stopped, a budget is spent
(iterations, time, GPU-hours, cost) or the deadline (`--hours`) passes, and says why; at once,
with the fix, on an API error that waiting will not heal (not logged in, a refused key, a spent
credit balance: night_checks.py). Before it starts (or detaches) it checks what would make the
whole night fail (Claude Code's login, the agent's sandbox, the repo's baseline set-up) and
refuses with one line and the fix. Every start, exit, resume and end goes to
.autoresearch/night.jsonl.

Outside tmux it starts itself in a detached tmux session and says how to attach; inside tmux,
or with `--foreground`, it runs in the current terminal. Ctrl-C (or SIGTERM) interrupts Claude
Code, waits for the engine to record the run in progress, and ends the night.
"""

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid

import autoresearch
from autoresearch import agent_sandbox, errors, launch, output
from autoresearch.night import night_checks
from autoresearch.store import ledger, night_log, research, state
from autoresearch.store.research import now_ms

MAX_BACKOFF_S = 1800.0
DEFAULT_BACKOFF_S = 60.0
STOP_GRACE_S = 20.0          # after forwarding Ctrl-C, before SIGTERM; as long again before SIGKILL
SETTLE_S = 60.0              # how long an engine still recording its run is waited for
ALLOWED_TOOLS = ["Bash(autoresearch *)", "Bash(git *)", "Bash(uv *)", "Bash(nvidia-smi *)", "Bash(sleep *)",
                 "Bash(cat *)", "Bash(ls *)", "Bash(tail *)", "Bash(head *)", "Bash(grep *)",
                 "Read", "Edit", "Write", "Glob", "Grep"]
# Claude Code arguments `night` sets itself, and those that would bypass the permission checks.
OWN_ARGS = {"-p", "--print", "--session-id", "--resume", "-r", "--continue", "-c", "--output-format",
            "--fork-session"}
BYPASS_ARGS = {"--dangerously-skip-permissions", "--allow-dangerously-skip-permissions"}

START_PROMPT = ("You own the autoresearch session in this repository. Start the research loop: record the baseline "
                "with `autoresearch run -m \"baseline\"` (the set-up that needs the network or the GPU is done: "
                "your Bash runs in a sandbox without them), "
                "then keep going on your own: edit only the files in scope, run "
                "`autoresearch run -m \"<what you changed and why>\"` in the foreground, read the verdict, note what "
                "you learned in autoresearch.md, next idea. Do not stop and do not ask: the Stop hook says when the "
                "budget is spent.")
CONTINUE_PROMPT = ("Continue the autoresearch loop in this repository where it stands (`autoresearch brief` shows "
                   "the state): edit only the files in scope, run `autoresearch run -m \"<what you changed and "
                   "why>\"`, read the verdict, next idea. Do not stop and do not ask.")

EXAMPLES = """examples:
  autoresearch night --hours 8 --max-cost 25
  autoresearch night --foreground --backoff 10 -- --model claude-sonnet-5-5
  tmux attach -t autoresearch-night-<repo>       (watch a night started outside tmux)
"""


def add_parsers(sub):
    p = sub.add_parser("night", help="run the loop all night in Claude Code: start, resume after errors, stop "
                                     "at the budget", description=__doc__, epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hours", "--max-hours", dest="hours", type=_positive, metavar="H",
                   help="end the night H hours from now")
    p.add_argument("--max-cost", type=_positive, metavar="USD", help="end it when the agent's tokens cost USD")
    p.add_argument("--max-gpu-hours", type=_positive, metavar="G", help="end it when the runs held the GPU G hours")
    p.add_argument("--foreground", action="store_true", help="run in this terminal, without tmux")
    p.add_argument("--backoff", type=_positive, default=DEFAULT_BACKOFF_S, metavar="S",
                   help="seconds to wait before the first resume (default %(default)g; doubles after each exit "
                        f"without a new run, up to {MAX_BACKOFF_S:g})")
    p.add_argument("--prompt", metavar="TEXT", help="the first prompt (default: start or continue the loop)")
    p.add_argument("--no-agent-sandbox", action="store_true",
                   help="run without Claude Code's Bash sandbox where it cannot start (the PreToolUse hook is "
                        "then the only guard on the agent's side; references/trust-boundary.md)")
    p.add_argument("claude_args", nargs=argparse.REMAINDER, metavar="-- CLAUDE_ARGS",
                   help="more arguments for `claude`, after --")
    p.set_defaults(func=cmd_night)


def _positive(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text}")
    return value


def cmd_night(args):
    extra = list(args.claude_args or [])
    if extra and extra[0] == "--":
        extra = extra[1:]
    _check_claude_args(extra)
    repo = research.find()
    _refuse_if_over(repo)
    claude = shutil.which("claude")
    if claude is None:
        raise errors.Refused("`claude` (Claude Code) is not on PATH; install it (`npm install -g "
                          "@anthropic-ai/claude-code`) or add its folder to PATH, then run `autoresearch night` again")
    problem = agent_sandbox.agent_sandbox_problem()
    if problem and not args.no_agent_sandbox:
        raise errors.Refused(f"{problem}. `night` runs the agent in Claude Code's Bash sandbox; or start it with "
                          "`autoresearch night --no-agent-sandbox` (the PreToolUse hook is then the only guard "
                          "on the agent's side)")
    if state.is_locked(_lock_path(repo)):
        raise errors.Refused(f"a night is already running in {repo.root} (see {repo.rel(night_log.path(repo))}); "
                          "`autoresearch stop` ends it")
    # What would make the whole night fail, said here, in the person's terminal, before it detaches.
    _, config, runs, _ = research.load(repo, warn=lambda m: None)
    problem = night_checks.problems(repo, config, claude, len(runs))
    if problem:
        raise errors.Refused(problem)
    if not args.foreground and not os.environ.get("TMUX"):
        return _start_in_tmux(repo, args, extra)
    return Night(repo, claude, args, extra).run()


def _check_claude_args(extra):
    for arg in extra:
        name = arg.split("=", 1)[0]
        if name in BYPASS_ARGS or (name == "--permission-mode" and "bypassPermissions" in extra) \
                or arg == "--permission-mode=bypassPermissions":
            raise errors.UsageError(f"{arg}: `night` never bypasses permissions (also refused for root); it runs "
                                 "with acceptEdits and an allow-list, see references/overnight.md")
        if name in OWN_ARGS:
            raise errors.UsageError(f"{arg}: `night` sets this itself (it starts and resumes its own session)")


def _status(repo):
    from autoresearch.views import status  # noqa: PLC0415 - only when the night starts or resumes
    status.recover_if_needed(repo)
    return status.compute(repo, warn=lambda m: None)


def why_over(status, deadline_ms=None):
    """Why the night must end now, or None."""
    if not status.get("active"):
        return "the research session is stopped"
    if status.get("iterations_left") == 0:
        return f"the iteration budget is spent ({status['runs']} of {status['max_iterations']} runs)"
    if status.get("budget_spent"):
        return status["budget_spent"]
    if deadline_ms is not None and now_ms() >= deadline_ms:
        return "the night's deadline (--hours) passed"
    return None


def _refuse_if_over(repo):
    _, config, _, _ = research.load(repo, warn=output.warn)
    research.require_config(config)
    session = state.read_session(repo)
    if not state.is_active(session):
        reason = (session or {}).get("stop_reason")
        raise errors.Refused("the research session is stopped" + (f" ({reason})" if reason else "") +
                          "; `autoresearch resume` reopens it, then run `autoresearch night` again")
    over = why_over(_status(repo))
    if over:
        raise errors.Refused(f"{over}; nothing to do tonight (`autoresearch init` starts a new segment with a new budget)")


def _lock_path(repo):
    return os.path.join(repo.state, "night.lock")


# --------------------------------------------------------------------------- tmux

def tmux_name(repo):
    return "autoresearch-night-" + re.sub(r"[^A-Za-z0-9_-]", "-", os.path.basename(repo.root))[:40]


# XDG_STATE_HOME: the engine's state outside the repo (anchor.py) must be the person's own.
CARRIED = ("PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "VIRTUAL_ENV", "NO_PROXY", "no_proxy", "XDG_STATE_HOME")
CARRIED_PREFIXES = ("ANTHROPIC_", "CLAUDE_", "AUTORESEARCH_", "BASH_", "DISABLE_", "AWS_", "GOOGLE_", "VERTEX_",
                    "CLOUD_ML_", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "CUDA_", "UV_", "HF_")


def _carried_env():
    """What the night needs from this shell: a tmux server started earlier has its own
    environment (an old PATH, no API key), so these go into the window's command."""
    return {k: v for k, v in os.environ.items() if k in CARRIED or k.startswith(CARRIED_PREFIXES)}


def _start_in_tmux(repo, args, extra):
    tmux = shutil.which("tmux")
    if tmux is None:
        raise errors.Refused("tmux is not installed (a night must outlive your terminal); install it "
                          "(`apt-get install tmux`) or pass --foreground (under nohup or screen)")
    name = tmux_name(repo)
    if subprocess.run([tmux, "has-session", "-t", f"={name}"], capture_output=True).returncode == 0:
        raise errors.Refused(f"tmux session {name} exists already; attach with `tmux attach -t {name}` or end it")
    # Isolated (launch.py): the window's working folder is the research repo, and `python -m`
    # would put it first on sys.path (an `autoresearch/` folder there would run instead).
    argv = launch.engine_argv("night", "--foreground", "--backoff", f"{args.backoff:g}",
                              *(["--no-agent-sandbox"] if args.no_agent_sandbox else []))
    for flag, value in (("--hours", args.hours), ("--max-cost", args.max_cost),
                        ("--max-gpu-hours", args.max_gpu_hours), ("--prompt", args.prompt)):
        if value is not None:
            argv += [flag, value if isinstance(value, str) else f"{value:g}"]
    argv += ["--", *extra]
    src = autoresearch.SRC_DIR
    env = dict(_carried_env(), PYTHONPATH=os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p))
    shell = (f"env {' '.join(shlex.quote(f'{k}={v}') for k, v in sorted(env.items()))} {shlex.join(argv)}; "
             "code=$?; echo \"autoresearch night ended (exit $code); press Enter to close this window\"; read _")
    subprocess.run([tmux, "new-session", "-d", "-s", name, "-c", repo.root, shell], check=True)
    print(f"autoresearch: the night runs in tmux session {name}\n"
          f"  watch it:  tmux attach -t {name}   (detach again with Ctrl-b d)\n"
          f"  its log:   {repo.rel(night_log.path(repo))} (also in `autoresearch status`)\n"
          "  end it:    autoresearch stop", flush=True)
    return errors.EXIT_OK


# --------------------------------------------------------------------------- the night

class Outcome:
    """What one Claude Code invocation ended with, read from its stream-json output."""

    def __init__(self):
        self.result = None        # the final `result` event
        self.error = None         # the API error text Claude Code ended on
        self.reset_ms = None      # a rate limit's stated reset time (epoch ms)
        self.retry_ms = None      # the wait the API asked for (retry-after), from the last retry
        self.kind = None          # what kind of API error Claude Code named (authentication_failed, billing_error, ...)


class Night:
    def __init__(self, repo, claude, args, extra):
        self.repo, self.claude, self.args, self.extra = repo, claude, args, extra
        self.id = uuid.uuid4().hex[:12]
        self.session = str(uuid.uuid4())
        self.deadline_ms = now_ms() + int(args.hours * 3.6e6) if args.hours else None
        self.stopping = None
        self.child = None
        self.stream_dir = os.path.join(repo.state, "night")

    # --- signals: Ctrl-C and SIGTERM end the night, after Claude Code and the run in progress

    def _on_signal(self, signum, frame):
        first = self.stopping is None
        self.stopping = signal.Signals(signum).name
        if first:
            print(f"\nautoresearch: {self.stopping}: ending the night (waiting for Claude Code and the run "
                  "in progress to finish recording)", file=sys.stderr, flush=True)
        self._signal_child(signal.SIGINT)

    def _signal_child(self, sig):
        if self.child is not None and self.child.poll() is None:
            try:
                os.killpg(self.child.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def run(self):
        lock = state.Lock(_lock_path(self.repo))
        if not lock.acquire():
            raise errors.Refused(f"a night is already running in {self.repo.root}")
        saved = errors.trap((signal.SIGINT, signal.SIGTERM, signal.SIGHUP), self._on_signal)
        try:
            return self._loop()
        finally:
            errors.restore(saved)
            lock.release()

    def _limits(self):
        return {k: v for k, v in (("deadline_ms", self.deadline_ms), ("max_cost", self.args.max_cost),
                                  ("max_gpu_hours", self.args.max_gpu_hours)) if v is not None}

    def _loop(self):
        repo = self.repo
        state.write_session(repo, owner_session=self.session, night=dict(self._limits(), id=self.id, pid=os.getpid()))
        ledger.register(repo, self.session)
        status = _status(repo)
        night_log.append(repo, "start", night=self.id, session=self.session, pid=os.getpid(), claude=self.claude,
                         limits=self._limits(), runs=status["total_runs"], args=self.extra)
        self._say(f"night {self.id}: Claude Code session {self.session} owns the research session; "
                  f"{self._budget_text(status)}")
        if self.args.no_agent_sandbox:
            output.warn("the agent runs WITHOUT Claude Code's Bash sandbox (--no-agent-sandbox): the PreToolUse "
                        "hook is the only guard on the agent's side, and it cannot see what a program does "
                        "(references/hooks.md)")
        else:
            self._say(agent_sandbox.mode_line(None))
        prompt = self.args.prompt or (START_PROMPT if status["runs"] == 0 else CONTINUE_PROMPT)
        failures, resumes = 0, 0
        while True:
            before = status["total_runs"]
            started = time.monotonic()
            outcome, rc = self._claude(prompt, resume=resumes > 0)
            self._settle()
            status = _status(repo)
            new = status["total_runs"] - before
            night_log.append(repo, "exit", night=self.id, session=self.session, rc=rc, runs=new,
                             error=outcome.error, reset_at=outcome.reset_ms,
                             duration_s=round(time.monotonic() - started, 3),
                             cost_usd=(outcome.result or {}).get("total_cost_usd"))
            if self.stopping:
                return self._end(f"interrupted by {self.stopping}", 130)
            over = why_over(status, self.deadline_ms)
            if over:
                return self._end(over, errors.EXIT_OK)
            permanent = night_checks.permanent(outcome.kind, outcome.error) if outcome.error else None
            if permanent:   # waiting would not heal it: end now, with the fix where the person looks
                why, fix = permanent
                return self._end(f"{why}: {fix}", errors.EXIT_REFUSED, fix=fix, permanent=True)
            failures = 0 if new and not outcome.error else failures + 1
            wait, why = self._wait_for(outcome, failures, new)
            if self.deadline_ms is not None and now_ms() + wait * 1000 >= self.deadline_ms:
                return self._end(f"the night's deadline (--hours) comes before the next try ({why})", errors.EXIT_OK)
            self._say(f"Claude Code exited (rc {rc}, {new} new run(s)"
                      + (f", {outcome.error}" if outcome.error else "") + f"); resuming in {wait:g} s: {why}")
            if not self._sleep(wait):
                return self._end(f"interrupted by {self.stopping}", 130)
            status = _status(repo)
            over = why_over(status, self.deadline_ms)
            if over:
                return self._end(over, errors.EXIT_OK)
            resumes += 1
            night_log.append(repo, "resume", night=self.id, session=self.session, attempt=resumes,
                             failures=failures, wait_s=round(wait, 3), why=why)
            prompt = CONTINUE_PROMPT

    def _wait_for(self, outcome, failures, new):
        base = self.args.backoff
        wait = min(MAX_BACKOFF_S, base * 2 ** max(0, failures - 1))
        why = (f"exit {failures} in a row without a new run" if failures else "Claude Code ended its turn")
        if outcome.error:
            error = outcome.error.rstrip(". ")
            why = error if error.lower().startswith("api error") else f"API error: {error}"
        reset = outcome.reset_ms
        if reset is None and outcome.retry_ms:
            reset = now_ms() + outcome.retry_ms
        if reset is not None and reset > now_ms():
            until = (reset - now_ms()) / 1000 + 1
            if until > wait:
                wait = round(until, 3)
                why += f"; the rate limit resets at {time.strftime('%H:%M:%S', time.localtime(reset / 1000))}"
        return wait, why

    def _sleep(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self.stopping:
                return False
            time.sleep(min(0.2, max(0.0, end - time.monotonic())))
        return not self.stopping

    def _end(self, reason, code, **extra):
        night_log.append(self.repo, "end", night=self.id, session=self.session, reason=reason, **extra)
        state.write_session(self.repo, night=None)   # the night's own limits end with it
        self._say(f"night {self.id} ended: {reason}")
        status = _status(self.repo)
        for line in ledger.text(status["ledger"]):
            self._say("  " + line)
        return code

    def _budget_text(self, status):
        left = status.get("iterations_left")
        parts = ["no iteration limit" if left is None else f"{left} iteration(s) left"]
        b = status.get("budgets") or {}
        if b.get("deadline_ms"):
            parts.append(f"until {time.strftime('%Y-%m-%d %H:%M', time.localtime(b['deadline_ms'] / 1000))}")
        if b.get("max_cost"):
            parts.append(f"${status['ledger']['agent']['cost_usd']:.2f} of ${b['max_cost']:.2f} spent")
        if b.get("max_gpu_hours"):
            parts.append(f"{status['ledger']['gpu_hours']:.2f} of {b['max_gpu_hours']:g} GPU-hours used")
        return ", ".join(parts)

    def _say(self, text):
        print(f"autoresearch: {text}", flush=True)

    # --- one Claude Code invocation

    def _env(self):
        _, config, _, _ = research.load(self.repo, warn=lambda m: None)
        repeats = max(2, int(getattr(config, "noise_runs", None) or 1))   # a baseline's repeats, a win's re-run
        run_s = (float(getattr(config, "timeout_s", None) or 600) * repeats
                 + float(getattr(config, "checks_timeout_s", None) or 0) + 300)
        bash_ms = str(int(max(run_s, 1200) * 1000))
        env = dict(os.environ)
        env["CLAUDE_CODE_STOP_HOOK_BLOCK_CAP"] = "0"
        for name in ("BASH_DEFAULT_TIMEOUT_MS", "BASH_MAX_TIMEOUT_MS"):
            current = env.get(name, "")
            if not (current.isdigit() and int(current) >= int(bash_ms)):
                env[name] = bash_ms
        return env

    def command(self, prompt, resume):
        return [self.claude, "-p", prompt, *(("--resume", self.session) if resume else ("--session-id", self.session)),
                "--permission-mode", "acceptEdits", "--allowedTools", *ALLOWED_TOOLS,
                *self._sandbox_settings(), "--output-format", "stream-json", "--verbose", *self.extra]

    def _sandbox_settings(self):
        """The boundary, from the log's config as it is now, passed on the command line: settings
        given there outrank every settings file in the repo (references/trust-boundary.md)."""
        if self.args.no_agent_sandbox:
            return []
        _, config, _, _ = research.load(self.repo, warn=lambda m: None)
        fixed = list(getattr(config, "fixed", None) or [])
        return ["--settings", json.dumps(agent_sandbox.settings_for(self.repo.root, fixed))]

    def _claude(self, prompt, resume):
        os.makedirs(self.stream_dir, exist_ok=True)
        if not resume:
            self._say(f"starting Claude Code: {shlex.join(self.command(prompt, resume)[:1] + ['-p', '…'])} "
                      f"--session-id {self.session} …")
        outcome = Outcome()
        started_ms = now_ms()
        with open(os.path.join(self.stream_dir, f"{self.session}.stream.jsonl"), "ab") as raw:
            self.child = subprocess.Popen(self.command(prompt, resume), cwd=self.repo.root, env=self._env(),
                                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True)
            if self.stopping:
                self._signal_child(signal.SIGINT)
            reader = threading.Thread(target=self._read, args=(self.child.stdout, raw, outcome), daemon=True)
            reader.start()
            rc = self._wait_child()
            reader.join(timeout=10)
        self.child = None
        if outcome.error and outcome.reset_ms is None:
            outcome.reset_ms = self._reset_from_transcript(started_ms)
        return outcome, rc

    def _wait_child(self):
        escalated = None
        while True:
            try:
                return self.child.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
            if self.stopping:
                escalated = escalated or time.monotonic()
                waited = time.monotonic() - escalated
                if waited > 2 * STOP_GRACE_S:
                    self._signal_child(signal.SIGKILL)
                elif waited > STOP_GRACE_S:
                    self._signal_child(signal.SIGTERM)

    def _read(self, stream, raw, outcome):
        for line in stream:
            raw.write(line)
            raw.flush()
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                self._show(event, outcome)

    def _show(self, e, outcome):
        kind = e.get("type")
        if kind == "assistant":
            message = e.get("message") or {}
            for block in message.get("content") or []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text" and block.get("text", "").strip():
                    text = " ".join(block["text"].split())
                    if message.get("model") == "<synthetic>":
                        outcome.error = text[:300]
                        outcome.kind = e.get("error") if isinstance(e.get("error"), str) else outcome.kind
                    print(f"claude: {text[:400]}", flush=True)
                elif block.get("type") == "tool_use":
                    shown = (block.get("input") or {}).get("command") or (block.get("input") or {}).get("file_path")
                    print(f"claude ▸ {block.get('name')}: {str(shown or '')[:300]}", flush=True)
        elif kind == "system" and e.get("subtype") == "api_retry":
            outcome.retry_ms = e.get("retry_delay_ms") if isinstance(e.get("retry_delay_ms"), (int, float)) else None
            print(f"claude: API error {e.get('error_status')} ({e.get('error')}); Claude Code retries in "
                  f"{(outcome.retry_ms or 0) / 1000:.0f} s (attempt {e.get('attempt')} of {e.get('max_retries')})",
                  flush=True)
        elif kind == "rate_limit_event":
            info = e.get("rate_limit_info") or {}
            if info.get("status") == "rejected" and isinstance(info.get("resetsAt"), (int, float)):
                outcome.reset_ms = int(info["resetsAt"] * 1000)
        elif kind == "result":
            outcome.result = e
            if e.get("is_error") and not outcome.error:
                outcome.error = " ".join(str(e.get("result") or e.get("subtype") or "error").split())[:300]

    def _reset_from_transcript(self, since_ms):
        """The latest rate-limit reset time Claude Code recorded for this session's API errors."""
        latest = None
        for path in ledger.transcript_files(self.session)[:1]:
            try:
                with open(path, "rb") as f:
                    lines = [line for line in f if b'"api_error"' in line]
            except OSError:
                continue
            for line in lines:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                error = entry.get("error") if isinstance(entry.get("error"), dict) else {}
                limits = error.get("rateLimits") if isinstance(error.get("rateLimits"), dict) else {}
                reset = limits.get("resetsAt")
                if isinstance(reset, (int, float)) and ledger.timestamp_ms(entry.get("timestamp")) >= since_ms:
                    latest = max(latest or 0, int(reset * 1000))
        return latest

    def _settle(self):
        """After Claude Code exits: let a run still recording finish, and record a dead one as a crash."""
        end = time.monotonic() + SETTLE_S
        while state.is_locked(self.repo.lock) and time.monotonic() < end:
            time.sleep(0.2)
        if state.is_locked(self.repo.lock):
            self._say("a run is still going after Claude Code exited; it records itself when it ends")
