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


SPAWN = ('  File "/usr/lib/python3.8/site-packages/torch/multiprocessing/spawn.py", line 130, in join\n'
         '    raise ProcessExitedException(\n')


def test_a_launcher_that_reports_its_child_s_signal_is_read_by_the_signal():
    # dev27 acumen-4 / prompt4nr-3 (torch.multiprocessing), higherhrnet-47 (torch < 1.8's bare Exception),
    # and subprocess's CalledProcessError under accelerate: no error of the child's own, only its signal.
    for said in ("torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGKILL",
                 "Exception: process 1 terminated with signal SIGKILL",
                 "subprocess.CalledProcessError: Command '['/usr/bin/python', 'train.py']' died with <Signals.SIGKILL: 9>."):
        result = run("Traceback (most recent call last):\n" + SPAWN + said + "\n")
        assert (result["family"], result["codes"]) == ("OOM", ["HOST_OOM_KILLED"]), said
    segv = run("Traceback (most recent call last):\n" + SPAWN +
               "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGSEGV\n")
    assert segv["codes"] == ["SEGFAULT"] and segv["family"] == "UNKNOWN"
    # A run the engine stopped at its time limit also ends in SIGKILL: not the OOM killer.
    late = diagnose("Exception: process 1 terminated with signal SIGKILL\n", dict(TEMPLATE), {"status": "timeout"})
    assert late["family"] == "TIMEOUT"


def test_the_spawned_child_s_own_error_decides_over_the_wrapper():
    # torch.multiprocessing prints the child's traceback after its own (fairseq-3353 shape).
    text = ("Traceback (most recent call last):\n" + SPAWN + "torch.multiprocessing.spawn.ProcessRaisedException: \n\n"
            "-- Process 3 terminated with the following error:\nTraceback (most recent call last):\n"
            '  File "/opt/conda/lib/python3.8/site-packages/torch/multiprocessing/spawn.py", line 59, in _wrap\n'
            "    fn(i, *args)\n"
            "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 3; 10.76 GiB total capacity)\n")
    assert run(text)["codes"][0].startswith("OOM_")


def test_nccl_transport_failures_and_the_process_group_taking_the_process_down():
    # dev27 quickstart-6: an InfiniBand verbs call that failed (batch12 nccl-1129: ibv_create_qp).
    ib = run("10-0-4-11:62452:62548 [0] misc/ibvwrap.cc:284 NCCL WARN Call to ibv_modify_qp failed with error No such device\n"
             "10-0-4-11:62452:62548 [0] NCCL INFO transport/net_ib.cc:415 -> 2\n")
    assert (ib["family"], ib["codes"]) == ("DISTRIBUTED", ["NCCL_ERROR"]) and "NCCL_IB_DISABLE=1" in ib["explanation"]
    # NCCL's harmless probe for the verbs library is no failure.
    assert run("ai:480850:480850 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n")["family"] == "UNKNOWN"
    # dev27 nanogpt-55: ProcessGroupNCCL's own words, alone, and after another rank's OOM (that decides).
    down = ("[E ProcessGroupNCCL.cpp:455] Some NCCL operations have failed or timed out. Due to the asynchronous nature "
            "of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.\n"
            "[E ProcessGroupNCCL.cpp:460] To avoid data inconsistency, we are taking the entire process down.\n")
    assert run(down)["family"] == "DISTRIBUTED"
    assert run("[rank1]: torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n" + down)["family"] == "OOM"


def test_a_store_that_does_not_speak_the_store_protocol_is_the_rendezvous_address():
    # dev12 colossalai-5890: torchrun with --master_addr= --master_port= (empty).
    result = run("RuntimeError: Stop_waiting response is expected\n")
    assert (result["family"], result["codes"]) == ("DISTRIBUTED", ["DIST_INIT_FAILED"]) and "MASTER_ADDR" in result["explanation"]


def test_nccl_s_shared_memory_segment_is_named_as_nccl_s():
    # dev27 torchtitan-853, easyr1-228: NCCL's segment in /dev/shm, not a DataLoader's.
    result = run("(Runner pid=868697) Error while creating shared memory segment /dev/shm/nccl-UmqSM9 (size 7340384)\n")
    assert result["codes"] == ["SHM_EXHAUSTED"] and "NCCL_SHM_DISABLE=1" in result["explanation"]


TORCHRUN_TAIL = (
    "[2024-04-20 18:56:38,931] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: 1) local_rank: 0\n"
    "Traceback (most recent call last):\n"
    '  File "/home/u/.local/bin/torchrun", line 8, in <module>\n    sys.exit(main())\n'
    '  File "/home/u/.local/lib/python3.10/site-packages/torch/distributed/launcher/api.py", line 263, in launch_agent\n'
    "    raise ChildFailedError(\n"
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
    "============================================================\ntrain.py FAILED\n"
    "Root Cause (first observed failure):\n[0]:\n  rank      : 0 (local_rank: 0)\n  exitcode  : 1 (pid: 358104)\n")
ACCELERATE_TAIL = (
    "Traceback (most recent call last):\n"
    '  File "/usr/local/lib/python3.10/site-packages/accelerate/commands/launch.py", line 1017, in simple_launcher\n'
    "    raise subprocess.CalledProcessError(returncode=process.returncode, cmd=cmd)\n"
    "subprocess.CalledProcessError: Command '['/usr/bin/python3', 'train.py']' returned non-zero exit status 1.\n")


def test_a_launcher_s_report_after_the_child_s_output_changes_nothing():
    # Each corpus log below, with torchrun's or accelerate's report printed after it, reads as the log
    # itself: the child's error (an exception line, a pasted one, or a nested launcher's signal report)
    # decides, and the launcher's own frames are not where it failed.
    for name in ("xtuner-734-cannot-import-packaging-pkg-resources",      # dev13: the error quoted in a sentence
                 "cf-net-3-stack-unequal-size-patches",                    # batch10: frames of torch's collate
                 "stablecascade-33-windows-compile-jupyter",               # train: Jupyter frames, torch.compile
                 "acumen-4-spawn-sigkill-loguru-annotations",              # dev27: a nested launcher's SIGKILL
                 "kohya-3268-adafactor-warmup-valueerror"):                # dev8: accelerate's own report first
        base = run(log(name))
        for tail in (TORCHRUN_TAIL, ACCELERATE_TAIL):
            wrapped = run(log(name).rstrip("\n") + "\n" + tail)
            assert (wrapped["family"], wrapped["codes"]) == (base["family"], base["codes"]), (name, tail[:40])
    # A report with nothing of the child's before it names no family (precision first).
    assert run(TORCHRUN_TAIL)["family"] == "UNKNOWN"


def test_the_first_error_of_a_chain_decides_and_its_consequences_do_not():
    # The handler's own failure ("During handling ...", "direct cause") after the cause changes nothing,
    # including for the rules that read the frames around the cause (batch10 cf-net-3, train stablecascade-33).
    consequence = ("\n\nDuring handling of the above exception, another exception occurred:\n\nTraceback (most recent call last):\n"
                   '  File "/home/u/proj/train.py", line 99, in <module>\n    trainer.cleanup()\n'
                   "AttributeError: 'NoneType' object has no attribute 'close'\n")
    for name in ("cf-net-3-stack-unequal-size-patches", "stablecascade-33-windows-compile-jupyter",
                 "flagembedding-709-oom-then-torchrun-exitcode-1"):
        base = run(log(name))
        assert run(log(name).rstrip("\n") + consequence)["codes"] == base["codes"], name
