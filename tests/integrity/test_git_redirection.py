"""Git cannot be redirected: what the benchmark runs is the committed harness, byte for byte.

The agent's one-line attacks, tried with real git between runs (the hostile repo's eval.sh
prints the honest loss=1.0; the forged bytes print 0.25): a replacement object for the
evaluator's blob, a grafts file, and a smudge filter that rewrites the evaluator at checkout.
Each is refused or recorded `tampered` (the benchmark not started); none is ever kept, and
the person's `status` shows the honest best."""

import subprocess
import sys
from pathlib import Path

import hostile

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
from autoresearch.isolation import snapshot  # noqa: E402

FORGED_EVAL = 'echo "METRIC loss=0.25"\n'


def _git(root, *args, input=None):
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True,
                          input=input).stdout.strip()


def test_a_replaced_evaluator_blob_is_refused_and_never_measured(tmp_path):
    repo = hostile.make(tmp_path / "r")
    repo.baseline()
    real = _git(repo.root, "rev-parse", "HEAD:eval.sh")
    fake = _git(repo.root, "hash-object", "-w", "--stdin", input=FORGED_EVAL)
    _git(repo.root, "replace", real, fake)
    assert _git(repo.root, "show", "HEAD:eval.sh") + "\n" == FORGED_EVAL   # the attack works for plain git
    # The engine's own snapshot of the commit ignores the replacement.
    dest = snapshot.export_commit(repo.root, _git(repo.root, "rev-parse", "HEAD"), tmp_path / "snap")
    assert (dest / "eval.sh").read_text() == hostile.EVAL
    before = repo.snapshot()
    (repo.root / "train.sh").write_text("echo changed\n")
    proc = repo.cli("run", "-m", "after a git replace")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "replacement objects (refs/replace/" in proc.stderr and "git replace -d" in proc.stderr, proc.stderr
    assert repo.snapshot() == before
    assert repo.best()["metric"] == 1.0
    # The advice works: after it the run goes on and measures the real evaluator.
    remove = proc.stderr.split("remove them with `", 1)[1].split("`", 1)[0]
    subprocess.run(remove, shell=True, cwd=repo.root, check=True)
    rc, data = repo.json("run", "-q", "-m", "after removing the replacement")
    assert rc == 0 and data["record"]["metric"] == 1.0 and data["record"]["status"] == "discard", data


def test_a_grafts_file_is_refused(tmp_path):
    repo = hostile.make(tmp_path / "r")
    repo.baseline()
    grafts = repo.root / ".git" / "info" / "grafts"
    grafts.parent.mkdir(exist_ok=True)
    grafts.write_text(_git(repo.root, "rev-parse", "HEAD") + "\n")
    proc = repo.cli("run", "-m", "with grafts")
    assert proc.returncode == 3 and "a grafts file (.git/info/grafts); remove it with `rm .git/info/grafts`" \
        in proc.stderr, proc.stderr


def test_a_smudge_filter_rewriting_the_evaluator_is_caught_in_the_snapshot(tmp_path):
    """Planted between runs (not during one, where the guard restores git's setup), a filter
    changes the evaluator only in the run's snapshot: the content check before the benchmark
    finds it, and nothing runs."""
    repo = hostile.make(tmp_path / "r")
    repo.baseline()
    _git(repo.root, "config", "filter.evil.smudge", "sed s/loss=1.0/loss=0.25/")
    _git(repo.root, "config", "filter.evil.clean", "cat")
    (repo.root / ".git" / "info").mkdir(exist_ok=True)
    (repo.root / ".git" / "info" / "attributes").write_text("eval.sh filter=evil\n")
    rc, data = repo.attack("echo hi > \"$AUTORESEARCH_RUN_DIR/ran\"")
    record = data["record"]
    assert record["status"] == "tampered" and record["metric"] is None, record
    assert "fixed file eval.sh (in the run's snapshot) differs from the sha256 recorded at init" in record["reason"]
    assert "the benchmark was not started" in record["reason"]
    assert not (repo.root / record["run_dir"] / "ran").exists()
    assert repo.best()["metric"] == 1.0
    repo.assert_harness_intact()
