"""Reading rules on messy text, the run's shape, and explanations for benchmarks that are not the ML template.

The texts are short real fragments (each from a corpus log, URL in tests/diagnosis/corpus/) put
together the way real runs interleave them; the engine-side cases run real subprocesses.
"""

import json
import subprocess
import sys

from autoresearch.pipeline import diagnosis as seam
from gpu_train_debug import corpus, diagnose, logtext

TEMPLATE = corpus.template_config()
NAME_ERROR = ('Traceback (most recent call last):\n  File "train.py", line 65, in configure_loggers\n'
              "    tb_logger = SummaryWriter(log_dir=log_dir)\nNameError: name 'log_dir' is not defined\n")


def test_plain_name_error_in_a_generic_benchmark_names_the_exception_file_line_and_command():
    result = diagnose(NAME_ERROR, {}, {"status": "crash", "reason": "exit 1", "command": "python bench.py"})
    assert result["family"] == "CONFIG_INVALID" and result["codes"] == ["CODE_ERROR"]
    text = result["explanation"]
    for part in ("NameError: name 'log_dir' is not defined", "train.py line 65", "`python bench.py`", "exit 1",
                 "Define or import `log_dir`", "benchmark"):
        assert part in text, text
    assert "training step" not in text
    assert result["fix"] == {} and result["intermediates"]["exception_at"] == "train.py line 65, in configure_loggers"


def test_generic_timeout_speaks_of_the_benchmark_not_of_training():
    log = "loading 3 files\nresolving solver\nstill searching...\n"
    result = diagnose(log, {}, {"status": "timeout", "reason": "timed out after 900 s", "command": "make bench"})
    assert result["family"] == "TIMEOUT" and result["fix"] == {}
    assert "training" not in result["explanation"] and "compilation" not in result["explanation"]
    assert "'still searching...'" in result["explanation"] and "`make bench`" in result["explanation"]
    # The ML template keeps its own wording and fix.
    ml = diagnose(log, dict(TEMPLATE), {"status": "timeout"})
    assert ml["codes"] == ["STALL_BEFORE_FIRST_STEP"] and ml["fix"] == {"COMPILE": False}


def test_the_cause_not_the_cascade_in_chained_tracebacks():
    log = (NAME_ERROR + "\nDuring handling of the above exception, another exception occurred:\n\n"
           'Traceback (most recent call last):\n  File "train.py", line 379, in <module>\n    main()\n'
           "RuntimeError: logger setup failed\n")
    result = diagnose(log, {}, {"status": "crash"})
    assert result["codes"] == ["CODE_ERROR"] and "log_dir" in result["explanation"]


def test_a_warning_the_run_survived_does_not_outrank_the_real_error():
    log = ("/usr/lib/python3/site-packages/torch/amp/autocast_mode.py:250: UserWarning: In CPU autocast, but the "
           "target dtype is not supported. bf16 is not supported, disabling autocast\n" + NAME_ERROR)
    assert diagnose(log, {}, {"status": "crash"})["codes"] == ["CODE_ERROR"]


def test_loss_lines_only_no_traceback():
    log = "".join(f"iter {i}: loss {4 - i / 100:.4f}, time 101.2ms\n" for i in range(50))
    log += "iter 50: loss nan, time 101.9ms\niter 60: loss nan, time 101.1ms\n"
    result = diagnose(log, dict(TEMPLATE, MATRIX_LR=0.4), {"status": "crash"})
    assert result["family"] == "NAN_LOSS" and result["fix"] == {"MATRIX_LR": 0.04}


def test_messy_markup_is_undone():
    raw = ("\x1b[1;31m> RuntimeError:\x1b[0m\r\n> CUDA out of memory. Tried to allocate 12.00 MiB (GPU 0; 6.00 GiB "
           "total capacity; 4.44 GiB already allocated; 3.06 MiB free; 4.57 GiB reserved in total by PyTorch)\r\n")
    text = logtext.normalise(raw)
    assert "RuntimeError: CUDA out of memory" in text and "\x1b" not in text and "> " not in text
    result = diagnose(raw, dict(TEMPLATE), {"status": "crash"})
    assert result["family"] == "OOM" and result["fix"]["DEVICE_BATCH_SIZE"] < TEMPLATE["DEVICE_BATCH_SIZE"]
    assert result["intermediates"]["oom_capacity_mb"] == 6144.0


def test_sigkill_with_an_empty_log_is_the_oom_killer():
    result = diagnose("step 12 | loss: 3.1\n", {}, {"status": "crash", "reason": "killed by SIGKILL"})
    assert result["codes"] == ["HOST_OOM_KILLED"] and result["family"] == "OOM"
    assert "SIGKILL" in result["intermediates"]["exit_status"]


def test_a_log_that_names_its_own_data_command_is_quoted():
    log = ("WARNING: Failed to open the tokenizer file gpt2_tokenizer.bin\nThe Tokenizer is a new feature added "
           "April 14 2024.\nRe-run `python train_gpt2.py` to write it\n")
    result = diagnose(log, {}, {"status": "crash"})
    assert result["family"] == "TOKENIZER" and "`python train_gpt2.py`" in result["explanation"]


def test_engine_seam_passes_the_benchmark_command_from_the_log(tmp_path):
    repo, run_dir = tmp_path, tmp_path / ".autoresearch" / "runs" / "3"
    run_dir.mkdir(parents=True)
    (repo / "autoresearch.jsonl").write_text(json.dumps({"type": "config", "command": "python bench.py"}) + "\n{torn\n")
    bench = repo / "bench.py"
    bench.write_text("print('warming up')\nprint(undefined_name)\n")
    proc = subprocess.run([sys.executable, str(bench)], capture_output=True, text=True)
    (run_dir / "output.log").write_text(proc.stdout + proc.stderr)
    result = seam.for_run(str(repo), str(run_dir), "crash", reason=f"exit {proc.returncode}")
    assert result["family"] == "CONFIG_INVALID"
    assert "`python bench.py`" in result["explanation"] and "exit 1" in result["explanation"]
    assert "bench.py line 2" in result["explanation"]


def test_a_results_tsv_crash_row_whose_description_names_the_cause():
    # The example rows of karpathy/autoresearch's program.md (results.tsv format).
    rows = ("commit\tval_bpb\tmemory_gb\tstatus\tdescription\na1b2c3d\t0.997900\t44.0\tkeep\tbaseline\n"
            "c3d4e5f\t1.005000\t44.0\tdiscard\tswitch to GeLU activation\n"
            "d4e5f6g\t0.000000\t0.0\tcrash\tdouble model width (OOM)\n")
    result = diagnose(rows, dict(TEMPLATE), {"status": "crash"})
    assert result["family"] == "OOM" and "double model width (OOM)" in result["explanation"]
    b, total, seq = result["fix"]["DEVICE_BATCH_SIZE"], TEMPLATE["TOTAL_BATCH_SIZE"], TEMPLATE.get("MAX_SEQ_LEN", 2048)
    assert b < TEMPLATE["DEVICE_BATCH_SIZE"] and total % (b * seq) == 0
    assert diagnose(rows.replace("(OOM)", "lr 10x, loss went nan"), {}, {"status": "crash"})["family"] == "NAN_LOSS"


def test_library_messages_outside_the_corpus():
    # Texts the libraries print (DeepSpeed's fp16 loss scaler, Triton's build step, torch's
    # C++ extension loader), each with the family and the template fix they call for.
    cases = [
        ("[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768",
         "NAN_LOSS", {"DTYPE": "bfloat16"}),
        ("RuntimeError: Failed to find C compiler. Please specify via CC environment variable.",
         "COMPILE_FAILURE", {"COMPILE": False}),
        ("subprocess.CalledProcessError: Command '['which', 'c++']' returned non-zero exit status 1.",
         "COMPILE_FAILURE", {"COMPILE": False}),
        ("RuntimeError: \"addmm_impl_cpu_\" not implemented for 'Half'", "DTYPE_UNSUPPORTED", {"DTYPE": "float32"}),
        ("RuntimeError: CUDA error: invalid device ordinal", "NO_ACCELERATOR", {}),
        ("ValueError: Expected input batch_size (64) to match target batch_size (32).", "CONFIG_INVALID", {}),
        ("RuntimeError: Given groups=1, weight of size [64, 3, 7, 7], expected input[1, 4, 224, 224] to have 3 "
         "channels, but got 4 channels instead", "CONFIG_INVALID", {}),
        ("requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='cdn-lfs.huggingface.co', port=443): Read timed out.",
         "DATA", {}),
        ("torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError", "DISTRIBUTED", {}),
    ]
    for text, family, fix in cases:
        result = diagnose(text, dict(TEMPLATE, DTYPE="float16"), {"status": "crash"})
        assert (result["family"], result["fix"]) == (family, fix), text
