"""What the three hooks share: reading Claude Code's stdin, finding the research repo,
asking the engine, and answering.

Standard library only, so a hook starts in milliseconds with any python3 >= 3.10.
A hook must never break the user's session: on bad input or an engine failure it lets
the action through and says why on stderr (Claude Code shows that in its debug log).
"""

import contextlib
import io
import json
import os
import sys
from pathlib import Path

PLUGIN_ROOT = Path(__file__).resolve().parent.parent
LOG_NAME = "autoresearch.jsonl"
STATE_DIR = ".autoresearch"


class LetThrough(Exception):
    """Raised to end a hook without a decision; the message goes to stderr."""


def note(message):
    print(f"autoresearch hook: {message}", file=sys.stderr)


def read_input(stream=None):
    """The hook input: one JSON object on stdin. Raises LetThrough when it is not."""
    stream = stream if stream is not None else sys.stdin
    try:
        raw = stream.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise LetThrough(f"could not read the hook input ({exc}); letting this through")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise LetThrough(f"hook input is not JSON ({exc.msg} at char {exc.pos}); letting this through")
    if not isinstance(data, dict):
        raise LetThrough("hook input is not a JSON object; letting this through")
    return data


def text_field(data, key):
    """A string field of the input, or None when absent or of another type."""
    value = data.get(key)
    return value if isinstance(value, str) and value else None


def find_repo(start):
    """The nearest directory at or above `start` that holds the log, or None."""
    try:
        here = Path(start).resolve()
    except (OSError, RuntimeError, ValueError):
        return None
    for folder in (here, *here.parents):
        try:
            if (folder / LOG_NAME).is_file():
                return folder
        except OSError:
            return None
    return None


def repo_for_session(data):
    """The research repo of this session: from the input `cwd`, else CLAUDE_PROJECT_DIR."""
    for start in (text_field(data, "cwd"), os.environ.get("CLAUDE_PROJECT_DIR")):
        if start:
            repo = find_repo(start)
            if repo:
                return repo
    return None


def engine(repo, *argv):
    """Run one engine command in this process (no interpreter start-up): (rc, stdout, stderr).

    The engine is the plugin's own copy under src/, so hooks need no separate install.
    """
    src = str(PLUGIN_ROOT / "src")
    if src not in sys.path:
        sys.path.insert(0, src)
    out, err = io.StringIO(), io.StringIO()
    previous = os.getcwd()
    try:
        from autoresearch import cli  # noqa: PLC0415 - imported late: only when a repo is found

        os.chdir(repo)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli.main(list(argv))
    except SystemExit as exc:  # argparse exits on bad arguments
        rc = exc.code if isinstance(exc.code, int) else 2
    except Exception as exc:  # noqa: BLE001 - a broken engine must not break the session
        raise LetThrough(f"`autoresearch {' '.join(argv)}` failed in {repo}: {exc!r}; letting this through")
    finally:
        os.chdir(previous)
    return rc, out.getvalue(), err.getvalue()


def state_and_brief(repo):
    """(status dict, brief text or None) from one `autoresearch brief --json` call.

    Raises LetThrough when the engine cannot say: a hook never decides on a guess.
    """
    rc, out, err = engine(repo, "brief", "--json")
    try:
        reply = json.loads(out)
    except json.JSONDecodeError:
        reply = None
    if rc != 0:   # under --json the reason is the object's message (stderr stays empty)
        why = reply.get("message") if isinstance(reply, dict) else None
        raise LetThrough(f"`autoresearch brief` exited {rc} in {repo} ({(why or err).strip()[-300:]}); "
                         "letting this through")
    state = reply.get("state") if isinstance(reply, dict) else None
    if not isinstance(state, dict):
        raise LetThrough(f"`autoresearch brief --json` gave no state in {repo}; letting this through")
    text = reply.get("text")
    return state, (text.strip() if isinstance(text, str) and text.strip() else None)


def answer(obj):
    """Print the hook's JSON answer on stdout (the only thing a hook may print there)."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False))
    sys.stdout.write("\n")


def main(handler):
    """Run `handler(input)`; whatever goes wrong, exit 0 without a decision."""
    try:
        handler(read_input())
    except LetThrough as exc:
        if str(exc):
            note(str(exc))
    except Exception as exc:  # noqa: BLE001 - last line of defence: never break the session
        note(f"internal error {exc!r}; letting this through")
    return 0
