"""Every user-facing command has --help with examples, shown as written (issue 7)."""

import contextlib
import io
import re

import pytest

from autoresearch import cli


def _commands():
    sub = next(a for a in cli.build_parser()._actions if a.dest == "command")
    return sorted(sub.choices)


def _help(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exc:
        cli.build_parser().parse_args([*argv, "--help"])
    assert exc.value.code == 0
    return out.getvalue()


def test_every_command_is_covered():
    assert {"init", "run", "status", "brief", "stop", "resume", "export", "diagnose", "report"} <= set(_commands())


@pytest.mark.parametrize("command", _commands())
def test_help_has_an_example_on_its_own_line(command):
    text = _help(command)
    assert "example" in text.lower(), text
    # The example is a command line of its own, not squashed into a paragraph.
    own_line = re.compile(rf"^\s*(examples?:\s*)?autoresearch {command}\b", re.I)
    assert any(own_line.match(line) for line in text.splitlines()), text
    # A list of examples keeps one per line (argparse's default formatter reflows them into one).
    squashed = [line for line in text.splitlines() if line.lower().startswith("examples:") and line.strip() != "examples:"]
    assert not squashed, f"examples run together (use RawDescriptionHelpFormatter): {squashed}"


def test_top_level_help_lists_every_command():
    text = _help()
    for command in _commands():
        assert command in text
