"""The evaluator scores the model that trained and never loses a finished run: the attention
training used where it loads here, else exact SDPA with a note; the dtypes training left; the
loss over slices of the logits."""

import json
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from .template_helpers import tiny_gpt


@pytest.fixture
def h(modules):
    return modules[1].harness


def trained_on_cuda(train, vocab, seq_len):
    """A tiny model as train.build_model leaves it on CUDA: embedding tables in bf16."""
    model = tiny_gpt(train, vocab, seq_len=seq_len)
    model.wte.to(dtype=torch.bfloat16)
    for emb in model.value_embeds.values():
        emb.to(dtype=torch.bfloat16)
    return model


def saved_state(model):
    """What Recorder.finish writes: the state dict, copied to the CPU."""
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


def test_the_rebuilt_model_has_training_dtypes_and_its_exact_losses(h, modules):
    prepare, train = modules
    vocab, T = prepare.prepared_vocab_size(), 32
    trained = trained_on_cuda(train, vocab, T)
    x = torch.randint(0, vocab, (2, T), generator=torch.Generator().manual_seed(1))
    y = torch.roll(x, -1, dims=1)
    rebuilt = h.rebuild_model(train, trained.config, saved_state(trained), torch.device("cpu"))
    assert {n: p.dtype for n, p in rebuilt.named_parameters()} == {n: p.dtype for n, p in trained.named_parameters()}
    assert rebuilt.wte.weight.dtype == torch.bfloat16
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):   # as training runs on CUDA
        assert torch.equal(h.token_losses(rebuilt, x, y, vocab), h.token_losses(trained, x, y, vocab))
        # what the evaluator used to score: the same weights in fp32 embeddings, another model
        as_fp32 = train.GPT(trained.config)
        as_fp32.load_state_dict(saved_state(trained))
        assert not torch.equal(h.token_losses(as_fp32.eval(), x, y, vocab), h.token_losses(trained, x, y, vocab))


def test_the_loss_is_taken_over_slices_of_the_logits(h, modules, monkeypatch):
    """Each cross-entropy call sees at most LOSS_CHUNK_ELEMENTS logits (never a whole fp32 copy of
    vocab x tokens), and the losses are those of one call over everything."""
    prepare, train = modules
    vocab, T = prepare.prepared_vocab_size(), 32
    model = tiny_gpt(train, vocab, seq_len=T)
    x = torch.randint(0, vocab, (3, T), generator=torch.Generator().manual_seed(2))
    y = torch.roll(x, -1, dims=1)
    seen = []

    def recording(logits, targets, **kwargs):
        seen.append((logits.numel(), logits.dtype))
        return F.cross_entropy(logits, targets, **kwargs)

    monkeypatch.setattr(h, "LOSS_CHUNK_ELEMENTS", vocab * 10)
    monkeypatch.setattr(h, "_CROSS_ENTROPY", recording)
    with torch.no_grad():
        losses = h.token_losses(model, x, y, vocab)
        whole = F.cross_entropy(model(x).float().view(-1, vocab), y.reshape(-1), reduction="none").view(y.shape)
    assert len(seen) == 10 and all(n <= vocab * 10 and dtype == torch.float32 for n, dtype in seen)
    torch.testing.assert_close(losses, whole, rtol=0, atol=1e-6)


def test_the_evaluator_attention_never_raises(h):
    """FA3 where training used it and it loads; SDPA (exact) where it does not, with the loader's
    message in the note; FlexAttention runs needs torch.compile, so SDPA too."""
    fa3 = object()
    assert h.eval_attention("fa3", "cuda", (9, 0), fa3_loader=lambda c: fa3)[:2] == ("fa3", fa3)

    def failing(capability):
        raise ValueError("Version 1 of 'kernels-community/flash-attn3' is not available in the local cache")

    backend, module, reason, note = h.eval_attention("fa3", "cuda", (9, 0), fa3_loader=failing)
    assert (backend, module) == ("sdpa", None) and "FA3 did not load" in reason
    assert "scores with SDPA instead of Flash Attention 3" in note and "not available in the local cache" in note
    assert "huggingface.co" in note   # what to do
    assert h.eval_attention("flex", "cuda", (8, 9))[:2] == ("sdpa", None)
    assert h.eval_attention("sdpa", "cpu", None)[3] is None


def test_training_falls_back_from_fa3_with_the_loaders_message(h, capsys):
    def failing(capability):
        raise ValueError("Cannot find a build variant for this system in kernels-community/flash-attn3")

    backend, _, reason = h.pick_attention("cuda", (9, 0), True, True, fa3_loader=failing)
    assert backend == "flex" and reason.startswith("FA3 unavailable")
    out = capsys.readouterr().out
    assert "Flash Attention 3 did not load, so training uses flex: ValueError: Cannot find a build variant" in out
    assert "kernels>=0.15.1" in out
    with pytest.raises(h.HarnessError, match="Cannot find a build variant .* Fix: "):
        h.pick_attention("cuda", (9, 0), True, True, requested="fa3", fa3_loader=failing)


def test_a_finished_fa3_run_is_scored_when_fa3_does_not_load(research_repo, modules, tmp_path):
    """The real evaluator process, on weights of a run that trained with FA3, on a machine where FA3
    does not load (this one: no kernel in the Hugging Face cache, the Hub offline): it scores with
    SDPA, says so, and gives the val_bpb the same weights get when training used SDPA."""
    prepare, train = modules
    repo, env = research_repo
    model = trained_on_cuda(train, prepare.prepared_vocab_size(), prepare.MAX_SEQ_LEN)
    results = {}
    for attention in ("fa3", "sdpa"):
        run = tmp_path / attention
        run.mkdir()
        torch.save({"config": vars(model.config), "state_dict": saved_state(model)}, run / "final_model.pt")
        (run / "train.json").write_text(json.dumps({"attention": attention, "dtype": "bfloat16", "batch_size": 4,
                                                    "training_seconds": 1.0}))
        run_env = dict(env, AUTORESEARCH_RUN_DIR=str(run), HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"),
                       AUTORESEARCH_DEVICE="cpu")
        done = subprocess.run([sys.executable, "-I", "harness.py", "evaluate"], cwd=repo, env=run_env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        results[attention] = done.stdout, json.loads((run / "summary.json").read_text())
    out, summary = results["fa3"]
    assert "harness: the evaluator scores with SDPA instead of Flash Attention 3" in out
    assert out.index("scores with SDPA instead") < out.index("val_bpb:")
    assert summary["run"]["eval_attention"].startswith("sdpa (") and summary["run"]["attention"] == "fa3"
    assert summary["val_bpb"] == results["sdpa"][1]["val_bpb"]
    assert not os.path.exists(tmp_path / "fa3" / "final_model.pt")   # scored, then deleted as always


def test_fa3_that_loads_but_fails_while_scoring_is_scored_again_with_sdpa(h, modules, capsys):
    """A kernel that loaded but does not run here (the device boundary: FA3 needs a GPU, so a
    stand-in raises what CUDA raises): the val split is scored with SDPA, with a note."""
    prepare, train = modules
    model = tiny_gpt(train, prepare.prepared_vocab_size(), seq_len=prepare.MAX_SEQ_LEN)

    def no_kernel_image(*args, **kwargs):
        raise RuntimeError("CUDA error: no kernel image is available for execution on the device")

    score = lambda: h.evaluate_split(model, 2, "val", 2 * prepare.MAX_SEQ_LEN)   # noqa: E731
    expected = score()
    machine = h.Machine(torch.device("cpu"), torch.float32, False, "fa3", "Flash Attention 3, as in training",
                        "cpu", None)
    saved = dict(h._ATTENTION)
    h._ATTENTION.update(backend="fa3", fa3=type("FA3", (), {"flash_attn_func": staticmethod(no_kernel_image)}))
    try:
        assert h.scored(machine, score) == expected
    finally:
        h._ATTENTION.clear()
        h._ATTENTION.update(saved)
    assert machine.backend == "sdpa"
    assert "Flash Attention 3 failed in the evaluator (RuntimeError: CUDA error: no kernel image" in capsys.readouterr().out
