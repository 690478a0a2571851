"""The classes behind dev32's first-measurement misses in the settings/data/tokenizer families (rule round r8):
each pinned with short synthetic lines in the shape of the real message (the corpus id it came from), and a
near miss where the class is absent."""

import pytest

from gpu_train_debug import diagnose


def run(text):
    return diagnose(text, None, {"status": "crash"})


@pytest.mark.parametrize("log, family, code", [
    # nanodet-486: Lightning 2 stops fit when every loader is empty (its warnings alone do not decide).
    ("x/data.py:110: UserWarning: `DataLoader` returned 0 length. Please make sure this was your intention.\n"
     "  rank_zero_warn(\n`Trainer.fit` stopped: No training batches.\n", "DATA", "DATASET_EMPTY"),
    # Older Lightning raises it (the wordings WIMP-5 and sscd-9 quote).
    ("ValueError: `Dataloader` returned 0 length. Please make sure that it returns at least 1 batch\n", "DATA",
     "DATASET_EMPTY"),
    ("pytorch_lightning.utilities.exceptions.MisconfigurationException: Total length of `DataLoader` across ranks is "
     "zero. Please make sure that it returns at least 1 batch.\n", "DATA", "DATASET_EMPTY"),
    # llamafactory-2113: sentencepiece given no tokenizer.model (vocab_file None).
    ('  File "/env/lib/python3.10/site-packages/sentencepiece/__init__.py", line 311, in LoadFromFile\n'
     "    return _sentencepiece.SentencePieceProcessor_LoadFromFile(self, arg)\nTypeError: not a string\n",
     "TOKENIZER", "TOKENIZER_MISSING"),
    # chinese-vicuna-190: a rich frame whose arrow line indexes a data record that is a string.
    ("  156 │   │   │   p += fmt({'input': data_point['input'][i]})\n"
     "❱ 157 │   │   p += fmt({'input': data_point['input'][-1].strip()})\n  158 │   │\n"
     "╰──────────────────────────────────────────╯\nIndexError: string index out of range\n", "DATA", "DATA_FORMAT"),
    ('Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n    text = sample["text"]["en"]\n'
     "TypeError: string indices must be integers\n", "DATA", "DATA_FORMAT"),
    # megatron-lm-116: the exception line first, then the traceback whose last statement asserts an argument.
    ("AssertionError\nTraceback (most recent call last):\n  File \"pretrain_bert.py\", line 146, in <module>\n"
     "    pretrain(provider)\n  File \"/w/megatron/arguments.py\", line 213, in parse_args\n"
     "    assert args.encoder_seq_length is not None\n", "CONFIG_INVALID", "CONFIG_VALUE"),
    ('Traceback (most recent call last):\n  File "train.py", line 30, in main\n'
     "    assert opt.batch_size % opt.world_size == 0\nAssertionError\n", "CONFIG_INVALID", "CONFIG_VALUE"),
    # hcgf-15: a JSONDecodeError under the project's dataloader module.
    ('Traceback (most recent call last):\n  File "/w/proj/dataloader/data_loader.py", line 34, in _read_files\n'
     "    js = json.loads(line.strip())\n  File \"/env/lib/python3.10/json/__init__.py\", line 346, in loads\n"
     "    return _default_decoder.decode(s)\n"
     "json.decoder.JSONDecodeError: Invalid control character at: line 1 column 63 (char 62)\n", "DATA", "DATA_FORMAT"),
])
def test_dev32_classes(log, family, code):
    result = run(log)
    assert (result["family"], result["codes"]) == (family, [code]), result["explanation"]


@pytest.mark.parametrize("log", [
    # Lightning's warning that a loader is empty, with no stop: a validation loader may be switched off on purpose.
    "x/data.py:110: UserWarning: `DataLoader` returned 0 length. Please make sure this was your intention.\n",
    # `not a string` with no sentencepiece in sight.
    "    os.path.join(None)\nTypeError: not a string\n",
    # A string index that is not a data record's field.
    "  3 │   c = name[5]\n╰──────────╯\nIndexError: string index out of range\n",
    # An assert on the model's tensors, not on the arguments.
    "AssertionError\nTraceback (most recent call last):\n  File \"model.py\", line 3, in forward\n"
    "    assert x.shape[1] == self.dim\n",
    # A JSONDecodeError under a module that is no data module (and /mnt/data high up the path is no data module).
    'Traceback (most recent call last):\n  File "/mnt/data/proj/utils/io.py", line 34, in read_it\n'
    "    js = json.loads(line)\njson.decoder.JSONDecodeError: Invalid control character at: line 1 column 63 (char 62)\n",
])
def test_dev32_near_misses_name_no_family(log):
    assert run(log)["family"] == "UNKNOWN"

