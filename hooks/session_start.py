#!/usr/bin/env python3
"""SessionStart hook: give a fresh context the state of the research session.

After a resume, a compaction or /clear the agent has lost what it knew; at a plain start-up
it only needs the state when a research session is active in this repo. In those cases the
output of `autoresearch brief` goes in as additionalContext, with what to do next.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hooklib  # noqa: E402

ALWAYS = {"resume", "compact", "clear"}


def context(brief_text, state, session_id):
    active = bool(state.get("active"))
    owner = state.get("owner_session")
    if not active:
        head = ("autoresearch: this is a research repo; its session is stopped. Run `autoresearch resume` "
                "to reopen it, or `autoresearch status` to review.")
    elif state.get("iterations_left") == 0:
        head = ("autoresearch: the research session here has spent its iteration budget; the loop is over. "
                "Report the results (`autoresearch status`, `autoresearch report -o report.html`) instead of "
                "running more experiments.")
    elif state.get("budget_spent"):
        head = (f"autoresearch: the research session here is over: {state['budget_spent']}. Report the results "
                "(`autoresearch status`, `autoresearch report -o report.html`) instead of running more "
                "experiments.")
    elif owner and owner == session_id:
        left = state.get("iterations_left")
        budget = "no iteration limit" if left is None else f"{left} iteration(s) left"
        head = (f"autoresearch: you own the active research session here ({budget}). Continue the loop: edit "
                "only the files in scope, run `autoresearch run -m \"<change and why>\"`, repeat. The engine "
                "decides keep or discard; never edit the fixed files or autoresearch.jsonl.")
    elif not owner:
        head = ("autoresearch: a research session is active here but no Claude Code session owns it (it was "
                "set up outside Claude Code). Run `autoresearch resume` to make this session the owner; the "
                "Stop hook then keeps it experimenting.")
    else:
        head = ("autoresearch: a research session is active here, owned by another Claude Code session. "
                "Run `autoresearch resume` to take it over in this session (the Stop hook then keeps this "
                "session looping), or leave it alone.")
    return f"{head}\n\n{brief_text}" if brief_text else head


def handle(data):
    source = hooklib.text_field(data, "source") or "startup"
    repo = hooklib.repo_for_session(data)
    if repo is None:
        return
    state, brief_text = hooklib.state_and_brief(repo)
    if source not in ALWAYS and not state.get("active"):
        return  # a plain start in a stopped repo: stay quiet
    text = context(brief_text, state, hooklib.text_field(data, "session_id"))
    hooklib.answer({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}})


if __name__ == "__main__":
    sys.exit(hooklib.main(handle))
