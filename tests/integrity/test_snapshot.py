"""snapshot.py against real git: a run's tree is exactly its commit, whatever the work tree holds."""

import os
import subprocess

import pytest

from autoresearch.isolation import snapshot
from gitrepo import git_repo


def git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    git_repo(root)
    (root / "train.py").write_text("LR = 0.1\n")
    (root / "bench.sh").write_text("#!/bin/sh\necho METRIC x=1\n")
    os.chmod(root / "bench.sh", 0o755)
    (root / "src").mkdir()
    (root / "src" / "model.py").write_text("DEPTH = 4\n")
    os.symlink("train.py", root / "link.py")
    # A checkout differs from `git archive` here: export-ignore would drop the file from an archive.
    (root / ".gitattributes").write_text("src/model.py export-ignore\n")
    (root / ".gitignore").write_text(".venv/\ndata.bin\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "start")
    return root


def test_export_is_the_commit_not_the_work_tree(repo, tmp_path):
    commit = git(repo, "rev-parse", "HEAD")
    (repo / "train.py").write_text("LR = 9.9  # edited while the run is in flight\n")
    (repo / "new.py").write_text("untracked\n")
    dest = snapshot.export_commit(repo, commit, tmp_path / "snap" / "1")
    assert (dest / "train.py").read_text() == "LR = 0.1\n"
    assert (dest / "src" / "model.py").read_text() == "DEPTH = 4\n"
    assert os.access(dest / "bench.sh", os.X_OK)
    assert os.readlink(dest / "link.py") == "train.py"
    assert not (dest / "new.py").exists() and not (dest / ".git").exists()
    assert not list((tmp_path / "snap").glob(".*index")), "the throw-away index is left behind"
    # The repository itself is untouched: no worktree registered, the work tree's edit intact.
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert (repo / "train.py").read_text().startswith("LR = 9.9")
    assert git(repo, "status", "--porcelain", "--", "train.py") == "M train.py"


def test_export_of_a_missing_commit_fails_cleanly(repo, tmp_path):
    with pytest.raises(snapshot.SnapshotError):
        snapshot.export_commit(repo, "0" * 40, tmp_path / "snap" / "2")
    assert not (tmp_path / "snap" / "2").exists()


def test_untracked_data_is_linked_and_the_state_is_not(repo, tmp_path):
    (repo / ".venv" / "bin").mkdir(parents=True)
    (repo / ".venv" / "bin" / "python").write_text("#!/bin/sh\n")
    (repo / "data.bin").write_bytes(b"\x00" * 10)
    (repo / "src" / "extra.txt").write_text("untracked inside a tracked folder\n")
    (repo / ".autoresearch" / "runs").mkdir(parents=True)
    (repo / "autoresearch.jsonl").write_text("{}\n")
    (repo / "__pycache__").mkdir()
    dest = snapshot.export_commit(repo, "HEAD", tmp_path / "snap" / "3")
    linked = snapshot.link_untracked(repo, dest, skip=[".autoresearch/", "autoresearch.jsonl"])
    assert sorted(linked) == [".venv", "data.bin", "src/extra.txt"]
    assert os.path.realpath(dest / ".venv") == os.path.realpath(repo / ".venv")
    assert (dest / "data.bin").read_bytes() == b"\x00" * 10
    for absent in (".autoresearch", "autoresearch.jsonl", "__pycache__"):
        assert not os.path.lexists(dest / absent)
    snapshot.remove(dest)
    assert not dest.exists()
    assert (repo / ".venv" / "bin").is_dir() and (repo / "data.bin").exists(), "remove followed a link"


def test_files_as_bytes_round_trip(repo, tmp_path):
    files = snapshot.commit_files(repo, "HEAD")
    assert files["train.py"] == b"LR = 0.1\n" and files["src/model.py"] == b"DEPTH = 4\n"
    assert "link.py" not in files
    assert snapshot.commit_files(repo, "HEAD", ["src"]) == {"src/model.py": b"DEPTH = 4\n"}
    dest = snapshot.materialize(files, tmp_path / "remote", executable={"bench.sh"})
    assert (dest / "src" / "model.py").read_bytes() == b"DEPTH = 4\n"
    assert os.access(dest / "bench.sh", os.X_OK) and not os.access(dest / "train.py", os.X_OK)
    for bad in ("../escape.py", "/etc/x", "a/../../b"):
        with pytest.raises(ValueError):
            snapshot.materialize({bad: b"x"}, tmp_path / "remote2")
    assert not (tmp_path / "escape.py").exists()


def test_remove_handles_read_only_trees_and_sweep_keeps_named(repo, tmp_path):
    folder = tmp_path / "snaps"
    a = snapshot.export_commit(repo, "HEAD", folder / "1")
    b = snapshot.export_commit(repo, "HEAD", folder / "2")
    os.chmod(a / "src", 0o555)
    os.chmod(a, 0o555)
    snapshot.sweep(folder, keep={"2"})
    assert not a.exists() and b.exists()
