"""gitops.toplevel finds the work tree without starting git in the common case: it must give
what `git rev-parse --show-toplevel` gives, in every layout below (real git repos)."""

import os
import subprocess

import pytest

from autoresearch.store import gitops


def git_says(path):
    proc = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=path, capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


@pytest.fixture
def layouts(tmp_path):
    main = tmp_path / "main"
    (main / "a" / "b").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(main)], check=True)
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    (main / "f").write_text("x\n")
    subprocess.run(["git", "add", "f"], cwd=main, check=True)
    subprocess.run(["git", "commit", "-qm", "x"], cwd=main, check=True, env=env)
    subprocess.run(["git", "worktree", "add", "-q", str(tmp_path / "linked")], cwd=main, check=True)
    subprocess.run(["git", "init", "-q", "--bare", str(main / "a" / "bare.git")], check=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "link").symlink_to(main / "a")
    return [main, main / "a" / "b", main / ".git", main / ".git" / "refs", tmp_path / "linked",
            main / "a" / "bare.git", tmp_path / "outside", tmp_path / "link", tmp_path]


def test_the_work_tree_is_the_one_git_names(layouts):
    for path in layouts:
        assert gitops.toplevel(str(path)) == git_says(path), path


def test_git_decides_when_the_environment_moves_the_repository(layouts, monkeypatch):
    main = layouts[0]
    monkeypatch.setenv("GIT_DIR", str(main / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(layouts[6]))
    assert gitops._nearest_work_tree(str(main)) is None
    assert gitops.toplevel(str(main)) == git_says(main)
