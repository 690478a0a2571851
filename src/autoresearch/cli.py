"""The `autoresearch` command line: one argparse tree, each command in the module named for it.

Exit codes (DESIGN 4.3): 0 done, 2 usage error, 3 refused (nothing run, nothing recorded).
`--json` makes stdout exactly one JSON object; human text goes to stderr.

Each module listed in COMMAND_MODULES exposes `add_parsers(subparsers)`, which adds its
sub-commands and sets `func` (called with the parsed args, returns the exit code).
Modules are imported when the CLI starts, so they must import only the standard library
at module level (heavy optional imports go inside functions).
"""

import argparse
import importlib
import json
import sys

from autoresearch import __version__

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_REFUSED = 3

# Order is the order shown in --help.
COMMAND_MODULES = [
    "autoresearch.initialize",
    "autoresearch.experiment",
    "autoresearch.summary",
    "autoresearch.session",
    "autoresearch.diagnosis",
    "autoresearch.report",
    "autoresearch.serve",
    "autoresearch.demo",
]


class Refused(Exception):
    """Raised by a command that refuses to act: exit 3, nothing run, nothing recorded."""


class UsageError(Exception):
    """Raised for bad arguments that argparse cannot catch: exit 2."""


class Failed(Exception):
    """Raised when a command could not finish (e.g. git failed): exit 1, with the reason."""


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of exiting, so `--json` can report it."""

    def error(self, message):
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def build_parser():
    parser = _Parser(
        prog="autoresearch",
        description="Run, decide and record experiments: the engine behind the autoresearch plugin.",
        epilog="Run `autoresearch COMMAND --help` for the options and examples of each command.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"autoresearch {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).add_parsers(sub)
    return parser


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    as_json = "--json" in argv
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help(sys.stderr)
            return _fail(as_json, EXIT_USAGE, "usage", "no command given (see `autoresearch --help`)")
        return args.func(args)
    except Refused as exc:
        print(f"autoresearch: refused: {exc}", file=sys.stderr)
        return _fail(as_json, EXIT_REFUSED, "refused", str(exc))
    except UsageError as exc:
        print(f"autoresearch: {exc}", file=sys.stderr)
        return _fail(as_json, EXIT_USAGE, "usage", str(exc))
    except Failed as exc:
        print(f"autoresearch: failed: {exc}", file=sys.stderr)
        return _fail(as_json, 1, "failed", str(exc))
    except KeyboardInterrupt:
        print("autoresearch: interrupted", file=sys.stderr)
        return _fail(as_json, 130, "interrupted", "interrupted")


def _fail(as_json, code, kind, message):
    """Under --json even a failure prints exactly one JSON object on stdout."""
    if as_json:
        print(json.dumps({"ok": False, "error": kind, "message": message, "exit_code": code}))
    return code
