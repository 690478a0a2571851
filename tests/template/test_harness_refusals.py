"""Every refusal of the template's harness, raised by the harness's own code, gets its diagnosis code
and a fix that says what to change in train.py (gpu_train_debug/harness_verdict.py). The texts are
the harness's, so a change of its wording that the diagnoser no longer reads fails here."""

import json
import math

import pytest
import torch

from gpu_train_debug import diagnose


def diagnosed(error, stage="the evaluation failed"):
    """The log the engine gets: the harness's FAIL line, then autoresearch.sh's reason line."""
    fail = f"FAIL: {error}"
    log = f"step 00010 (0.0%) | loss: 9.010000\n{fail}\nautoresearch.sh: {stage} (exit 1): {fail}\n"
    return diagnose(log, {"DEPTH": 2, "DEVICE_BATCH_SIZE": 8, "TOTAL_BATCH_SIZE": 4096},
                    {"status": "crash", "reason": "exit 1"})


def raised(call, kind):
    with pytest.raises(kind) as caught:
        call()
    return caught.value


@pytest.fixture
def h(modules):
    return modules[1].harness


@pytest.fixture
def guard(h):
    """The evaluator's guard on (installing the real audit hook into pytest would outlive the test)."""
    saved = dict(h._GUARD)
    h._GUARD["installed"] = True
    yield h
    h._GUARD.clear()
    h._GUARD.update(saved)


def test_the_static_check_of_train_py(h):
    error = raised(lambda: h.check_train_py("def main():\n    X = open('/etc/passwd').read()\n"), h.UnsafeTrainPy)
    result = diagnosed(error, "train.py failed")
    assert (result["family"], result["codes"]) == ("CONFIG_INVALID", ["TRAIN_PY_REFUSED"])
    assert "train.py:2: open() is not allowed in train.py" in result["explanation"]
    assert "main()" in result["explanation"]


@pytest.mark.parametrize("how", ["raised", "wrapped", "then-other-error"])
def test_model_code_refused_by_the_evaluator_is_its_fail_verdict(guard, how):
    """The audit's refusal ends the evaluation as a FAIL line, also when another exception carries
    it (torch.compile wraps what its backend raised); one the code caught and survived is harmless."""
    h = guard

    def model_code():
        with h._guarded():
            try:
                h._audit("open", ("/tmp/model-debug.log", "a", 0))
            except PermissionError as e:
                if how == "raised":
                    raise
                if how == "wrapped":
                    raise RuntimeError("backend='inductor' raised: PermissionError") from e
                raise ValueError("went on")
    error = raised(model_code, h.UnsafeTrainPy)
    assert str(error) == "the evaluator refused train.py's model code: open('/tmp/model-debug.log')"
    result = diagnosed(error)
    assert (result["family"], result["codes"]) == ("CONFIG_INVALID", ["MODEL_CODE_REFUSED"])
    assert "open('/tmp/model-debug.log')" in result["explanation"]


def test_a_caught_refusal_or_a_fake_one_is_not_the_harness_verdict(guard):
    h = guard
    with h._guarded():
        try:
            h._audit("open", ("/tmp/model-debug.log", "a", 0))
        except PermissionError:
            pass
    fake = PermissionError("the evaluator refused train.py's model code: nothing")
    with pytest.raises(PermissionError):
        with h._guarded():
            raise fake


def test_exit_in_model_code_is_a_refusal_not_a_silent_stop(guard):
    h = guard

    def model_code():
        with h._guarded():
            raise SystemExit(0)
    error = raised(model_code, h.UnsafeTrainPy)
    result = diagnosed(error)
    assert result["codes"] == ["MODEL_CODE_REFUSED"] and "SystemExit" in result["explanation"]


def test_missing_weights_and_a_model_for_another_vocab(h, modules, tmp_path, monkeypatch):
    prepare, train = modules
    monkeypatch.setenv("AUTORESEARCH_RUN_DIR", str(tmp_path))
    definitions = h.Definitions(train, None, prepare.prepared_vocab_size())
    error = raised(lambda: h.evaluate_run(definitions), h.HarnessError)
    result = diagnosed(error)
    assert (result["family"], result["codes"], result["fix"]) == ("CONFIG_INVALID", ["NO_FINAL_WEIGHTS"], {})
    assert "recorder.finish(" in result["explanation"]

    (tmp_path / h.TRAIN_FILE).write_text(json.dumps({}))
    torch.save({"config": {"vocab_size": 50257, "sequence_len": 1024}, "state_dict": {}}, tmp_path / h.WEIGHTS_FILE)
    error = raised(lambda: h.evaluate_run(definitions), h.HarnessError)
    result = diagnosed(error)
    assert (result["family"], result["codes"]) == ("CONFIG_INVALID", ["VOCAB_CONTEXT_MISMATCH"])
    assert "vocab 50257 and context 1024" in result["explanation"]
    assert "tokenizer.get_vocab_size()" in result["explanation"] and "MAX_SEQ_LEN" in result["explanation"]


def test_a_train_py_rewritten_during_the_run(h, tmp_path):
    path = tmp_path / "train.py"
    path.write_text("X = 1\n")
    error = raised(lambda: h.load_train_module(str(path), expected_sha="0" * 64), h.HarnessError)
    result = diagnosed(error)
    assert (result["family"], result["codes"], result["fix"]) == ("CONFIG_INVALID", ["TRAIN_PY_CHANGED"], {})
    assert "writes to train.py" in result["intermediates"]["fix_step"]


def test_logits_of_the_wrong_shape(h, modules):
    vocab = modules[0].prepared_vocab_size()
    x = torch.zeros(2, 8, dtype=torch.long)
    error = raised(lambda: h._logits(lambda idx: idx.float(), x, vocab), h.HarnessError)
    result = diagnosed(error)
    assert (result["family"], result["codes"]) == ("CONFIG_INVALID", ["LOGITS_SHAPE"])
    assert f"(B, T, {vocab})" in result["explanation"] and "(2, 8)" in result["explanation"]


def test_a_model_that_reads_the_next_token(h, modules):
    vocab = modules[0].prepared_vocab_size()
    x = torch.randint(0, vocab, (2, 16))

    def peeks(idx):
        return torch.nn.functional.one_hot(torch.roll(idx, -1, dims=1), vocab).float() * 5
    error = raised(lambda: h.causality_probe(peeks, x, torch.roll(x, -1, dims=1), vocab=vocab), h.CausalityError)
    for stage in ("train.py failed", "the evaluation failed"):
        result = diagnosed(error, stage)
        assert (result["family"], result["codes"]) == ("LOSS_TOO_GOOD", ["CAUSAL_LEAK"])
        assert "position 8" in result["explanation"] and "causal" in result["explanation"]


def test_a_non_finite_val_bpb_is_its_own_code_not_a_learning_rate_fix():
    result = diagnosed(f"val_bpb is {math.nan}")
    assert (result["family"], result["codes"], result["fix"]) == ("NAN_LOSS", ["VAL_BPB_NONFINITE"], {})
    assert "model.eval()" in result["explanation"]


def test_a_gpu_torch_cannot_use(h, tmp_path, monkeypatch):
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-8f3a1c2e-0000-1111-2222-333344445555)'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{__import__('os').environ['PATH']}")
    monkeypatch.delenv("AUTORESEARCH_DEVICE", raising=False)
    result = diagnosed(raised(h.pick_device, h.HarnessError), "train.py failed")
    assert (result["family"], result["codes"]) == ("NO_ACCELERATOR", ["NO_CUDA_DEVICE"])
    assert "uv sync" in result["explanation"] and "AUTORESEARCH_DEVICE=cpu" in result["explanation"]


def test_compile_failure_and_fa3_before_ampere(h):
    def broken(*args):
        raise RuntimeError("CompilationError at 1:2")
    error = raised(lambda: h._LoudCompiled(broken)(torch.zeros(1)), h.HarnessError)
    result = diagnose(f"FAIL: {error}\nautoresearch.sh: train.py failed (exit 1): FAIL: {error}\n",
                      {"DEPTH": 2, "COMPILE": True}, {"status": "crash"})
    assert (result["family"], result["codes"], result["fix"]) == ("COMPILE_FAILURE", ["TORCH_COMPILE_FAILED"],
                                                                 {"COMPILE": False})
    error = raised(lambda: h.pick_attention("cuda", (7, 5), False, True, "fa3"), h.HarnessError)
    result = diagnose(f"FAIL: {error}\n", {"DEPTH": 2, "ATTENTION_BACKEND": "fa3"}, {"status": "crash"})
    assert (result["family"], result["codes"], result["fix"]) == ("GPU_UNSUPPORTED", ["FA_UNSUPPORTED_ARCH"],
                                                                 {"ATTENTION_BACKEND": "sdpa"})
