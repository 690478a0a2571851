"""The `autoresearch` command line: one argparse tree, each command in the module named for it.

Exit codes: 0 done, 2 usage error, 3 refused (nothing run, nothing recorded).
`--json` makes stdout exactly one JSON object; human text goes to stderr.

Each module listed in COMMAND_MODULES exposes `add_parsers(subparsers)`, which adds its
sub-commands and sets `func` (called with the parsed args, returns the exit code).
Only the module of the command being run is imported (COMMANDS maps each command to its
module; `--help` imports them all), and modules import only the standard library at module
level (heavy optional imports go inside functions).
"""

import argparse
import errno
import importlib
import json
import os
import sys

from autoresearch import __version__, output
# Re-exported for callers of the command line (the hooks, tests): the rooms import them from errors.
from autoresearch.errors import (EXIT_OK, EXIT_REFUSED, EXIT_USAGE, Failed, Refused, UsageError,  # noqa: F401
                                 positive_int)

# Order is the order shown in --help.
COMMAND_MODULES = [
    "autoresearch.setup.initialize",
    "autoresearch.pipeline.experiment",
    "autoresearch.views.status",
    "autoresearch.views.export",
    "autoresearch.night.session",
    "autoresearch.night.night",
    "autoresearch.views.rundiagnosis",
    "autoresearch.views.report",
    "autoresearch.views.verify",
    "autoresearch.views.serve",
    "autoresearch.setup.demo",
    "autoresearch.pool.pool",
]

# Which module defines each command, so `autoresearch status` (and every hook call) imports
# only its own module: importing all of them costs ~20 ms (serve pulls in http.server, diagnose
# the diagnoser). A command missing here still works: the full list is loaded instead.
COMMANDS = {
    "init": "autoresearch.setup.initialize",
    "run": "autoresearch.pipeline.experiment",
    "status": "autoresearch.views.status", "brief": "autoresearch.views.status", "export": "autoresearch.views.export",
    "stop": "autoresearch.night.session", "resume": "autoresearch.night.session",
    "night": "autoresearch.night.night",
    "diagnose": "autoresearch.views.rundiagnosis",
    "report": "autoresearch.views.report",
    "verify": "autoresearch.views.verify",
    "serve": "autoresearch.views.serve",
    "demo": "autoresearch.setup.demo",
    "pool": "autoresearch.pool.pool", "submit": "autoresearch.pool.pool", "wait": "autoresearch.pool.pool",
}


# Optional parts plug in here, at the command edge: the pipeline, the summary and the log never
# import the pool or the night. A `run` while a pool serves the repo is a wave of one: the pool's
# `route(args)` runs it and returns the exit code, or returns None and the pipeline runs it here.
ROUTES = {"run": "autoresearch.pool.pool"}


def _dispatch(command, args):
    """Run `command` (the first word of argv: args.command is init's --command option for init)."""
    route = ROUTES.get(command)
    if route:
        code = importlib.import_module(route).route(args)
        if code is not None:
            return code
    return args.func(args)


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of exiting, so `--json` can report it."""

    def error(self, message):
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def build_parser(command=None):
    """The argparse tree; given the command about to run, only that command's module is loaded
    (`--help`, no command or an unknown one load them all, so the listing stays complete)."""
    parser = _Parser(
        prog="autoresearch",
        description="Run, decide and record experiments: the engine behind the autoresearch plugin.",
        epilog="Run `autoresearch COMMAND --help` for the options and examples of each command.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"autoresearch {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    modules = [COMMANDS[command]] if command in COMMANDS else COMMAND_MODULES
    for name in modules:
        importlib.import_module(name).add_parsers(sub)
    return parser


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    as_json = "--json" in argv
    # Under --json stdout is one JSON object and stderr stays empty: output collects what
    # would have gone to stderr and the object carries it as "warnings".
    output.json_mode(as_json)
    try:
        return _main(argv, as_json)
    finally:
        output.json_mode(False)


def _main(argv, as_json):
    try:
        _check_text(argv)
        # The top level has only flags without values, so the first word is the command.
        command = next((a for a in argv if not a.startswith("-")), None)
        parser = build_parser(command)
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help(sys.stderr)
            return _fail(as_json, EXIT_USAGE, "usage", "no command given (see `autoresearch --help`)")
        _refuse_from_agent(command, args)
        return _dispatch(command, args)
    except Refused as exc:
        print(f"autoresearch: refused: {exc}", file=sys.stderr)
        return _fail(as_json, EXIT_REFUSED, "refused", str(exc))
    except UsageError as exc:
        print(f"autoresearch: {exc}", file=sys.stderr)
        return _fail(as_json, EXIT_USAGE, "usage", str(exc))
    except Failed as exc:
        storage = storage_problem(exc)
        if storage:
            print(f"autoresearch: refused: {storage}", file=sys.stderr)
            return _fail(as_json, EXIT_REFUSED, "refused", storage)
        print(f"autoresearch: failed: {exc}", file=sys.stderr)
        return _fail(as_json, 1, "failed", str(exc))
    except KeyboardInterrupt:
        print("autoresearch: interrupted", file=sys.stderr)
        return _fail(as_json, 130, "interrupted", "interrupted")
    except BrokenPipeError:
        # The reader went away (`| head`): it has what it wanted. Point stdout at /dev/null so
        # Python's own flush at exit does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - a bug must not print a traceback at the agent
        storage = storage_problem(exc)
        if storage:
            print(f"autoresearch: refused: {storage}", file=sys.stderr)
            return _fail(as_json, EXIT_REFUSED, "refused", storage)
        # The log is append-only and a run in progress leaves current.json, which the next
        # engine call records as a crash: nothing is lost by stopping here.
        message = (f"internal error: {type(exc).__name__}: {_one_line(exc)}; please report this "
                   "(with the command) at the autoresearch issue tracker")
        print(f"autoresearch: {message}", file=sys.stderr)
        return _fail(as_json, 1, "internal", message)


def _refuse_from_agent(command, args):
    """The engine is the one command the agent's sandbox lets out: from Claude Code's session it
    runs only what cannot change what decides (references/trust-boundary.md)."""
    from autoresearch import agent_sandbox   # noqa: PLC0415 - the loop's own commands never need it
    # (`command`, not args.command: init's --command option shares that name)
    why = agent_sandbox.refusal(command, args)
    if why and agent_sandbox.agent_session(agent_sandbox.repo_root_guess()):
        raise Refused(why)


STORAGE_ERRNOS = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up",
                  errno.EROFS: "the file system is read-only", errno.EFBIG: "a file size limit was reached",
                  errno.EACCES: "permission denied", errno.EPERM: "the operation is not permitted"}
STORAGE_WORDS = {"No space left on device": "the disk is full", "Read-only file system": "the file system is read-only",
                 "Disk quota exceeded": "the disk quota is used up", "Permission denied": "permission denied",
                 "Operation not permitted": "the operation is not permitted"}


def storage_problem(exc):
    """A one-line refusal for a full disk or a file the engine may not write (None otherwise):
    these are the machine's state, not an engine bug, and nothing was lost by stopping."""
    why = STORAGE_ERRNOS.get(getattr(exc, "errno", None)) if isinstance(exc, OSError) else None
    if why is None and isinstance(exc, Failed):
        why = next((v for k, v in STORAGE_WORDS.items() if k in str(exc)), None)
    if why is None:
        return None
    where = f" writing {exc.filename}" if getattr(exc, "filename", None) else ""
    return (f"{why}{where} ({_one_line(exc)}); free space or fix the permissions, then run the command again "
            "(a finished result waits in the engine's state folder and is appended then)")


def _check_text(argv):
    """Refuse arguments that are not UTF-8 (Python keeps such bytes as lone surrogates).

    They could not be written to the UTF-8 log, and replacing them would record something
    the user did not type.
    """
    for arg in argv:
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = arg.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
            raise UsageError(f"argument {shown[:80]!r} is not valid UTF-8 text; "
                             "pass text in UTF-8 (check your terminal's locale)") from None


def _one_line(exc):
    return " ".join(str(exc).split())[:300]


def _fail(as_json, code, kind, message):
    """Under --json even a failure prints exactly one JSON object on stdout (the line printed
    to stderr just before it is collected, so the message is not repeated in "warnings")."""
    if as_json:
        found = [w for w in output.warnings() if message not in w]
        data = {"ok": False, "error": kind, "message": message, "exit_code": code}
        print(json.dumps(dict(data, warnings=found) if found else data, ensure_ascii=False), flush=True)
    return code
