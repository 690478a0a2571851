"""The chain's anchor outside the repo: a log rewritten and re-chained with the agent's tools is
caught by `status`, `verify` and `run`; a forged waiting result in .git is not appended.

The forger below is what an agent can do with a Python script: it knows the chain's format
(chain.py is in the plugin) and can write everything in the research repo, `.git` included."""

import json
import shutil
import subprocess

import hostile

from autoresearch.store import anchor, chain


def rechain(root, change):
    """Rewrite the log with `change(records)` and chain it again, tip and engine copy included,
    exactly as the engine would have written it."""
    lines = (root / "autoresearch.jsonl").read_text().splitlines()
    records = change([json.loads(line) for line in lines])
    prev, out = chain.GENESIS, []
    for record in records:
        record["prev"] = prev
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()
        out.append(line)
        prev = chain.line_hash(line)
    data = b"\n".join(out) + b"\n"
    (root / "autoresearch.jsonl").write_bytes(data)
    (root / ".git" / "autoresearch" / "log.jsonl").write_bytes(data)
    before = chain.line_hash(out[-2]) if len(out) > 1 else chain.GENESIS
    (root / ".git" / "autoresearch" / "tip.json").write_text(
        json.dumps({"hash": prev, "before": before, "size": len(data)}) + "\n")


def forge_best(records):
    for r in records:
        if r.get("run") == 2:
            r.update(status="keep", metric=0.001, metrics={"loss": 0.001}, description="forged")
    return records


def test_a_log_rewritten_and_rechained_disagrees_with_the_anchor(tmp_path):
    repo = hostile.make(tmp_path / "r")
    repo.baseline()
    repo.attack("echo honest", "second")
    assert repo.status()["anchor"]["state"] == "agrees"
    rechain(repo.root, forge_best)
    # The chain alone takes the forgery for the engine's own log.
    records, warnings = repo.engine_view()
    assert warnings == [] and records[-1]["metric"] == 0.001
    status = repo.status()
    assert status["anchor"]["state"] == "disagrees", status["anchor"]
    text = repo.ok("status").stdout
    assert text.startswith("WARNING: the log disagrees with the engine's anchor"), text
    assert "the chain's tip in .git/autoresearch names the record with hash" in text
    assert "rewritten outside the engine" in text
    proc = repo.cli("verify")
    assert proc.stdout.startswith("WARNING: the log disagrees with the engine's anchor"), proc.stdout
    # No run goes on that log (it would move the anchor onto the forged chain).
    before = (repo.root / "autoresearch.jsonl").read_bytes()
    proc = repo.cli("run", "-m", "on a forged log")
    assert proc.returncode == 3 and "the log disagrees with the engine's anchor" in proc.stderr, proc.stderr
    assert (repo.root / "autoresearch.jsonl").read_bytes() == before
    # The person's way out, as the message says: remove the anchor, a new one starts.
    path = proc.stderr.split("remove ", 1)[1].split(" and the next run", 1)[0]
    assert path == anchor.anchor_path(str(repo.root))
    (tmp_path / "aside").write_bytes(open(path, "rb").read())
    subprocess.run(["rm", path], check=True)
    assert repo.status()["anchor"]["state"] == "none"


def test_a_tip_deleted_or_a_log_replaced_without_its_line_disagrees(tmp_path):
    repo = hostile.make(tmp_path / "r")
    repo.baseline()
    tip = repo.root / ".git" / "autoresearch" / "tip.json"
    saved = tip.read_bytes()
    tip.unlink()   # without a tip the chain reads the log as it is: any line would count
    assert repo.status()["anchor"]["state"] == "disagrees"
    tip.write_bytes(saved)
    assert repo.status()["anchor"]["state"] == "agrees"
    # The tip kept, the log and the copy re-chained with a forged run: they no longer hold its record.
    repo.attack("echo honest", "second")
    saved = tip.read_bytes()
    rechain(repo.root, forge_best)
    tip.write_bytes(saved)
    status = repo.status()
    assert status["anchor"]["state"] == "disagrees" and "neither the log nor the engine's copy" in \
        status["anchor"]["text"], status["anchor"]


def test_a_forged_waiting_result_in_git_is_not_appended(tmp_path):
    repo = hostile.make(tmp_path / "r")
    repo.baseline()
    before = (repo.root / "autoresearch.jsonl").read_bytes()
    for folder in (repo.root / ".git" / "autoresearch" / "pending", repo.root / ".autoresearch" / "pending"):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "2.json").write_text(hostile.forged_keep(2) + "\n")
    status = repo.status()
    assert status["best"]["metric"] == 1.0 and (repo.root / "autoresearch.jsonl").read_bytes() == before
    rc, data = repo.attack("echo honest", "next")
    assert rc == 0 and data["record"]["run"] == 2 and data["record"]["description"] == "next", data
    assert repo.best()["metric"] == 1.0
    repo.assert_log_as_written()


def test_a_new_place_has_no_anchor_yet_and_the_next_run_starts_one(tmp_path):
    repo = hostile.make(tmp_path / "r")
    repo.baseline()
    moved = tmp_path / "moved"
    shutil.copytree(repo.root, moved, symlinks=True)
    other = hostile.Hostile(moved)
    status = other.status()
    assert status["anchor"]["state"] == "none" and "no" in status["anchor"]["text"], status["anchor"]
    assert "anchor: none for this log on this machine yet" in other.ok("status").stdout
    rc, data = other.attack("echo honest", "first run here")
    assert rc == 0, data
    held = other.status()["anchor"]
    assert held["state"] == "agrees" and "(3 records)" in held["text"]   # the header, the baseline, this run, held
    # The original place keeps its own anchor.
    assert repo.status()["anchor"]["state"] == "agrees"
