"""The PreToolUse hook against the corpus (hook_corpus.py): every write to a protected file is
denied, every other command passes; plus the tools other than Bash (MCP file tools, the
engine's state, reads of the hidden holdout).

The corpus is judged in this process through the hook's own `decision()` (the same code the
hook script runs; 240 subprocesses would cost a minute); test_plugin_hooks.py runs the hook as
Claude Code does, as a process fed the JSON on stdin, and so does benchmarks/hook_corpus.py.
"""

import json
import subprocess
import sys

import pytest

import hook_corpus
from conftest import ROOT, engine_env

sys.path.insert(0, str(ROOT / "hooks"))
import pre_tool_use  # noqa: E402


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return hook_corpus.make_repo(tmp_path_factory.mktemp("corpus") / "research", engine_env())


@pytest.mark.parametrize("command", hook_corpus.WRITES)
def test_every_write_to_a_protected_file_is_denied(repo, command):
    reason = pre_tool_use.decision(hook_corpus.payload(repo, command))
    assert reason and reason.startswith("autoresearch:"), command


@pytest.mark.parametrize("command", hook_corpus.READS)
def test_commands_that_leave_protected_files_alone_pass(repo, command):
    assert pre_tool_use.decision(hook_corpus.payload(repo, command)) is None, command


def test_the_corpus_is_big_enough_and_its_writes_really_write(repo, tmp_path):
    """A sample of the writes, run for real in a copy of the repo, does change a protected file."""
    assert len(hook_corpus.WRITES) + len(hook_corpus.READS) >= 120
    sample = ["bash -c 'echo x > prepare.py'", "f=prepare.py; echo x > $f", "make hack", "make deep",
              "git checkout other -- prepare.py", "git apply evil.patch", "tar xf evil.tar", "git stash pop",
              "echo prepare.py | xargs rm", "find . -name prepare.py -exec sed -i 's/fixed/easier/' {} \\;",
              "echo `rm prepare.py`", "(echo hi)#'\nrm prepare.py", "echo $(true)#x > prepare.py",
              "echo $'a\\' #' > prepare.py",
              "awk -i inplace '{print}' prepare.py" if _has("gawk") else "patch < evil.patch",
              "printf ',s/fixed/easier/\\nw\\n' | ed -s prepare.py" if _has("ed") else "unzip -o evil.zip",
              "python3 -c \"open('prepare.py', 'w').write('EVAL = 1')\"", "git restore --source other prepare.py",
              hook_corpus.WRITES[hook_corpus.WRITES.index("sort -o prepare.py train.py") + 1]]
    assert all(c in hook_corpus.WRITES for c in sample)
    for command in sample:
        copy = tmp_path / f"copy{abs(hash(command))}"
        subprocess.run(["cp", "-a", str(repo), str(copy)], check=True)
        before = (copy / "prepare.py").read_bytes()
        subprocess.run(["bash", "-c", command], cwd=copy, capture_output=True, timeout=30)
        after = (copy / "prepare.py").read_bytes() if (copy / "prepare.py").exists() else None
        assert after != before, command


def _has(tool):
    import shutil
    return shutil.which(tool) is not None


def call(repo, tool, **tool_input):
    return pre_tool_use.decision({"cwd": str(repo), "tool_name": tool, "tool_input": tool_input,
                                  "hook_event_name": "PreToolUse"})


@pytest.mark.parametrize("tool,args", [
    ("mcp__filesystem__write_file", {"path": "prepare.py", "content": "x"}),
    ("mcp__filesystem__edit_file", {"path": "{repo}/prepare.py", "edits": [{"oldText": "a", "newText": "b"}]}),
    ("mcp__filesystem__move_file", {"source": "{repo}/prepare.py", "destination": "/tmp/p.py"}),
    ("mcp__fs__delete", {"paths": ["train.py", "autoresearch.jsonl"]}),
    ("Write", {"file_path": ".autoresearch/current.json", "content": "{}"}),
    ("Edit", {"file_path": "{repo}/.autoresearch/session.json"}),
])
def test_mcp_file_tools_and_the_engines_state_are_protected(repo, tool, args):
    args = json.loads(json.dumps(args).replace("{repo}", str(repo)))
    assert call(repo, tool, **args).startswith("autoresearch:")


def test_mcp_reads_and_edits_in_scope_pass(repo):
    assert call(repo, "mcp__filesystem__read_file", path="prepare.py") is None
    assert call(repo, "mcp__filesystem__write_file", path="train.py", content="x") is None
    assert call(repo, "Read", file_path=str(repo / "prepare.py")) is None


@pytest.fixture
def holdout(tmp_path, monkeypatch, repo):
    data = tmp_path / "cache"
    (data / "prepared").mkdir(parents=True)
    for name in ("train.bin", "val.bin", "holdout.bin", "holdout.idx.npy"):
        (data / "prepared" / name).write_bytes(b"\0" * 16)
    monkeypatch.setenv("AUTORESEARCH_CACHE", str(data))
    run = repo / ".autoresearch" / "runs" / "1"
    (run / "holdout.json").write_text('{"holdout_bpb": 0.97}\n')
    yield data / "prepared"
    (run / "holdout.json").unlink()


def test_the_holdout_is_never_read(repo, holdout):
    assert "holdout" in call(repo, "Read", file_path=str(holdout / "holdout.bin"))
    assert "holdout" in call(repo, "Read", file_path=".autoresearch/runs/1/holdout.json")
    assert "holdout" in call(repo, "Grep", pattern="x", path=str(holdout))
    assert "holdout" in call(repo, "mcp__filesystem__read_file", path=str(holdout / "holdout.idx.npy"))
    for command in [f"cat {holdout}/holdout.bin", "cat .autoresearch/runs/1/holdout.json",
                    f"xxd {holdout}/holdout.bin | head", f"cp {holdout}/holdout.bin /tmp/h",
                    "python3 -c \"import numpy as np; np.fromfile('" + str(holdout) + "/holdout.bin')\"",
                    "python3 -c 'import prepare; print(prepare.evaluate_holdout())'",
                    f"grep -r . {holdout}", "grep -rn bpb .autoresearch/runs", f"tar czf /tmp/d.tgz {holdout}"]:
        assert "holdout" in (call(repo, "Bash", command=command) or ""), command


def test_the_commands_and_the_page_that_show_the_holdout_are_refused(repo, holdout):
    for command in ["autoresearch verify", "cd /r && autoresearch verify --json", "python3 -m autoresearch verify",
                    "autoresearch report --holdout -o /tmp/r.html", "bin/autoresearch   verify | head"]:
        assert "holdout" in (call(repo, "Bash", command=command) or ""), command
    assert "holdout" in call(repo, "Read", file_path=".autoresearch/holdout-report.html")
    for command in ["autoresearch report", "autoresearch status", "autoresearch run -m 'verify the loss'",
                    "git commit -m 'verify' && autoresearch run -m x", 'autoresearch run -m "please verify it"']:
        assert call(repo, "Bash", command=command) is None, command


def test_the_rest_of_the_data_and_the_runs_stay_readable(repo, holdout):
    assert call(repo, "Read", file_path=str(holdout / "val.bin")) is None
    assert call(repo, "Bash", command=f"ls -la {holdout}") is None
    assert call(repo, "Bash", command="cat .autoresearch/runs/1/output.log") is None
    assert call(repo, "Bash", command="python3 -c 'print(1)'") is None


def test_the_hook_runs_for_every_tool_it_judges():
    """hooks.json must send the tools this hook judges to it (a regex per Claude Code)."""
    import re
    matcher = json.loads((ROOT / "hooks" / "hooks.json").read_text())["hooks"]["PreToolUse"][0]["matcher"]
    for tool in ("Edit", "Write", "MultiEdit", "NotebookEdit", "Bash", "Read", "Grep", "mcp__filesystem__write_file"):
        assert re.fullmatch(matcher, tool), tool
    assert not re.fullmatch(matcher, "WebFetch")


def test_the_log_cache_key_is_not_read(repo):
    assert "secret" in call(repo, "Read", file_path=".git/autoresearch/cache.key")
    assert "secret" in call(repo, "Bash", command="cat .git/autoresearch/cache.key")


@pytest.mark.parametrize("command,changes", hook_corpus.BYPASSES)
def test_each_closed_bypass_really_changes_what_decides(repo, tmp_path, command, changes):
    """Run for real in a copy of the repo: the command does change the fixed file, what git reads
    as it, or the repository's config, so the hook's refusal stands for a real attack."""
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(repo), str(copy)], check=True)

    def seen():
        if changes == "file":
            return (copy / "prepare.py").read_bytes() if (copy / "prepare.py").exists() else None
        if changes == "git":
            return subprocess.run(["git", "show", "HEAD:prepare.py"], cwd=copy, capture_output=True).stdout
        return (copy / ".git" / "config").read_bytes()

    before = seen()
    subprocess.run(["bash", "-c", command], cwd=copy, capture_output=True, timeout=30)
    assert seen() != before, command
