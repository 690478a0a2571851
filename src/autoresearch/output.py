"""How commands talk: human text, or with `--json` exactly one JSON object on stdout.

With `--json`, human text goes to stderr so stdout stays machine-readable.
"""

import json
import sys


def wants_json(args):
    return bool(getattr(args, "json", False))


def say(args, text):
    """Human text: stdout normally, stderr under --json."""
    stream = sys.stderr if wants_json(args) else sys.stdout
    print(text, file=stream, flush=True)


def warn(message):
    print(f"autoresearch: warning: {message}", file=sys.stderr, flush=True)


def emit(args, text, data):
    """Finish a command: the text for a person, or the object for a program."""
    if wants_json(args):
        if text:
            print(text, file=sys.stderr, flush=True)
        print(json.dumps(data, ensure_ascii=False, sort_keys=False), flush=True)
    elif text:
        print(text, flush=True)
