"""Training-run semantics: what a script, a configuration or a dataset refused.

Read from the shape of a message and the library that raised it, not from one error class at a
time, so that one rule covers the wordings of many projects: argparse's refusal of a command
line (any program name), a configuration validated by a library (TrainingArguments,
accelerate, DeepSpeed, pydantic or OmegaConf schemas), a sampler or loader given no samples,
a data file whose records do not share one schema, a model that computed no loss because its
batches carry no labels, and losses logged as NaN in any layout (tables, key=value, progress
bars). Each reading returns (family, code, why, explanation) or None; the caller records `why`
as the deciding evidence. A wrong family is worse than none: every rule needs both the message
shape and, where the shape alone is ambiguous, the place it was raised.
"""

import re

_I, _M = re.I, re.M

# argparse (and jsonargparse) refusing a command line: `<prog>: error: <what>`, where <prog> is
# whatever the script is called (`train.py`, `iColoriT training scripts`, none at all). The
# wording after `error:` is argparse's own, so the rule holds for every program, also where a user
# retyped it without its spaces (`main.py train:error:argument --model:invalid choice:'SAE'`).
USAGE = re.compile(
    r"^[^\S\n]*(?:[^\n:]{1,80}:[^\S\n]*)?error:[^\S\n]*(?:unrecognized arguments:|the following arguments are required:"
    r"|argument [^\n]{1,80}?:[^\S\n]*(?:invalid (?:choice|[\w ]{1,20}value)|expected (?:one|at least|\d)|ignored explicit"
    r"|not allowed with|conflicting)|ambiguous option:|one of the arguments [^\n]{1,80} is required)"
    # transformers' HfArgumentParser, refusing the same way
    r"|Some specified arguments are not used by the HfArgumentParser"
    # (r6) optparse's `error: no such option: -f`, and Python Fire's refusals (alpaca-lora's and llama-recipes'
    # finetune.py take their command line through Fire): `ERROR: Could not consume arg: --x`, `ERROR: Cannot find key: -f`.
    r"|^[^\S\n]*(?:[^\n:]{1,80}:[^\S\n]*)?error:[^\S\n]*no such option:"
    r"|^[^\S\n]*ERROR: (?:Could not consume arg|Cannot find key|The function received no value for the required argument):", _M)
# The same refusal quoted inside a sentence (`I get error message: 'main.py: error: argument --lr-params: invalid
# float value: ...'`): a script's name in front of argparse's own wording, after a quote or a parenthesis.
USAGE_QUOTED = re.compile(
    r"[^\n]['\"`(][^\S\n]*[\w./\\-]{1,80}\.py:[^\S\n]?error:[^\S\n]?(?:unrecognized arguments:"
    r"|the following arguments are required:|argument [^\n]{1,80}?:[^\S\n]*(?:invalid (?:choice|[\w ]{1,20}value)"
    r"|expected (?:one|at least|\d)))")

# A configuration schema refused a value: pydantic, OmegaConf/Hydra, yacs, jsonargparse.
_SCHEMA = re.compile(
    r"\b(?:pydantic[\w.]*\.)?ValidationError: \d+ validation errors? for \w+"
    r"|\bomegaconf\.errors\.\w+|\b(?:ConfigAttributeError|ConfigKeyError|MissingMandatoryValue|ConfigCompositionException"
    r"|InterpolationResolutionError)\b:?|\bhydra\.errors\.\w+|Non-existent config key:|\bConfigValueError\b"
    # an exception class that names a misconfiguration (Lightning's MisconfigurationException, ...)
    r"|\b\w*Misconfiguration(?:Exception|Error)\b|\bInvalidConfig(?:uration)?(?:Error|Exception)\b", _I)

# PyYAML's scanner/parser refusing a file, in its own words and with its `in "<file>", line N, column M`
# mark: whatever class name was printed with it (or none, as debuggers paste it), a config that is not YAML.
_YAML_SYNTAX = re.compile(
    r"mapping values are not allowed here|while scanning a (?:simple key|quoted scalar|block scalar|plain scalar)"
    r"|could not find expected ':'|found character '[^'\n]{1,4}' that cannot start any token"
    r"|while parsing a (?:block|flow) (?:mapping|sequence|collection)|expected <block end>, but found"
    r"|did not find expected (?:key|'-' indicator|node content)|found undefined alias")
# configargparse's refusal of the config file it was given (`train.py: error: Couldn't parse config file: ...`).
_CONFIG_UNPARSED = re.compile(r"\berror: Couldn't parse config file: [^\n]{0,200}")
_YAML_MARK = re.compile(r"^[^\S\n]*in [\"'<][^\n]{1,300}, line \d+, column \d+", _M)

# A library's own validation of its arguments or config: where it was raised...
_VALIDATING_FRAME = re.compile(
    r"training_args\.py|hf_argparser\.py|__post_init__|[/\\]deepspeed[/\\]runtime[/\\]config|"
    r"(?:integrations[/\\])?deepspeed\.py|accelerate[/\\](?:utils[/\\]dataclasses|accelerator|state|commands)|"
    r"[/\\](?:configs?|arguments?|args|config_utils|configuration_\w+)\.py", _I)
# ...and, pasted without frames, the wording such validation uses: a setting named with how it
# must relate to another (`requires ... to match`, `mismatch`, `will be ignored`, `must be`).
_CONFIG_WORDS = re.compile(
    r"(?:(?:\b|_)config(?:uration)?\b|\bTrainingArguments\b|\barguments\b|\bDeepSpeed\b|\baccelerate\b|(?<![\w-])--\w"
    r"|`[a-z]\w*_\w+`|\btarget[_ ]modules\b|\bevaluation[_ ]strategy\b|\b[a-z]+_(?:strategy|steps|size|ratio|type|mode|precision|modules|dataset|field|func|epochs)\b)", _I)
# Words of other families: a message that names them is not read as a setting refused.
_OTHER_SUBJECT = re.compile(r"tokeni[sz]er|chat[_ ]template|\bvocab|\bcuda\b|\bgpu\b|\bdevice\b|memory|\bmodule named|"
                            r"\bnot installed\b|\bversion\b|\bdriver\b", _I)
_CONFIG_VERDICT = re.compile(
    r"\b(?:mismatch(?:es)?|must (?:be|match|have|set|specify|provide)|requires? (?:the|you|a|an|that|at least)|will be ignored"
    r"|(?:is|are) not (?:supported|compatible|allowed|a valid)|cannot be (?:used|combined|set)|incompatible"
    r"|please (?:correct|specify|set|check)|should be (?:set|one of|an? )|expected one of|only (?:supports?|one of)"
    r"|does not (?:require|support|accept|take)|you didn't pass|not found in the (?:base )?model|set (?:it to |to )?None"
    r"|has to be (?:specified|set|given|provided))\b", _I)   # (r6) transformers' `max_steps has to be specified`

# What a training loop or scheduler refuses that is a setting, whatever library raised it.
_NO_PARAMETERS = re.compile(r"optimizer got an empty parameter list|no (?:trainable )?parameters? (?:to optimi[sz]e|require gradients?)", _I)
_SCHEDULE_OVERRUN = re.compile(r"Tried to step \d+ times?\. The specified number of total steps is \d+")

# Data: a sampler or loader given nothing, records of different types, batches without labels.
_EMPTY = re.compile(
    r"num_samples should be a positive integer value, but got num_samples=0|\bnum_samples=0\b"
    r"|\b(?:train(?:ing)?[_ ])?dataset is empty\b|\bFound 0 (?:files|images|samples|examples)\b"
    r"|\bno (?:samples|examples|images|training (?:samples|examples|data)) (?:were )?found\b"
    # (r8) Lightning's loaders of no batches: `ValueError: \`Dataloader\` returned 0 length. Please make sure that it
    # returns at least 1 batch`, `Total length of \`CombinedLoader\` across ranks is zero. Please make sure that it
    # returns at least 1 batch`, and Lightning 2's `\`Trainer.fit\` stopped: No training batches.` (its warnings that a
    # loader "returned 0 length. Please make sure this was your intention" alone do not count: a val loader may be off)
    r"|`?Data[Ll]oader`? returned 0 length\. Please make sure that it returns at least 1 batch"
    r"|\bacross ranks is zero\. Please make sure that it returns at least 1 batch|`?Trainer\.fit`? stopped: No training batches", _I)
_SCHEMA_DRIFT = re.compile(
    r"\bArrowInvalid: (?:JSON parse error|Column\(|Could not convert|Invalid value)|Column\([^)\n]*\) changed from \w+ to \w+"
    r"|\bArrowTypeError\b|Couldn't cast array of type|\bDatasetGenerationError\b|\bDatasetGenerationCastError\b"
    r"|\bpandas\.errors\.ParserError\b|Error tokenizing data\. C error", _I)
_NO_LOSS = re.compile(r"The model did not return a loss from the inputs")
_IMAGE_UNREADABLE = re.compile(r"cannot identify image file|\bUnidentifiedImageError\b|broken data stream when reading image file"
                               r"|\bTruncated File Read\b", _I)
_FILE_NOT_FOUND = re.compile(r"\b(?:Image|File|Label|Annotation)s? Not Found\b:?\s+['\"]?[^\s'\"]+\.(?:jpe?g|png|bmp|tiff?|webp|txt|json|xml|npy)\b", _I)
# A tokenizer without a chat template asked to apply one (transformers' refusal, and projects' own wordings).
NO_TEMPLATE = re.compile(r"tokenizer\.chat_template is not set|Cannot use chat template functions|"
                         r"does not have a chat template|no chat template (?:is )?(?:set|defined|found)", _I)
# A model wrapper asked for the wrapped model's own method or attribute (the script forgot `.module`).
_WRAPPED = re.compile(r"'(?:DataParallel|DistributedDataParallel|FullyShardedDataParallel)' object has no attribute '(?!module')\w+'")
# transformers' Trainer refusing to train a quantized base model that carries no adapters.
_QUANTIZED_ONLY = re.compile(r"You cannot perform fine-tuning on purely quantized models")
# torch's older wording of a state_dict that does not fit the model (`unexpected key "x" in state_dict`).
_STATE_KEYS = re.compile(r"\b(?:unexpected|missing) keys? \"[\w.]+\" in state_dict"
                         # mlx's load_weights (strict) given weights the model does not have, or lacking some
                         r"|\b(?:Received parameters not in model|Missing parameters):")
# LLaMA-Factory's data loader given a dataset name its dataset_info.json does not define.
_UNDEFINED_DATASET = re.compile(r"\bUndefined dataset [^\n]{1,80}? in dataset_info\.json")
# timm's registry has no model of that name: the config or the command line names one nobody registered.
_UNKNOWN_MODEL = re.compile(r"\bRuntimeError: Unknown model \([\w.-]+\)")
# A dataset asked for a column or a split it does not have (datasets' `Column 'x' not in the dataset`,
# `Unknown split "validation". Should be one of [...]` and tensorflow-datasets' `Unknown split 'val'`,
# a trainer's `does not contain a column named`).
NO_COLUMN = re.compile(r"does not contain (?:a|any) columns? named|\bColumn '?[^\n']{1,80}'? not in the dataset"
                       # datasets' map(remove_columns=[...]) naming columns the dataset does not have
                       r"|\bColumns? to remove \[[^\]\n]{1,200}\] not in the dataset"
                       r"|Unknown split [\"'][^\"'\n]{1,40}[\"']\.? Should be one of"
                       # (r6) datasets' rename_column(s) of columns the dataset lacks: `Original column names {'1', '0'} not in the dataset`.
                       r"|\bOriginal column names? [^\n]{1,200}? not in the dataset", _I)
# A function that reads records from a JSON/JSON Lines/CSV file (`from_jsonl`, `load_json`, `read_csv_file`):
# a KeyError raised there is a record without the field the reader expects.
_RECORD_READER = re.compile(r"^_?(?:from|load|read|parse)_?(?:jsonl?|json_?lines|csv|tsv)(?:_file|_data)?$", _I)
_DATASET_FRAME = re.compile(r"[/\\]datasets[/\\](?:formatting|arrow_dataset|features)"
                            # trl's SFT trainer reading each record's text field (`lambda x: x[dataset_text_field]`)
                            r"|(?<![\w.-])trl[/\\]trainer[/\\](?:sft_trainer|utils)\.py")
_HUB_DATASET = re.compile(r"doesn't exist on the Hub or cannot be accessed|\bDatasetNotFoundError\b")

# Tensors that do not fit what an operation needs: two dtypes, two shapes, a graph that gives no
# gradient, an index past a table. torch's own wordings, whatever project raised them.
_DTYPE_CLASH = re.compile(
    r"\bsame dtype\b|scalar type \w+ but (?:got|found) (?:scalar type )?\w+|Found dtype \w+ but expected \w+"
    r"|result type \w+ can't be cast to the desired output type \w+|Expected floating point type for target"
    r"|\"\w*(?:loss|nll|entropy|index|gather|scatter|embedding)\w*\" not implemented for '(?:Int|Long|Float|Double|Bool|Byte)'")
_SHAPE_CLASH = re.compile(
    r"Expected \d+-dimensional input for \d+-dimensional weight|size mismatch, m1: \[|Output size is too small"
    r"|\b\dD or \dD target tensor expected|Target size \([^\n]{0,60}\) must be the same as input size"
    r"|Using a target size \([^\n]{0,60}\) that is different to the input size|Expected target size \[?[\d, ]+"
    r"|shapes? [^\n]{1,40} (?:and|vs\.?) [^\n]{1,40} (?:are )?(?:not compatible|incompatible|do not match|don't match)", _I)
_GRAPH = re.compile(
    r"grad can be implicitly created only for scalar outputs|Can't call numpy\(\) on Tensor that requires grad"
    r"|doesn't require gradient|One of the differentiated Tensors (?:does not require grad|appears to not have been used)"
    r"|a view of a leaf Variable that requires grad|leaf variable has been moved into the graph interior")
_INDEX_PAST = re.compile(r"\bTarget -?\d+ is out of bounds|\bindex out of range in self\b")
_LOSS_NONFINITE = re.compile(
    r"\bLoss (?:became|becomes|is) (?:infinite or NaN|NaN or inf\w*)|\b(?:non-finite|NaN|infinite) loss (?:detected|encountered|at)"
    r"|\bloss (?:became|becomes|went|turned) (?:nan|inf|infinite|non-finite)\b", _I)

# NaN losses in the layouts training loops print: `| loss | nan |` tables, progress-bar
# postfixes (`loss=nan`), logging dicts, and the loss-scale messages of fp16 optimizers.
_NAN_METRIC = re.compile(
    r"(?:^|[\s|,{(\[])['\"]?(?:train[_/ ])?loss[\w/]*['\"]?[^\S\n]*(?:\|[^\S\n]*|[:=][^\S\n]*)[-+]?(?:nan|inf)\b", _I | _M)
_SCALE_COLLAPSE = re.compile(
    r"Found (?:NaN|Inf)[^\n]{0,40}decreas\w* (?:lg_)?loss[_ ]scale|loss[_ ]scale[^\n]{0,40}(?:reduced|decreased) to"
    r"|Gradient overflow\.?\s+Skipping step", _I)


# Words (lower case) one of which a line must hold for each regex to match it: regexes run only on
# those lines, so that a log of any size is read in about the time str.find takes.
_WORDS = {
    "USAGE": ("error:", "hfargumentparser"),
    "USAGE_QUOTED": (".py: error:", ".py:error:"),
    "_SCHEMA": ("validationerror", "omegaconf", "configattributeerror", "configkeyerror", "missingmandatoryvalue",
                "configcompositionexception", "interpolationresolutionerror", "hydra.errors", "non-existent config key",
                "configvalueerror", "misconfiguration", "invalidconfig"),
    "_YAML_SYNTAX": ("mapping values", "while scanning a", "could not find expected", "cannot start any token",
                     "while parsing a", "expected <block end>", "did not find expected", "undefined alias"),
    "_CONFIG_UNPARSED": ("couldn't parse config file",),
    "_NO_PARAMETERS": ("parameter",),
    "_SCHEDULE_OVERRUN": ("tried to step",),
    "_EMPTY": ("num_samples", "dataset is empty", "found 0 ", "no samples", "no examples", "no images", "no training",
               "returned 0 length", "across ranks is zero"),
    "_SCHEMA_DRIFT": ("arrow", "column(", "couldn't cast", "datasetgeneration", "parsererror", "error tokenizing data"),
    "_NO_LOSS": ("did not return a loss",),
    "_IMAGE_UNREADABLE": ("identify image", "unidentifiedimageerror", "broken data stream", "truncated file read"),
    "_FILE_NOT_FOUND": ("not found",),
    "NO_TEMPLATE": ("chat template", "chat_template"),
    "NO_COLUMN": ("column", "unknown split"),
    "_WRAPPED": ("dataparallel' object has no attribute", "fullyshardeddataparallel' object has no attribute"),
    "_QUANTIZED_ONLY": ("purely quantized",),
    "_STATE_KEYS": ("in state_dict", "parameters not in model", "missing parameters:"),
    "_UNKNOWN_MODEL": ("unknown model (",),
    "_UNDEFINED_DATASET": ("undefined dataset",),
    "_HUB_DATASET": ("exist on the hub", "datasetnotfounderror"),
    "_DTYPE_CLASH": ("dtype", "scalar type", "result type", "floating point type", "not implemented for"),
    "_SHAPE_CLASH": ("dimensional", "size mismatch", "output size is too small", "target tensor expected", "target size",
                     "shape"),
    "_GRAPH": ("grad", "leaf variable", "differentiated"),
    "_INDEX_PAST": ("out of bounds", "index out of range"),
    "_LOSS_NONFINITE": ("nan", "infinite", "non-finite"),
    "_NAN_METRIC": ("nan", "inf"),
    "_SCALE_COLLAPSE": ("found nan", "found inf", "loss scale", "loss_scale", "gradient overflow"),
    "_STEP_NAN": ("nan", "inf"),
    "_TENSOR_NAN": ("tensor(",),
}


def _candidates(log, lower, words):
    """The lines of `log` that hold one of `words` (in `lower`, the log in lower case), joined."""
    starts = set()
    for word in words:
        at = lower.find(word)
        while at >= 0:
            start = lower.rfind("\n", 0, at) + 1
            starts.add(start)
            stop = lower.find("\n", at)
            if stop < 0:
                break
            at = lower.find(word, stop)
    lines = []
    for start in sorted(starts):
        stop = log.find("\n", start)
        lines.append(log[start:len(log) if stop < 0 else stop])
    return "\n".join(lines)


def _search(name, log, lower):
    """(match, text it was found in) for the regex `name` over the lines that may hold it."""
    text = _candidates(log, lower, _WORDS[name])
    return (globals()[name].search(text) if text else None), text


def usage_error(log):
    """The argparse refusal line (also one quoted in a sentence), or None."""
    lower = log.lower()
    return _search("USAGE", log, lower)[0] or _search("USAGE_QUOTED", log, lower)[0]


# A loop that prints its loss as a bare scalar tensor, one per line (`print(loss.detach().float())` gives
# `tensor(3.2207, device='cuda:0')`), and then `tensor(nan, ...)` lines: the loss turned NaN and stayed.
_SCALAR_TENSOR = r"^[^\S\n]*tensor\([^\S\n]*{}[^\S\n]*(?:,[^\S\n]*(?:device|dtype|grad_fn|requires_grad)=[^,()\n]{{1,40}}){{0,3}}\)[^\S\n]*$"
_TENSOR_VALUE = re.compile(_SCALAR_TENSOR.format(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?"), _M | _I)
_TENSOR_NAN = re.compile(_SCALAR_TENSOR.format(r"(?:nan|-?inf)"), _M | _I)

_STEP_VALUE = re.compile(r"^[^\S\n]*\d+[^\S\n]*[,:|\t ][^\S\n]*\d+\.\d+[^\S\n]*$", _M)
_STEP_NAN = re.compile(r"^[^\S\n]*\d+[^\S\n]*[,:|\t ][^\S\n]*(?:nan|inf)[^\S\n]*$", _M | _I)


def nan_losses(log):
    """('FP16_LOSS_SCALE_OVERFLOW' | 'LOSS_DIVERGED', line) when losses were logged as NaN/inf."""
    lower = log.lower()
    scale, scaled = _search("_SCALE_COLLAPSE", log, lower)
    nan, nans = _search("_NAN_METRIC", log, lower)
    if scale and (nan or len(_SCALE_COLLAPSE.findall(scaled)) >= 3):
        return "FP16_LOSS_SCALE_OVERFLOW", _line(scaled, scale)
    if nan and len(_NAN_METRIC.findall(nans)) >= 2:
        return "LOSS_DIVERGED", _line(nans, nan)
    # A bare `step value` column (the loss the loop prints) that turns to nan and stays there.
    turned, text = _search("_STEP_NAN", log, lower)
    if turned and len(_STEP_NAN.findall(text)) >= 2:
        at = log.find(_line(text, turned))
        if len(_STEP_VALUE.findall(log[max(0, at - 4000):at])) >= 2:
            return "LOSS_DIVERGED", _line(text, turned)
    return _tensor_column(log, lower)


def _tensor_column(log, lower):
    """('LOSS_DIVERGED', line) when bare scalar tensors printed one per line turn from finite to NaN/inf."""
    turned, text = _search("_TENSOR_NAN", log, lower)
    if not turned or len(_TENSOR_NAN.findall(text)) < 2:
        return None
    first = _line(text, turned)
    if not _TENSOR_VALUE.search(text[:turned.start()]):
        return None   # never finite: no loss seen to turn, perhaps not a loss at all
    return "LOSS_DIVERGED", first


def read(log, raised=None, link=None):
    """A diagnosis from the message's shape and where it was raised, or None."""
    if raised is None:
        raised = _quoted_exception(log)
    message = raised.text() if raised is not None else ""
    # Frames pasted without their `Traceback` header are not parsed into the chain: read them too.
    printed = log[max(0, raised.start - 1500):raised.start] if raised is not None else ""
    # (r8) What follows the exception line: a traceback pasted after the error it ends in.
    after = log[raised.start:raised.start + 2000] if raised is not None else ""
    if raised is not None:
        # What was printed around the exception that ended the run (its chain), not text far above it.
        log = log[max(0, raised.start - 6000):raised.start + 2000]
    frames = " ".join(f"{f.file} {f.function or ''}" for f in (link.frames if link else []))
    if raised is not None and raised.file:
        frames += f" {raised.file} {raised.function or ''}"
    lower = log.lower()
    found, text = _search("_SCHEMA", log, lower)
    hit = _SCHEMA.search(message) or found
    if hit and _OTHER_SUBJECT.search(_line(text, found) if found else message):
        hit = None   # a misconfiguration of the GPU/CUDA/tokenizer/version is that family's, not a setting's
    if hit and _EMPTY.search(_line(text, found) if found else message):
        hit = None   # (r8) Lightning's MisconfigurationException that a loader has no batches: the data's (below)
    if hit:
        return ("CONFIG_INVALID", "CONFIG_VALUE", _line(text, found) if found else message,
                "A configuration schema refused the run's settings (" + hit.group(0)[:100] + "): a key it does "
                "not know (renamed or moved to another section in this version), a missing required key, or a "
                "value of the wrong type. Fix the keys the error lists in the config file (the project's example "
                "configs for the installed version show the layout), or install the version the config was "
                "written for.")
    yaml = _yaml_syntax(log, lower)
    if yaml:
        return yaml
    structural = (_tokenizer_file(raised, frames, printed) or _record_format(raised, printed)
                  or _argument_assert(raised, printed, after) or _data_json(raised, link, printed))
    if structural:
        return structural
    if raised is not None and raised.name == "KeyError" and _RECORD_READER.match(raised.function or ""):
        return ("DATA", "DATASET_KEY", message,
                f"{message[:100]}, raised in {raised.function}() while it read the data file's records: a record "
                "has no such field. Give every record the fields the reader expects (the project's data format: "
                "names, case, nesting), or convert the file to that format.")
    if raised is not None and raised.name == "KeyError" and (_DATASET_FRAME.search(frames) or _DATASET_FRAME.search(printed)):
        return ("DATA", "DATASET_KEY", message,
                f"{message[:100]}: a row of the dataset has no such column (it was looked up by the `datasets` "
                "library for the trainer). Rename the dataset's column to the one the trainer reads (e.g. `text`), "
                "or tell the trainer the column's name (dataset_text_field, formatting_func, label_names).")
    field = _record_field(raised, printed[-600:])
    if field:
        return field
    for name, family, code, explain in _FIXED:
        found, text = _search(name, log, lower)
        hit = globals()[name].search(message) or found
        if hit:
            return family, code, _line(text, found) if found else message, explain(hit.group(0))
    unset = _unset_setting(raised)
    if unset:
        return unset
    if raised is not None and raised.name in ("ValueError", "AssertionError", "TypeError", "KeyError"):
        # A check that names the GPU, CUDA, a device or a version refuses the machine, not a setting.
        validating = _VALIDATING_FRAME.search(frames) and not _OTHER_SUBJECT.search(raised.message)
        worded = (_CONFIG_WORDS.search(raised.message) and _CONFIG_VERDICT.search(raised.message)
                  and not _OTHER_SUBJECT.search(raised.message))
        if (validating and raised.name != "KeyError") or (worded and raised.name == "ValueError"):
            return ("CONFIG_INVALID", "CONFIG_VALUE", message,
                    f"{message[:160]}: the library validated its arguments or configuration and refused a "
                    "combination of settings" + (" (raised while it checked them)" if validating else "") + ". "
                    "Change the settings the message names so that they agree (for DeepSpeed's values that "
                    "TrainingArguments also sets, `\"auto\"`), or install the library version the script was "
                    "written for; no train.py constant fixes it.")
    return None


# A KeyError raised by the statement that reads that very field from a loaded record or annotation
# (`json.loads(sample["ground_truth"])`, `for c in coco_json['categories']`, `self.data[index]['json_dialogue']`):
# the data has no such field. Only names that say "a record of the data" count (not `example` of a collator,
# `batch`, `config` or `args`, whose missing keys are settings or code).
# (r9) and a data item's field store: verl's `data_item.non_tensor_batch["reward_model"]` (one attribute hop).
_RECORD_INDEX = re.compile(
    r"\b(?:sample|record|ann|anno|annotations?|\w+_json|json_\w+|\w+_anno(?:tation)?s?|data\[(?:index|idx|i)\]"
    r"|data_item\.\w+)"
    r"(?:\[[^\]\n]{1,30}\])*\[\s*['\"]([\w .-]{1,40})['\"]\s*\]")


_QUOTED_KEY = re.compile(r"\[\s*['\"]([\w .-]{1,40})['\"]\s*\]")


def _record_field(raised, before):
    """DATA/DATASET_KEY when a KeyError's key is the field its statement (printed in `before`, the text
    above the exception) read from a data record."""
    if raised is None or raised.name != "KeyError":
        return None
    key = (raised.message or "").strip().strip("'\"")
    # (r9) any key of the chain counts: `record["a"]["b"]` raises KeyError 'a' when the record lacks "a".
    if not key or not any(key in _QUOTED_KEY.findall(found.group(0)) for found in _RECORD_INDEX.finditer(before)):
        return None
    return ("DATA", "DATASET_KEY", raised.text(),
            f"{raised.text()[:100]}, raised by the statement that reads that field from a record of the data: "
            "a record (or the annotation file) has no such field. Give the data the fields the loader reads "
            "(its documented format: names, case, nesting, JSON vs JSON Lines), or read the field the data has.")


# -- (r8) the statement that raised: records, arguments, tokenizer files, data readers -------------

# The source line a traceback printed last: a rich box's `❱` line, IPython's `---->` arrow, or the last
# indented code line of a CPython frame (not a `File "..."` line, a box border or a code fence).
_ARROW_LINE = re.compile(r"^[^\S\n]*(?:│[^\S\n]*)?(?:❱|-+>)[^\S\n]*\d*[^\S\n]*(?:│[^\S\n]*)*(.+?)[^\S\n]*│?[^\S\n]*$", _M)
_SOURCE_LINE = re.compile(r"^(?: {2,}|\t)(?!File \")(?![│╭╰─])(\S.*)$", _M)


_FRAME_HEADER = re.compile(r"^[^\S\n]*File \"|\.py:\d+ in \w+|^[^\S\n]*\S+ in \w+\(|^<ipython-input-", _M)


def _last_statement(text):
    """The statement the last frame printed in `text` (its source line), or "": the arrow a rich or IPython
    frame points with (the lines printed after it are context), else the last source line of a CPython frame."""
    tail = text[-1500:]
    header = max((m.start() for m in _FRAME_HEADER.finditer(tail)), default=-1)
    arrows = [m for m in _ARROW_LINE.finditer(tail) if m.start() > header]
    if arrows:
        return arrows[-1].group(1).strip()
    sources = list(_SOURCE_LINE.finditer(tail))
    return sources[-1].group(1).strip() if sources else ""


# A field of a data record indexed as a string/list it is not: `data_point['input'][-1]` raising
# `IndexError: string index out of range`, `sample["text"]["en"]` raising `string indices must be integers`.
# The record has another shape than the code reads (a string where a list or dict was expected).
STRING_INDEX = re.compile(r"^(?:string index out of range|string indices must be integers\b|list indices must be integers or "
                           r"slices, not str\b)")
RECORD_NAMED = re.compile(
    r"\b(?:data_?point|sample|record|example|entry|instance|conversations?|ann|anno|annotations?|\w+_json|json_\w+"
    r"|data\[(?:index|idx|i)\])\[")


def _record_format(raised, printed):
    """DATA/DATA_FORMAT when a string-index error was raised by a statement that indexes a data record."""
    if raised is None or raised.name not in ("IndexError", "TypeError") or not STRING_INDEX.match(raised.message or ""):
        return None
    statement = _last_statement(printed)
    if not RECORD_NAMED.search(statement):
        return None
    return ("DATA", "DATA_FORMAT", raised.text(),
            f"{raised.text()[:100]}, raised by `{statement[:80]}`, which reads a field of a data record: the "
            "field holds another type than the code indexes (a string where a list of turns or a dict was "
            "expected, or a record that is a plain string). Give every record the layout the script documents "
            "(its example data: field names, lists vs strings), or convert the file to it.")


# An assert on a parsed argument or config attribute (`assert args.encoder_seq_length is not None`,
# `assert cfg.MODEL.X in (...)`, `assert opt.batch_size % opt.world_size == 0`): a setting is missing or
# does not fit the others. The statement is printed above the exception line, or (a traceback pasted
# after the error it ends in) as the last source line below it.
ARGS_ASSERT = re.compile(r"^assert\s*\(?\s*(?:not\s+)?(?:self\.)?(?:args|opts?|cfg|config|conf|hparams|hp|FLAGS|flags)\.\w+")
_EXCEPTION_LINE = re.compile(r"^[\w.]*(?:Error|Exception)\b", _M)


def _argument_assert(raised, printed, after):
    """CONFIG_INVALID/CONFIG_VALUE when the assert that failed checks the run's arguments or config."""
    if raised is None or raised.name != "AssertionError":
        return None
    statement = _last_statement(printed)
    below = after.split("\n", 1)[1] if "\n" in after else ""
    if not ARGS_ASSERT.match(statement) and not (raised.message or "").strip() and "Traceback (most recent call last)" in below \
            and not _EXCEPTION_LINE.search(below):
        statement = _last_statement(below)
    if not ARGS_ASSERT.match(statement):
        return None
    return ("CONFIG_INVALID", "CONFIG_VALUE", statement,
            f"An assert on the run's arguments failed (`{statement[:100]}`): a setting the script requires was not "
            "given (None), or does not fit the others. Pass it on the command line or in the config (the "
            "project's example scripts show the arguments it expects), with a value the check accepts.")


# sentencepiece handed no model file: the slow (sentencepiece) tokenizer's vocab_file is None because the
# folder has no tokenizer.model/spiece.model (a model that ships only tokenizer.json), or the tokenizer class
# asked for is a slow one the files do not fit: `SentencePieceProcessor_LoadFromFile ... TypeError: not a string`.
_SPM_LOAD = re.compile(r"sentencepiece|LoadFromFile|SentencePieceProcessor|get_spm_processor")


def _tokenizer_file(raised, frames, printed):
    """TOKENIZER/TOKENIZER_MISSING when sentencepiece was asked to load a model file that is not there (None)."""
    if raised is None or raised.name != "TypeError" or (raised.message or "").strip() != "not a string":
        return None
    if not _SPM_LOAD.search(f"{frames} {printed[-800:]}"):
        return None
    return ("TOKENIZER", "TOKENIZER_MISSING", raised.text(),
            "sentencepiece was given no tokenizer model file (`TypeError: not a string` from LoadFromFile: the slow "
            "tokenizer's vocab_file is None): the model folder has no tokenizer.model/spiece.model (many models ship "
            "only tokenizer.json), or the tokenizer class asked for is a slow one these files do not fit. Load the "
            "fast tokenizer (use_fast=True, LLaMA-Factory's --use_fast_tokenizer), or add the tokenizer.model that "
            "belongs to the model.")


# A JSON decode error raised under a function of the project's data module (`dataloader/data_loader.py`
# `_read_files`, `datasets/coco.py`): the data file is not the JSON the reader parses (raw newlines or
# control characters inside strings, JSON Lines read as one document, a truncated file).
_DATA_MODULE_TAIL = re.compile(r"(?:^|[/\\])(?:\w*_)?(?:data(?:set)?s?|data_?loaders?)(?:[/\\][\w.-]+\.py|(?:_\w+)?\.py)$", _I)
_INSTALLED = re.compile(r"[/\\](?:site|dist)-packages[/\\]|[/\\]lib[/\\]python\d[\d.]*[/\\]")
_PRINTED_FILE = re.compile(r'^[^\S\n]*File "([^"\n]+)", line \d+', _M)


def _data_json(raised, link, printed):
    """DATA/DATA_FORMAT when a JSONDecodeError was raised under the project's own data-reading module
    (its frames parsed, or `File "..."` lines printed above it without a traceback header, as VS Code shows them)."""
    if raised is None or raised.name != "JSONDecodeError":
        return None
    files = [f.file for f in link.frames if f.file] if link is not None and link.frames else _PRINTED_FILE.findall(printed)
    own = [file for file in files if not _INSTALLED.search(file)]
    tails = ["/".join(re.split(r"[/\\]", file)[-2:]) for file in own]
    if not any(_DATA_MODULE_TAIL.search(tail) for tail in tails):
        return None
    if any(re.search(r"conf|cfg|setting|option|param", tail, _I) for tail in tails[-1:]):
        return None   # the deepest own frame reads a config: not the data
    return ("DATA", "DATA_FORMAT", raised.text(),
            f"{raised.text()[:100]}, raised while the project's data loader parsed a data file: a record is not "
            "valid JSON (a raw newline or control character inside a string, JSON Lines read as one document, a "
            "truncated file). Fix the records (escape newlines as \\n), or parse them leniently "
            "(json.loads(..., strict=False)) / in the format the file is in.")
def record_field(raised, log):
    """(r9) _record_field for a caller holding the whole log: the statement printed above the exception."""
    if raised is None:
        return None
    return _record_field(raised, log[max(0, raised.start - 600):raised.start])


def _quoted_exception(log):
    """An exception quoted in a sentence or after other text on its line, when no line starts with one
    (`... reports an error that the ValueError: Must provide ...`): read like one printed on its own."""
    from gpu_train_debug.rules import fallbacks   # fallbacks reads this module's tables: import it late
    return fallbacks.pasted_exception(log) or fallbacks.message_only(log)


# A setting nobody set, dereferenced by the code that reads the settings: `'NoneType' object has no
# attribute 'lower'` raised in accelerate's launcher, a TrainingArguments __post_init__, a config module.
_NONE_ATTRIBUTE = re.compile(r"^'NoneType' object has no attribute '\w+'")
# Where a launcher or a script reads its settings (not a model's own configuration class).
_SETTINGS_FRAME = re.compile(r"accelerate[/\\]commands[/\\]|training_args\.py|hf_argparser\.py|__post_init__"
                             r"|[/\\](?:configs?|arguments?|args|options|opts|parse_config|config_utils)\.py", _I)


def _unset_setting(raised):
    """A None setting dereferenced in the frame that reads arguments or configuration, or None."""
    if raised is None or raised.name != "AttributeError" or not _NONE_ATTRIBUTE.match(raised.message or ""):
        return None
    if not _SETTINGS_FRAME.search(f"{raised.file or ''} {raised.function or ''}"):
        return None
    return ("CONFIG_INVALID", "CONFIG_VALUE", raised.text(),
            f"{raised.text()[:120]}, raised at {raised.where()} where the settings are read: a setting the "
            "run needs was never given (None), such as a launcher that was not configured (`accelerate config`), "
            "an argument left out of the command line, or a key missing from the config file. Set it (the "
            "launcher's config, the command line or the config file).")


def _yaml_syntax(log, lower):
    """PyYAML's syntax error with its file/line mark: the config file is not valid YAML."""
    found, text = _search("_YAML_SYNTAX", log, lower)
    if not found or not _YAML_MARK.search(log):
        return None
    return ("CONFIG_INVALID", "CONFIG_VALUE", _line(text, found),
            f"The YAML parser refused a config file ({found.group(0)}): a line that is not `key: value` (a "
            "missing space after the colon, a tab, an unquoted value holding `:`, Python code in a .yaml file, "
            "indentation that breaks a mapping). Fix the file at the line and column the error names (`in "
            "\"<file>\", line N, column M`), or use the config file the project ships for this version.")


_FIXED = (
    ("NO_TEMPLATE", "TOKENIZER", "TOKENIZER_NO_CHAT_TEMPLATE", lambda said: (
        f"The tokenizer has no chat template ({said[:80]}): base (not instruction-tuned) models ship none, and "
        "transformers no longer supplies a default. Use the model's Instruct/chat variant, or set one "
        "(`tokenizer.chat_template = ...`, or the trainer's template option) before formatting the data.")),
    ("_WRAPPED", "CONFIG_INVALID", "CODE_ERROR", lambda said: (
        f"The code asked the DataParallel/DistributedDataParallel wrapper for the model's own attribute ({said[:100]}): "
        "a wrapped model's methods and attributes live on `model.module`. Call `model.module.<name>` (or keep a "
        "reference to the unwrapped model), or run on one GPU (CUDA_VISIBLE_DEVICES=0) where the script does not wrap it.")),
    ("_CONFIG_UNPARSED", "CONFIG_INVALID", "CONFIG_VALUE", lambda said: (
        f"The argument parser could not read the config file it was given ({said[:120]}): the file is not valid "
        "YAML/INI (a stray line such as `...`, a tab, a missing space after `:`), or another file than a config "
        "was passed. Fix the file at the line the parser's message names, or pass the config the project ships.")),
    ("_QUANTIZED_ONLY", "CONFIG_INVALID", "CONFIG_VALUE", lambda said: (
        f"The Trainer refused to train a quantized model without adapters ({said[:80]}): 4-/8-bit weights cannot "
        "be trained directly. Attach LoRA adapters first (peft's get_peft_model, unsloth's get_peft_model), and "
        "do not merge_and_unload them before training; or load the model unquantized.")),
    ("_STATE_KEYS", "CONFIG_INVALID", "CHECKPOINT_MISMATCH", lambda said: (
        f"The checkpoint's weights do not fit the model built ({said[:100]}): it was saved from another "
        "architecture or options (a `module.` prefix from DataParallel, other layer names or sizes). Build the model "
        "with the options the checkpoint was trained with, strip or add the prefix, or load with strict=False only "
        "for keys you mean to drop.")),
    ("_UNKNOWN_MODEL", "CONFIG_INVALID", "CONFIG_VALUE", lambda said: (
        f"timm has no model registered under that name ({said[:100]}): the name in the config or command line is "
        "misspelled, or the project's module that registers it (@register_model) was not imported before "
        "create_model. Correct the model name, or import the project's model module first.")),
    ("_UNDEFINED_DATASET", "CONFIG_INVALID", "CONFIG_VALUE", lambda said: (
        f"The dataset named in the run's arguments is not defined in dataset_info.json ({said[:100]}): the name "
        "is misspelt, or a custom dataset was not registered there (its file_name and columns), or dataset_dir "
        "points at another folder. Add the dataset's entry to dataset_info.json, or pass a name it defines.")),
    ("_LOSS_NONFINITE", "NAN_LOSS", "LOSS_DIVERGED", lambda said: (
        f"The training loss became NaN/inf ({said[:80]}): the run diverged. Lower the learning rate (or "
        "warm it up longer), clip gradients, and in fp16 use bf16 or float32.")),
    ("_IMAGE_UNREADABLE", "DATA", "DATA_CORRUPT", lambda said: (
        f"An image of the dataset cannot be decoded ({said[:90]}): the file is corrupt, truncated (an "
        "interrupted download or copy) or not an image at all. Find it (the message names it, or open every "
        "file with PIL once) and delete or replace it, or download the data again.")),
    ("_FILE_NOT_FOUND", "DATA", "FILE_MISSING", lambda said: (
        f"A file the dataset lists is not where it is looked for ({said[:100]}): the dataset's paths (its "
        "YAML/config or annotation file) point at another folder than the data, or the file was never "
        "extracted. Fix the data paths in the config, or put the files where they are listed.")),
    ("_HUB_DATASET", "DATA", "HUB_ACCESS_DENIED", lambda said: (
        f"The Hugging Face Hub refused the dataset ({said[:80]}): the id is misspelt, private or gated. Check "
        "the id, log in (`huggingface-cli login` or HF_TOKEN) and accept its terms, or point at a local copy.")),
    ("NO_COLUMN", "DATA", "DATASET_KEY", lambda said: (
        f"The dataset has no column of the name the trainer reads ({said[:80]}). Rename the column (e.g. to "
        "`text`), or tell the trainer its name (dataset_text_field, formatting_func).")),
    ("_DTYPE_CLASH", "CONFIG_INVALID", "DEVICE_MISMATCH", lambda said: (
        f"Two tensors of different dtypes met in one operation ({said[:90]}): a tensor the code creates or "
        "loads (labels, masks, inputs) has another dtype than the weights or the loss expects (class targets "
        "must be int64, probabilities float). Cast it where it is made (`.long()`, `.float()`, `.to(dtype)`).")),
    ("_SHAPE_CLASH", "CONFIG_INVALID", "SHAPE_MISMATCH", lambda said: (
        f"Tensor shapes do not fit the operation ({said[:90]}): the data's shape (channels, image size, "
        "target layout) differs from what the model or loss was configured for. Make the input and target "
        "shapes match the model's settings (channels, size, number of classes), or the model's settings the data.")),
    ("_GRAPH", "CONFIG_INVALID", "AUTOGRAD_ERROR", lambda said: (
        f"The autograd graph cannot give the gradient asked for ({said[:90]}): backward on a non-scalar, a "
        "tensor detached from or frozen out of the graph. Reduce the loss to a scalar (`.mean()`), detach "
        "before converting to numpy, and keep the trained parameters requiring grad.")),
    ("_INDEX_PAST", "CONFIG_INVALID", "INDEX_OUT_OF_RANGE", lambda said: (
        f"An index is past the end of the table it selects from ({said[:80]}): a class label >= the number of "
        "classes, or a token id >= the embedding's vocabulary size (tokens added to the tokenizer without "
        "resizing the embeddings). Set the number of classes / vocabulary size to cover the data "
        "(`model.resize_token_embeddings(len(tokenizer))`).")),
    ("_NO_PARAMETERS", "CONFIG_INVALID", "CONFIG_VALUE", lambda said: (
        f"The optimizer was given no parameters to train ({said[:80]}): every parameter is frozen, or the "
        "setting that picks the trainable modules (adapter target modules, a freeze option, a parameter "
        "filter) matched none of the model's. Check that setting against the model's module names.")),
    ("_SCHEDULE_OVERRUN", "CONFIG_INVALID", "CONFIG_VALUE", lambda said: (
        f"The learning-rate scheduler was stepped past the total it was built for ({said[:90]}): its "
        "total_steps (or epochs x steps_per_epoch) is smaller than the steps the loop takes. Build it from the "
        "same number of steps the loop runs (after gradient accumulation and drop_last), or stop at it.")),
    ("_EMPTY", "DATA", "DATASET_EMPTY", lambda said: (
        f"The data loader was given no samples ({said[:80]}): the dataset, or one split of it, is empty. "
        "Check the data path and the files it should match (names, extensions, the split's folder, the "
        "annotation file), and that preprocessing wrote them.")),
    ("_SCHEMA_DRIFT", "DATA", "DATA_FORMAT", lambda said: (
        f"The data file could not be read as one table ({said[:100]}): its records do not share one schema "
        "(a field that is an object in one record and a list or string in another, numbers mixed with "
        "strings), or the file is not in the format it was loaded as. Make every record's fields the same "
        "type (e.g. all strings), and use JSON Lines (one record per line) for `json` datasets.")),
    ("_NO_LOSS", "DATA", "DATASET_KEY", lambda said: (
        "The model computed no loss: the batches it was given carry no `labels` (" + said[:60] + "). Add a "
        "labels column to the dataset (or a data collator that makes one; for classification, labels of a "
        "class type), or tell the trainer which column holds them (label_names).")),
)


def _line(log, match):
    start = log.rfind("\n", 0, match.start()) + 1
    stop = log.find("\n", match.end())
    return log[start:len(log) if stop < 0 else stop].strip()[:300]
