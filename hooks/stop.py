#!/usr/bin/env python3
"""Stop hook: keep the owner session running experiments until its budget is spent.

Blocks the stop (with the brief state and the next step as the reason) only when all hold:
the session's repo is a research repo, its session is active, the stopping session is the
one that ran `autoresearch init` (or `resume`), iterations are left, and the loop is not
stuck. Stuck means no new run was recorded across K consecutive blocks (K = 3, or env
AUTORESEARCH_STOP_STUCK_BLOCKS); the count lives in .autoresearch/stop-hook.json.

We keep our own count instead of trusting `stop_hook_active`: that flag stays true for
the whole chain of continuations, so it cannot tell a working loop from a stuck one.
"""

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hooklib  # noqa: E402

COUNTER_NAME = "stop-hook.json"
DEFAULT_STUCK_BLOCKS = 3


def stuck_limit():
    raw = os.environ.get("AUTORESEARCH_STOP_STUCK_BLOCKS", "")
    try:
        value = int(raw)
    except ValueError:
        if raw:
            hooklib.note(f"AUTORESEARCH_STOP_STUCK_BLOCKS={raw!r} is not an integer; using {DEFAULT_STUCK_BLOCKS}")
        return DEFAULT_STUCK_BLOCKS
    return max(value, 1)


def read_counter(path):
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_counter(path, data):
    """Write atomically, so a killed hook never leaves a half-written counter."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def blocks_without_progress(counter, session_id, total_runs):
    """Blocks already spent since the last new run of this session (0 after progress)."""
    if counter.get("session_id") != session_id or counter.get("total_runs") != total_runs:
        return 0
    blocks = counter.get("blocks")
    return blocks if isinstance(blocks, int) and blocks >= 0 else 0


def continue_reason(brief_text, state, blocks, limit):
    left = state.get("iterations_left")
    budget = "no iteration limit" if left is None else f"{left} iteration(s) left"
    lines = [
        f"autoresearch: the research session is still active ({budget}). Do not stop and do not ask the "
        "user anything; they expect you to keep experimenting on your own.",
        "",
        brief_text or "(`autoresearch brief` gave nothing; run `autoresearch status` to see the state.)",
        "",
        next_step(state),
    ]
    if blocks:
        lines += ["", f"No new run was recorded since the last {blocks} stop(s); after {limit} in a row this hook "
                      "lets the session end. If the loop truly cannot go on, write why in autoresearch.md and run "
                      "`autoresearch stop`."]
    return "\n".join(lines)


def next_step(state):
    pool = state.get("pool")
    if isinstance(pool, dict) and pool.get("up"):
        gpus, queued = pool.get("gpus") or 1, pool.get("queued") or 0
        return ("Next step (a pool is up, work in waves): write up to "
                f"{max(1, gpus - 1 - queued)} more diverse candidate(s), one idea each: edit only the files in "
                "scope, `autoresearch submit -m \"<what and why>\"` after each (the work tree goes back to the "
                f"best code); {queued} candidate(s) are queued. Then `autoresearch wait` and read the wave's "
                "verdicts; note what you learned in autoresearch.md.")
    return ("Next step: pick the most promising untried idea (autoresearch.ideas.md, or a new hypothesis from the "
            "results above), edit only the files in scope, then run "
            "`autoresearch run -m \"<what you changed and why>\"` in the foreground. The engine decides keep or "
            "discard; note what you learned in autoresearch.md.")


def waiting_reason(brief_text, running):
    if running.get("wave"):
        return "\n".join([
            f"autoresearch: wave {running['wave']} is running on the pool. Do not stop: run `autoresearch wait` "
            "to get its verdicts (it returns within its --timeout; run it again if it says still running), "
            "then write the next wave.", "", brief_text or ""]).strip()
    return "\n".join([
        f"autoresearch: run {running.get('run')} is still in progress (pid {running.get('pid')}). Do not stop: "
        "wait for it (for example `sleep 60; autoresearch status`), read its result, then go on with the next "
        "experiment.",
        "",
        brief_text or "",
    ]).strip()


def register_transcript(repo, session_id, data):
    """Tell the ledger where the owner's transcript is (it sums the usage recorded there)."""
    transcript = hooklib.text_field(data, "transcript_path")
    try:
        from autoresearch.store import ledger, research  # noqa: PLC0415 - on sys.path after hooklib.engine
        ledger.register(research.Repo(repo), session_id, transcript)
    except (ImportError, OSError) as exc:
        hooklib.note(f"could not register the transcript for the ledger ({exc!r})")


def handle(data):
    session_id = hooklib.text_field(data, "session_id")
    repo = hooklib.repo_for_session(data)
    if repo is None:
        return  # not a research repo: nothing to say
    state, brief_text = hooklib.state_and_brief(repo)
    if not state.get("active"):
        raise hooklib.LetThrough(f"session in {repo} is stopped; letting the stop through")
    owner = state.get("owner_session")
    if not owner:
        raise hooklib.LetThrough(f"no Claude Code session owns the research session in {repo}; run "
                                 "`autoresearch resume` in the session that should keep looping")
    if not session_id or owner != session_id:
        raise hooklib.LetThrough(
            f"this session ({session_id}) does not own the research session in {repo} (owner {owner}); "
            "run `autoresearch resume` in this session to take it over")
    register_transcript(repo, session_id, data)
    left = state.get("iterations_left")
    if isinstance(left, int) and left <= 0:
        hooklib.answer({"systemMessage": f"autoresearch: iteration budget spent in {repo}; the loop ends here."})
        return
    if state.get("budget_spent"):
        hooklib.answer({"systemMessage": f"autoresearch: {state['budget_spent']} in {repo}; the loop ends here."})
        return

    running = state.get("running")
    if isinstance(running, dict):
        # A run holds the engine's lock (the kernel drops it if the run dies), so this is never stale:
        # waiting for it is progress, and does not count towards the stuck limit.
        hooklib.answer({"decision": "block", "reason": waiting_reason(brief_text, running)})
        return

    counter_path = repo / hooklib.STATE_DIR / COUNTER_NAME
    total_runs = state.get("total_runs")
    blocks = blocks_without_progress(read_counter(counter_path), session_id, total_runs)
    limit = stuck_limit()
    if blocks >= limit:
        # Start the count afresh, so the next user turn gets K more tries.
        write_counter(counter_path, {"session_id": session_id, "total_runs": total_runs, "blocks": 0})
        hooklib.answer({"systemMessage": f"autoresearch: no new run was recorded across {blocks} stop blocks in "
                                         f"{repo}; the loop looks stuck, so the session may end."})
        return
    write_counter(counter_path, {"session_id": session_id, "total_runs": total_runs, "blocks": blocks + 1})
    hooklib.answer({"decision": "block", "reason": continue_reason(brief_text, state, blocks, limit)})


if __name__ == "__main__":
    sys.exit(hooklib.main(handle))
