"""Log signatures of training failures: which text means which diagnosis code.

Each signature is (code, family, regex). `scan` returns the matches in priority order (the
order of SIGNATURES): a root cause outranks its consequences, e.g. an out-of-memory on one
rank comes before the NCCL timeout the other ranks then hit. The texts come from the
sources cited in references/diagnosis-codes.md and tests/fixtures/logs/.
"""

import re

_I = re.IGNORECASE
_M = re.MULTILINE

SIGNATURES = [
    ("OOM", "OOM", re.compile(
        r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|HIP out of memory"
        r"|MPS backend out of memory"),
     ('out of memory', 'outofmemoryerror')),
    ("CAUSAL_LEAK", "LOSS_TOO_GOOD", re.compile(
        r"CAUSALITY VIOLATION|the model sees future tokens"),
     ('causality violation', 'sees future tokens')),
    ("FA_UNSUPPORTED_ARCH", "GPU_UNSUPPORTED", re.compile(
        r"FlashAttention only supports|FlashAttention-?3 (?:is )?(?:only|not) supported"
        r"|flash[_-]?attn\w* .*not supported on|Flash Attention 3 is unavailable"
        r"|ATTENTION_BACKEND='fa3' needs a Hopper", _I),
     ('flashattention', 'flash_attn', 'flash-attn', 'flashattn', 'flash attention 3', 'needs a hopper')),
    ("BACKEND_NEEDS_CUDA_COMPILE", "CONFIG_INVALID", re.compile(
        r"ATTENTION_BACKEND='flex' needs CUDA and torch\.compile"),
     ("attention_backend='flex' needs",)),
    ("TRITON_GPU_TOO_OLD", "GPU_UNSUPPORTED", re.compile(
        r"too old to be supported by the triton GPU compiler"),
     ('too old to be supported',)),
    ("TORCH_ARCH_UNSUPPORTED", "GPU_UNSUPPORTED", re.compile(
        r"with CUDA capability sm_\d+ is not compatible with the current PyTorch installation"
        r"|no kernel image is available for execution on the device"),
     ('is not compatible with the current pytorch', 'no kernel image')),
    ("BF16_UNSUPPORTED", "DTYPE_UNSUPPORTED", re.compile(
        r"does not support bfloat16|bf16 is not supported|bfloat16 is not supported"
        r"|Bf16 requires|only supported on GPUs with compute capability of at least 8", _I),
     ('bfloat16', 'bf16', 'compute capability of at least 8')),
    ("NO_CUDA_DEVICE", "NO_ACCELERATOR", re.compile(
        r"Torch not compiled with CUDA enabled|Found no NVIDIA driver|No CUDA GPUs are available"
        r"|no CUDA-capable device is detected|CUDA driver version is insufficient"),
     ('not compiled with cuda', 'no nvidia driver', 'no cuda gpus', 'no cuda-capable', 'driver version is insufficient')),
    ("MISSING_PACKAGE", "MISSING_DEPENDENCY", re.compile(
        r"ModuleNotFoundError: No module named '([\w.]+)'|ImportError: No module named ([\w.]+)"),
     ('no module named',)),
    ("TORCH_COMPILE_FAILED", "COMPILE_FAILURE", re.compile(
        r"Windows not yet supported for torch\.compile|Cannot find a working triton installation"
        r"|BackendCompilerFailed|InductorError|torch\._dynamo\.exc\.\w+|InvalidCxxCompiler"
        r"|CppCompileError|not yet supported for torch\.compile"),
     ('torch.compile', 'triton installation', 'backendcompilerfailed', 'inductorerror', 'torch._dynamo.exc', 'invalidcxxcompiler', 'cppcompileerror')),
    ("TOKENIZER_MISSING", "TOKENIZER", re.compile(
        r"(?:FileNotFoundError|No such file or directory)[^\n]*(?:tokenizer|token_bytes)|no tokenizer at", _I),
     ('filenotfounderror', 'no such file', 'no tokenizer at')),
    ("DATA_SHARDS_MISSING", "DATA", re.compile(
        r"(?:FileNotFoundError|No such file or directory)[^\n]*(?:\.parquet|shard_|[/\\]data\b)"
        r"|No (?:parquet|data|training) (?:files|shards) found|no prepared data in"
        r"|the prepared split has no documents|cannot reach Hugging Face to download", _I),
     ('filenotfounderror', 'no such file', 'files found', 'shards found', 'no prepared data',
      'prepared split has no documents', 'cannot reach hugging face')),
    ("BATCH_NOT_DIVISIBLE", "CONFIG_INVALID", re.compile(
        r"assert[^\n]*TOTAL_BATCH_SIZE\s*%|TOTAL_BATCH_SIZE[^\n]*(?:not divisible|must be divisible|not a multiple)"),
     ('total_batch_size',)),
    ("WINDOW_PATTERN_INVALID", "CONFIG_INVALID", re.compile(
        r"WINDOW_PATTERN=[^\n]*use only the letters S and L"),
     ('window_pattern=',)),
    ("SHAPE_MISMATCH", "CONFIG_INVALID", re.compile(
        r"mat1 and mat2 shapes cannot be multiplied|shape '\[[^\]]*\]' is invalid for input of size"
        r"|The size of tensor a \(\d+\) must match|size mismatch for|must be divisible by"
        r"|Expected [^\n]* to have [^\n]* but got"),
     ('mat1 and mat2', 'is invalid for input of size', 'the size of tensor a', 'size mismatch for', 'must be divisible by', 'but got')),
    ("NCCL_TIMEOUT", "DISTRIBUTED", re.compile(
        r"Watchdog caught collective operation timeout"),
     ('watchdog caught',)),
    ("NCCL_ERROR", "DISTRIBUTED", re.compile(
        r"NCCL error in:|DistBackendError|ncclUnhandledCudaError|ncclSystemError|ncclInternalError"),
     ('nccl', 'distbackenderror')),
    ("FP16_LOSS_SCALE_OVERFLOW", "NAN_LOSS", re.compile(
        r"Overflow detected\. Skipping step|Gradient overflow\.\s+Skipping step|Minimum loss scale reached"),
     ('overflow detected', 'gradient overflow', 'minimum loss scale')),
    ("LOSS_DIVERGED", "NAN_LOSS", re.compile(
        r"\bloss\s*[:=]\s*[-+]?(?:nan|inf)\b|Loss is (?:NaN|inf)|non-finite loss|^FAIL\s*$"
        r"|the run diverged|val_bpb is (?:nan|inf)", _I | _M),
     ('nan', 'inf', 'fail', 'non-finite', 'diverged')),
]


# Numbers inside PyTorch's OOM message (c10/cuda/CUDACachingAllocator.cpp).
_SIZE = r"([\d.]+) (bytes|[KMGT]iB)"
OOM_TRIED = re.compile(r"Tried to allocate " + _SIZE)
OOM_TOTAL = re.compile(r"total capac(?:i)?ty of " + _SIZE + r" of which " + _SIZE + r" is free")
OOM_ALLOCATED = re.compile(r"Of the allocated memory " + _SIZE + r" is allocated by PyTorch")
OOM_RESERVED = re.compile(_SIZE + r" is reserved by PyTorch but unallocated")
_UNIT = {"bytes": 1, "KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30, "TiB": 2 ** 40}

# Progress lines: karpathy's `step 00042 (12.3%) | loss: 3.2 | ...` and generic `loss=3.2`.
# What the run itself printed about its shapes outranks the constants read from files:
# the template's `Batch: 4,096 tokens/step = 8 x 256 x 2 accum | ...` line, and its
# `... DEVICE_BATCH_SIZE*MAX_SEQ_LEN=1536` failure.
BATCH_LINE = re.compile(r"Batch: ([\d,]+) tokens/step = (\d+) x (\d+) x (\d+) accum")
TOKENS_PER_FWDBWD = re.compile(r"DEVICE_BATCH_SIZE\*MAX_SEQ_LEN=(\d+)")
STEP = re.compile(r"\bstep[ =:]+(\d+)(?: \(([\d.]+)%\))?")
LOSS = re.compile(r"\b[Ll]oss\s*[:=]\s*([-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|[Nn]a[Nn]|-?[Ii]nf))")
VAL_BPB = re.compile(r"^val_bpb:\s*([\d.]+)", _M)
ERROR_LINE = re.compile(r"^(?:[\w.]+(?:Error|Exception|Exit|Interrupt)|Killed|Traceback|FAIL)\b.*$", _M)


def scan(text, lower=None):
    """[(code, family, last match)] of every signature found, highest priority first.

    Speed: a regex over a whole 10,000-line log costs tens of milliseconds in Python's re
    (case-insensitive alternations have no literal prefix to skip ahead with). Every
    signature is one line long and names fixed words, so we look for those words with
    str.rfind (C speed) from the end, and run the regex only on the lines that hold them.
    """
    lower = lowered(text) if lower is None else lower
    found = []
    for code, family, regex, anchors in SIGNATURES:
        best = None
        for anchor in anchors:
            match = _last_on_anchor_lines(text, lower, regex, anchor)
            if match and (best is None or match.start() > best.start()):
                best = match
        if best is not None:
            found.append((code, family, best))
    return found


def lowered(text):
    """text.lower() with the same length (a few Unicode letters lower to two characters)."""
    lower = text.lower()
    if len(lower) != len(text):
        lower = "".join(ch if len(ch.lower()) != 1 else ch.lower() for ch in text)
    return lower


# Lines checked per anchor word before giving up (bounds the worst case on odd logs).
MAX_ANCHOR_LINES = 5000


def _last_on_anchor_lines(text, lower, regex, anchor):
    end = len(lower)
    for _ in range(MAX_ANCHOR_LINES):
        pos = lower.rfind(anchor, 0, end)
        if pos < 0:
            return None
        start = lower.rfind("\n", 0, pos) + 1
        stop = lower.find("\n", pos)
        stop = len(lower) if stop < 0 else stop
        match = regex.search(text, start, stop)
        if match:
            return match
        end = start
    return None


def to_bytes(number, unit):
    return float(number) * _UNIT[unit]


def oom_numbers(text):
    """Sizes from the last OOM message, in bytes (keys missing when not printed)."""
    out = {}
    for key, regex in (("tried", OOM_TRIED), ("allocated", OOM_ALLOCATED), ("reserved_free", OOM_RESERVED)):
        match = _last(regex, text)
        if match:
            out[key] = to_bytes(match.group(1), match.group(2))
    match = _last(OOM_TOTAL, text)
    if match:
        out["capacity"] = to_bytes(match.group(1), match.group(2))
        out["free"] = to_bytes(match.group(3), match.group(4))
    return out


def _last(regex, text):
    last = None
    for last in regex.finditer(text):
        pass
    return last


# Loss values are read from the end of the log (about the last 500 progress lines): the
# divergence or the too-good loss is there.
TAIL_CHARS = 64 * 1024


def losses(text):
    """Training loss values printed in the last TAIL_CHARS of the log, in order."""
    tail = text[-TAIL_CHARS:]
    values = []
    for match in LOSS.finditer(tail):
        try:
            values.append(float(match.group(1)))
        except ValueError:
            pass
    return values


def last_step(text, lower=None):
    """(step, percent) of the last progress line, or None."""
    lower = lowered(text) if lower is None else lower
    match = _last_on_anchor_lines(text, lower, STEP, "step")
    if not match:
        return None
    return int(match.group(1)), (float(match.group(2)) if match.group(2) else None)


def val_bpb(text):
    match = _last(VAL_BPB, text[-TAIL_CHARS:])
    return float(match.group(1)) if match else None


def last_error_line(text):
    match = _last(ERROR_LINE, text[-TAIL_CHARS:])
    return match.group(0).strip()[:300] if match else None


def printed_shapes(text, device_batch=None):
    """{MAX_SEQ_LEN, TOTAL_BATCH_SIZE, DEVICE_BATCH_SIZE} as the run printed them (those it printed)."""
    head = text[:64 * 1024]
    match = BATCH_LINE.search(head)
    if match:
        return {"TOTAL_BATCH_SIZE": int(match.group(1).replace(",", "")), "DEVICE_BATCH_SIZE": int(match.group(2)),
                "MAX_SEQ_LEN": int(match.group(3))}
    match = _last(TOKENS_PER_FWDBWD, text[-TAIL_CHARS:])
    if match and device_batch and int(match.group(1)) % device_batch == 0:
        return {"MAX_SEQ_LEN": int(match.group(1)) // device_batch}
    return {}
