"""With --json every command writes exactly one JSON object on stdout and nothing on stderr:
also when it warns (a torn log line), refuses or hits a usage error. Warnings go into the object."""

import json

import pytest

from helpers_engine import make_repo


@pytest.fixture(scope="module")
def torn(tmp_path_factory):
    repo = make_repo(tmp_path_factory.mktemp("json") / "research")
    repo.experiment("1.0", "baseline")
    repo.experiment("crash", "break it")
    with open(repo.root / "autoresearch.jsonl", "ab") as f:
        f.write(b'{"run": 99, "status": "ke')   # a torn last line: every reader warns
    return repo


COMMANDS = [
    ["status"], ["brief"], ["stop"], ["resume"],
    ["export", "--tsv", "-"], ["export", "--tsv", "out.tsv"], ["export", "--pi", "-"], ["export", "--pi", ".auto/log.jsonl"],
    ["diagnose", ".autoresearch/runs/2/output.log"],
    ["report", "-o", "report.html"],
    ["run", "-m", "same code again", "--force"],            # streams nothing under --json
    ["run", "-m", "refused: nothing changed"],               # exit 3
    ["init", "--metric", "loss"],                            # exit 2: a usage error
    ["export"],                                              # exit 2 from argparse
    ["status", "--no-such-flag"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a))
def test_one_object_and_nothing_else(torn, args):
    proc = torn.cli(*args, "--json")
    assert proc.stderr == "", proc.stderr
    assert proc.stdout.count("\n") == 1 and proc.stdout.endswith("\n"), proc.stdout[:500]
    data = json.loads(proc.stdout)
    assert isinstance(data, dict)
    if proc.returncode != 0:
        assert data["ok"] is False and data["exit_code"] == proc.returncode and data["message"]


@pytest.mark.parametrize("args", [["status"], ["brief"], ["export", "--tsv", "-"], ["export", "--pi", "-"]])
def test_warnings_are_in_the_object_and_on_stderr_without_json(torn, args):
    data = json.loads(torn.cli(*args, "--json").stdout)
    assert any("skipped malformed line" in w for w in data["warnings"]), data.get("warnings")
    assert "skipped malformed line" in torn.cli(*args).stderr


def test_init_and_a_fresh_run_with_json(tmp_path):
    repo = make_repo(tmp_path / "r", init_args=None)
    proc = repo.cli("init", "--metric", "loss", "--command", "bash bench.sh", "--scope", "value.txt",
                    "--fixed", "bench.sh", "--json")
    assert proc.returncode == 0 and proc.stderr == "" and json.loads(proc.stdout)["ok"]
    proc = repo.cli("run", "-m", "baseline", "--json")   # not -q: the benchmark's output stays in output.log
    assert proc.returncode == 0 and proc.stderr == "" and json.loads(proc.stdout)["status"] == "keep"


def _json_commands():
    import sys
    sys.path.insert(0, str(__import__("helpers_engine").SRC))
    from autoresearch import cli
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return sorted(name for name, p in sub.choices.items() if any("--json" in a.option_strings for a in p._actions))


@pytest.mark.parametrize("command", _json_commands())
def test_every_json_command_answers_a_usage_error_with_one_object(torn, command):
    """Every command that has --json (also ones added later, which the list above may not
    cover yet): a bad flag is a usage error in one object, nothing on stderr, nothing run."""
    before = torn.snapshot()
    proc = torn.cli(command, "--no-such-flag", "--json")
    assert proc.returncode == 2 and proc.stderr == "", proc.stderr
    assert json.loads(proc.stdout)["error"] == "usage" and proc.stdout.count("\n") == 1
    assert torn.snapshot() == before

