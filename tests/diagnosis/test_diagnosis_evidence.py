"""The log read as what it is before keywords decide: exception chains, frames and their
libraries, the rank that failed first, warnings that are the cause, root causes the last line
hides. Every text is a real corpus log (tests/diagnosis/corpus/, thread URL in its README) or a
short fragment cut from one.
"""

from pathlib import Path

from gpu_train_debug import corpus, diagnose, evidence, logtext

CORPUS = Path(__file__).resolve().parent / "corpus"
TEMPLATE = corpus.template_config()


def log(name):
    return (CORPUS / f"{name}.log").read_text(encoding="utf-8")


def run(text, config=None):
    return diagnose(text, dict(TEMPLATE) if config is None else config, {"status": "crash"})


def test_the_chain_starts_at_the_first_error_and_knows_each_frames_library():
    read = evidence.read(logtext.normalise(log("pytorch-121833-streamwriter-chained")))
    first, last = read.chain[0], read.chain[-1]
    assert "PytorchStreamWriter failed writing file data/1" in first.message
    assert first.raised_in == "torch" and [f.library for f in first.frames] == ["torch", "torch"]
    # The handler's frames: the user's script, then torch.
    assert last.frames[0].library is None and "entry0.py" in last.frames[0].file
    assert last.user_frame().function == "storeModel"


def test_messages_read_the_same_on_every_machine_and_rank():
    one = "CUDA out of memory. Tried to allocate 2.00 GiB on cuda:1 (/home/a/x.py, pid 4411 at 0x7f3a)"
    two = "CUDA out of memory. Tried to allocate 512.50 MiB on cuda:0 (/srv/b/y.py, pid 17 at 0x55e1)"
    assert evidence.normalise(one) == evidence.normalise(two)
    assert "<size>" in evidence.normalise(one) and "cuda:<n>" in evidence.normalise(one)


def test_torchruns_root_cause_block_names_the_rank_and_exit_code():
    result = run(log("oevortex-unsloth-4-root-cause-exitcode-1"))
    facts = result["intermediates"]["evidence"]
    assert (facts["root_cause_rank"], facts["root_cause_exitcode"]) == (0, 1)
    # Exit 1 with no error of its own is no family: precision first.
    assert result["family"] == "UNKNOWN"


def test_every_diagnosis_carries_the_lines_that_decided_it():
    result = run(log("nccl-342-docker-shm-segment"))
    decided = result["intermediates"]["evidence"]["decided_by"]
    assert any("posix_fallocate failed" in d["line"] or "shared memory segment" in d["line"] for d in decided)


def test_shared_memory_is_not_the_disk_it_looks_like():
    # "No space left on device" on NCCL's /dev/shm segment and on a DataLoader's /torch_ file.
    for name in ("nccl-290-posix-fallocate-shm", "nccl-525-kubeflow-shm-segment", "eslam-20-torch-shm-no-space"):
        result = run(log(name))
        assert (result["family"], result["codes"]) == ("OOM", ["SHM_EXHAUSTED"]), name
        assert "--shm-size" in result["explanation"] and result["fix"] == {}
    # The real full disk still is one.
    assert run("OSError: [Errno 28] No space left on device: '/data/ckpt/step_100.pt'\n")["codes"] == ["DISK_FULL"]


def test_a_failed_checkpoint_write_is_a_full_disk():
    for name in ("chatglm6b-1166-streamwriter-deepspeed", "f5tts-458-streamwriter-rank0", "simplerl-19-streamwriter-ray"):
        result = run(log(name))
        assert (result["family"], result["codes"]) == ("DATA", ["DISK_FULL"]), name
        assert "checkpoint" in result["explanation"]


def test_host_memory_kills_do_not_get_the_gpu_batch_fix():
    result = run(log("detectron2-384-worker-exited-docker"))
    assert result["family"] == "OOM" and result["fix"] == {}
    assert "DEVICE_BATCH_SIZE" not in result["explanation"]


def test_a_driver_warning_decides_when_the_run_went_on_without_the_gpu():
    result = run(log("verba-72-driver-too-old-cpu-fallback"))
    assert (result["family"], result["codes"]) == ("NO_ACCELERATOR", ["DRIVER_TOO_OLD"])
    assert "warning" in result["explanation"] and "driver" in result["explanation"]
    # ... and it explains a later "no GPU" failure.
    later = log("yuan2-65-driver-too-old-container") + "RuntimeError: No CUDA GPUs are available\n"
    result = run(later)
    assert result["codes"] == ["DRIVER_TOO_OLD"]
    decided = [d["line"] for d in result["intermediates"]["evidence"]["decided_by"]]
    assert decided[0] == "RuntimeError: No CUDA GPUs are available" and "too old" in decided[1]
    # A later bug of the code's own that has nothing to do with the GPU is what ended that run.
    unrelated = log("yuan2-65-driver-too-old-container") + (
        'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n    x = cfg["lr"]\n'
        "KeyError: 'lr'\n")
    assert run(unrelated, {})["codes"] == ["CODE_ERROR"]


def test_code_errors_only_when_raised_in_the_projects_own_code():
    # TypeError inside an installed package: not named a code bug.
    inside = run(log("labml-166-unpack-nonetype-in-library"))
    assert inside["family"] == "UNKNOWN" and "labml_nn" in inside["explanation"]
    # The same kind of error raised in the project's own file is.
    own = ('Traceback (most recent call last):\n  File "train.py", line 88, in main\n'
           "    x, y = batch\nTypeError: cannot unpack non-iterable NoneType object\n")
    assert run(own, {})["codes"] == ["CODE_ERROR"]
    # A pasted line with no frames is not enough either; a NameError always is.
    assert run("TypeError: cannot unpack non-iterable NoneType object\n", {})["family"] == "UNKNOWN"
    assert run("NameError: name 'cfg' is not defined\n", {})["codes"] == ["CODE_ERROR"]


def test_a_launchers_report_defers_to_its_childs_error():
    result = run(log("kohya-3268-adafactor-warmup-valueerror"))
    assert "num_warmup_steps" in result["explanation"]
    assert "CalledProcessError" in result["intermediates"]["launcher_error"]


def test_a_keyerror_from_a_datasets_getitem_is_the_data():
    for name in ("desed-91-keyerror-embeddings-missing", "yolact-644-keyerror-dataloader-worker"):
        result = run(log(name))
        assert (result["family"], result["codes"]) == ("DATA", ["DATASET_ITEM_MISSING"]), name


def test_a_tokenizer_by_hub_id_is_the_hub_a_tokenizer_by_path_is_missing():
    # The message alone follows an unreachable Hub, a shadowing local folder or an old
    # transformers (the corpus has threads of each): only a network error in the log decides.
    alone = run(log("lora-scripts-609-cant-load-tokenizer-hub"))
    assert alone["family"] == "UNKNOWN" and "HF_ENDPOINT" in alone["explanation"]
    offline = ("requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', port=443): "
               "Max retries exceeded with url: /openai/clip-vit-large-patch14/resolve/main/vocab.json\n")
    assert run(offline + log("lora-scripts-609-cant-load-tokenizer-hub"))["codes"] == ["HUB_UNREACHABLE"]
    local = run(log("pyramid-flow-42-cant-load-tokenizer-local"))
    assert local["codes"] == ["TOKENIZER_MISSING"] and "pyramid_flow_model/tokenizer" in local["explanation"]


def test_a_watchdog_timeout_says_who_waited_where():
    result = run(log("torchtune-2093-watchdog-on-save"))
    inter = result["intermediates"]
    assert result["codes"] == ["NCCL_TIMEOUT"] and inter["timed_out_ranks"] == [0, 3]
    assert "different collectives" in result["explanation"] and "barrier" in result["explanation"]
    # A rank that printed no timeout while others did was elsewhere.
    busy = ("[rank1]:[E321 02:07:08 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600060 "
            "milliseconds before timing out.\n")
    text = "[rank0]: Saving model checkpoint to out/checkpoint-500\n" + busy
    inter = run(text)["intermediates"]
    assert inter["ranks_not_timed_out"] == [0] and inter["busy_with"] == "saving a checkpoint"


def test_accelerators_other_than_cuda():
    cases = {"therock-1054-hip-oom-16gib": ("OOM", "ROCm"), "physical-ai-319-xpu-out-of-device-memory": ("OOM", "XPU"),
             "lwm-60-tpu-hbm-direct-cause": ("OOM", "TPU"), "tianshou-1237-mps-float64": ("DTYPE_UNSUPPORTED", "float32")}
    for name, (family, word) in cases.items():
        result = run(log(name))
        assert result["family"] == family and word in result["explanation"], name


def test_build_and_import_failures_in_their_usual_words():
    cases = {"ERROR: Failed building wheel for flash-attn\n": "BUILD_FAILED",
             "ERROR: No matching distribution found for torch==2.0.1+cu118\n": "BUILD_FAILED",
             "ImportError: /usr/lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.30' not found\n": "BINARY_MISMATCH",
             "RuntimeError: operator torchvision::nms does not exist\n": "BINARY_MISMATCH",
             "csrc/ops.cu:2:10: fatal error: cuda_runtime.h: No such file or directory\n": "BUILD_TOOLCHAIN"}
    for text, code in cases.items():
        result = run(text, {})
        assert (result["family"], result["codes"]) == ("MISSING_DEPENDENCY", [code]), text
    # "Failed to build" in a sentence is not pip's verdict on a wheel.
    assert run("Failed to build the vocabulary from the corpus: it is empty\n", {})["family"] == "UNKNOWN"


def test_an_extension_build_that_stopped_in_ninja_is_a_failed_build_not_a_launcher():
    # CalledProcessError of `ninja -v` raised in torch's extension builder: the build failed.
    for name in ("denoising-diffusion-gan-25-ninja-direct-cause", "chamferdistance-31-ninja-setup-install"):
        result = run(log(name))
        assert (result["family"], result["codes"]) == ("MISSING_DEPENDENCY", ["BUILD_FAILED"]), name
        assert "launcher_error" not in result["intermediates"]
    assert "pip install ninja" in run(log("knn-cuda-14-ninja-required"))["explanation"]


def test_build_toolchain_failures_name_the_tool_that_is_too_old_or_too_new():
    gcc = run(log("instant-ngp-1562-gcc-later-than-12"))
    nvcc = run(log("3detr-59-nvcc-compute-89"))
    mismatch = run(log("openpcdet-1275-cuda-version-mismatch"))
    assert {r["codes"][0] for r in (gcc, nvcc, mismatch)} == {"BUILD_TOOLCHAIN"}
    assert "gcc" in gcc["explanation"] and "toolkit" in nvcc["explanation"] and "CUDA_HOME" in mismatch["explanation"]


def test_gpu_limits_that_are_not_vram():
    triton = run(log("pascal-pkgs-ci-50-triton-shared-memory-p40"))
    assert (triton["family"], triton["codes"]) == ("GPU_UNSUPPORTED", ["TRITON_SHARED_MEMORY"])
    assert triton["intermediates"]["shared_memory_limit"] == 49152 and "not GPU memory" in triton["explanation"]
    fa = run(log("llaga-16-fa-backward-head-dim-a40"))
    assert fa["codes"] == ["FA_UNSUPPORTED_ARCH"] and fa["fix"] == {"ATTENTION_BACKEND": "sdpa"}
    assert run(log("bitsandbytes-492-cuda-setup-failed-rich"))["codes"] == ["BINARY_MISMATCH"]
    # cuDNN that does not initialise is full GPU memory as often as a broken install: no guess.
    assert run(log("comfyui-11723-cudnn-not-initialized-conv3d"))["family"] == "UNKNOWN"


def test_sigbus_is_shared_memory_and_fp16_weights_under_the_scaler_are_a_config_error():
    bus = run(log("llama-cookbook-223-sigbus-8-gpus-container"))
    assert (bus["family"], bus["codes"]) == ("OOM", ["SHM_EXHAUSTED"]) and "SIGBUS" in bus["explanation"]
    assert bus["intermediates"]["evidence"]["root_cause_exitcode"] == -7
    # The engine saw the signal and the log said nothing.
    silent = diagnose("step 10 | loss 3.1\n", dict(TEMPLATE), {"status": "crash", "reason": "killed by SIGBUS"})
    assert silent["codes"] == ["SHM_EXHAUSTED"]
    scaled = run(log("cogvideo-775-unscale-fp16-after-training"))
    assert (scaled["family"], scaled["codes"]) == ("CONFIG_INVALID", ["FP16_WEIGHTS_SCALED"])
    assert "float32" in scaled["explanation"]


def test_words_with_digits_are_found_among_thousands_of_progress_lines():
    # The presence test zeroes digits in the log and in the words alike: "[Errno 28]" and
    # "exit code 137" stay findable however many numbered progress lines surround them.
    progress = "".join(f"step {i:05d} | loss: {9 - i / 1000:.4f} | dt: {300 + i % 7}ms\n" for i in range(5000))
    disk = progress + "OSError: [Errno 28] No space left on device: '/ckpt/step_5000.pt'\n" + progress[:2000]
    assert run(disk, {})["codes"] == ["DISK_FULL"]
    killed = progress + "Process exited with exit code 137\n"
    assert run(killed, {})["codes"] == ["HOST_OOM_KILLED"]


def test_a_division_by_zero_is_an_empty_dataset_only_when_it_divides_by_a_count_of_data():
    empty = run(log("cpm-26-zero-division-len-dataloader"))
    assert (empty["family"], empty["codes"]) == ("DATA", ["DATASET_EMPTY"])
    assert "len(train_dataloader)" in empty["explanation"]
    # The same error dividing by something else names no family: a bug or a value gone to zero.
    other = ('Traceback (most recent call last):\n  File "train.py", line 12, in <module>\n'
             '    ratio = gain / temperature\nZeroDivisionError: float division by zero\n')
    assert run(other)["family"] == "UNKNOWN"


def test_losses_below_zero_or_a_crash_are_never_a_causal_leak():
    # TR-MISR's loss is a negative score; the run then divided by an empty validation set.
    assert run(log("tr-misr-2-zero-division-empty-val"))["codes"] == ["DATASET_EMPTY"]
    # kohya's diffusion loss of 0.122, then a GPU watchdog: the crash decides, not the small loss.
    assert run(log("a1111-12499-kohya-launch-timed-out"))["codes"] == ["GPU_WATCHDOG_TIMEOUT"]


def test_a_library_contract_read_from_where_the_exception_was_raised():
    # KeyError inside transformers' auto-config registry: a model type newer than transformers.
    qwen = run(log("qwen-434-keyerror-qwen2-old-transformers"))
    assert (qwen["family"], qwen["intermediates"]["model_type"]) == ("MISSING_DEPENDENCY", "qwen2")
    # An unexpected keyword at the caller does not say whose function it is: no family ...
    own = ('Traceback (most recent call last):\n  File "train.py", line 40, in <module>\n    model = Net(depht=4)\n'
           "TypeError: Net.__init__() got an unexpected keyword argument 'depht'\n")
    assert run(own)["family"] == "UNKNOWN"
    # ... unless the class is a library's own arguments or config, renamed between versions.
    assert run(log("poseidon-3-trainingarguments-eval-strategy"))["codes"] == ["PACKAGE_VERSION"]
    # A name only an optional kernel package provides: its guarded import failed.
    assert run(log("openchat-52-nameerror-flash-attn-v1"))["codes"] == ["PACKAGE_VERSION"]


def test_the_cause_an_error_quotes_decides_over_the_error_that_carries_it():
    # NCCL's "unhandled cuda error" quotes CUDA's failure: 802 is an unready NVSwitch fabric.
    assert run(log("llamafactory-8968-b200-cuda-802-not-initialized"))["codes"] == ["CUDA_SYSTEM_NOT_READY"]
    assert run(log("nccl-1029-cuda-failure-initialization-error"))["family"] == "UNKNOWN"
    # xformers says its kernels were built for another torch: a binary mismatch, not the GPU.
    assert run(log("firefly-258-xformers-built-for-other-torch"))["codes"] == ["BINARY_MISMATCH"]
    # ENOSPC from a multiprocessing semaphore is /dev/shm; EACCES from shm_open is a permission.
    assert run(log("megatron-878-semlock-errno-28-dataloader"))["codes"] == ["SHM_EXHAUSTED"]
    assert run(log("nccl-328-shm-open-permission"))["codes"] == ["PERMISSION_DENIED"]
    # torch's default collate stacking samples of different sizes: the data, not the model.
    assert run(log("cf-net-3-stack-unequal-size-patches"))["codes"] == ["DATA_SHAPE_INCONSISTENT"]
