"""Training-run semantics (gpu_train_debug/rules/semantics.py): message shapes, not error classes."""

import time

import pytest

from gpu_train_debug import diagnose


@pytest.mark.parametrize("log, family, code", [
    ("some tool: error: unrecognized arguments: --epochs 3\n", "CONFIG_INVALID", "USAGE_ERROR"),
    ("usage: x [-h]\nerror: argument cmd: invalid choice: 'go' (choose from 'run')\n", "CONFIG_INVALID", "USAGE_ERROR"),
    ("pydantic_core._pydantic_core.ValidationError: 2 validation errors for RunConfig\n", "CONFIG_INVALID", "CONFIG_VALUE"),
    ("ValueError: Please correct the following DeepSpeed config values that mismatch TrainingArguments values:\n",
     "CONFIG_INVALID", "CONFIG_VALUE"),
    ("ValueError: optimizer got an empty parameter list\n", "CONFIG_INVALID", "CONFIG_VALUE"),
    ("ValueError: num_samples should be a positive integer value, but got num_samples=0\n", "DATA", "DATASET_EMPTY"),
    ("pyarrow.lib.ArrowInvalid: JSON parse error: Column(/a) changed from number to string in row 3\n", "DATA", "DATA_FORMAT"),
    ("RuntimeError: mat1 and mat2 must have the same dtype\n", "CONFIG_INVALID", "DEVICE_MISMATCH"),
    ("IndexError: Target 10 is out of bounds.\n", "CONFIG_INVALID", "INDEX_OUT_OF_RANGE"),
    ("| loss | nan |\n| step | 10 |\n| loss | nan |\n", "NAN_LOSS", "LOSS_DIVERGED"),
    ("ValueError: Cannot use chat template functions because tokenizer.chat_template is not set\n", "TOKENIZER",
     "TOKENIZER_NO_CHAT_TEMPLATE"),
    ("OSError: cannot identify image file <_io.BufferedReader name='data/x/1.jpg'>\n", "DATA", "DATA_CORRUPT"),
    ("pytorch_lightning.utilities.exceptions.MisconfigurationException: No `test_dataloader()` method defined\n",
     "CONFIG_INVALID", "CONFIG_VALUE"),
])
def test_message_shapes(log, family, code):
    result = diagnose(log, None, {"status": "crash"})
    assert (result["family"], result["codes"]) == (family, [code]), result["explanation"]
    assert result["intermediates"]["evidence"]["decided_by"]


@pytest.mark.parametrize("log", [
    "ValueError: too many values to unpack (expected 2)\n",            # the code's, not a setting
    "step 1 | loss: 2.1\nstep 2 | loss: 2.0\nINFO finished\n",          # nothing failed
    "RuntimeError: CUDA error: an illegal memory access was encountered\n",
])
def test_no_family_without_the_shape(log):
    assert diagnose(log, None, {"status": "crash"})["family"] == "UNKNOWN"


def test_semantic_reading_stays_fast_on_long_logs():
    body = "".join(f"step {i:05d} | loss: {4 - i / 5000:.6f} | lr 3e-4 | info nan-free\n" for i in range(10000))
    for end in ("", "ValueError: --x requires the save and eval strategy to match\n", "KeyError: 'text'\n"):
        diagnose(body + end)
        start = time.perf_counter()
        diagnose(body + end)
        assert time.perf_counter() - start < 0.2


# dev23 (configuration and version-mismatch round): the shapes read from a message and where it was raised.
_MODULE_GETATTR = ('  File "/usr/lib/python3.8/site-packages/torch/nn/modules/module.py", line 532, in __getattr__\n'
                   '    type(self).__name__, name))\n')


@pytest.mark.parametrize("log, family, code", [
    ("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n    model.fit(x)\n" + _MODULE_GETATTR
     + "AttributeError: 'DataParallel' object has no attribute 'fit'\n", "CONFIG_INVALID", "CODE_ERROR"),
    ("torch.nn.modules.module.ModuleAttributeError: 'DistributedDataParallel' object has no attribute 'encoder'\n",
     "CONFIG_INVALID", "CODE_ERROR"),
    ("ValueError: You cannot perform fine-tuning on purely quantized models. Please attach trainable adapters\n",
     "CONFIG_INVALID", "CONFIG_VALUE"),
    ("KeyError: 'unexpected key \"head.weight\" in state_dict'\n", "CONFIG_INVALID", "CHECKPOINT_MISMATCH"),
    ("RuntimeError: Unknown model (my_vit_tiny)\n", "CONFIG_INVALID", "CONFIG_VALUE"),
    ("Traceback (most recent call last):\n  File \"train.py\", line 4, in <module>\n    parser = Trainer.add_argparse_args(parser)\n"
     "AttributeError: type object 'Trainer' has no attribute 'add_argparse_args'\n", "MISSING_DEPENDENCY", "PACKAGE_VERSION"),
])
def test_dev23_shapes(log, family, code):
    result = diagnose(log, None, {"status": "crash"})
    assert (result["family"], result["codes"]) == (family, [code]), result["explanation"]


@pytest.mark.parametrize("log", [
    # a relative import in the project's own tree: a file run as a script, or a module that moved
    "Traceback (most recent call last):\n  File \"/home/u/proj/proj/train.py\", line 3, in <module>\n"
    "    from . import arguments\nImportError: cannot import name 'arguments'\n",
    # the wrapper's own `module` attribute missing is not the forgotten `.module`
    "AttributeError: 'DataParallel' object has no attribute 'module'\n",
])
def test_dev23_no_family_without_the_shape(log):
    result = diagnose(log, None, {"status": "crash"})
    assert result["family"] == "UNKNOWN" or result["codes"] != ["CODE_ERROR"], result["explanation"]
    if "from . import" in log:
        assert result["family"] == "UNKNOWN", result["explanation"]


def test_a_missing_submodule_is_a_release_not_a_package():
    # `a.b` missing while `a` imports: torch._six, peft.utils.config, colossalai.legacy moved between releases.
    dotted = diagnose("ModuleNotFoundError: No module named 'torch._six'\n", None, {"status": "crash"})
    plain = diagnose("ModuleNotFoundError: No module named 'peft'\n", None, {"status": "crash"})
    assert (dotted["family"], dotted["codes"]) == ("MISSING_DEPENDENCY", ["PACKAGE_VERSION"])
    assert (plain["family"], plain["codes"]) == ("MISSING_DEPENDENCY", ["MISSING_PACKAGE"])


# dev24: a forward() called without an input, annotations without a field, Keras/TF members a release removed.
@pytest.mark.parametrize("log, family, code", [
    ("Traceback (most recent call last):\n  File \"train.py\", line 159, in train\n    out = net(a)\n"
     "  File \"/usr/lib/python3.8/site-packages/torch/nn/modules/module.py\", line 1110, in _call_impl\n"
     "    return forward_call(*input, **kwargs)\nTypeError: forward() missing 1 required positional argument: 'b'\n",
     "CONFIG_INVALID", "CODE_ERROR"),
    ("Traceback (most recent call last):\n  File \"/w/proj/mmdet/datasets/coco.py\", line 59, in load_annotations\n"
     "    info['filename'] = info['file_name']\nKeyError: 'file_name'\n", "DATA", "DATASET_KEY"),
    ("Traceback (most recent call last):\n  File \"/w/proj/utils.py\", line 99, in on_train_begin\n"
     "    grads = get(self.model.total_loss)\nAttributeError: 'Functional' object has no attribute 'total_loss'\n",
     "MISSING_DEPENDENCY", "PACKAGE_VERSION"),
])
def test_dev24_shapes(log, family, code):
    result = diagnose(log, None, {"status": "crash"})
    assert (result["family"], result["codes"]) == (family, [code]), result["explanation"]


def test_forward_called_from_inside_a_library_names_no_family():
    log = ("Traceback (most recent call last):\n  File \"/usr/lib/python3.8/site-packages/transformers/trainer.py\", "
           "line 10, in training_step\n    out = model(**inputs)\n  File \"/usr/lib/python3.8/site-packages/torch/nn/"
           "modules/module.py\", line 1110, in _call_impl\n    return forward_call(*input, **kwargs)\n"
           "TypeError: forward() missing 1 required positional argument: 'labels'\n")
    assert diagnose(log, None, {"status": "crash"})["family"] == "UNKNOWN"


@pytest.mark.parametrize("path", ["", "C:\\\\", "/"])
def test_an_empty_or_root_path_is_a_setting_not_a_missing_file(path):
    log = ("Traceback (most recent call last):\n  File \"/w/p/main.py\", line 5, in <module>\n    cfg = load(args.config)\n"
           f"FileNotFoundError: [Errno 2] No such file or directory: '{path}'\n")
    result = diagnose(log, None, {"status": "crash"})
    assert (result["family"], result["codes"]) == ("CONFIG_INVALID", ["CONFIG_VALUE"]), result["explanation"]


# dev26 (run settings and data round): each shape pinned by a synthetic line in the form of the real
# message (the corpus id in the comment is where the shape came from).
@pytest.mark.parametrize("log, family, code", [
    # openvla-oft-148: tensorflow-datasets' split refusal, single quotes, quoted in a sentence
    ("I set --use_val_set True and got: ValueError: Unknown split 'val'. Should be one of ['train'].\n",
     "DATA", "DATASET_KEY"),
    # datasets' own wording of the same refusal, double quotes
    ('ValueError: Unknown split "validation". Should be one of [\'train\', \'test\'].\n', "DATA", "DATASET_KEY"),
    # querydet-46: PyYAML's words and mark, pasted by a debugger without the exception's module
    ('Exception has occurred: ScannerError\nmapping values are not allowed here\n'
     '  in "/w/proj/configs/base.yaml", line 5, column 29\n', "CONFIG_INVALID", "CONFIG_VALUE"),
    ("could not find expected ':'\n  in \"<unicode string>\", line 12, column 3:\n", "CONFIG_INVALID", "CONFIG_VALUE"),
    # deepfacelab-5697: argparse's refusal retyped without its spaces
    ("i get an error \"main.py train:error:argument --model:invalid choice:'X' (choose from 'A','B')\"\n",
     "CONFIG_INVALID", "USAGE_ERROR"),
    # chatglm-finetune-lora-32: a loss printed as bare scalar tensors that turns NaN
    ("tensor(3.2207, device='cuda:0')\ntensor(nan, device='cuda:0')\ntensor(nan, device='cuda:0')\n",
     "NAN_LOSS", "LOSS_DIVERGED"),
    # diffusers-125: a setting left None, dereferenced by accelerate's launcher
    ("Traceback (most recent call last):\n  File \"/usr/lib/python3.7/site-packages/accelerate/commands/launch.py\", "
     "line 280, in simple_launcher\n    mixed_precision = PrecisionType(args.mixed_precision.lower())\n"
     "AttributeError: 'NoneType' object has no attribute 'lower'\n", "CONFIG_INVALID", "CONFIG_VALUE"),
    # xturing-261: a JSON Lines reader's KeyError on a record without the field
    ("Traceback (most recent call last):\n  File \"/usr/lib/python3.10/site-packages/lib/data/reader.py\", line 89, "
     "in from_jsonl\n    data[\"text\"].append(row[\"text\"])\nKeyError: 'text'\n", "DATA", "DATASET_KEY"),
])
def test_dev26_shapes(log, family, code):
    result = diagnose(log, None, {"status": "crash"})
    assert (result["family"], result["codes"]) == (family, [code]), result["explanation"]


@pytest.mark.parametrize("log", [
    # the YAML words without PyYAML's file/line mark
    "note: mapping values are not allowed here, the docs say\n",
    # scalar tensors that were never finite: no loss seen to turn
    "tensor(nan, device='cuda:0')\ntensor(nan, device='cuda:0')\n",
    # a None dereferenced in the project's model code, not where settings are read
    "Traceback (most recent call last):\n  File \"/w/p/model.py\", line 3, in forward\n    x = self.head.weight\n"
    "AttributeError: 'NoneType' object has no attribute 'weight'\n",
    # a KeyError in a function that is not a file reader
    "Traceback (most recent call last):\n  File \"/w/p/train.py\", line 3, in build\n    m = MODELS[name]\n"
    "KeyError: 'resnet'\n",
])
def test_dev26_shapes_need_their_evidence(log):
    result = diagnose(log, None, {"status": "crash"})
    assert result["codes"] not in (["CONFIG_VALUE"], ["LOSS_DIVERGED"], ["DATASET_KEY"]), result["explanation"]


# dev29 (a batch drawn like the acceptance batches): the shapes its misses had, in the real messages' form.
@pytest.mark.parametrize("log, family, code", [
    # isice-1: argparse's refusal quoted inside a sentence
    ("When I run it I get error message: 'main.py: error: argument --lr-params: invalid float value: '15\\\\''\n",
     "CONFIG_INVALID", "USAGE_ERROR"),
    # opennmt-1886: configargparse refusing the config file it was given
    ("train.py: error: Couldn't parse config file: expected '<document start>', but found '<block mapping start>'\n",
     "CONFIG_INVALID", "CONFIG_VALUE"),
    # sp-society-7: a library's validation telling the caller to specify a setting
    ("ValueError: When using a generator for validation data, you must specify a value for `validation_steps`.\n",
     "CONFIG_INVALID", "CONFIG_VALUE"),
    # mlx-lm-765: the same, quoted in a sentence
    ("the tool reports an error that the ValueError: Must provide at least one of --train or --test.\n",
     "CONFIG_INVALID", "CONFIG_VALUE"),
    # deepke-271: datasets' map(remove_columns=...) naming columns the dataset lacks
    ("ValueError: Column to remove ['output', 'kg'] not in the dataset. Current columns in the dataset: ['id', 'input']\n",
     "DATA", "DATASET_KEY"),
    # open-r1-205: trl's SFT trainer reading the text field of a record that has none
    ("trl/trainer/utils.py\", line 612, in <lambda> [rank0]: self.formatting_func = lambda x: x[dataset_text_field] "
     "[rank0]: KeyError: 'text'\n", "DATA", "DATASET_KEY"),
    # viewdiff-24: NCCL's reason for ncclInvalidUsage, two ranks on one GPU (more processes than GPUs): the GPUs
    # are there, the launch maps ranks onto them wrongly
    ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1691, "
     "invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.19.3\nncclInvalidUsage: This usually reflects "
     "invalid usage of NCCL library.\nLast error:\nDuplicate GPU detected : rank 0 and rank 1 both on CUDA device 1000\n",
     "DISTRIBUTED", "NCCL_ERROR"),
    # fast-sd-1673: a script's own path check raised as a ValueError
    ("Traceback (most recent call last):\n  File \"/c/train_dreambooth.py\", line 321, in __init__\n"
     "    raise ValueError(\"Instance images root doesn't exists.\")\nValueError: Instance images root doesn't exists.\n",
     "DATA", "FILE_MISSING"),
])
def test_dev29_shapes(log, family, code):
    result = diagnose(log, None, {"status": "crash"})
    assert (result["family"], result["codes"]) == (family, [code]), result["explanation"]


@pytest.mark.parametrize("log", [
    # argparse's words in a sentence without a script's name in front of them
    "the docs say 'error: argument --x: invalid float value' is what you get\n",
    # `must specify` about the GPU is the machine's, not a setting's
    "ValueError: you must specify a CUDA device for `device_map` when no GPU is visible\n",
    # a path check about the toolchain (CUDA_HOME) is not a data file
    "Traceback (most recent call last):\n  File \"setup.py\", line 3, in <module>\n    raise OSError(m)\n"
    "OSError: CUDA_HOME path does not exist\n",
    # a KeyError raised in the project's own formatting code, not trl's
    "Traceback (most recent call last):\n  File \"/w/p/format.py\", line 3, in fmt\n    x = row['text']\n"
    "KeyError: 'text'\n",
])
def test_dev29_shapes_need_their_evidence(log):
    result = diagnose(log, None, {"status": "crash"})
    assert result["codes"] not in (["USAGE_ERROR"], ["CONFIG_VALUE"], ["FILE_MISSING"], ["DATASET_KEY"]), result["explanation"]


# The earlier dev sets' misses in the data/settings families, read by class (ids name where each shape came from).
@pytest.mark.parametrize("log, family, code", [
    # chatglm-efficient-tuning-17: LLaMA-Factory given a dataset name its dataset_info.json does not define
    ("Run it in Colab caused ValueError: Undefined dataset mydata in dataset_info.json\n", "CONFIG_INVALID", "CONFIG_VALUE"),
    # mlx-examples-854: mlx's strict load_weights given weights the model does not have
    ("  File \"/x/mlx/nn/layers/base.py\", line 211, in load_weights\n"
     "    raise ValueError(f\"Received parameters not in model: {extras}.\")\n", "CONFIG_INVALID", "CHECKPOINT_MISMATCH"),
    # donut-318: a record's field read by the statement that raised
    ("ground_truth = json.loads(sample[\"ground_truth\"]) KeyError: 'ground_truth'\n", "DATA", "DATASET_KEY"),
    # aktwelve-tutorials-4: an annotation document without the field (IPython's frame layout)
    ("<ipython-input-6-5aee> in load_data(self, annotation_json, images_dir)\n"
     "---> 18         for category in coco_json['categories']:\n\nKeyError: 'categories'\n", "DATA", "DATASET_KEY"),
])
def test_data_and_settings_shapes_of_earlier_sets(log, family, code):
    result = diagnose(log, None, {"status": "crash"})
    assert (result["family"], result["codes"]) == (family, [code]), result["explanation"]


@pytest.mark.parametrize("log", [
    # a settings dict without the key: the run's settings, not its data
    "Traceback (most recent call last):\n  File \"/w/p/train.py\", line 3, in main\n    lr = config['lr']\nKeyError: 'lr'\n",
    # a collator's `example[...]` (a Trainer that dropped the column is a setting, minicpm-v-374)
    "Traceback (most recent call last):\n  File \"/w/p/collate.py\", line 3, in collate\n"
    "    ids = example[\"input_ids\"]\nKeyError: 'input_ids'\n",
    # a record read for another key than the one missing
    "Traceback (most recent call last):\n  File \"/w/p/data.py\", line 3, in get\n    x = sample['image']; y = LUT[x]\n"
    "KeyError: 'cat'\n",
])
def test_record_field_needs_the_record_and_the_key(log):
    result = diagnose(log, None, {"status": "crash"})
    assert result["codes"] != ["DATASET_KEY"], result["explanation"]
