"""How a multi-process log is read: per-line envelopes (torchrun's `[rankN]:`, nanotron's
`[defaultN]:`, timestamps, glog and logger headers, a web UI's line numbers, Ray's process tags) are
taken off before any line rule reads a line, and the rank each prefix named is kept by line; a
launcher's report decides only when its child printed no error of its own. The shapes are cut from
corpus logs (tests/diagnosis/corpus/, thread URLs in its README).
"""

import random
from pathlib import Path

from gpu_train_debug import corpus, diagnose, logtext

CORPUS = Path(__file__).resolve().parent / "corpus"
TEMPLATE = corpus.template_config()


def log(name):
    return (CORPUS / f"{name}.log").read_text(encoding="utf-8")


def run(text, config=None):
    return diagnose(text, dict(TEMPLATE) if config is None else config, {"status": "crash"})


def test_each_kind_of_envelope_comes_off_and_the_rank_stays_known():
    cases = {
        # qwen3-coder-174: a timestamp, then torchrun's rank prefix
        "2024-11-20 14:37:16 [rank3]: torch.OutOfMemoryError: CUDA out of memory.": ("torch.OutOfMemoryError: CUDA out of memory.", 3),
        # flagembedding-709 / deepspeed launcher lines: a bracketed logging timestamp
        "[2024-04-20 18:56:38,931] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: 1)":
            ("torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: 1)", None),
        # tf-models-9301: TensorFlow's timestamp with microseconds and a colon
        "2020-09-24 18:27:41.164048: E tensorflow/stream_executor/cuda/cuda_blas.cc:225] failed":
            ("E tensorflow/stream_executor/cuda/cuda_blas.cc:225] failed", None),
        # torch >= 2.2's glog header on the launcher's own lines
        "E0328 18:18:48.413000 140217767576768 torch/distributed/elastic/multiprocessing/api.py:826] failed (exitcode: 1)":
            ("failed (exitcode: 1)", None),
        # nanotron/picotron: `[defaultN]:` with no blank after it
        "[default2]:Traceback (most recent call last):": ("Traceback (most recent call last):", 2),
        # LlamaFactory's web UI log view numbers each line, then torchrun's prefix and glog's bracket
        "[80746] [rank0]:[E321 02:07:08.408 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught":
            ("[E321 02:07:08.408 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught", 0),
        # easyr1-228: Ray's process tag; accelerate's test harness: `stderr: `
        "(Runner pid=868697) Error while creating shared memory segment /dev/shm/nccl-UmqSM9":
            ("Error while creating shared memory segment /dev/shm/nccl-UmqSM9", None),
        "stderr: Traceback (most recent call last):": ("Traceback (most recent call last):", None),
    }
    for line, (words, rank) in cases.items():
        text, ranks = logtext.normalise_lines("before\n" + line + "\nafter")
        assert text.split("\n")[1] == words, line
        assert ranks.get(1) == rank, line
    # Text that only looks like an envelope stays: a ChildFailedError's `[1]:` failure index.
    assert logtext.normalise("[1]:\n  time : 2023\n") == "[1]:\n  time : 2023\n"


def test_a_wrapped_exception_joined_across_ranked_lines_keeps_the_later_lines_ranks():
    text, ranks = logtext.normalise_lines("[rank1]: x\n[rank0]: RuntimeError:\n[rank0]:   boom\n[rank2]: y")
    assert text == "x\nRuntimeError: boom\ny" and ranks == {0: 1, 1: 0, 2: 2}


def test_line_rules_read_the_program_s_words_under_any_envelope():
    # The shell's `Killed` (train fastmaskrcnn-172 and others), argparse's usage block (dev16 sku110k-17)
    # and an exception in a markdown code fence (dev23 axolotl-465) read the same behind each envelope.
    texts = {"Loading checkpoint shards:  50%|█████     | 1/2\nKilled\n": "OOM",
             "usage: train.py [-h] --data DATA\ntrain.py: error: the following arguments are required: --data\n":
                 "CONFIG_INVALID"}
    for text, family in texts.items():
        assert run(text)["family"] == family
        for prefix in ("[rank0]: ", "[default0]:", "2024-11-20 14:37:16 ", "[1743] ",
                       "I0328 18:18:48.413000 140217767576768 run.py:826] "):
            wrapped = "\n".join(prefix + line for line in text.split("\n"))
            assert run(wrapped)["family"] == family, (prefix, text)


def test_the_rank_that_printed_the_deciding_line_is_named():
    text = ("[rank1]: Traceback (most recent call last):\n"
            "[rank1]:   File \"train.py\", line 9, in <module>\n"
            "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
            "[rank0]: [E ProcessGroupNCCL.cpp:455] NCCL error: unhandled system error\n")
    result = run(text)
    facts = result["intermediates"]["evidence"]
    assert result["family"] == "OOM" and facts["first_failed_rank"] == 1
    assert any(d.get("rank") == 1 for d in facts["decided_by"])


def test_torchrun_s_root_cause_rank_decides_over_the_other_ranks_consequences():
    # Rank 2's DataLoader worker died; rank 0's NCCL error (which the signature order ranks first) is
    # its consequence. The Root Cause block names rank 2, whose line was `[rank2]:`-prefixed.
    text = ("[rank0]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited\n"
            "[rank2]: RuntimeError: DataLoader worker (pid 4243) exited unexpectedly with exit code 1.\n"
            "Root Cause (first observed failure):\n[2]:\n  time      : 2024-06-01_10:00:00\n"
            "  rank      : 2 (local_rank: 2)\n  exitcode  : 1 (pid: 4242)\n")
    result = run(text)
    facts = result["intermediates"]["evidence"]
    assert result["family"] == "OOM" and "DataLoader" in result["explanation"]
    assert facts["root_cause_rank"] == 2 and facts["decided_by"][0]["rank"] == 2
    # Without the block, the signature order decides.
    assert run(text.split("Root Cause")[0])["family"] == "DISTRIBUTED"


def test_an_envelope_on_every_line_changes_no_diagnosis_in_the_corpus():
    # A sample of corpus logs from splits that are tuned on; the acceptance batches are not read here.
    rows = [c for c in corpus.load(str(CORPUS)) if c.split in ("train", "dev7", "dev12", "dev21", "dev27")]
    for case in random.Random(21).sample(rows, 40):
        base = run(case.text)["family"]
        for prefix in ("[rank0]: ", "2024-11-20 14:37:16 "):
            wrapped = "\n".join(prefix + line for line in case.text.split("\n"))
            assert run(wrapped)["family"] == base, (case.id, prefix)
