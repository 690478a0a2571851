"""What would make a whole night fail, checked before `night` starts (or detaches), and the
errors during the night that waiting will not heal.

Before: Claude Code on PATH, logged in or holding an API key (`claude auth status`: local and
offline, under a second), the agent's sandbox able to start, and the research repo ready to
record a baseline. Each problem is one line with the fix; `night` refuses with it (exit 3)
before it starts anything, so the person reads it in their own terminal.

During: Claude Code ends a turn on an API error with a synthetic answer whose `error` field
names its kind. Not logged in, a refused key and a spent credit balance stay so however long
the night waits: `night` ends at once with the fix (in the night log and `status`). Rate
limits, overload and network errors heal by waiting and are retried.
"""

import json
import os
import shlex
import shutil
import subprocess

AUTH_TIMEOUT_S = 4.0
AGAIN = "then run `autoresearch night` again"
LOGIN_FIX = ("log in: run `claude` in a terminal and type /login (a Claude subscription), or export "
             f"ANTHROPIC_API_KEY (an API key from console.anthropic.com); {AGAIN}")


def problems(repo, config, claude, runs_so_far):
    """The first problem that would make the night fail (one line with its fix), or None."""
    # The agent's sandbox is checked before these (agent_sandbox.agent_sandbox_problem, which
    # --no-agent-sandbox overrides), in cmd_night.
    for check in (lambda: auth_problem(claude), lambda: repo_problem(repo, config, runs_so_far)):
        problem = check()
        if problem:
            return problem
    return None


# --- Claude Code's login -----------------------------------------------------------------------

def auth_problem(claude):
    """Why Claude Code cannot call the API (not logged in, no key), or None.

    `claude auth status` (2.1.x) prints JSON with `loggedIn` and exits 1 when there is no login
    and no key; it reads local state only. An older CLI without the command, or one that does
    not answer in time, is not held against the night: the night's own first turn will tell."""
    try:
        done = subprocess.run([claude, "auth", "status", "--json"], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=AUTH_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    try:
        status = json.loads(done.stdout)
    except ValueError:
        return None
    if not isinstance(status, dict) or status.get("loggedIn") is not False:
        return None
    return f"Claude Code is not logged in and has no API key: {LOGIN_FIX}"


# --- the research repo -------------------------------------------------------------------------

def repo_problem(repo, config, runs_so_far):
    """Why the agent could not record a baseline here, or None. Only before the first run: once
    runs exist, the loop's own verdicts and next steps say what to do."""
    if runs_so_far:
        return None
    try:
        words = shlex.split(config.command or "")
    except ValueError:
        words = []
    if not words:
        return f"the benchmark command is empty; set it with `autoresearch init --command CMD ...`, {AGAIN}"
    program = words[0]
    local = os.path.join(repo.root, program)
    if not (shutil.which(program) or (os.sep in program and os.path.exists(local))):
        return (f"the benchmark command `{config.command}` cannot start: `{program}` is not on PATH or in the "
                f"repo; install it or fix the command (`autoresearch init --command ...`), {AGAIN}")
    if getattr(config, "template", None) == "ml" and not _prepared(repo) and shutil.which("uv") is None:
        return ("the ML template has no prepared data yet and `uv` is not on PATH, so the agent cannot set it up "
                "(it runs `uv sync` and `uv run prepare.py`); install uv, or prepare it yourself "
                f"(`python3 prepare.py --fit-baseline`), {AGAIN}")
    return None


def _prepared(repo):
    cache = os.environ.get("AUTORESEARCH_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "autoresearch")
    return os.path.exists(os.path.join(cache, "prepared", "manifest.json"))


# --- during the night ------------------------------------------------------------------------

# What Claude Code's synthetic answer names (its `error` field), and words of its text for a
# CLI that does not name it.
_LOGIN = ("not logged in",)
_KEY = ("invalid api key",)
_CREDIT = ("credit balance is too low",)


def permanent(kind, text):
    """(why, fix) when an API error will not heal by waiting; None when it may (rate limit,
    overload, network, a server error)."""
    lower = (text or "").lower()
    if any(w in lower for w in _CREDIT) or kind == "billing_error":
        return ("the API says the credit balance is too low",
                "add credits (console.anthropic.com, Plans & Billing) or log in with a Claude subscription "
                f"(`claude`, then /login); {AGAIN}")
    if any(w in lower for w in _LOGIN):
        return "Claude Code is not logged in", LOGIN_FIX
    if any(w in lower for w in _KEY):
        return ("the API refused the key (Invalid API key)",
                "set a valid ANTHROPIC_API_KEY (console.anthropic.com), or unset it and log in (`claude`, then "
                f"/login); {AGAIN}")
    if kind == "authentication_failed":
        return (f"Claude Code could not authenticate ({' '.join(str(text).split())[:160]})",
                "check the API key and its permissions (ANTHROPIC_API_KEY), or log in again (`claude`, then "
                f"/login); {AGAIN}")
    return None
