"""One way for tests to make a git repository: created, with a local identity, files committed.

Every test that needs a research repo (or any repo) starts here, so a change to how the engine
expects a repository to look (an identity, a first commit) is made once.
"""

import subprocess
from pathlib import Path

IDENTITY = ("Test", "t@example.com")


def git(root, *args, **kwargs):
    """`git ARGS` in root; raises on failure. Returns the CompletedProcess (text)."""
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True, **kwargs)


def git_repo(root, files=None, message="start", identity=IDENTITY):
    """A git repository at `root` (made if missing) with `identity` in its local config; when
    `files` (name -> text) is given they are written and committed as one commit, `message`."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q")
    git(root, "config", "user.name", identity[0])
    git(root, "config", "user.email", identity[1])
    if files is not None:
        for name, text in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", message)
    return root
