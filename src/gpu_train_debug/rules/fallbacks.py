"""Fallbacks read from the structure of a failure, for logs no signature in patterns.py knows.

They look at what any Python traceback shows, whatever the project: the class of the exception
that ended the run, the statement that raised it (the source line printed above it), the
library its deepest frame lives in, and the classes of the other exceptions of its chain. Each
reading is one whose meaning holds across projects:

- an `assert` that a path exists failed: a file or folder the run needs is missing (DATA);
- an `assert torch.cuda.is_available()` failed: no usable GPU (NO_ACCELERATOR);
- pyarrow's ArrowInvalid/ArrowTypeError or datasets' DatasetGenerationError while a dataset was
  built: the data file's records do not have one consistent format (DATA);
- a JSONDecodeError raised by the statement that reads a config file: the config is not valid
  JSON (CONFIG_INVALID); by one that reads a data file: the data is not (DATA);
- `<LibraryConfigClass>.__init__() got an unexpected keyword argument` for the training-library
  classes whose keywords are renamed between releases (TrainingArguments, SFTConfig, ...): the
  installed release is not the one the code was written for (MISSING_DEPENDENCY);
- `forward() got an unexpected keyword argument`, raised where torch calls a module's forward:
  the model's own signature, not a library release, so no family;
- an AttributeError raised inside an installed library about one of its own objects: two
  libraries of releases that do not go together (MISSING_DEPENDENCY);
- torch's `index out of range in self` (an embedding lookup): token ids beyond the embedding
  table (CONFIG_INVALID), the CPU twin of the device-side assert;
- peft's `Target modules ... not found in the base model`: LoRA target names this model does not
  have (CONFIG_INVALID); bitsandbytes' refusal to move a quantised model (CONFIG_INVALID);
- transformers' `Unable to create tensor ... excessive nesting`: the features handed to the
  collator are not token ids (the data's fields or format, DATA);
- a loss printed as a tensor, `tensor(nan, ... grad_fn=<...LossBackward0>)` (NAN_LOSS).

Each returns (family, codes, why, explanation) or None; `False` means "name no family" (a wrong
family is worse than UNKNOWN). Standard library only, bounded scans.
"""

import re

from gpu_train_debug import logtext
from gpu_train_debug.rules import semantics

# Every code a fallback here can give (references/diagnosis-codes.md documents each).
CODES = ("FILE_MISSING", "NO_CUDA_DEVICE", "DATA_FORMAT", "CONFIG_VALUE", "PACKAGE_VERSION", "CODE_ERROR",
         "INDEX_OUT_OF_RANGE", "DATASET_EMPTY", "DATASET_KEY", "TOKENIZER_NO_CHAT_TEMPLATE", "LOSS_DIVERGED",
         "DIST_INIT_FAILED", "NCCL_ERROR", "TF32_UNSUPPORTED", "USAGE_ERROR")

# -- assertions ------------------------------------------------------------------------------

_PATH_ASSERT = re.compile(
    r"\bassert\b[^\n]*?(?:os\.path\.(?:exists|isfile|isdir|lexists)\s*\(|\.(?:exists|is_file|is_dir)\(\s*\)"
    r"|os\.access\s*\(|glob\()")
_GPU_ASSERT = re.compile(r"\bassert\b[^\n]*?\b(?:torch\.)?cuda\.(?:is_available|device_count)\s*\(")
_MISSING_WORDS = re.compile(r"\b(?:does\s*n[o']t exist|not exists?|not found|no such file|cannot find|can't find|could not find)\b",
                            re.I)
_FILE_WORDS = re.compile(r"\b(?:file|path|dir(?:ectory)?|folder|checkpoint|ckpt|weights?|model|dataset|data)\b"
                         r"|\.(?:pth?|bin|json|ya?ml|safetensors|ckpt|npy|txt|csv)\b", re.I)


# (r4) A dataset module of the project: datasets/..., data/..., dataset.py, data_loader.py, my_dataset.py.
_DATASET_MODULE = re.compile(r"(?:^|[/\\])(?:\w*_)?(?:data(?:set)?s?|data_?loaders?)(?:[/\\]|(?:_\w+)?\.py$)", re.I)


def assertion(raised, statement):
    """An AssertionError read from the check that failed."""
    if raised.name != "AssertionError":
        return None
    checked = f"{statement}\n{raised.message}"
    if _PATH_ASSERT.search(checked):
        return ("DATA", ["FILE_MISSING"], "the failed assert checks that a path exists", (
            f"An assert that a file or folder exists failed (`{statement.strip()[:120]}`): a path the run needs is "
            "missing. Download or create it (a checkpoint, a config, the prepared data), or fix the path (relative "
            "paths depend on the working directory)."))
    if _GPU_ASSERT.search(checked):
        return ("NO_ACCELERATOR", ["NO_CUDA_DEVICE"], "the failed assert checks for a CUDA GPU", (
            f"An assert that CUDA is available failed (`{statement.strip()[:120]}`): torch sees no GPU (a CPU-only "
            "torch build, a driver that does not load, or CUDA_VISIBLE_DEVICES hiding the GPUs)."))
    if semantics.ARGS_ASSERT.match((statement or "").strip()):
        # (r8) an assert on the parsed arguments or config (`assert args.encoder_seq_length is not None`,
        # megatron-lm-116): a setting was not given or does not fit the others.
        return ("CONFIG_INVALID", ["CONFIG_VALUE"], "the failed assert checks the run's arguments or config", (
            f"An assert on the run's arguments failed (`{checked.strip()[:100]}`): a setting the script requires "
            "was not given (None), or does not fit the others. Pass it on the command line or in the config (the "
            "project's example scripts show the arguments it expects), with a value the check accepts."))
    if raised.message and _MISSING_WORDS.search(raised.message) and _FILE_WORDS.search(raised.message):
        return ("DATA", ["FILE_MISSING"], "the assert's message says a file or folder was not found", (
            f"{raised.text()[:160]}: a file or folder the run needs is missing. Download or create it, or fix "
            "its path."))
    if _DATASET_MODULE.search(raised.file or "") and not re.search(r"(?:site|dist)-packages", raised.file):
        # (r4) an assert in the project's dataset module checks the data it read (shapes, counts, formats)
        # as often as the code: no family rather than a code error (dev28 stylegan2-ada-14).
        return False
    return None


# A script's own check that a path exists, raised as an exception rather than asserted
# (`raise ValueError("Instance images root doesn't exists.")`): the message names a file, folder,
# root or path and says it does not exist.
_PATH_ABSENT = re.compile(r"\b(?:root|dir(?:ectory)?|folder|path|file)s?\b[^\n]{0,80}?\b(?:does ?n[o']t|doesn't|do not|not) exists?\b",
                          re.I)
# ...but not a toolchain's or a library's path (CUDA_HOME, nvcc, a shared library): another family's.
_TOOLCHAIN_PATH = re.compile(r"cuda|nvcc|driver|\.so\b|\.dll\b|librar|compiler|gcc|module", re.I)
_CHECKED_RAISES = ("ValueError", "RuntimeError", "Exception", "OSError", "IOError")


def path_check(raised):
    """A script's own path check raised as ValueError/RuntimeError/OSError: a file or folder is missing."""
    message = raised.message or ""
    if raised.name not in _CHECKED_RAISES or not _PATH_ABSENT.search(message) or _TOOLCHAIN_PATH.search(message):
        return None
    return ("DATA", ["FILE_MISSING"], "the error says a file or folder the run reads does not exist", (
        f"{raised.text()[:160]}: a file or folder the run reads (its data, images or checkpoint) is not where the "
        "setting points. Download or create it, or fix the path in the command line or config (relative paths "
        "depend on the working directory)."))


# -- data loading ----------------------------------------------------------------------------

def record_index(raised, statement):
    """(r8) A string-index error raised by the statement that indexes a data record's field
    (`data_point['input'][-1]`, `sample["text"]["en"]`): the record has another layout (DATA)."""
    if raised.name not in ("IndexError", "TypeError") or not semantics.STRING_INDEX.match(raised.message or ""):
        return None
    if not semantics.RECORD_NAMED.search(statement or ""):
        return None
    return ("DATA", ["DATA_FORMAT"], "a data record's field indexed as a type it is not", (
        f"{raised.text()[:100]}, raised by `{statement.strip()[:80]}`, which reads a field of a data record: the "
        "field holds another type than the code indexes (a string where a list of turns or a dict was expected, "
        "or a record that is a plain string). Give every record the layout the script documents (its example "
        "data: field names, lists vs strings), or convert the file to it."))


_ARROW = ("ArrowInvalid", "ArrowTypeError", "ArrowNotImplementedError", "DatasetGenerationError", "CastError",
          "DatasetGenerationCastError")


_ARROW_MENTION = re.compile(r"pyarrow\.lib\.Arrow(?:Invalid|TypeError|NotImplementedError)\b")
_DATASETS_BUILDER = re.compile(r"datasets[/\\]packaged_modules[/\\](?:json|csv|text|parquet|arrow)[/\\]")


def dataset_build(names, message, link=None, around=""):
    """pyarrow/datasets could not turn the data file's records into a table: an Arrow error in the
    chain, quoted just above it (`Failed to load JSON from file ... <class 'pyarrow.lib.ArrowInvalid'>`),
    or a ValueError raised in datasets' own file builders."""
    frames = link.frames if link else []
    built = any(_DATASETS_BUILDER.search(f.file or "") for f in frames) and "ValueError" in names
    if not (any(name in _ARROW for name in names) or _ARROW_MENTION.search(around) or built):
        return None
    return ("DATA", ["DATA_FORMAT"], "pyarrow/datasets could not build a table from the data file", (
        f"`datasets` could not build the dataset from its file ({message[:140]}): its records do not share one "
        "format (a field that is an object in one record and a list or another type in the next, a JSON array "
        "read as JSON Lines, a column of mixed types). Make every record the same shape and type, or load it "
        "with an explicit schema (features=...)."))


_CONFIG_READ = re.compile(r"conf|cfg|setting|hparam|hyper|\bparams?\b|option", re.I)
# (`train.py`, `test.py` name a script, not the file it reads)
_DATA_READ = re.compile(r"data|jsonl|annot|sample|label|corpus|example|\b(?:train|val|test)\b(?!\.py)", re.I)


def json_decode(raised, statement):
    """A JSONDecodeError: what the statement that raised it was reading."""
    if raised.name != "JSONDecodeError" or not statement:
        return None
    if _CONFIG_READ.search(statement):
        return ("CONFIG_INVALID", ["CONFIG_VALUE"], "the statement that failed to parse JSON reads a config", (
            f"The config file is not valid JSON ({raised.text()[:100]}, reading `{statement.strip()[:80]}`): an "
            "unquoted value, a trailing comma, a comment, or a file that holds something else (an empty file, a "
            "note, an HTML page). Fix the file at the line and column the error names."))
    if _DATA_READ.search(statement):
        return ("DATA", ["DATA_FORMAT"], "the statement that failed to parse JSON reads a data file", (
            f"The data file is not valid JSON ({raised.text()[:100]}, reading `{statement.strip()[:80]}`): JSON "
            "Lines read as one document, a truncated file, or another format. Read it in its own format."))
    return None


# -- library contracts -----------------------------------------------------------------------

# Training-library classes whose keyword arguments are renamed or added between releases.
_LIBRARY_CLASSES = frozenset((
    "TrainingArguments", "Seq2SeqTrainingArguments", "Trainer", "Seq2SeqTrainer", "SFTConfig", "SFTTrainer",
    "DPOConfig", "DPOTrainer", "GRPOConfig", "GRPOTrainer", "ORPOConfig", "ORPOTrainer", "KTOConfig", "KTOTrainer",
    "PPOConfig", "PPOTrainer", "RewardConfig", "RewardTrainer", "LoraConfig", "PeftConfig", "BitsAndBytesConfig",
    "GenerationConfig", "Accelerator", "DataCollatorForCompletionOnlyLM", "DataCollatorForSeq2Seq"))
_KEYWORD = re.compile(r"^(?:(\w+)\.)?(\w+)\(\) got an unexpected keyword argument '?(\w+)'?")


def unexpected_keyword(raised, link):
    """A keyword a callee does not take: whose callee the structure says."""
    if raised.name != "TypeError":
        return None
    match = _KEYWORD.match(raised.message)
    if not match:
        return None
    owner, function, keyword = match.groups()
    frames = link.frames if link else []
    through_module_call = bool(frames) and re.search(r"torch[/\\]nn[/\\]modules[/\\]module\.py", frames[-1].file or "")
    if keyword == "num_items_in_batch":
        return ("MISSING_DEPENDENCY", ["PACKAGE_VERSION"], "transformers' Trainer passes a keyword this model's code predates", (
            f"{raised.text()[:160]}: transformers 4.46+ passes num_items_in_batch to the model's forward, and this "
            "model's code (remote code, or a patched forward) does not take it. Install the transformers release "
            "the project pins, or update the model code."))
    if function == "forward" or function == "_forward_unimplemented" or through_module_call:
        return False   # a model's forward: its own signature or the caller's code, no release says which
    if owner in _LIBRARY_CLASSES and function == "__init__":
        return ("MISSING_DEPENDENCY", ["PACKAGE_VERSION"], f"`{owner}` takes different keywords in other releases", (
            f"{raised.text()[:160]}: the installed release of the library that defines `{owner}` does not take "
            f"`{keyword}` (it was renamed, added or removed between releases: e.g. evaluation_strategy/eval_strategy, "
            "tokenizer/processing_class, max_seq_length moving into SFTConfig). Install the release the project "
            "pins (its requirements), or use the keyword the installed release documents."))
    return None


_BUILTIN_TYPES = frozenset(("NoneType", "str", "int", "float", "bool", "list", "dict", "tuple", "set", "bytes",
                            "function", "method", "module", "type", "generator"))
_WRAPPERS = frozenset(("DataParallel", "DistributedDataParallel", "FullyShardedDataParallel"))
_NO_ATTRIBUTE = re.compile(r"^'(\w+)' object has no attribute '(\w+)'")


# Classes of the training libraries whose methods and attributes come and go between releases.
_VERSIONED_CLASSES = _LIBRARY_CLASSES | frozenset(("LightningModule", "LightningDataModule", "LightningCLI",
                                                   # Keras' functional model and TensorFlow's eager tensor
                                                   "Functional", "EagerTensor"))
_CLASS_ATTRIBUTE = re.compile(r"^(?:type object )?'(?:[\w]+\.)*(\w+)'(?: object)? has no attribute '(\w+)'")


def library_class_attribute(raised):
    """A training library's Trainer/arguments class without the method or attribute the code uses:
    Lightning's Trainer lost add_argparse_args/accelerator_backend, gained num_devices, and so on."""
    if raised.name != "AttributeError":
        return None
    match = _CLASS_ATTRIBUTE.match(raised.message)
    if not match or match.group(1) not in _VERSIONED_CLASSES:
        return None
    owner, attribute = match.groups()
    return ("MISSING_DEPENDENCY", ["PACKAGE_VERSION"], f"`{owner}` of the installed release has no `{attribute}`", (
        f"{raised.text()[:160]}: `{owner}` comes from a training library (pytorch-lightning, transformers, trl, "
        f"accelerate) whose releases add, rename and remove such members; the code was written for a release with "
        f"`{attribute}`. Install the library version the project pins (its requirements or environment file), or "
        "use the member the installed release documents."))


def library_attribute(raised, link):
    """An AttributeError raised inside an installed library about one of its own objects."""
    if raised.name != "AttributeError" or link is None or not link.frames:
        return None
    lib = link.raised_in
    match = _NO_ATTRIBUTE.match(raised.message)
    if lib in (None, "python") or not match or match.group(1) in _BUILTIN_TYPES:
        return None
    if match.group(1) in _WRAPPERS and match.group(2) != "module":
        # torch's Module.__getattr__ refusing the wrapper: the code forgot `.module`, no release is at fault.
        return ("CONFIG_INVALID", ["CODE_ERROR"], "a parallel wrapper asked for the wrapped model's attribute", (
            f"{raised.text()[:160]}: the model is wrapped in {match.group(1)}, whose attributes are not the model's; "
            "the model's own methods live on `model.module`. Call `model.module.<name>`, keep a reference to the "
            "unwrapped model, or run on one GPU (CUDA_VISIBLE_DEVICES=0) where the script does not wrap it."))
    return ("MISSING_DEPENDENCY", ["PACKAGE_VERSION"], f"raised inside the installed `{lib}` about its own object", (
        f"{raised.text()[:160]}, raised inside the installed `{lib}`: it expects an attribute that the object "
        "(from another library or release) does not have, so two installed libraries are releases that do not "
        "go together (transformers with peft/accelerate/trl/deepspeed, or torch). Install the versions the "
        "project pins together (its requirements)."))


_EMBEDDING_INDEX = re.compile(r"\bindex out of range in self(?![A-Za-z])")
_TARGET_BOUNDS = re.compile(r"^Target -?\d+ is out of bounds")
_LORA_TARGETS = re.compile(r"Target modules? .{0,200}?not found in the base model|Please specify `target_modules` in `peft_config`")
_UNKNOWN_ARCHITECTURE = re.compile(r"has model type `[\w-]+` but Transformers does not recognize this architecture")
# A checkpoint whose rope_scaling is newer than the library (Llama 3.1's {"rope_type": "llama3", ...}
# read by a transformers/mlx-lm/vLLM release that wants the old {"type", "factor"} pair).
_ROPE_SCALING = re.compile(r"`?rope_scaling`? must (?:contain keys|be a dictionary with (?:with )?two fields)")
# datasets older than the fsspec it runs with (2023-24): glob patterns and the cache refuse to work.
_FSSPEC_MIX = re.compile(r"Invalid pattern: '(?:\*\*)?' can only be an entire path component"
                         r"|Loading a dataset cached in a LocalFileSystem is not supported")
# (r7) datasets 4.0 dropped loading scripts: a Hub dataset (or local folder) built by a `<name>.py` script.
_DATASET_SCRIPT = re.compile(r"Dataset scripts are no longer supported, but found [\w.-]+\.py")
# (r7) LLaMA-Factory dropped every sample while converting the data to its format (columns, roles, tags
# that do not match dataset_info.json, or empty turns).
_NO_VALID_SAMPLES = re.compile(r"Cannot find valid samples, check `?data/README\.md`? for the data format")
# (r7) a transformers *ForSequenceClassification model whose config has no pad_token_id, asked for a batch
# of more than one sequence (it looks for the last non-pad token of each).
_NO_PAD_TOKEN_ID = re.compile(r"Cannot handle batch sizes > 1 if no padding token is defined")
_EVAL_WITHOUT_DATA = re.compile(r"evaluation requires an eval_dataset|--do_eval requires a validation dataset"
                                r"|requires a (?:validation|eval) dataset")
_TF32 = re.compile(r"--tf32 requires Ampere or a newer GPU")
_LAZY_IMPORT = re.compile(r"Failed to import [\w.]+ because of the following error")
_EMPTY_SAMPLER = re.compile(r"num_samples should be a positive integer value, but got num_samples=0")
# transformers/peft classes whose missing attribute means another release (a method added or removed).
_LIBRARY_OBJECT = re.compile(r"^'(?:\w+(?:ForCausalLM|ForConditionalGeneration|ForSequenceClassification|ForTokenClassification"
                             r"|ForMaskedLM|ForQuestionAnswering|PreTrainedModel|TokenizerFast|Tokenizer)|"
                             + "|".join(sorted(_LIBRARY_CLASSES)) + r")' object has no attribute")
_QUANTISED_MOVE = re.compile(r"`?\.to`? is not supported for `?4-bit`? or `?8-bit`? bitsandbytes models")
_NESTED_FEATURES = re.compile(r"Unable to create tensor.{0,300}?excessive nesting", re.S)


# Library messages whose meaning is the same in every project that meets them: (the exception classes that
# may carry it, or None for any; the message's shape; family; code; why; the explanation, from the exception).
# Read in order; the first that fits decides.
_CONTRACTS = (
    (("IndexError",), _EMBEDDING_INDEX, "CONFIG_INVALID", "INDEX_OUT_OF_RANGE",
     "torch's embedding lookup got an id beyond its table", lambda r: (
         f"{r.text()[:120]}: an embedding lookup got an index at or beyond the size of its table: token ids "
         "larger than the model's vocabulary (a tokenizer with added tokens and no resize_token_embeddings, a "
         "pad/special id outside the vocabulary, data tokenised with another tokenizer). Make the embedding as "
         "large as the tokenizer's vocabulary, or the ids smaller than it.")),
    (("IndexError",), _TARGET_BOUNDS, "CONFIG_INVALID", "INDEX_OUT_OF_RANGE",
     "a class label at or beyond the number of classes", lambda r: (
         f"{r.text()[:120]}: the loss got a class label at or beyond the number of classes the model "
         "outputs. Make num_classes/num_labels cover every label in the data (labels start at 0).")),
    (("ValueError",), _EMPTY_SAMPLER, "DATA", "DATASET_EMPTY", "the sampler was given a dataset of 0 samples", lambda r: (
        f"{r.text()[:120]}: the dataset is empty (0 samples), so the sampler has nothing to draw. Check "
        "the data path and the files it should match, and filters (max length, empty texts) that can drop "
        "every sample.")),
    (("KeyError", "ValueError"), semantics.NO_COLUMN, "DATA", "DATASET_KEY", "the dataset has no such column or split",
     lambda r: (
         f"{r.text()[:160]}: the dataset does not have the column or split the code asks for. Rename the "
         "field in the data, or point the code at the column/split the data has.")),
    (("ValueError",), semantics.NO_TEMPLATE, "TOKENIZER", "TOKENIZER_NO_CHAT_TEMPLATE", "the tokenizer has no chat template",
     lambda r: (
         f"{r.text()[:120]}: the tokenizer (a base model's, most often) has no chat template. Use the "
         "instruct/chat model's tokenizer, or set tokenizer.chat_template (or the trainer's template option).")),
    (("AttributeError",), _LIBRARY_OBJECT, "MISSING_DEPENDENCY", "PACKAGE_VERSION",
     "a transformers model/tokenizer lacks a method of another release", lambda r: (
         f"{r.text()[:160]}: the installed transformers (or the model's remote code) is a release without "
         "that method, or with it renamed. Install the transformers release the project or the model card "
         "names.")),
    (None, _UNKNOWN_ARCHITECTURE, "MISSING_DEPENDENCY", "PACKAGE_VERSION",
     "transformers does not know the checkpoint's model type", lambda r: (
         f"{r.text()[:160]}: the installed transformers is older than the model. Upgrade transformers to "
         "the release the model card names (`pip install -U transformers`).")),
    (("ValueError",), _ROPE_SCALING, "MISSING_DEPENDENCY", "PACKAGE_VERSION",
     "the checkpoint's rope_scaling is newer than the library", lambda r: (
         f"{r.text()[:160]}: the model's config.json carries a rope_scaling of a newer release (Llama "
         "3.1+'s rope_type 'llama3') than the installed library reads. Upgrade transformers / mlx-lm / vLLM "
         "to a release that knows the model.")),
    (None, _FSSPEC_MIX, "MISSING_DEPENDENCY", "PACKAGE_VERSION",
     "datasets and fsspec of releases that do not go together", lambda r: (
         f"{r.text()[:120]}: the installed `datasets` is older than the `fsspec` it runs with. Upgrade "
         "datasets (`pip install -U datasets`), or pin fsspec to the release datasets asks for.")),
    (None, _DATASET_SCRIPT, "MISSING_DEPENDENCY", "PACKAGE_VERSION",
     "datasets 4 no longer runs dataset loading scripts", lambda r: (
         f"{r.text()[:120]}: the dataset is built by a loading script, which `datasets` 4.0 and later no longer "
         "run. Install datasets<4 (`pip install \"datasets<4\"`, e.g. 3.6.0), or load a script-free copy of the "
         "data (its Parquet/JSON files).")),
    (("RuntimeError",), _NO_VALID_SAMPLES, "DATA", "DATA_FORMAT",
     "LLaMA-Factory found no sample in the format its dataset_info.json entry describes", lambda r: (
         f"{r.text()[:120]}: every record was dropped while converting the data: its fields, roles or tags do "
         "not match the dataset's entry in dataset_info.json (formatting alpaca/sharegpt, columns, tags), or the "
         "turns are empty or out of order. Make the records match data/README.md's format for that entry.")),
    (("ValueError",), _NO_PAD_TOKEN_ID, "TOKENIZER", "TOKENIZER_NO_PAD_TOKEN",
     "a sequence-classification model without a pad token id got a batch", lambda r: (
         f"{r.text()[:120]}: the model's config has no pad_token_id, so it cannot find where each sequence of a "
         "batch ends. Give the tokenizer a pad token (`tokenizer.pad_token = tokenizer.eos_token`) and the "
         "model the same id (`model.config.pad_token_id = tokenizer.pad_token_id`).")),
    (("ValueError",), _EVAL_WITHOUT_DATA, "CONFIG_INVALID", "CONFIG_VALUE",
     "evaluation is switched on without an evaluation dataset", lambda r: (
         f"{r.text()[:120]}: evaluation is on (eval_strategy/do_eval) but no evaluation dataset is given. "
         "Pass one (or a validation split / val_size), or turn evaluation off.")),
    (None, _TF32, "DTYPE_UNSUPPORTED", "TF32_UNSUPPORTED", "tf32 asked of a GPU older than Ampere", lambda r: (
        f"{r.text()[:120]}: TF32 exists on Ampere (sm_80) and newer GPUs only. Turn tf32 off "
        "(--tf32 False), and bf16 with it on such a GPU (fp16 instead).")),
    (("RuntimeError",), _LAZY_IMPORT, "MISSING_DEPENDENCY", "PACKAGE_VERSION", "a package's lazy import failed", lambda r: (
        f"{r.text()[:160]}: importing an installed package failed (its own traceback is above): "
        "packages of releases that do not go together (transformers, peft, accelerate, trl, torch), or one "
        "installed half-way. Install the versions the project pins together.")),
    (("ValueError",), _LORA_TARGETS, "CONFIG_INVALID", "CONFIG_VALUE",
     "peft found none of the LoRA target modules in this model", lambda r: (
         f"{r.text()[:160]}: the LoRA target_modules name layers this model does not have (each "
         "architecture names its projections differently: q_proj/v_proj, query_key_value, W_pack, c_attn). "
         "Set target_modules to this model's linear layer names (print the model, or use 'all-linear').")),
    (("ValueError",), _QUANTISED_MOVE, "CONFIG_INVALID", "CODE_ERROR", "bitsandbytes refuses to move a quantised model",
     lambda r: (
         f"{r.text()[:160]}: the code calls .to()/.cuda() on a model loaded in 4/8-bit; bitsandbytes has "
         "already placed it. Drop the .to() call (place it with device_map when loading).")),
    (("ValueError",), _NESTED_FEATURES, "DATA", "DATA_FORMAT", "the collator got features that are not token ids",
     lambda r: (
         f"{r.text()[:160]}: the batch's features are not lists of token ids (raw text or nested lists "
         "reached the collator): the data's fields are not the ones the tokenising code expects (names, case, "
         "nesting). Give the records the fields the script reads, or tokenise them before batching.")),
)


def message_contract(raised):
    """Library messages whose meaning is the same in every project that meets them (_CONTRACTS)."""
    message = raised.message or ""
    for names, shape, family, code, why, explain in _CONTRACTS:
        if (names is None or raised.name in names) and shape.search(message):
            return family, [code], why, explain(raised)
    return None


# -- config files and model folders ------------------------------------------------------------

_CONFIG_LIBRARY = re.compile(r"^(?:yaml\.(?:\w+\.)*\w+Error|omegaconf\.(?:\w+\.)*\w+|hydra\.(?:\w+\.)*\w+"
                             r"|toml(?:lib)?\.(?:\w+\.)*\w+|configparser\.\w+)$")
_YAML_NAMES = ("ScannerError", "ParserError", "ComposerError", "ConstructorError", "MissingConfigException",
               "ConfigAttributeError", "ConfigKeyError", "InterpolationResolutionError", "TomlDecodeError",
               "TOMLDecodeError")


_DIST_CLASSES = {"DistStoreError": "DIST_INIT_FAILED", "DistNetworkError": "DIST_INIT_FAILED",
                 "DistBackendError": "NCCL_ERROR", "DistError": "DIST_INIT_FAILED"}
_DATASETS_MISSING = ("DataFilesNotFoundError", "DatasetNotFoundError", "EmptyDatasetError")


def exception_class(raised):
    """Exception classes whose package and name say what failed, whatever the message."""
    if raised.name in _DIST_CLASSES and raised.type.startswith(("torch.distributed", "c10d", "torch._C")):
        return ("DISTRIBUTED", [_DIST_CLASSES[raised.name]], "an exception class of torch.distributed", (
            f"{raised.text()[:160]}: torch.distributed failed ({raised.name}): processes that never all joined "
            "the rendezvous (a rank that died or was not started, a wrong MASTER_ADDR/port, a firewall), or a "
            "backend error. Look for the first rank's own error above it."))
    if raised.name in _DATASETS_MISSING and raised.type.startswith("datasets."):
        return ("DATA", ["FILE_MISSING"], "datasets found no data at that path or id", (
            f"{raised.text()[:160]}: `datasets` found no data files (or no dataset) where the code points. Fix "
            "the path or id, or the file pattern/extension it matches."))
    return None


def config_library(raised):
    """An error raised by a config-file library (yaml, omegaconf, hydra, toml): the config is invalid."""
    if not (_CONFIG_LIBRARY.match(raised.type) or (raised.type in _YAML_NAMES and raised.type != raised.name)):
        return None
    return ("CONFIG_INVALID", ["CONFIG_VALUE"], "raised by a config-file library while reading the config", (
        f"The run's configuration could not be read ({raised.text()[:160]}): a YAML/TOML syntax error (a tab, a "
        "missing space after ':', an unquoted special value), a key the config does not define, or a config "
        "name hydra cannot find. Fix the file at the line the error names, or the key/override it quotes."))


_MODEL_FILES = re.compile(
    r"does not appear to have (?:a )?files? named ([\w.,\- ]+)|Error no file named ([\w.,\- ]+?) found in directory"
    r"|Incorrect path_or_model_id: '([^'\n]+)'|(\S+) is not a local folder and is not a valid model identifier")


def model_files(raised, before):
    """from_pretrained found no model at the path or id (or the folder lacks the weights/config)."""
    if raised.name not in ("OSError", "EnvironmentError", "ValueError", "FileNotFoundError"):
        return None
    match = _MODEL_FILES.search(raised.message or "")
    if not match:
        return None
    named = match.group(1) or match.group(2) or ""
    if re.search(r"tokeniz|vocab|spiece|merges|sentencepiece", f"{named} {before}", re.I):
        return None   # a tokenizer's files: one message, three causes (README's reader conventions)
    return ("DATA", ["FILE_MISSING"], "from_pretrained found no model files at that path or id", (
        f"{raised.text()[:180]}: the model path (or Hub id) does not hold the files from_pretrained needs "
        "(config.json, the weights): a path that does not exist or is not the model's folder (an adapter or "
        "checkpoint folder, a parent folder), an unfinished download, or a mistyped id. Point it at the "
        "folder with config.json and the weights, or download the model there."))


# -- argparse's usage block ---------------------------------------------------------------------

_USAGE_BLOCK = re.compile(r"^usage: \S+[^\n]*\n(?:[^\n]*\n){0,40}?(?:\S+: )?error: (?:argument |unrecognized arguments"
                          r"|the following arguments are required|invalid choice)[^\n]*", re.M)


def usage_block(log):
    """argparse printed its usage and an `error:` line (with or without the program's name)."""
    tail = log[-20000:]
    found = None
    for found in _USAGE_BLOCK.finditer(tail):
        pass
    return found.group(0).splitlines()[-1].strip() if found else None


# -- a loss printed as a tensor --------------------------------------------------------------

_NAN_TENSOR = re.compile(r"tensor\(\s*(?:nan|-?inf)\b[^\n]*?(?:grad_fn=<\w*Loss\w*>|\bloss\b)|\bloss\w*\W{1,4}tensor\(\s*(?:nan|-?inf)\b",
                         re.I)


# A trainer's own stop: detectron2's `Loss became infinite or NaN`, torchvision's references' `Loss is
# nan, stopping training`, YOLO's `non-finite loss`, a loss dict printed with nan values.
_NAN_WORDS = re.compile(r"Loss became infinite or NaN|\bLoss is (?:nan|inf)\b|non-finite loss|'loss\w*': (?:nan|inf)\b", re.I)


def nan_loss_tensor(log):
    """A non-finite loss printed as a torch tensor (`tensor(nan, ..., grad_fn=<NllLossBackward0>)`),
    or a trainer's own words for stopping on one."""
    tail = log[-65536:]
    lowered = tail.lower()
    if "nan" not in lowered and "inf" not in lowered:
        return False
    return bool(_NAN_TENSOR.search(tail) or _NAN_WORDS.search(tail))


# -- an exception pasted inside a sentence ---------------------------------------------------

_QUOTE_CLOSES = {"`": "`", '"': '"', "“": "”", "「": "」"}
_IN_PROSE = re.compile(r"(?<![A-Za-z0-9_.])((?:[a-z_][\w]*\.)*(?:[A-Z]\w*(?:Error|Exception)|Arrow[A-Z]\w+)) ?: ?([^\n]{1,300})")


# CPython's and the libraries' own message templates name the exception class when a launcher
# printed only the message (`command error: 'cannot import name ...'`, `Exception initializing ...:`).
_TEMPLATES = (
    (re.compile(r"cannot import name '\w+' from '[\w.]+'[^\n']*"), "ImportError"),
    (re.compile(r"\b\w+\.__init__\(\) got an unexpected keyword argument '\w+'"), "TypeError"),
    (_ARROW_MENTION, "ArrowInvalid"),
)


def message_only(log):
    """An exception known only from its message's template, when no exception line was printed."""
    tail = log[-4000:]
    for regex, kind in _TEMPLATES:
        found = None
        for found in regex.finditer(tail):
            pass
        if found is not None:
            raised = logtext.Raised(kind, found.group(0).strip())
            raised.start = len(log) - len(tail) + found.start()
            return raised
    return None


def pasted_exception(log):
    """An exception quoted inside a sentence or after other text on its line (`... raised IndexError:
    index out of range in self ...`), when no line starts with one: the last such mention."""
    tail = log[-4000:]
    found = None
    for found in _IN_PROSE.finditer(tail):
        pass
    if found is None or found.group(1).endswith("Warning"):
        return None
    message = found.group(2)
    opened = tail[found.start() - 1:found.start()] if found.start() else ""
    if opened in _QUOTE_CLOSES and _QUOTE_CLOSES[opened] in message:
        # (r6) quoted in the user's sentence (`...`, "...", '...'): the message ends where the quote does, at
        # the first quote mark that ends a word (a message may quote a name itself: `... for `validation_steps`.`).
        close = re.escape(_QUOTE_CLOSES[opened])
        end = re.search(close + r"(?=[.,;:!?)]*(?:\s|$))", message) or re.search(close, message)
        message = message[:end.start()]
    raised = logtext.Raised(found.group(1), message.strip())
    raised.start = len(log) - len(tail) + found.start()
    return raised
