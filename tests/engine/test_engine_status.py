"""`status --json`, `brief` and `export`: computed from the log alone, and agreeing with it."""

import json
import shutil

import pytest
from helpers_engine import repo, make  # noqa: F401 (fixtures)

CONTRACT_KEYS = {"segment", "name", "metric_name", "metric_unit", "direction", "runs", "total_runs", "counts",
                 "baseline", "best", "noise", "confidence", "last_runs", "consecutive_non_keeps",
                 "max_iterations", "iterations_left", "active", "owner_session", "running"}


def _history(repo):
    repo.experiment("1.0", "baseline")
    repo.experiment("0.8", "improve")
    repo.experiment("0.9", "regress")
    repo.experiment("crash", "break it")
    repo.experiment("0.85", "regress again")


def test_status_json_agrees_with_the_log(make):
    repo = make("--max-iterations", "10", "--unit", "nats")
    _history(repo)
    s = repo.status()
    assert CONTRACT_KEYS <= set(s)
    runs = repo.runs()
    assert s["runs"] == s["total_runs"] == len(runs) == 5
    assert s["counts"] == {"keep": 2, "discard": 2, "crash": 1, "timeout": 0, "checks_failed": 0, "tampered": 0}
    kept = [r for r in runs if r["status"] == "keep"]
    assert s["baseline"] == {"run": 1, "commit": kept[0]["commit"], "metric": 1.0, "description": "baseline"}
    assert s["best"] == {"run": 2, "commit": kept[1]["commit"], "metric": 0.8, "description": "improve"}
    assert s["best"]["metric"] == min(r["metric"] for r in kept)
    assert s["consecutive_non_keeps"] == 3
    assert s["iterations_left"] == 5 and s["max_iterations"] == 10
    assert s["last_runs"][-1]["run"] == 5 and len(s["last_runs"]) == 5
    assert s["active"] is True and s["running"] is None
    assert (s["metric_name"], s["metric_unit"], s["direction"]) == ("loss", "nats", "lower")
    assert s["noise"] is None


def test_status_is_the_same_from_a_copy_of_the_log(make, tmp_path):
    """Nothing but the log (and session.json) feeds the status: a copy in another repo gives the same.
    The log's hash chain is part of it: its tip and the engine's copy in .git/autoresearch/ go along
    (a log copied alone is not the one the engine last wrote there, see tests/integrity), and so
    does the anchor in the state folder."""
    repo = make()
    _history(repo)
    other = make()
    shutil.copy(repo.root / "autoresearch.jsonl", other.root / "autoresearch.jsonl")
    shutil.rmtree(other.root / ".git" / "autoresearch")
    shutil.copytree(repo.root / ".git" / "autoresearch", other.root / ".git" / "autoresearch")
    # ... and so does its anchor outside the repo (anchor.py), else the other repo's own disagrees.
    from autoresearch.store import anchor
    shutil.copy(anchor.anchor_path(str(repo.root)), anchor.anchor_path(str(other.root)))
    a, b = repo.status(), other.status()
    assert a.pop("anchor")["state"] == b.pop("anchor")["state"] == "agrees"
    assert {k: v for k, v in a.items()} == {k: v for k, v in b.items()}


def test_status_skips_malformed_lines_with_a_warning(repo):
    repo.experiment("1.0")
    with open(repo.root / "autoresearch.jsonl", "a") as f:
        f.write('{"run": 99, "status": "ke')  # a torn line, no newline
    proc = repo.cli("status", "--json")
    assert proc.returncode == 0 and proc.stderr == ""
    data = json.loads(proc.stdout)
    assert data["runs"] == 1 and any("skipped malformed line" in w for w in data["warnings"])
    assert "skipped malformed line" in repo.cli("status").stderr
    # The next append starts on a fresh line: the torn one stays isolated.
    repo.experiment("0.9")
    assert repo.status()["runs"] == 2


def test_stop_and_resume_flip_active(repo):
    repo.ok("stop")
    assert repo.status()["active"] is False
    repo.ok("resume", "--session", "new-owner")
    s = repo.status()
    assert s["active"] is True and s["owner_session"] == "new-owner"


def test_brief_is_compact_and_actionable(make):
    repo = make("--max-iterations", "20")
    _history(repo)
    proc = repo.ok("brief")
    text = proc.stdout
    assert len(text) < 1500
    for needle in ("lower loss", "Best: run 2 0.8", "Baseline: run 1 1", "#5 discard", "#4 crash",
                   "Consecutive non-keeps: 3", "Iterations left: 15", "edit only value.txt",
                   "bench.sh", 'autoresearch run -m "'):
        assert needle in text, needle
    rc, data = repo.json("brief")
    assert rc == 0 and data["text"] == text.rstrip("\n") and data["state"]["best"]["run"] == 2


def test_brief_before_any_run(repo):
    text = repo.ok("brief").stdout
    assert "No baseline yet" in text and "autoresearch run -m" in text


def test_brief_stays_short_with_long_descriptions(repo):
    repo.experiment("1.0", "x" * 5000)
    for i in range(6):
        repo.experiment(f"0.{9 - i}", "y" * 5000)
    assert len(repo.ok("brief").stdout) < 1500


def test_export_tsv_in_karpathys_columns(repo, tmp_path):
    _history(repo)
    out = tmp_path / "results.tsv"
    repo.ok("export", "--tsv", str(out))
    lines = out.read_text().splitlines()
    assert lines[0] == "commit\tloss\tmemory_gb\tstatus\tdescription"
    rows = [line.split("\t") for line in lines[1:]]
    assert [r[3] for r in rows] == ["keep", "keep", "discard", "crash", "discard"]
    assert rows[0][1:3] == ["1.000000", "2.0"] and rows[3][1:3] == ["0.000000", "0.0"]
    assert all(len(r) == 5 and len(r[0]) == 7 for r in rows)


@pytest.mark.parametrize("description", ["tab\there", "new\nline", "quote \" and \\ back"])
def test_export_keeps_rows_intact(repo, tmp_path, description):
    repo.experiment("1.0", description)
    text = repo.ok("export", "--tsv", "-").stdout
    assert len(text.splitlines()) == 2 and text.splitlines()[1].count("\t") == 4


def test_export_to_stdout_with_json_puts_the_tsv_in_the_object(repo):
    _history(repo)
    plain = repo.ok("export", "--tsv", "-").stdout
    rc, data = repo.json("export", "--tsv", "-")
    assert rc == 0 and data["tsv"] == plain and data["rows"] == 5 and data["path"] is None


def test_a_log_without_a_valid_config_header_is_refused_by_every_command(repo):
    """A torn only header: status/brief said "None None is better" and exited 0."""
    log = repo.root / "autoresearch.jsonl"
    log.write_bytes(log.read_bytes()[:40])  # the header, torn
    messages = []
    for args in (["status"], ["brief"], ["run", "-q", "-m", "x"], ["stop"]):
        rc, data = repo.json(*args)
        assert rc == 3 and "no valid config header" in data["message"], data
        messages.append(data["message"])
    assert len(set(messages)) == 1 and "autoresearch init" in messages[0]
    repo.ok("init", "--metric", "loss", "--command", "bash bench.sh", "--scope", "value.txt", "--fixed", "bench.sh")
    assert repo.experiment("1.0")["status"] == "keep"
