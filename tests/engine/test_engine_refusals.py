"""Every refusal: exit 3, one JSON object under --json, nothing run, nothing recorded, git untouched."""

import json
import subprocess

import pytest
from helpers_engine import repo  # noqa: F401 (fixtures)


def _refused(repo, *args):
    before = repo.snapshot()
    proc = repo.cli("run", *args, "--json")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    assert data["ok"] is False and data["error"] == "refused"
    assert repo.snapshot() == before, "a refusal changed the log, HEAD or the refs"
    assert not (repo.root / ".autoresearch/current.json").exists()
    return data["message"]


def test_fixed_file_changed(repo):
    repo.experiment("1.0")
    (repo.root / "bench.sh").write_text("echo METRIC loss=0\n")
    repo.set("0.9")
    message = _refused(repo, "-m", "cheat")
    best = repo.runs()[-1]["commit"]
    assert "fixed file bench.sh changed" in message and f"git checkout {best} -- bench.sh" in message
    subprocess.run(["git", "add", "bench.sh"], cwd=repo.root, check=True)  # staged: advice still works
    _follow(repo, message)
    assert repo.experiment("0.9")["status"] == "keep"


def _follow(repo, message):
    """Run the command the refusal suggests, as a user would paste it."""
    command = message.split("restore it with `", 1)[1].split("`", 1)[0]
    subprocess.run(command, shell=True, cwd=repo.root, check=True, capture_output=True)


def test_fixed_file_changed_in_a_commit_gets_advice_that_works(repo):
    repo.experiment("1.0")
    (repo.root / "bench.sh").write_text("echo METRIC loss=0\n")
    repo.git("commit", "-qam", "tweak the harness")
    repo.set("0.9")
    message = _refused(repo, "-m", "x")
    assert "changed in a commit after" in message and "git commit" in message
    _follow(repo, message)
    assert repo.experiment("0.9")["status"] == "keep"
    assert repo.experiment("0.8")["status"] == "keep"  # and the runs after it are not refused


def test_init_refuses_a_fixed_file_with_uncommitted_changes(tmp_path):
    from helpers_engine import make_repo
    repo = make_repo(tmp_path / "r", init_args=None)
    (repo.root / "bench.sh").write_text("echo METRIC loss=0\n")
    before = repo.snapshot()
    proc = repo.cli("init", "--metric", "loss", "--command", "bash bench.sh", "--scope", "value.txt",
                    "--fixed", "bench.sh")
    assert proc.returncode == 3 and "commit or revert bench.sh before init" in proc.stderr
    assert repo.snapshot() == before
    repo.git("commit", "-qam", "new harness")
    repo.ok("init", "--metric", "loss", "--command", "bash bench.sh", "--scope", "value.txt", "--fixed", "bench.sh")
    assert repo.experiment("1.0")["status"] == "keep"


def test_fixed_file_deleted(repo):
    repo.experiment("1.0")
    (repo.root / "bench.sh").unlink()
    repo.set("0.9")
    assert "fixed file bench.sh is missing" in _refused(repo, "-m", "x")


def test_tracked_file_outside_scope_changed(repo):
    repo.experiment("1.0")
    (repo.root / "README.txt").write_text("edited\n")
    repo.set("0.9")
    message = _refused(repo, "-m", "x")
    assert "outside the scope" in message and "README.txt" in message


def test_untracked_file_outside_scope_is_not_swept_up(repo):
    repo.experiment("1.0")
    (repo.root / "notes.tmp").write_text("scratch\n")
    repo.experiment("0.9")
    assert "notes.tmp" not in repo.git("show", "--name-only", "--format=", "HEAD")
    assert (repo.root / "notes.tmp").exists()


def test_nothing_changed(repo):
    repo.experiment("1.0")
    message = _refused(repo, "-m", "no-op")
    assert "nothing in the scope (value.txt) changed" in message


def test_repeat_of_an_earlier_run_names_it(repo):
    repo.experiment("1.0")
    repo.experiment("1.5", "worse idea")
    repo.set("1.5")
    message = _refused(repo, "-m", "same again")
    assert "identical to run 2" in message and "worse idea" in message
    forced = repo.experiment("1.5", "same again", "--force")
    assert forced["status"] == "discard" and forced["repeat_of"] == 2


def test_session_stopped(repo):
    repo.experiment("1.0")
    repo.ok("stop")
    repo.set("0.9")
    assert "session is stopped" in _refused(repo, "-m", "x")
    repo.ok("resume")
    assert repo.experiment("0.9")["status"] == "keep"


def test_missing_session_file_means_stopped_for_every_command(repo):
    """status, brief (and so the hooks) and run agree: one function decides `active`."""
    repo.experiment("1.0")
    (repo.root / ".autoresearch/session.json").unlink()
    assert repo.status()["active"] is False
    assert "Session STOPPED" in repo.ok("brief").stdout
    repo.set("0.9")
    assert "autoresearch resume" in _refused(repo, "-m", "x")
    repo.ok("resume")
    assert repo.status()["active"] is True
    assert repo.experiment("0.9")["status"] == "keep"


def test_head_moved_away_from_best(repo):
    repo.experiment("1.0")
    repo.git("commit", "-q", "--allow-empty", "-m", "agent's own commit")  # a descendant: fine
    repo.set("0.9")
    assert repo.experiment("0.9")["status"] == "keep"
    repo.git("checkout", "-q", "-B", "elsewhere", "HEAD~2")  # before the best commit
    repo.set("0.7")
    message = _refused(repo, "-m", "x")
    assert "not at the best commit" in message and "git reset --keep" in message
    assert "git checkout" not in message  # the advice never detaches HEAD


def test_run_outside_a_research_repo(tmp_path):
    from helpers_engine import run_cli
    proc = run_cli(["run", "-m", "x", "--json"], cwd=tmp_path)
    assert proc.returncode == 3 and "not in a git repository" in json.loads(proc.stdout)["message"]


@pytest.mark.parametrize("args, needle", [
    (["run"], "required"),
    (["run", "-m", "  "], "-m needs a description"),
    (["run", "-m", "x", "--asi", "{not json"], "--asi is not valid JSON"),
    (["run", "-m", "x", "--asi", "[1]"], "--asi must be a JSON object"),
    (["run", "-m", "x", "--repeat", "2"], "--repeat needs --baseline"),
    (["run", "-m", "x", "--repeat", "0", "--baseline"], "must be >= 1"),
    (["init", "--metric", "loss", "--timeout", "-1"], "must be > 0"),
    (["init", "--metric", "bad name", "--command", "x", "--scope", "value.txt"], "not a METRIC name"),
    (["init", "--command", "x", "--scope", "value.txt"], "needs --metric"),
    (["init", "--metric", "loss", "--command", "x", "--scope", "value.txt", "--fixed", "value.txt"],
     "both fixed and in the scope"),
])
def test_usage_errors_exit_2_with_one_json_object(repo, args, needle):
    before = repo.snapshot()
    proc = repo.cli(*args, "--json")
    assert proc.returncode == 2, proc.stderr
    data = json.loads(proc.stdout)
    assert data["error"] == "usage" and needle in data["message"]
    assert proc.stderr == ""
    assert needle in repo.cli(*args).stderr
    assert repo.snapshot() == before
