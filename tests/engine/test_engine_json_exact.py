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
