"""`stop` and `resume`: end or reopen the research session the hooks keep alive.

The Stop hook keeps the agent looping only while `.autoresearch/session.json` says active;
`run` refuses while the session is stopped. `resume` can hand the session to a new owner
(the Claude Code session that resumes the work).
"""

import argparse
import os

from autoresearch import errors, output
from autoresearch.store import research, state
from autoresearch.store.research import now_ms


def add_parsers(sub):
    p = sub.add_parser("stop", help="end the session: the hooks let the agent stop, `run` refuses",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="examples:\n  autoresearch stop\n"
                              '  autoresearch stop --reason "budget for tonight is spent"')
    p.add_argument("--reason", default="stopped by `autoresearch stop`", help="why (kept in session.json)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_stop)
    p = sub.add_parser("resume", help="reopen a stopped session", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="examples:\n  autoresearch resume\n"
                              "  autoresearch resume --session \"$CLAUDE_CODE_SESSION_ID\"   (hand it to this session)")
    p.add_argument("--session", metavar="ID",
                   help="new owner session (default: $CLAUDE_CODE_SESSION_ID, else unchanged)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_resume)


def _session_repo():
    repo = research.find()
    _, config, _, segment = research.load(repo, warn=output.warn)
    research.require_config(config)
    return repo, config, segment


def cmd_stop(args):
    repo, config, segment = _session_repo()
    before = state.read_session(repo) or {}
    session = state.write_session(repo, active=False, stopped=now_ms(), stop_reason=args.reason,
                                  segment=segment,
                                  owner_session=before.get("owner_session", config.owner_session))
    text = ("autoresearch: session stopped; `autoresearch resume` reopens it" if state.is_active(before)
            else "autoresearch: the session was already stopped")
    output.emit(args, text, {"ok": True, "active": False, "session": session})
    return errors.EXIT_OK


def cmd_resume(args):
    repo, config, segment = _session_repo()
    before = state.read_session(repo) or {}
    owner = args.session or os.environ.get("CLAUDE_CODE_SESSION_ID") or \
        before.get("owner_session", config.owner_session)
    session = state.write_session(repo, active=True, stopped=None, stop_reason=None, segment=segment,
                                  owner_session=owner, resumed=now_ms())
    text = "autoresearch: session active" + (f" (owner {owner})" if owner else "") + \
        '; next: autoresearch run -m "..."'
    output.emit(args, text, {"ok": True, "active": True, "session": session})
    return errors.EXIT_OK
