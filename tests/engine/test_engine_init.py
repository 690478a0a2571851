"""`autoresearch init`: the header, the session file, ignored files, the ML template."""

import json
import os
from pathlib import Path

from helpers_engine import Research, make_repo, repo, run_cli  # noqa: F401 (fixtures)
from gitrepo import git_repo


def test_header_session_and_ignores(tmp_path):
    repo = make_repo(tmp_path / "r", init_args=None)
    proc = run_cli(["init", "--metric", "loss", "--unit", "nats", "--command", "bash bench.sh",
                    "--scope", "value.txt", "--fixed", "bench.sh", "--max-iterations", "7",
                    "--json"], cwd=repo.root, env={"CLAUDE_CODE_SESSION_ID": "sess-123"})
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    header = repo.records()[0]
    assert data["config"] == header
    assert header["metricUnit"] == "nats" and header["bestDirection"] == "lower"
    assert header["max_iterations"] == 7 and header["owner_session"] == "sess-123"
    assert header["fixed"]["bench.sh"] == _sha256(repo.root / "bench.sh")
    assert header["hardware"]["cpu_count"] == os.cpu_count()
    session = json.loads((repo.root / ".autoresearch/session.json").read_text())
    assert session["active"] is True and session["owner_session"] == "sess-123"
    # The log and the state folder are ignored, so they never show as changes.
    assert repo.git("status", "--porcelain") == ""
    assert repo.git("check-ignore", "autoresearch.jsonl", "autoresearch.md", ".autoresearch/x")


def test_session_option_overrides_env(tmp_path):
    repo = make_repo(tmp_path / "r", init_args=None)
    proc = run_cli(["init", "--metric", "loss", "--command", "true", "--scope", "value.txt",
                    "--session", "explicit"], cwd=repo.root, env={"CLAUDE_CODE_SESSION_ID": "env"})
    assert proc.returncode == 0
    assert repo.status()["owner_session"] == "explicit"


def test_not_a_git_repo_names_git_init(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "train.py").write_text("print('METRIC loss=1')\n")
    proc = run_cli(["init", "--metric", "loss", "--command", "python3 train.py", "--scope", "train.py"],
                   cwd=plain)
    assert proc.returncode == 3 and "--git-init" in proc.stderr
    assert not (plain / ".git").exists() and not (plain / "autoresearch.jsonl").exists()
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    proc = run_cli(["init", "--git-init", "--metric", "loss", "--command", "python3 train.py",
                    "--scope", "train.py"], cwd=plain, env=env)
    assert proc.returncode == 0, proc.stderr
    repo = Research(plain)
    proc = repo.cli("run", "-q", "-m", "baseline", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["record"]["metric"] == 1.0
    assert "train.py" in repo.git("ls-files")


def test_default_command_is_autoresearch_sh_and_it_becomes_fixed(tmp_path):
    repo = make_repo(tmp_path / "r", init_args=None)
    (repo.root / "autoresearch.sh").write_text("bash bench.sh\n")
    repo.git("add", "autoresearch.sh")
    repo.git("commit", "-q", "-m", "bench")
    repo.ok("init", "--metric", "loss", "--scope", "value.txt")
    header = repo.records()[0]
    assert header["command"] == "bash autoresearch.sh" and "autoresearch.sh" in header["fixed"]


def test_template_ml(tmp_path):
    home = tmp_path / "home"
    (home / "assets").mkdir(parents=True)
    for name in ("prepare.py", "train.py", "program.md", "pyproject.toml"):
        (home / "assets" / name).write_text(f"# {name}\n")
    (home / "autoresearch.sh").write_text("echo METRIC val_bpb=1.0\n")
    work = tmp_path / "ml"
    work.mkdir()
    git_repo(work)
    env = {"AUTORESEARCH_HOME": str(home), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    proc = run_cli(["init", "--template", "ml", "--json"], cwd=work, env=env)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert sorted(data["copied"]) == ["autoresearch.sh", "prepare.py", "program.md", "pyproject.toml",
                                      "train.py"]
    h = data["config"]
    assert (h["metricName"], h["bestDirection"], h["metricUnit"]) == ("val_bpb", "lower", "bpb")
    assert h["scope"] == ["train.py"] and sorted(h["fixed"]) == ["autoresearch.sh", "prepare.py"]
    assert h["command"] == "bash autoresearch.sh" and h["timeout_s"] == 900
    assert h["rule"]["implausible_gain"] == 0.3 and h["template"] == "ml"
    repo = Research(work)
    assert sorted(repo.git("ls-files").split()) == sorted(data["copied"])
    assert repo.git("status", "--porcelain") == ""
    # A second init never overwrites the research done so far.
    (work / "train.py").write_text("# improved\n")
    repo.git("commit", "-qam", "improved")
    proc = run_cli(["init", "--template", "ml", "--json"], cwd=work, env=env)
    assert json.loads(proc.stdout)["copied"] == [] and (work / "train.py").read_text() == "# improved\n"


def test_template_missing_is_refused(tmp_path):
    repo = make_repo(tmp_path / "r", init_args=None)
    proc = run_cli(["init", "--template", "ml"], cwd=repo.root, env={"AUTORESEARCH_HOME": str(tmp_path)})
    assert proc.returncode == 3 and "AUTORESEARCH_HOME" in proc.stderr
    assert not (repo.root / "autoresearch.jsonl").exists()


def test_defaults_follow_the_train_py_convention(tmp_path):
    repo = make_repo(tmp_path / "r", init_args=None)
    for name, text in (("train.py", "print('METRIC loss=1')\n"), ("prepare.py", "DATA = 1\n"),
                       ("autoresearch.sh", "python3 train.py\n")):
        (repo.root / name).write_text(text)
    repo.git("add", ".")
    repo.git("commit", "-q", "-m", "harness")
    repo.ok("init", "--metric", "loss")
    header = repo.records()[0]
    assert header["scope"] == ["train.py"] and header["command"] == "bash autoresearch.sh"
    assert sorted(header["fixed"]) == ["autoresearch.sh", "prepare.py"]
    proc = repo.cli("init", "--metric", "loss", "--scope", "train.py", "prepare.py", "--json")
    assert proc.returncode == 0 and list(json.loads(proc.stdout)["config"]["fixed"]) == ["autoresearch.sh"]


def test_project_home_holds_the_template():
    """Without AUTORESEARCH_HOME, the template is looked up next to the package (the checkout)."""
    from autoresearch.store import research
    assert research.project_home() == Path(__file__).resolve().parents[2]


def _sha256(path):
    import hashlib
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_a_log_moved_aside_never_reuses_an_old_run_number(repo):
    """mv autoresearch.jsonl old; init; run: run 1's ref and files belong to the old log."""
    repo.experiment("1.0")
    old_commit = repo.git("rev-parse", "refs/autoresearch/runs/1")
    (repo.root / "autoresearch.jsonl").rename(repo.root / "old.jsonl")
    repo.ok("init", "--metric", "loss", "--command", "bash bench.sh", "--scope", "value.txt", "--fixed", "bench.sh")
    repo.set("0.9")
    record = repo.experiment("0.9", "after the move")
    assert record["run"] == 2 and record["ref"] == "refs/autoresearch/runs/2"
    assert repo.git("rev-parse", "refs/autoresearch/runs/1") == old_commit
    assert (repo.root / ".autoresearch/runs/1/output.log").read_text().count("value 1.0") == 1


def test_a_benchmark_command_named_like_an_engine_command_is_just_the_command(tmp_path):
    """`--command run` is the benchmark's command line: init records it (the engine never takes it
    for its own `run` command and routes the call elsewhere)."""
    repo = make_repo(tmp_path / "r", ("--metric", "loss", "--command", "run", "--scope", "value.txt", "--json"))
    header = json.loads((repo.root / "autoresearch.jsonl").read_text().splitlines()[0])
    assert header["command"] == "run"
