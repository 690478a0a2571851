"""Every stored failure log maps to the right family, code and a fix valid for its config.

The logs in tests/fixtures/logs/ were produced by breaking a tiny train.py on purpose and
running it (kind "real"), or carry GPU-only error text copied from the PyTorch, Triton and
NCCL sources cited in cases.json (kind "sourced"). Expectations are hand-written there.
"""

import json
from pathlib import Path

import pytest

from gpu_train_debug import diagnose
from autoresearch.pipeline.diagnosis import read_log

LOGS = Path(__file__).resolve().parent.parent / "fixtures" / "logs"
CASES = json.loads((LOGS / "cases.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", CASES, ids=[c["log"] for c in CASES])
def test_log_maps_to_family_code_and_fix(case):
    text = read_log(LOGS / case["log"])
    result = diagnose(text, case["config"], {"status": case["status"], "reason": case["reason"]})
    assert result["family"] == case["family"], result["explanation"]
    assert result["codes"][0] == case["code"]
    assert result["fix"] == case["fix"]
    assert set(result) == {"family", "codes", "intermediates", "fix", "explanation"}
    json.dumps(result)  # the engine stores it as JSON


@pytest.mark.parametrize("case", [c for c in CASES if "DEVICE_BATCH_SIZE" in c["fix"]], ids=lambda c: c["log"])
def test_batch_fix_keeps_total_batch_and_fits(case):
    config = dict(case["config"], **case["fix"])
    b, seq = config["DEVICE_BATCH_SIZE"], config.get("MAX_SEQ_LEN", 2048)
    assert config["TOTAL_BATCH_SIZE"] % (b * seq) == 0
    assert b < case["config"]["DEVICE_BATCH_SIZE"]


def test_every_fixture_is_listed_and_real_ones_were_run():
    listed = {c["log"] for c in CASES}
    assert listed == {p.name for p in LOGS.glob("*.log")}
    real = [c for c in CASES if c["kind"] == "real"]
    assert len(real) >= 10
    assert all(c["exit_code"] != 0 or c["status"] == "implausible" for c in real)
    assert all(c.get("source") for c in CASES if c["kind"] == "sourced")
