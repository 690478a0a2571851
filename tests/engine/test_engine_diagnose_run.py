"""`autoresearch diagnose N`: the run's own output, its own commit's train.py and its recorded
settings give exactly the diagnosis the engine recorded, although the engine has since rolled
./train.py back to the best. `diagnose LOG` on that run's output warns that ./train.py is not
the run's.

The crash is a real captured log (tests/fixtures/logs/batch_not_divisible.log: a device batch
that does not divide the total batch), replayed by the benchmark when train.py has that batch.
"""

import json
import shutil
import subprocess
from pathlib import Path

from helpers_engine import make_repo

LOG = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "batch_not_divisible.log"
TRAIN = "TOTAL_BATCH_SIZE = 2048\nDEVICE_BATCH_SIZE = {batch}\nDEPTH = 2\nMATRIX_LR = 0.01\n"
PREPARE = "MAX_SEQ_LEN = 128\nVOCAB_SIZE = 64\n"
BENCH = """#!/bin/bash
if grep -q "DEVICE_BATCH_SIZE = 12" train.py; then cat crash.log >&2; exit 1; fi
echo "METRIC loss=1.0"
"""


def test_diagnose_run_equals_the_recorded_diagnosis(tmp_path):
    repo = make_repo(tmp_path / "r", init_args=None)
    (repo.root / "train.py").write_text(TRAIN.format(batch=8))
    (repo.root / "prepare.py").write_text(PREPARE)
    (repo.root / "bench.sh").write_text(BENCH)
    shutil.copy(LOG, repo.root / "crash.log")
    subprocess.run(["git", "add", "."], cwd=repo.root, check=True)
    subprocess.run(["git", "commit", "-qm", "harness"], cwd=repo.root, check=True)
    repo.ok("init", "--metric", "loss", "--command", "bash bench.sh", "--scope", "train.py",
            "--fixed", "bench.sh", "prepare.py", "crash.log")
    repo.ok("run", "-q", "-m", "baseline")
    (repo.root / "train.py").write_text(TRAIN.format(batch=12))
    repo.ok("run", "-q", "-m", "a device batch of 12")
    crash = repo.runs()[-1]
    assert crash["status"] == "crash" and crash["diagnosis"]["fix"] == {"DEVICE_BATCH_SIZE": 8}
    assert "DEVICE_BATCH_SIZE = 8" in (repo.root / "train.py").read_text()   # rolled back to the best

    rc, by_number = repo.json("diagnose", str(crash["run"]))
    assert rc == 0 and by_number == crash["diagnosis"]
    text = repo.ok("diagnose", str(crash["run"])).stdout
    assert text.splitlines()[0].startswith("diagnosis: CONFIG_INVALID") and "DEVICE_BATCH_SIZE=8" in text

    by_log = repo.cli("diagnose", f".autoresearch/runs/{crash['run']}/output.log")
    assert by_log.returncode == 0
    assert (f"warning: ./train.py is not run {crash['run']}'s (the engine put HEAD back at the best commit); "
            f"`autoresearch diagnose {crash['run']}`") in by_log.stderr
    rc, data = repo.json("diagnose", f".autoresearch/runs/{crash['run']}/output.log")
    assert rc == 0 and "./train.py is not run" in data["warning"]
    # the baseline's output, read with the baseline's train.py: nothing to warn about
    quiet = repo.cli("diagnose", ".autoresearch/runs/1/output.log")
    assert "warning" not in quiet.stderr


def test_diagnose_an_unknown_run_is_refused(tmp_path):
    repo = make_repo(tmp_path / "r")
    repo.ok("run", "-q", "-m", "baseline")
    proc = repo.cli("diagnose", "42")
    assert proc.returncode == 3 and "no run 42" in proc.stderr
    rc, data = repo.json("diagnose", "42")
    assert rc == 3 and data["ok"] is False
    assert json.dumps(data)
