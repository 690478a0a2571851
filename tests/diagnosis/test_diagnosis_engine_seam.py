"""The engine's seam (for_run, short) and the `autoresearch diagnose` command."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli

from autoresearch.pipeline import diagnosis
from gpu_train_debug import FAMILIES, diagnose

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
LOGS = FIXTURES / "logs"

TRAIN_PY = """\
import torch
DEPTH = 8
ASPECT_RATIO = 64
HEAD_DIM = 128
TOTAL_BATCH_SIZE = 2**19
DEVICE_BATCH_SIZE = 128
MATRIX_LR = 0.04
ATTENTION_BACKEND = "fa3"
DTYPE = "auto"
COMPILE = "auto"
GRAD_CHECKPOINTING = False
model = build_model()   # never executed by the diagnoser
"""
PREPARE_PY = "MAX_SEQ_LEN = 2048\nTIME_BUDGET = 300\nEVAL_TOKENS = 40 * 524288\nVOCAB_SIZE = 8192\n"


def _repo(tmp_path, log_name, steps=None, summary=None):
    repo = tmp_path / "repo"
    run_dir = repo / ".autoresearch" / "runs" / "3"
    run_dir.mkdir(parents=True)
    (repo / "train.py").write_text(TRAIN_PY)
    (repo / "prepare.py").write_text(PREPARE_PY)
    shutil.copy(LOGS / log_name, run_dir / "output.log")
    if steps is not None:
        (run_dir / "steps.jsonl").write_text(steps)
    if summary is not None:
        (run_dir / "summary.json").write_text(json.dumps(summary))
    return repo, run_dir


def test_for_run_oom_reads_train_and_prepare_constants(tmp_path):
    repo, run_dir = _repo(tmp_path, "oom_train_rtx4090.log")
    result = diagnosis.for_run(str(repo), str(run_dir), "crash", {}, 0.99, "lower", "exit 1")
    assert result["family"] == "OOM"
    assert result["fix"] == {"DEVICE_BATCH_SIZE": 32}
    assert result["intermediates"]["num_params"] == 50331648  # 50.3 M, as train.py reports
    assert result["status"] == "crash" and result["reason"] == "exit 1"
    assert diagnosis.short(result).splitlines()[0] == \
        "diagnosis: OOM (OOM_TRAIN_ACTIVATIONS) - fix: DEVICE_BATCH_SIZE=32"
    json.dumps(result)


def test_for_run_timeout_uses_steps_file_and_skips_torn_lines(tmp_path):
    steps = "".join(json.dumps({"step": i, "progress": i / 100, "loss": 5.0 - i / 50}) + "\n" for i in range(40))
    steps += '{"step": 40, "progr'  # torn last line from a killed run
    repo, run_dir = _repo(tmp_path, "timeout_hang.log", steps=steps)
    result = diagnosis.for_run(str(repo), str(run_dir), "timeout", reason="timed out after 900 s")
    assert result["family"] == "TIMEOUT"
    assert result["codes"] == ["HANG_DURING_TRAINING"]
    assert result["intermediates"]["last_step"] == 39


def test_for_run_implausible_with_a_normal_looking_log(tmp_path):
    repo, run_dir = _repo(tmp_path, "timeout_hang.log", summary={"val_bpb": 0.95})
    reason = "gain 45% over best exceeds implausible threshold 30%"
    result = diagnosis.for_run(str(repo), str(run_dir), "implausible", {"val_bpb": 0.95}, 1.0, "lower", reason)
    assert result["family"] == "LOSS_TOO_GOOD"
    assert result["codes"] == ["IMPLAUSIBLE_GAIN"]


def test_for_run_survives_missing_files(tmp_path):
    run_dir = tmp_path / "empty-run"
    run_dir.mkdir()
    result = diagnosis.for_run(str(tmp_path), str(run_dir), "crash", reason="exit 1")
    assert result["family"] == "UNKNOWN"
    assert result["fix"] == {}


def test_short_lines():
    assert diagnosis.short(None) == "diagnosis: none"
    text = diagnosis.short({"family": "GPU_UNSUPPORTED", "codes": ["FA_UNSUPPORTED_ARCH"],
                            "fix": {"ATTENTION_BACKEND": "sdpa"}, "explanation": "FA3 needs Hopper. More."})
    assert text.splitlines()[0] == 'diagnosis: GPU_UNSUPPORTED (FA_UNSUPPORTED_ARCH) - fix: ATTENTION_BACKEND="sdpa"'
    assert len(text.splitlines()) == 2


def test_cli_json_is_one_object_and_fix_uses_config(tmp_path):
    shutil.copy(LOGS / "missing_package.log", tmp_path / "run.log")
    (tmp_path / "train.py").write_text(TRAIN_PY)
    (tmp_path / "prepare.py").write_text(PREPARE_PY)
    proc = run_cli(["diagnose", "run.log", "--json"], cwd=tmp_path)  # ./train.py picked up
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["family"] == "MISSING_DEPENDENCY"
    assert result["fix"] == {"ATTENTION_BACKEND": "sdpa"}
    human = run_cli(["diagnose", "run.log", "--config", "train.py"], cwd=tmp_path)
    assert human.returncode == 0
    assert human.stdout.startswith('diagnosis: MISSING_DEPENDENCY (MISSING_PACKAGE) - fix: ATTENTION_BACKEND="sdpa"')


def test_cli_bad_input_is_one_line_exit_2(tmp_path):
    proc = run_cli(["diagnose", "nope.log"], cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and "no such log file" in proc.stderr
    (tmp_path / "x.log").write_text("hello\n")
    proc = run_cli(["diagnose", "x.log", "--config", "missing.py"], cwd=tmp_path)
    assert proc.returncode == 2 and "no such config file" in proc.stderr
    proc = run_cli(["diagnose", "x.log", "--json"], cwd=tmp_path)
    assert proc.returncode == 0 and json.loads(proc.stdout)["family"] == "UNKNOWN"


def test_hostile_or_broken_train_py_is_never_executed(tmp_path):
    marker = tmp_path / "pwned"
    (tmp_path / "train.py").write_text(
        f"import os\nos.system('touch {marker}')\nDEPTH = 4\nHUGE = 10 ** 10 ** 10\n"
        "DEVICE_BATCH_SIZE = 8\nNAME = open('/etc/passwd').read()\n")
    config = diagnosis.read_config(str(tmp_path))
    assert config == {"DEPTH": 4, "DEVICE_BATCH_SIZE": 8}
    assert not marker.exists()
    (tmp_path / "train.py").write_text("DEPTH = (\n")
    assert diagnosis.read_config(str(tmp_path)) == {}


@pytest.mark.slow   # real torch training (left out of `make check`, tests/conftest.py)
def test_real_broken_run_end_to_end(tmp_path):
    """Break the tiny train.py on purpose, run it with torch, diagnose its log with the CLI."""
    sys.path.insert(0, str(FIXTURES))
    from make_logs import _make_cache
    _make_cache(str(tmp_path / "cache"))
    source = (FIXTURES / "tiny_train.py").read_text().replace("DEVICE_BATCH_SIZE = 8", "DEVICE_BATCH_SIZE = 24")
    (tmp_path / "train.py").write_text(source)
    with open(tmp_path / "output.log", "w") as out:
        proc = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
                              env=dict(os.environ, TINY_CACHE=str(tmp_path / "cache")), timeout=120)
    assert proc.returncode == 1
    cli = run_cli(["diagnose", "output.log", "--json"], cwd=tmp_path)
    result = json.loads(cli.stdout)
    assert (result["family"], result["codes"]) == ("CONFIG_INVALID", ["BATCH_NOT_DIVISIBLE"])
    assert result["fix"] == {"DEVICE_BATCH_SIZE": 16}  # largest divisor of 2**11 / 128 = 16 below 24
    # Applying the fix makes the same script train.
    fixed = source.replace("DEVICE_BATCH_SIZE = 24", "DEVICE_BATCH_SIZE = 16").replace("MAX_STEPS = 250", "MAX_STEPS = 3")
    (tmp_path / "train.py").write_text(fixed)
    proc = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, capture_output=True, text=True,
                          env=dict(os.environ, TINY_CACHE=str(tmp_path / "cache")), timeout=120)
    assert proc.returncode == 0, proc.stdout[-500:]
    assert "val_bpb:" in proc.stdout


def test_diagnose_never_raises_on_junk():
    from hypothesis import given, settings, strategies as st

    @settings(max_examples=150, deadline=None)
    @given(st.text(max_size=400), st.dictionaries(st.sampled_from(["DEPTH", "DEVICE_BATCH_SIZE", "TOTAL_BATCH_SIZE",
                                                                   "MAX_SEQ_LEN", "HEAD_DIM", "MATRIX_LR", "DTYPE"]),
                                                  st.one_of(st.integers(-5, 10 ** 7), st.floats(allow_nan=True),
                                                            st.text(max_size=5), st.booleans(), st.none())),
           st.sampled_from(["crash", "timeout", "implausible", None]))
    def check(text, config, status):
        result = diagnose(text, config, {"status": status})
        assert result["family"] in FAMILIES
        json.dumps(result, allow_nan=True)

    check()


def test_long_log_keeps_startup_warning_and_final_traceback():
    warning = (LOGS / "torch_build_without_sm120.log").read_text().split("Traceback")[0]
    progress = "".join(f"step {i:05d} ({i / 300:.1f}%) | loss: 4.2 | dt: 300ms\n" for i in range(30000))
    tail = "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
    result = diagnose(warning + progress + tail, {"ATTENTION_BACKEND": "fa3"}, {"status": "crash"})
    # The warning at the top says torch itself lacks the architecture: no constant can fix that.
    assert (result["family"], result["codes"], result["fix"]) == ("GPU_UNSUPPORTED", ["TORCH_ARCH_UNSUPPORTED"], {})
    assert result["intermediates"]["last_step"] == 29999


def test_unicode_that_changes_length_when_lowered():
    text = "İ" * 50 + "\nRuntimeError: Current CUDA Device does not support bfloat16. Please switch dtype to float16.\n"
    assert diagnose(text, {"DTYPE": "bfloat16"}, {})["fix"] == {"DTYPE": "float16"}


def test_profile_overrides_from_the_prepared_manifest(tmp_path, monkeypatch):
    """The template's CPU smoke profile trains at MAX_SEQ_LEN 256: the fix must use that, not 2048."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "prepare.py").write_text(PREPARE_PY + 'PROFILES = {"default": {}, "smoke": {"MAX_SEQ_LEN": 256, "VOCAB_SIZE": 512}}\n')
    (repo / "train.py").write_text("DEPTH = 2\nDEVICE_BATCH_SIZE = 6\nTOTAL_BATCH_SIZE = 4096\n")
    cache = tmp_path / "cache"
    (cache / "prepared").mkdir(parents=True)
    (cache / "prepared" / "manifest.json").write_text('{"profile": "smoke"}')
    monkeypatch.setenv("AUTORESEARCH_CACHE", str(cache))
    config = diagnosis.read_config(str(repo))
    assert (config["MAX_SEQ_LEN"], config["VOCAB_SIZE"], config["DEPTH"]) == (256, 512, 2)
    result = diagnose("FAIL: TOTAL_BATCH_SIZE=4096 is not a multiple of DEVICE_BATCH_SIZE*MAX_SEQ_LEN=1536\n", config, {})
    assert result["fix"] == {"DEVICE_BATCH_SIZE": 4}
    (cache / "prepared" / "manifest.json").write_text("not json")
    assert diagnosis.read_config(str(repo))["MAX_SEQ_LEN"] == 2048


def test_implausible_gain_with_a_very_low_bpb_is_not_called_a_leak_when_the_probe_passed(tmp_path):
    # A smoke run on synthetic data can reach 0.2 bpb honestly; the harness's causality probe
    # said so in the log, so the diagnosis must not claim the model sees the future.
    log = ("step 00040 (100.0%) | loss: 0.410000 | lrm: 0.10\n"
           "Causality probe: passed (future tokens moved earlier losses by 0 nats)\n"
           "---\nval_bpb:          0.198710\n")
    repo, run_dir = _repo(tmp_path, "timeout_hang.log", summary={"val_bpb": 0.19871})
    (run_dir / "output.log").write_text(log)
    reason = "implausible: gain 60% over best exceeds the 30% limit"
    passed = diagnosis.for_run(str(repo), str(run_dir), "implausible", {"val_bpb": 0.19871}, 0.4946, "lower", reason)
    assert (passed["family"], passed["codes"]) == ("LOSS_TOO_GOOD", ["IMPLAUSIBLE_GAIN"])
    assert "probe passed" in passed["explanation"]
    # Without the probe's word the same numbers still point at a leak.
    (run_dir / "output.log").write_text(log.replace("Causality probe: passed (future tokens moved earlier losses by 0 nats)\n", ""))
    unproven = diagnosis.for_run(str(repo), str(run_dir), "implausible", {"val_bpb": 0.19871}, 0.4946, "lower", reason)
    assert unproven["codes"] == ["CAUSAL_LEAK"]
