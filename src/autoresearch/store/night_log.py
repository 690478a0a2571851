"""The night log `.autoresearch/night.jsonl`: every start, exit, resume and end of `night`.

One JSON object per line, appended whole (log.append), each with `event` (start, exit, resume,
end), `night` (the id of that `night` invocation), `session` (the Claude Code session) and
`timestamp` (ms). `status` and the report show the last night from it.
"""

import os
import time

from autoresearch.store import log
from autoresearch.store.research import now_ms

NAME = "night.jsonl"
EVENTS = ("start", "exit", "resume", "end")
SHOWN = 30


def path(repo):
    return os.path.join(repo.state, NAME)


def append(repo, event, **fields):
    record = {"event": event, "timestamp": now_ms(), **fields}
    os.makedirs(repo.state, exist_ok=True)
    log.append(path(repo), record)
    return record


def read(repo):
    records = log.read(path(repo), warn=lambda m: None)
    return [r for r in records if r.get("event") in EVENTS and isinstance(r.get("timestamp"), (int, float))]


def summary(repo):
    """The last night: its id, session, start, exits, resumes, how it ended, its events."""
    events = read(repo)
    if not events:
        return None
    last = events[-1].get("night")
    mine = [e for e in events if e.get("night") == last]
    start = next((e for e in mine if e["event"] == "start"), mine[0])
    end = next((e for e in reversed(mine) if e["event"] == "end"), None)
    return {
        "night": last,
        "nights": len({e.get("night") for e in events}),
        "session": start.get("session"),
        "started": start.get("timestamp"),
        "exits": sum(e["event"] == "exit" for e in mine),
        "resumes": sum(e["event"] == "resume" for e in mine),
        "ended": end.get("reason") if end else None,
        "ended_at": end.get("timestamp") if end else None,
        "events": mine[-SHOWN:],
    }


def _clock(ms):
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def describe(e):
    """One line for one event."""
    what = {"start": lambda: f"started Claude Code session {e.get('session')}",
            "exit": lambda: f"Claude Code exited (rc {e.get('rc')}, {e.get('runs', 0)} new run(s))"
                            + (f": {e['error']}" if e.get("error") else ""),
            "resume": lambda: f"resumed session {e.get('session')} after {e.get('wait_s', 0):g} s ({e.get('why')})",
            "end": lambda: f"night ended: {e.get('reason')}"}[e["event"]]()
    return f"{_clock(e['timestamp'])} {what}"


def text(night):
    if not night:
        return []
    state = f"ended: {night['ended']}" if night["ended"] else "running (or killed without a word)"
    return [f"night: started {_clock(night['started'])}, {night['exits']} exit(s), {night['resumes']} "
            f"resume(s); {state}"]
