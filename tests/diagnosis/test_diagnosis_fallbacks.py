"""Structure-level fallbacks (gpu_train_debug/rules/fallbacks.py): what a traceback's shape says when
no signature knows its text. Each reading holds across projects; a wrong family is worse than
none, so each test also shows the nearby case that must stay UNKNOWN."""

from pathlib import Path

from gpu_train_debug import diagnose

DIR = Path(__file__).resolve().parent / "corpus"


def run(text):
    return diagnose(text, {}, {"status": "crash"})


def log(name):
    return (DIR / f"{name}.log").read_text(encoding="utf-8")


def tb(statement, error, path="train.py"):
    return (f'Traceback (most recent call last):\n  File "{path}", line 40, in main\n    {statement}\n{error}\n')


def test_an_assert_that_a_path_exists_is_a_missing_file():
    out = run(tb("assert os.path.isfile(checkpoint_path)", "AssertionError"))
    assert (out["family"], out["codes"]) == ("DATA", ["FILE_MISSING"])
    assert out["intermediates"]["evidence"]["decided_by"][-1]["why"].startswith("the failed assert checks")
    assert run(tb("assert Path(cfg.data_dir).exists(), cfg.data_dir", "AssertionError: /data/x"))["family"] == "DATA"
    assert run(tb("assert ok", "AssertionError: Checkpoint ./ckpt/model_final.pth not found!"))["family"] == "DATA"
    gpu = run(tb("assert torch.cuda.is_available()", "AssertionError"))
    assert (gpu["family"], gpu["codes"]) == ("NO_ACCELERATOR", ["NO_CUDA_DEVICE"])
    # Any other assert in the project's own code stays what it was (a check of the code's values).
    assert run(tb("assert x.shape[0] == y.shape[0]", "AssertionError"))["family"] == "CONFIG_INVALID"
    # Pasted without a traceback, the statement line above still says what was checked.
    assert run(log("add-gcn-10-assert-model-dir-exists"))["codes"] == ["FILE_MISSING"]


def test_arrow_errors_while_datasets_builds_a_split_are_the_data_format():
    for name in ("llamafactory-412-arrowinvalid-object-to-array", "mllm-dpo-2-arrowinvalid-dataset-generation"):
        out = run(log(name))
        assert (out["family"], out["codes"]) == ("DATA", ["DATA_FORMAT"]), name


def test_a_json_decode_error_is_read_from_what_the_statement_reads():
    lib = '  File "/usr/lib/python3.10/json/decoder.py", line 355, in raw_decode\n    raise JSONDecodeError("Expecting value", s, err.value) from None\n'
    head = 'Traceback (most recent call last):\n  File "run.py", line 17, in main\n    {}\n'
    error = "json.decoder.JSONDecodeError: Expecting value: line 12 column 16 (char 320)\n"
    assert run(head.format("config = json.load(f)") + lib + error)["family"] == "CONFIG_INVALID"
    assert run(head.format("samples = json.load(open(args.train_file))") + lib + error)["family"] == "DATA"
    assert run(head.format("x = json.load(f)") + lib + error)["family"] == "UNKNOWN"


def test_a_training_library_config_refusing_a_keyword_is_its_release():
    out = run(tb("args = SFTConfig(max_seq_length=2048)",
                 "TypeError: SFTConfig.__init__() got an unexpected keyword argument 'max_seq_length'"))
    assert (out["family"], out["codes"]) == ("MISSING_DEPENDENCY", ["PACKAGE_VERSION"])
    # A forward() refusing a keyword is the model's own signature: no family.
    assert run("TypeError: forward() got an unexpected keyword argument 'labels'\n")["family"] == "UNKNOWN"


def test_an_attribute_error_inside_a_library_about_its_own_object_is_a_version_mix():
    lib = ('Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n    model = get_peft_model(model, cfg)\n'
           '  File "/venv/lib/python3.10/site-packages/peft/tuners/lora/model.py", line 88, in _create\n'
           '    target.update_layer(x)\n')
    out = run(lib + "AttributeError: 'Linear8bitLt' object has no attribute 'update_layer'\n")
    assert (out["family"], out["codes"]) == ("MISSING_DEPENDENCY", ["PACKAGE_VERSION"])
    # About None or a builtin value, the caller passed the wrong thing: no family from this.
    assert run(lib + "AttributeError: 'NoneType' object has no attribute 'update_layer'\n")["family"] == "UNKNOWN"


def test_library_messages_with_one_meaning():
    assert run(log("llms-tuning-1-sfttrainer-index-out-of-range"))["codes"] == ["INDEX_OUT_OF_RANGE"]
    assert run(log("llamafactory-181-lora-target-modules-baichuan"))["family"] == "CONFIG_INVALID"
    assert run(log("sa2va-74-to-not-supported-4bit"))["family"] == "CONFIG_INVALID"
    assert run(log("superadapters-2-unable-to-create-tensor-keys"))["family"] == "DATA"


def test_a_loss_printed_as_a_nan_tensor():
    out = run("tensor(nan, device='cuda:1', dtype=torch.float16, grad_fn=<NllLossBackward0>)\n")
    assert out["family"] == "NAN_LOSS"
    assert run("weights: tensor(nan, device='cuda:0')\n")["family"] == "UNKNOWN"


def test_a_wrapped_frame_path_is_joined():
    out = run(log("stanford-alpaca-159-keyerror-llama-fsdp"))
    assert (out["family"], out["intermediates"].get("model_type")) == ("MISSING_DEPENDENCY", "llama")


def test_from_pretrained_finding_no_model_files_is_a_missing_path():
    for line in ("OSError: ./models/llama-7b does not appear to have a file named config.json.",
                 "OSError: Error no file named pytorch_model.bin, tf_model.h5 or flax_model.msgpack found in directory out/",
                 "OSError: Incorrect path_or_model_id: '/root/models/Qwen-7B'. Please provide either the path to a local folder",
                 "OSError: /data/llama is not a local folder and is not a valid model identifier listed on 'https://huggingface.co/models'"):
        out = run(line + "\n")
        assert (out["family"], out["codes"]) == ("DATA", ["FILE_MISSING"]), line
    # A tokenizer's files: the same words have three causes (README's reader conventions), no family.
    assert run("OSError: ./tok does not appear to have a file named tokenizer.model.\n")["family"] == "UNKNOWN"


def test_config_library_errors_are_an_invalid_config():
    for text in ('yaml.scanner.ScannerError: mapping values are not allowed here\n  in "train.yaml", line 12, column 14\n',
                 "omegaconf.errors.ConfigAttributeError: Key 'lr' is not in struct\n",
                 "hydra.errors.MissingConfigException: Cannot find primary config 'config'.\n"):
        assert run(text)["family"] == "CONFIG_INVALID", text


def test_dataset_messages_with_one_meaning():
    empty = run("ValueError: num_samples should be a positive integer value, but got num_samples=0\n")
    assert (empty["family"], empty["codes"]) == ("DATA", ["DATASET_EMPTY"])
    assert run('KeyError: "Column text not in the dataset. Current columns in the dataset: [\'instruction\']"\n')["codes"] == ["DATASET_KEY"]
    assert run("ValueError: Unknown split \"validation\". Should be one of ['train'].\n")["family"] == "DATA"
    assert run("ValueError: Cannot use chat template functions because tokenizer.chat_template is not set\n")["family"] == "TOKENIZER"
    assert run("IndexError: Target 5 is out of bounds.\n")["codes"] == ["INDEX_OUT_OF_RANGE"]
    assert run("AttributeError: 'LlamaForCausalLM' object has no attribute 'enable_input_require_grads'\n")["codes"] == ["PACKAGE_VERSION"]
    # A project's own model class missing an attribute is its code, not a release: no family from this.
    assert run("AttributeError: 'GPT' object has no attribute 'configure_optimizers'\n")["family"] == "UNKNOWN"


def test_structure_read_from_dev13_kinds():
    # An Arrow error quoted above a truncated traceback, or a ValueError raised in datasets' json builder.
    assert run(log("ms-swift-3981-grpo-json-arrowinvalid"))["codes"] == ["DATA_FORMAT"]
    assert run(log("xtuner-469-not-able-to-read-records-json"))["codes"] == ["DATA_FORMAT"]
    # Only the message printed (a launcher's wording): CPython's template names the class.
    assert run(log("xtuner-734-cannot-import-packaging-pkg-resources"))["codes"] == ["PACKAGE_VERSION"]
    assert run(log("sd-dreambooth-ext-1079-accelerator-project-dir"))["codes"] == ["PACKAGE_VERSION"]
    # A trainer's own words for stopping on a NaN loss.
    assert run(log("opendet2-29-loss-infinite-or-nan"))["family"] == "NAN_LOSS"
    # A KeyError in a collate function under transformers' Trainer: remove_unused_columns, not the data.
    collator = run(log("chatglm-tuning-258-collator-keyerror-seq-len"))
    assert (collator["family"], collator["codes"]) == ("CONFIG_INVALID", ["CONFIG_VALUE"])
    assert run(log("ms-swift-1898-failed-import-sft-not-callable"))["family"] == "MISSING_DEPENDENCY"


def test_library_contracts_common_in_llm_fine_tuning():
    cases = {
        "ValueError: The checkpoint you are trying to load has model type `qwen2` but Transformers does not recognize this architecture.": "MISSING_DEPENDENCY",
        "ValueError: rope_scaling must contain keys {'type', 'factor'}": "MISSING_DEPENDENCY",
        "ValueError: Invalid pattern: '**' can only be an entire path component\n": "MISSING_DEPENDENCY",
        "NotImplementedError: Loading a dataset cached in a LocalFileSystem is not supported.": "MISSING_DEPENDENCY",
        "ValueError: Trainer: evaluation requires an eval_dataset.": "CONFIG_INVALID",
        "TypeError: LlamaForCausalLM.forward() got an unexpected keyword argument 'num_items_in_batch'": "MISSING_DEPENDENCY",
        "AttributeError: 'TrainingArguments' object has no attribute 'evaluation_strategy'": "MISSING_DEPENDENCY",
        "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.": "DISTRIBUTED",
        "datasets.exceptions.DataFilesNotFoundError: No (supported) data files found in /data/x": "DATA",
    }
    for text, family in cases.items():
        assert run(text + "\n")["family"] == family, text


def test_rank_prefixed_frames_usage_blocks_and_tf32():
    # torchrun's `[rank0]:` prefix does not hide the frames: the keyword is read from where it was raised.
    out = run(log("sd-scripts-1524-load-model-unexpected-device"))
    assert (out["family"], out["codes"]) == ("MISSING_DEPENDENCY", ["PACKAGE_VERSION"])
    assert run(log("open-genie-2-invalid-choice-train-subcommand"))["codes"] == ["USAGE_ERROR"]
    assert run(log("fastchat-1191-v100-bf16-tf32"))["family"] == "DTYPE_UNSUPPORTED"
    # ENOSPC while multiprocessing makes its queue's lock (or joblib probes a semaphore): /dev/shm, not the disk.
    assert run(log("vits-fast-fine-tuning-397-errno28-simplequeue"))["codes"] == ["SHM_EXHAUSTED"]
