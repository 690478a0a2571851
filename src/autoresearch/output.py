"""How commands talk: human text, or with `--json` exactly one JSON object and nothing else.

Without `--json`, results go to stdout and warnings to stderr. With `--json` (see `json_mode`),
stdout is one JSON object and stderr stays empty: progress text is dropped, warnings (and
anything else the command writes to Python's stderr) are collected and reported in the
object's `"warnings"` list.
"""

import io
import json
import sys

_collected = None   # a StringIO standing in for sys.stderr while a --json command runs
_real_stderr = None


def json_mode(on):
    """Start (True) or end (False) collecting what a --json command writes to stderr."""
    global _collected, _real_stderr
    if on and _collected is None:
        _real_stderr, _collected = sys.stderr, io.StringIO()
        sys.stderr = _collected
    elif not on and _collected is not None:
        sys.stderr, _collected = _real_stderr, None


def warnings():
    """What the running --json command wrote to stderr so far, one item per line."""
    if _collected is None:
        return []
    return [line for line in _collected.getvalue().splitlines() if line.strip()]


def wants_json(args):
    return bool(getattr(args, "json", False))


def say(args, text):
    """Progress text for a person: stdout normally, nothing under --json."""
    if not wants_json(args):
        print(text, flush=True)


def warn(message):
    print(f"autoresearch: warning: {message}", file=sys.stderr, flush=True)


def emit(args, text, data):
    """Finish a command: the text for a person, or the object (with its warnings) for a program."""
    if wants_json(args):
        print_json(data)
    elif text:
        print(text, flush=True)


def print_json(data):
    """The one JSON object of a --json command, with the warnings it collected."""
    found = warnings()
    if found and isinstance(data, dict) and isinstance(data.get("warnings", []), list):
        data = dict(data, warnings=list(data.get("warnings") or []) + found)
    stream = sys.stdout
    stream.write(json.dumps(data, ensure_ascii=False, allow_nan=False) + "\n")
    stream.flush()
