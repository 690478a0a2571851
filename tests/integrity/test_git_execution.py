"""The benchmark cannot make git run its code after the run.

git executes what the repository's configuration names: hooks (`.git/hooks/*`, `core.hooksPath`),
`core.fsmonitor` (on any index refresh: status, diff, reset), `gpg.program` with
`commit.gpgSign`, clean/smudge filters named by `.git/info/attributes`, external diff drivers.
The engine runs git itself, unsandboxed, right after the benchmark (the reset of a discard,
the run ref) and before the next one (the commit of the scope). A benchmark that plants one of
these gets its payload run outside the run, with the user's rights: here the payload touches a
marker and appends a forged `keep` to the log with a valid hash chain (the engine's own append).

Two layers hold it: every git command of the engine overrides what executes (hooks, fsmonitor,
signing, external diff and textconv), and the guard (integrity.py) records `.git/config`,
`.git/info/attributes`, the hooks folder and the user's global git config before the benchmark,
and after it verifies and restores them before any git command runs, marking the run `tampered`.
Under Landlock the writes into the git directory fail outright.
"""

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hostile import make

from autoresearch.isolation import sandbox

SRC = Path(__file__).resolve().parents[2] / "src"
MODES = [pytest.param(True, id="sandbox"), pytest.param(False, id="detection")]

FORGE = """import os, sys
sys.path.insert(0, {src!r})
marker = {marker!r}
with open(marker, "a") as f:
    f.write(" ".join(sys.argv[1:]) + "\\n")
if not os.path.exists(marker + ".forged"):
    open(marker + ".forged", "w").close()
    from autoresearch.store import log
    log.append({log!r}, log.Run.from_json({{"run": 99, "commit": "abcdef0", "metric": 0.001,
               "metrics": {{"loss": 0.001}}, "status": "keep", "description": "forged",
               "timestamp": 1, "segment": 0}}))
"""


def _mode(on):
    if on and not sandbox.abi():
        pytest.skip("Landlock is not available on this kernel")
    return on


def _payload(tmp_path, repo, name, tail=""):
    """An executable script outside the run: it records that it ran, forges a keep, then `tail`."""
    forge = tmp_path / "forge.py"
    forge.write_text(FORGE.format(src=str(SRC), marker=str(tmp_path / "marker"), log=str(repo.root / "autoresearch.jsonl")))
    script = tmp_path / name
    script.write_text(f"#!/bin/sh\n{sys.executable} {forge} {name} \"$@\"\n{tail}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def _git_config(key, value, file='"$L/.git/config"'):
    return f"git config --file {file} {key} '{value}'"


# Each attack: (what the benchmark runs, given the payload's path). All are written from inside the
# run's snapshot into the live repository ($L) or the user's home.
HOOKS = ("post-commit", "reference-transaction", "post-checkout", "pre-commit", "post-index-change")


def _attacks(p):
    hooks = "; ".join(f'mkdir -p "$L/.git/hooks"; cp {p} "$L/.git/hooks/{h}"' for h in HOOKS)
    elsewhere = f'mkdir -p "$L/../myhooks"; cp {p} "$L/../myhooks/post-commit"; ' \
                f'cp {p} "$L/../myhooks/reference-transaction"'
    return {
        "hooks": hooks,
        "hooks_path": elsewhere + '; git config --file "$L/.git/config" core.hooksPath "$L/../myhooks"',
        "fsmonitor": _git_config("core.fsmonitor", str(p)),
        "gpg": _git_config("commit.gpgSign", "true") + "; " + _git_config("gpg.program", str(p)),
        "filter": 'mkdir -p "$L/.git/info"; echo "* filter=evil diff=evil" > "$L/.git/info/attributes"; '
                  + _git_config("filter.evil.clean", f"{p} clean") + "; "
                  + _git_config("filter.evil.smudge", f"{p} smudge") + "; "
                  + _git_config("diff.evil.textconv", f"{p} textconv"),
        "diff_external": _git_config("diff.external", str(p)),
    }


GPG_TAIL = ("cat > /dev/null; echo '-----BEGIN PGP SIGNATURE-----'; echo x; echo '-----END PGP SIGNATURE-----'; "
            "echo >&2; echo '[GNUPG:] SIG_CREATED D 1 8 00 1 X' >&2")


def _next_runs(repo, n=2):
    """Runs after the attack: the engine commits, resets, diffs; each a tie with the baseline."""
    for i in range(n):
        rc, data = repo.attack(f"echo next {i}", message=f"next {i}")
        assert rc == 0, data
        assert data["record"]["status"] == "discard", data["record"]


def _assert_never_ran(tmp_path, repo):
    marker = tmp_path / "marker"
    assert not marker.exists(), f"the payload ran: {marker.read_text()}"
    records = repo.assert_log_as_written()
    assert 99 not in [r.get("run") for r in records]
    assert repo.best()["run"] == 1 and repo.best()["metric"] == 1.0


@pytest.mark.parametrize("on", MODES)
@pytest.mark.parametrize("attack", ["hooks", "hooks_path", "fsmonitor", "gpg", "filter", "diff_external"])
def test_benchmark_plants_what_git_executes(tmp_path, on, attack):
    repo = make(tmp_path / "r", sandbox=_mode(on))
    repo.baseline()
    config_before = (repo.root / ".git" / "config").read_bytes()
    hooks_before = sorted(os.listdir(repo.root / ".git" / "hooks"))
    p = _payload(tmp_path, repo, "payload", GPG_TAIL if attack == "gpg" else "")
    rc, data = repo.attack(_attacks(p)[attack] + "; true")
    assert rc == 0, data
    record = data["record"]
    if on:
        assert record["status"] == "discard", record   # the writes failed: a tie with the baseline
    else:
        assert record["status"] == "tampered", record
        assert record["metric"] is None
        assert any(".git/config" in t or ".git/hooks" in t for t in record["tampered"]), record
    assert (repo.root / ".git" / "config").read_bytes() == config_before
    assert sorted(os.listdir(repo.root / ".git" / "hooks")) == hooks_before
    assert not (repo.root / ".git" / "info" / "attributes").exists() or \
        "evil" not in (repo.root / ".git" / "info" / "attributes").read_text()
    _next_runs(repo)
    _assert_never_ran(tmp_path, repo)


@pytest.mark.parametrize("attack", ["hooks", "fsmonitor", "gpg"])
def test_what_is_planted_between_runs_never_runs_in_the_engine(tmp_path, attack):
    """Planted by a tool between runs (no guard is watching then): the engine's own git commands
    still run none of it. (The user's own git would: the PreToolUse hook refuses the writes.)"""
    home = tmp_path / "home"
    home.mkdir()
    repo = make(tmp_path / "r", sandbox=False)
    repo.env["HOME"] = str(home)
    repo.env.pop("XDG_CONFIG_HOME", None)
    repo.baseline()
    p = _payload(tmp_path, repo, "payload", GPG_TAIL if attack == "gpg" else "")
    git_dir = repo.root / ".git"
    if attack == "hooks":
        for h in HOOKS:
            (git_dir / "hooks" / h).write_bytes(p.read_bytes())
            (git_dir / "hooks" / h).chmod(0o755)
    elif attack == "fsmonitor":
        repo.git("config", "core.fsmonitor", str(p))
    else:
        repo.git("config", "commit.gpgSign", "true")
        repo.git("config", "gpg.program", str(p))
    _next_runs(repo, 2)
    marker = tmp_path / "marker"
    assert not marker.exists(), f"the payload ran: {marker.read_text()}"
    assert repo.best()["run"] == 1
    repo.assert_log_as_written()


@pytest.mark.parametrize("on", MODES)
def test_benchmark_writes_the_users_global_git_config(tmp_path, on):
    """~/.gitconfig: under the sandbox the home folder is read-only to the benchmark (the write
    fails); with detection alone the guard notes it, finds the change and restores it before git
    runs again."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Person\n")
    repo = make(tmp_path / "r", sandbox=_mode(on))
    repo.env["HOME"] = str(home)
    repo.env.pop("XDG_CONFIG_HOME", None)
    repo.baseline()
    p = _payload(tmp_path, repo, "payload")
    rc, data = repo.attack(
        f'printf "[filter \\"evil\\"]\\n\\tclean = {p} clean\\n[core]\\n\\tfsmonitor = {p}\\n" >> "$HOME/.gitconfig"; '
        f'mkdir -p "$HOME/.config/git"; echo "* filter=evil" > "$HOME/.config/git/attributes"; true')
    record = data["record"]
    assert record["status"] == ("discard" if on else "tampered"), record
    assert (home / ".gitconfig").read_text() == "[user]\n\tname = Person\n"
    assert not (home / ".config" / "git" / "attributes").exists()
    if not on:
        assert any(".gitconfig" in t for t in record["tampered"]) and any("attributes" in t for t in record["tampered"])
        aside = [p.read_text() for p in (repo.root / ".autoresearch" / "foreign").iterdir() if "gitconfig" in p.name]
        assert any("fsmonitor" in text for text in aside), "the changed file was not kept aside"
    _next_runs(repo)
    _assert_never_ran(tmp_path, repo)


def test_the_engine_git_runs_with_execution_overridden(tmp_path):
    """The arguments every engine git call carries (gitops.NEUTRAL), read back from git itself."""
    from autoresearch.store import gitops
    repo = make(tmp_path / "r", sandbox=False)
    repo.git("config", "core.hooksPath", "elsewhere")
    repo.git("config", "core.fsmonitor", "/bin/false")
    repo.git("config", "commit.gpgSign", "true")
    assert gitops.git(str(repo.root), "config", "core.hooksPath") == os.devnull
    assert gitops.git(str(repo.root), "config", "core.fsmonitor") == "false"
    assert gitops.git(str(repo.root), "config", "commit.gpgSign") == "false"
    proc = subprocess.run(["git", *gitops.NEUTRAL, "config", "core.hooksPath"], cwd=repo.root,
                          capture_output=True, text=True)
    assert proc.stdout.strip() == os.devnull


def test_a_home_without_a_config_folder_and_a_hooks_path_of_the_user(tmp_path):
    """`~/.config` is a file, and the repository keeps its hooks elsewhere (core.hooksPath, as
    husky does): runs go on, and a hook planted there is removed and never runs."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".config").write_text("not a folder\n")
    repo = make(tmp_path / "r", sandbox=False)
    repo.env["HOME"] = str(home)
    repo.env.pop("XDG_CONFIG_HOME", None)
    (repo.root / ".hooks").mkdir()
    repo.git("config", "core.hooksPath", ".hooks")
    repo.baseline()
    p = _payload(tmp_path, repo, "payload")
    rc, data = repo.attack(f'cp {p} "$L/.hooks/post-commit"; cp {p} "$L/.hooks/reference-transaction"; true')
    record = data["record"]
    assert record["status"] == "tampered" and any(".hooks/post-commit" in t for t in record["tampered"]), record
    assert os.listdir(repo.root / ".hooks") == []
    _next_runs(repo)
    _assert_never_ran(tmp_path, repo)
