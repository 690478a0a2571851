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


def test_command_map_names_the_module_that_defines_each_command():
    """cli.COMMANDS lets a command load only its own module; it must agree with the modules."""
    import argparse
    import importlib
    for name in cli.COMMAND_MODULES:
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers(dest="command")
        importlib.import_module(name).add_parsers(sub)
        for command in sub.choices:
            assert cli.COMMANDS.get(command) == name, command


def test_a_command_loads_only_its_own_module():
    import subprocess
    import sys
    from helpers_engine import engine_env
    code = ("import sys; from autoresearch import cli; cli.build_parser('status'); "
            "print(sorted(m for m in sys.modules if m.startswith(('autoresearch.', 'http.server', 'gpu_train'))))")
    out = subprocess.run([sys.executable, "-c", code], env=engine_env(), capture_output=True, text=True,
                         check=True).stdout
    assert "autoresearch.views.status" in out
    for heavy in ("http.server", "autoresearch.views.serve", "autoresearch.views.report", "gpu_train_debug"):
        assert heavy not in out, out
