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
        r"|MPS backend out of memory")),
    ("FA_UNSUPPORTED_ARCH", "GPU_UNSUPPORTED", re.compile(
        r"FlashAttention only supports|FlashAttention-?3 (?:is )?(?:only|not) supported"
        r"|flash[_-]?attn\w* .*not supported on", _I)),
    ("TRITON_GPU_TOO_OLD", "GPU_UNSUPPORTED", re.compile(
        r"too old to be supported by the triton GPU compiler")),
    ("TORCH_ARCH_UNSUPPORTED", "GPU_UNSUPPORTED", re.compile(
        r"with CUDA capability sm_\d+ is not compatible with the current PyTorch installation"
        r"|no kernel image is available for execution on the device")),
    ("BF16_UNSUPPORTED", "DTYPE_UNSUPPORTED", re.compile(
        r"does not support bfloat16|bf16 is not supported|bfloat16 is not supported"
        r"|Bf16 requires|only supported on GPUs with compute capability of at least 8", _I)),
    ("NO_CUDA_DEVICE", "NO_ACCELERATOR", re.compile(
        r"Torch not compiled with CUDA enabled|Found no NVIDIA driver|No CUDA GPUs are available"
        r"|no CUDA-capable device is detected|CUDA driver version is insufficient")),
    ("MISSING_PACKAGE", "MISSING_DEPENDENCY", re.compile(
        r"ModuleNotFoundError: No module named '([\w.]+)'|ImportError: No module named ([\w.]+)")),
    ("TORCH_COMPILE_FAILED", "COMPILE_FAILURE", re.compile(
        r"Windows not yet supported for torch\.compile|Cannot find a working triton installation"
        r"|BackendCompilerFailed|InductorError|torch\._dynamo\.exc\.\w+|InvalidCxxCompiler"
        r"|CppCompileError|not yet supported for torch\.compile")),
    ("TOKENIZER_MISSING", "TOKENIZER", re.compile(
        r"(?:FileNotFoundError|No such file or directory)[^\n]*(?:tokenizer|token_bytes)", _I)),
    ("DATA_SHARDS_MISSING", "DATA", re.compile(
        r"(?:FileNotFoundError|No such file or directory)[^\n]*(?:\.parquet|shard_|[/\\]data\b)"
        r"|No (?:parquet|data|training) (?:files|shards) found", _I)),
    ("BATCH_NOT_DIVISIBLE", "CONFIG_INVALID", re.compile(
        r"assert[^\n]*TOTAL_BATCH_SIZE\s*%|TOTAL_BATCH_SIZE[^\n]*(?:not divisible|must be divisible)")),
    ("SHAPE_MISMATCH", "CONFIG_INVALID", re.compile(
        r"mat1 and mat2 shapes cannot be multiplied|shape '\[[^\]]*\]' is invalid for input of size"
        r"|The size of tensor a \(\d+\) must match|size mismatch for|must be divisible by"
        r"|Expected [^\n]* to have [^\n]* but got")),
    ("NCCL_TIMEOUT", "DISTRIBUTED", re.compile(
        r"Watchdog caught collective operation timeout")),
    ("NCCL_ERROR", "DISTRIBUTED", re.compile(
        r"NCCL error in:|DistBackendError|ncclUnhandledCudaError|ncclSystemError|ncclInternalError")),
    ("FP16_LOSS_SCALE_OVERFLOW", "NAN_LOSS", re.compile(
        r"Overflow detected\. Skipping step|Gradient overflow\.\s+Skipping step|Minimum loss scale reached")),
    ("LOSS_DIVERGED", "NAN_LOSS", re.compile(
        r"\bloss\s*[:=]\s*[-+]?(?:nan|inf)\b|Loss is (?:NaN|inf)|non-finite loss|^FAIL\s*$", _I | _M)),
]

_CODES = [code for code, _, _ in SIGNATURES]

# Numbers inside PyTorch's OOM message (c10/cuda/CUDACachingAllocator.cpp).
_SIZE = r"([\d.]+) (bytes|[KMGT]iB)"
OOM_TRIED = re.compile(r"Tried to allocate " + _SIZE)
OOM_TOTAL = re.compile(r"total capac(?:i)?ty of " + _SIZE + r" of which " + _SIZE + r" is free")
OOM_ALLOCATED = re.compile(r"Of the allocated memory " + _SIZE + r" is allocated by PyTorch")
OOM_RESERVED = re.compile(_SIZE + r" is reserved by PyTorch but unallocated")
_UNIT = {"bytes": 1, "KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30, "TiB": 2 ** 40}

# Progress lines: karpathy's `step 00042 (12.3%) | loss: 3.2 | ...` and generic `loss=3.2`.
STEP = re.compile(r"\bstep[ =:]+(\d+)(?: \(([\d.]+)%\))?")
LOSS = re.compile(r"\bloss\s*[:=]\s*([-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|nan|inf))", _I)
VAL_BPB = re.compile(r"^val_bpb:\s*([\d.]+)", _M)
ERROR_LINE = re.compile(r"^(?:[\w.]+(?:Error|Exception|Exit|Interrupt)|Killed|Traceback|FAIL)\b.*$", _M)


def scan(text):
    """[(code, family, last match)] of every signature found, highest priority first."""
    found = []
    for code, family, regex in SIGNATURES:
        last = None
        for last in regex.finditer(text):
            pass
        if last is not None:
            found.append((code, family, last))
    return found


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


def losses(text):
    """Training loss values printed in the log, in order (non-numbers become nan/inf)."""
    values = []
    for match in LOSS.finditer(text):
        try:
            values.append(float(match.group(1)))
        except ValueError:
            pass
    return values


def last_step(text):
    """(step, percent) of the last progress line, or None."""
    match = _last(STEP, text)
    if not match:
        return None
    return int(match.group(1)), (float(match.group(2)) if match.group(2) else None)


def last_error_line(text):
    match = _last(ERROR_LINE, text)
    return match.group(0).strip()[:300] if match else None
