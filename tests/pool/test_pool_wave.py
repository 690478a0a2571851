"""The wave flow for real: a local Ray head with 4 logical GPUs, real git, the real CLI.

One pool serves the whole module (Ray's start-up is the slow part); the tests run in order
on one research repo, each from whatever incumbent the one before left.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

from helpers_pool import SRC, cleanup, make_repo, ray_env, require_ray


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    require_ray()
    base, env = ray_env()
    # The controls sleep 4 s and the candidates 5 s: the four runs of a wave overlap even when
    # the shared machine is slow to start one of them.
    repo = make_repo(tmp_path_factory.mktemp("pool") / "research", env, value="1.0:4")
    markers = os.path.join(base, "markers")
    os.makedirs(markers)
    repo.env["AR_TEST_MARKERS"] = markers     # the local head's workers inherit the runner's env
    repo.ok("pool", "up", "--gpus", "4", "--cpus", "2")
    try:
        yield repo
    finally:
        repo.cli("pool", "down")
        cleanup(base)


def test_pool_up_refuses_a_node_without_the_prepared_data(tmp_path):
    # Runs before the module's pool starts (one local Ray at a time on this machine).
    require_ray()
    base, env = ray_env()
    try:
        other = make_repo(tmp_path / "research", env)
        missing = tmp_path / "cache" / "prepared" / "manifest.json"
        other.env["AUTORESEARCH_POOL_DATA"] = str(missing)
        proc = other.cli("pool", "up", "--gpus", "2", "--cpus", "1")
        assert proc.returncode == 3, proc.stderr
        assert "prepared data is missing" in proc.stderr and str(missing) in proc.stderr
        assert "uv run prepare.py" in proc.stderr
        rc, status = other.json("pool", "status")
        assert not status["up"]
    finally:
        cleanup(base)


def test_pool_status_lists_the_logical_gpus_and_listens_on_loopback_only(repo):
    rc, data = repo.json("pool", "status")
    assert rc == 0 and data["up"] and data["gpus"] == 4 and data["local"]
    assert [s["index"] for s in data["slots"]] == [0, 1, 2, 3]
    assert data["classes"] == ["logical GPU"] and data["queued"] == 0
    assert data["address"].startswith("127.0.0.1:")
    info = json.loads((repo.root / ".autoresearch/pool/pool.json").read_text())
    assert _listening_addresses(_tree(info["pid"])) <= {"127.0.0.1", "::ffff:127.0.0.1", "::1"}


def test_a_wave_of_three_candidates_and_the_control_runs_at_once(repo):
    repo.ok("run", "-m", "baseline")           # with a pool up: a calibration wave of one
    start = repo.git("rev-parse", "HEAD")
    ids = [repo.submit(v)["id"] for v in ("0.5:5", "0.9:5", "1.2:5")]
    # Each submit committed its change to the candidate's own ref, not the branch, and put
    # the work tree back at the incumbent.
    assert repo.git("rev-parse", "HEAD") == start
    assert (repo.root / "value.txt").read_text() == "1.0:4\n"
    assert repo.git("status", "--porcelain", "--untracked-files=no") == ""
    assert repo.git("show", f"refs/autoresearch/candidates/{ids[0]}:value.txt") == "0.5:5"

    # The four runs hold at a barrier until all four have started (120 s at most), so they
    # overlap however slowly a loaded machine starts them, if the pool runs them at once.
    markers = Path(repo.env["AR_TEST_MARKERS"])
    for old in markers.glob("start-*"):
        old.unlink()
    (markers / "barrier").write_text("4\n")
    rc, data = repo.json("wait", "--timeout", "200")
    (markers / "barrier").unlink()
    assert rc == 0 and data["status"] == "done"
    w = data["wave"]
    first = [r for r in data["runs"] if r["role"] in ("candidate", "control")][:4]
    assert sorted(r["role"] for r in first) == ["candidate"] * 3 + ["control"]
    seen = [repo.seen(r["run"]) for r in first]
    # They overlapped in time, each on its own GPU.
    assert max(s[1] for s in seen) < min(s[2] for s in seen), seen
    assert sorted(s[0] for s in seen) == ["0", "1", "2", "3"], seen
    assert all(r["slot"]["cuda_visible_devices"] == s[0] for r, s in zip(first, seen))

    logged = [r for r in repo.runs() if r.get("wave") == w]
    assert [r["run"] for r in logged] == [r["run"] for r in data["runs"]]       # run-number order
    assert sum(r["role"] == "candidate" for r in logged) == 3
    controls = [r for r in logged if r["role"] == "control"]
    assert controls and all(r["control"] and r["status"] == "discard" for r in controls)
    kept = [r for r in logged if r["status"] == "keep"]
    assert len(kept) == 1 and kept[0]["metric"] == 0.5 and kept[0]["candidate"] == ids[0]
    assert repo.git("rev-parse", "--short=7", "HEAD") == kept[0]["commit"]
    assert (repo.root / "value.txt").read_text() == "0.5:5\n"
    runner_up = next(r for r in logged if r.get("candidate") == ids[1])
    assert runner_up["status"] == "discard" and runner_up["runner_up"]
    # Every run kept its commit; the candidates' own refs are gone once recorded.
    for r in logged:
        assert repo.git("rev-parse", "--short=7", f"refs/autoresearch/runs/{r['run']}") == r["commit"]
    assert repo.git("for-each-ref", "refs/autoresearch/candidates") == ""
    # `status` counts candidates against the budget, not the pool's controls.
    rc, status = repo.json("status")
    assert status["best"]["run"] == kept[0]["run"]


def test_wait_never_blocks_past_its_timeout_and_the_next_wait_picks_the_wave_up(repo):
    repo.submit("0.45:6")
    rc, data = repo.json("wait", "--timeout", "1")
    assert rc == 0 and data["status"] == "running" and data["runs"] == []
    rc, data = repo.json("wait", "--timeout", "200")
    assert rc == 0 and data["status"] == "done"
    assert [r["metric"] for r in data["runs"] if r["role"] == "candidate"] == [0.45]


def test_run_with_a_pool_up_is_a_wave_of_one_and_a_crash_is_diagnosed(repo):
    repo.set("crash")
    rc, data = repo.json("run", "-m", "breaks")
    assert rc == 0 and data["status"] == "crash" and data["wave"]
    record = data["record"]
    assert record["role"] == "candidate" and record["reason"] == "exit 1"
    assert record["diagnosis"]["family"]
    assert (repo.root / record["run_dir"] / "diagnosis.json").exists()
    assert "RuntimeError: boom" in (repo.root / record["run_dir"] / "output.log").read_text()
    assert (repo.root / "value.txt").read_text() != "crash\n"


def test_submit_has_the_refusals_of_run(repo):
    before = (repo.root / "autoresearch.jsonl").read_bytes(), repo.git("for-each-ref")
    proc = repo.cli("submit", "-m", "nothing changed")
    assert proc.returncode == 3 and "nothing in the scope" in proc.stderr
    (repo.root / "bench.sh").write_text("echo METRIC loss=0\n")
    proc = repo.cli("submit", "-m", "games the harness")
    assert proc.returncode == 3 and "fixed file bench.sh" in proc.stderr
    repo.git("checkout", "bench.sh")
    repo.set("0.5:5")   # an earlier run's code again: an exact repeat
    proc = repo.cli("submit", "-m", "same as the best")
    assert proc.returncode == 3
    repo.git("checkout", "value.txt")
    assert ((repo.root / "autoresearch.jsonl").read_bytes(), repo.git("for-each-ref")) == before
    proc = repo.cli("wait", "--timeout", "1")
    assert proc.returncode == 3 and "nothing is submitted" in proc.stderr


def test_a_candidate_ref_moved_after_submit_to_game_the_harness_is_not_run(repo):
    cand = repo.submit("0.3")
    # The hostile move: point the candidate's ref (and its queue file) at a commit that also
    # rewrites the benchmark to print a perfect score.
    tree_env = dict(os.environ, GIT_INDEX_FILE=str(repo.root / ".git" / "hostile-index"))
    run = lambda *a: subprocess.run(["git", *a], cwd=repo.root, env=tree_env, capture_output=True,
                                    text=True, check=True).stdout.strip()
    run("read-tree", cand["commit"])
    blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo.root, input="echo METRIC loss=0\n",
                          capture_output=True, text=True, check=True).stdout.strip()
    run("update-index", "--cacheinfo", f"100644,{blob},bench.sh")
    hostile = run("commit-tree", run("write-tree"), "-p", cand["parent"], "-m", "gamed")
    repo.git("update-ref", f"refs/autoresearch/candidates/{cand['id']}", hostile)
    queue = repo.root / ".autoresearch" / "pool" / "candidates" / f"{cand['id']}.json"
    queue.write_text(json.dumps(dict(cand, commit=hostile)))
    rc, data = repo.json("wait", "--timeout", "200")
    assert rc == 0 and data["status"] == "done"
    assert not [r for r in data["runs"] if r.get("candidate") == cand["id"]]
    assert any("not run" in n and "bench.sh" in n for n in data["notes"]), data["notes"]
    assert not [r for r in repo.runs() if r["metric"] == 0]
    assert "METRIC loss=0" not in repo.git("show", "HEAD:bench.sh")


def test_a_wave_whose_control_is_slowed_runs_again_and_a_contended_one_keeps_nothing(repo):
    markers = Path(repo.env["AR_TEST_MARKERS"])
    calibration = [r for r in repo.runs() if r.get("calibration")]
    assert calibration and all(r["metrics"]["num_steps"] == 100 for r in calibration)
    # A noisy neighbour slows the first two runs to start (the control and the candidate):
    # half the calibration's steps. The wave is not trusted and runs again, unslowed.
    for old in markers.glob("claim-*"):
        old.rmdir()
    (markers / "contend").write_text("2\n")
    head = repo.git("rev-parse", "HEAD")
    cand = repo.submit("0.2")
    rc, data = repo.json("wait", "--timeout", "200")
    assert rc == 0 and data["status"] == "done", data
    assert any("was contended" in n and "runs again" in n for n in data["notes"]), data["notes"]
    mine = [r for r in data["runs"] if r.get("candidate") == cand["id"] and r["role"] == "candidate"]
    assert len(mine) == 1 and mine[0]["metrics"]["num_steps"] == 100
    assert mine[0]["contention"]["contended"] is False and mine[0]["contention"]["ratio"] == 1.0
    assert data["contention"]["contended"] is False
    assert [r["status"] for r in mine] == ["keep"] and repo.git("rev-parse", "HEAD") != head

    # Slowed on every attempt: one record for the candidate, flagged, and nothing kept.
    (markers / "contend").write_text("1000\n")
    head = repo.git("rev-parse", "HEAD")
    cand = repo.submit("0.1")
    rc, data = repo.json("wait", "--timeout", "200")
    (markers / "contend").unlink()
    assert rc == 0 and data["status"] == "done", data
    assert any("contended again" in n for n in data["notes"]), data["notes"]
    mine = [r for r in data["runs"] if r.get("candidate") == cand["id"] and r["role"] == "candidate"]
    assert len(mine) == 1 and mine[0]["status"] == "discard", mine
    assert "contended" in mine[0]["reason"] and mine[0]["contention"]["ratio"] == 0.5
    assert not [r for r in data["runs"] if r["status"] == "keep"]
    assert repo.git("rev-parse", "HEAD") == head


def _tree(pid):
    """pid and every descendant (the local head's Ray processes are the runner's children)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    children.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(entry))
            except OSError:
                pass
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        out.add(p)
        todo.extend(children.get(p, []))
    return out


def _listening_addresses(pids):
    """The local addresses on which any of `pids` listens (TCP, IPv4 and IPv6)."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            pass
    found = set()
    for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        with open(table) as f:
            for line in list(f)[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:   # LISTEN
                    found.add(_address(fields[1].split(":")[0], v6))
    assert found, "no listening socket found for the pool's processes"
    return found


def _address(hexaddr, v6):
    raw = bytes.fromhex(hexaddr)
    if not v6:
        return ".".join(str(b) for b in raw[::-1])
    words = [raw[i:i + 4][::-1] for i in range(0, 16, 4)]
    full = b"".join(words)
    if full[:12] == b"\0" * 10 + b"\xff\xff":
        return "::ffff:" + ".".join(str(b) for b in full[12:])
    if full == b"\0" * 15 + b"\1":
        return "::1"
    if full == b"\0" * 16:
        return "::"
    return full.hex()


def test_brief_and_the_report_know_the_waves(repo, tmp_path):
    rc, brief = repo.json("brief")
    assert "autoresearch submit" in brief["next"] and brief["state"]["pool"]["up"]
    assert brief["state"]["pool"]["gpus"] == 4 and "pool: 4 GPU(s)" in brief["text"]
    rc, report = repo.json("report")
    assert rc == 0
    out = repo.root / ".autoresearch" / "report.html"
    waves = report["waves"]
    logged = {r["wave"] for r in repo.runs() if r.get("wave")}
    assert [w["wave"] for w in waves] == sorted(logged)
    for w in waves:
        assert w["gpus"] == 4 and (w["controls"] or not w["candidates"])   # a calibration has no control
        assert 0 <= w["idle_fraction"] < 1 and w["idle_s"] >= 0
    assert any(w["kept"] for w in waves) and waves[1]["control_metric"] == 1.0   # wave 1 is the calibration
    # The page draws the wave section without a script error (when Chromium is here).
    import sys
    sys.path.insert(0, str(SRC.parent / "tests" / "report"))
    from report_browser import dump_dom, root_attributes
    dom, console = dump_dom(out.as_uri(), tmp_path / "profile")
    attrs = root_attributes(dom)
    assert attrs["data-ready"] == "1" and attrs["data-errors"] == "[]", attrs
    assert 'id="waves-box"' in dom and 'id="waves-box" hidden' not in dom
