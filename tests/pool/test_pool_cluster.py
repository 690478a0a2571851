"""Node loss mid-wave on a real two-node Ray cluster (`ray.cluster_utils.Cluster`, one machine).

The pool joins the cluster with `pool up --address`; the wave's four runs fill both nodes'
GPUs; the second node is removed while they run. Ray runs the lost tasks again on the head
node, and every candidate gets exactly one record, none of them a crash.
"""

import glob
import json
import os
import tempfile
import time

import pytest

from helpers_pool import cleanup, make_repo, ray_env, require_ray


@pytest.fixture(scope="module")
def cluster():
    require_ray()
    base, env = ray_env()
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
    repo = make_repo(tmp_path / "research", env, value="1.0:1")
    repo.ok("pool", "up", "--address", c.address)
    try:
        rc, status = repo.json("pool", "status")
        assert status["gpus"] == 4 and len({s["node"] for s in status["slots"]}) == 2
        repo.ok("run", "-m", "baseline")
        ids = [repo.submit(v)["id"] for v in ("0.7:5", "0.8:5", "0.6:5")]
        rc, data = repo.json("wait", "--timeout", "1")
        assert rc == 0 and data["status"] == "running"
        _until(lambda: _started(repo) >= 4)      # all four runs are going, two on each node
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
    assert any("lost" in n for n in data["notes"])


def _started(repo):
    """How many runs of the current wave have begun their benchmark: each writes env.txt first,
    into its run folder inside the task's temporary folder (both nodes are this machine)."""
    waves = repo.root / ".autoresearch" / "pool" / "waves"
    if not waves.is_dir():
        return 0
    current = max((json.loads(p.read_text()) for p in waves.glob("*.json")), key=lambda w: w["wave"])
    if current["status"] != "running":
        return 0
    tmp = tempfile.gettempdir()
    return sum(bool(glob.glob(os.path.join(tmp, f"autoresearch-run{r['run']}-*", "run", "env.txt")))
               for r in current["runs"])


def _until(check, timeout=120):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError("timed out waiting")
