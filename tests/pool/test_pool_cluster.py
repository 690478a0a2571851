"""Node loss mid-wave on a real two-node Ray cluster (`ray.cluster_utils.Cluster`, one machine).

The pool joins the cluster with `pool up --address`; the wave's four runs fill both nodes'
GPUs; the second node is removed while they run. Ray runs the lost tasks again on the head
node, and every candidate gets exactly one record, none of them a crash.

When to remove the node is an event, not a guess: each run leaves a start marker in this
test's own folder and holds at a barrier until all four have started, so the node goes down
while both of its runs are mid-benchmark, however slow the machine is. The tasks' temporary
folders are private to the test too (TMPDIR), so nothing an earlier run left in /tmp counts.
"""

import os
import time
from pathlib import Path

import pytest

from helpers_pool import cleanup, make_repo, ray_env, require_ray


@pytest.fixture(scope="module")
def cluster():
    require_ray()
    base, env = ray_env()
    markers, scratch = os.path.join(base, "markers"), os.path.join(base, "scratch")
    os.makedirs(markers)
    os.makedirs(scratch)
    # The nodes' raylets (and so every worker and benchmark) inherit this process's environment.
    env.update({"AR_TEST_MARKERS": markers, "TMPDIR": scratch})
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update({k: v for k, v in env.items() if k != "PYTHONPATH"})
    from ray.cluster_utils import Cluster
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "num_gpus": 2})
    try:
        worker = c.add_node(num_cpus=2, num_gpus=2)
        c.wait_for_nodes()
        yield c, worker, env
    finally:
        c.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        cleanup(base)


def test_a_node_lost_mid_wave_costs_no_candidate_its_record(cluster, tmp_path):
    c, worker, env = cluster
    markers = Path(env["AR_TEST_MARKERS"])
    repo = make_repo(tmp_path / "research", env, value="1.0:3")
    repo.ok("pool", "up", "--address", c.address)
    try:
        rc, status = repo.json("pool", "status")
        assert status["gpus"] == 4 and len({s["node"] for s in status["slots"]}) == 2
        repo.ok("run", "-m", "baseline")
        for old in markers.iterdir():
            old.unlink()
        (markers / "barrier").write_text("4\n")
        ids = [repo.submit(v)["id"] for v in ("0.7:5", "0.8:5", "0.6:5")]
        rc, data = repo.json("wait", "--timeout", "1")
        assert rc == 0 and data["status"] == "running"
        # All four runs have started (two on each node, four GPUs for four runs) and passed
        # the barrier together: each is at least 3 s from its end.
        _until(lambda: len(_started(markers)) >= 4, repo)
        c.remove_node(worker, allow_graceful=False)
        rc, data = repo.json("wait", "--timeout", "300", timeout=330)
        assert rc == 0 and data["status"] == "done", data
    finally:
        repo.cli("pool", "down")
    runs = repo.runs()
    for cid in ids:
        mine = [r for r in runs if r.get("candidate") == cid and r["role"] == "candidate"]
        assert len(mine) == 1, mine
        assert mine[0]["status"] in ("keep", "discard"), mine[0]
        assert mine[0]["metric"] is not None
    assert not [r for r in runs if r["status"] == "crash"]
    # The re-runs took place on the node that is left.
    head = c.head_node.node_id
    assert all(r["slot"]["node"] == head for r in runs if r.get("wave") == data["wave"])
    # The wave says which runs were begun again: at once, from where each run began (the runs
    # themselves tell), not only once Ray's health checks have marked the node dead.
    again = [n for n in data["notes"] if "ran it again" in n]
    assert len(again) == 2 and all("lost" in n for n in again), data["notes"]


def _started(markers):
    """The run numbers whose benchmark has begun (its start marker is there)."""
    return {p.name.split("-")[1] for p in markers.glob("start-*")}


def _until(check, repo, timeout=300):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.1)
    log = repo.root / ".autoresearch" / "pool" / "runner.log"
    raise AssertionError("timed out waiting; the runner said:\n" + (log.read_text() if log.exists() else "nothing"))
