"""Log signatures of training failures: which text means which diagnosis code.

Each signature is (code, family, regex). `scan` returns the matches in priority order (the
order of SIGNATURES): a root cause outranks its consequences, e.g. an out-of-memory on one
rank comes before the NCCL timeout the other ranks then hit. The texts come from the
sources cited in references/diagnosis-codes.md and tests/fixtures/logs/.
"""

import functools
import re

_I = re.IGNORECASE
_M = re.MULTILINE

SIGNATURES = [
    ("OOM", "OOM", re.compile(
        r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|HIP out of memory"
        r"|MPS backend out of memory|Tried to allocate [\d.]+ ?[KMGT]i?B \(GPU \d+; [\d.]+ ?[KMGT]i?B total capacity"
        r"|kIOGPUCommandBufferCallbackErrorOutOfMemory|\[metal::malloc\] Attempting to allocate"
        r"|\bO?OM [Dd]etected|RESOURCE_EXHAUSTED: Out of memory|CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED"
        r"|cudaErrorMemoryAllocation|cudaMalloc failed: out of memory|failed to allocate CUDA\d* buffer"
        # ROCm, Intel XPU (level-zero / SYCL) and TPU (XLA) say the same in their own words.
        r"|XPU out of memory|UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY|Allocation is out of device memory"
        r"|HIP_ERROR_OutOfMemory|hipErrorOutOfMemory|Ran out of memory in memory space (?:hbm|vmem)"
        r"|NPU out of memory|Attempting to reserve [\d.]+ ?[KMGT]i?B? at the bottom of memory"
        # TensorFlow/Keras, JAX and TPU runtimes: `OOM when allocating tensor`, `Resource exhausted:
        # Attempting to allocate`, `Failed to allocate request for 64.00MiB`; TensorFlow's cuDNN handle
        # that cannot be created because the process reserved the GPU's memory (fixed by memory growth).
        r"|OOM when allocating tensor|Resource exhausted: Attempting to allocate|Failed to allocate request for [\d.]+ ?[KMGT]i?B"
        r"|RESOURCE_EXHAUSTED: Error allocating device buffer|Could not create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR"
        r"|Cuda failure 'out of memory'|CUDA_ERROR_OUT_OF_MEMORY"
        # Every allocator's own words, whatever the runtime (Paddle's `Out of memory error on GPU 0`,
        # old torch's `cuda runtime error (2) : out of memory`, caffe2's `...: out of memory`,
        # TensorFlow's BFC `Ran out of memory trying to allocate`): "out of memory" is never anything
        # else, except the kernel's OOM killer (`Out of memory: Killed process`), which is host RAM.
        r"|(?i:(?<![\w-])out ?of ?memory\b(?!: kill)(?! killer))|paddle::memory::allocation::BadAlloc"
        # (r7) torch's message retyped from a screenshot with an article: `CUDA out of the memory`.
        r"|(?i:\b(?:CUDA|GPU) out of the memory\b)"
        r"|\b[A-Z]+_(?:RESULT_)?ERROR_OUT_OF_DEVICE_MEMORY\b|\bEL0004\b[^\n]*[Ff]ailed to allocate memory"),
     ('cuda_error_out_of_memory', 'oom when allocating', 'resource exhausted', 'failed to allocate request', 'error allocating device buffer',
      'could not create cudnn handle', 'out of memory', 'outofmemoryerror', 'total capacity', 'erroroutofmemory', 'metal::malloc',
      'om detected', 'resource_exhausted', 'alloc_failed', 'cudaerrormemoryallocation', 'failed to allocate cuda',
      'out_of_device_memory', 'out of device memory', 'error_outofmemory', 'at the bottom of memory', 'outof memory',
      'out ofmemory', 'el0004', 'out of the memory')),
    # A GPU watchdog stopped a kernel that ran too long (Windows TDR when the GPU also drives a
    # display; Metal's "Impacting Interactivity"): a time limit, not a fault of the model.
    ("GPU_WATCHDOG_TIMEOUT", "TIMEOUT", re.compile(
        r"the launch timed out and was terminated|CUDA_ERROR_LAUNCH_TIMEOUT|cudaErrorLaunchTimeout"
        r"|ErrorImpactingInteractivity|execution failed: Impacting Interactivity"),
     ('launch timed out', 'launch_timeout', 'launchtimeout', 'impactinginteractivity', 'impacting interactivity')),
    ("CAUSAL_LEAK", "LOSS_TOO_GOOD", re.compile(
        r"CAUSALITY VIOLATION|the model sees future tokens"),
     ('causality violation', 'sees future tokens')),
    ("FA_UNSUPPORTED_ARCH", "GPU_UNSUPPORTED", re.compile(
        r"FlashAttention only supports|FlashAttention-?3 (?:is )?(?:only|not) supported"
        r"|flash[_-]?attn\w* .*not supported on|Flash Attention 3 is unavailable"
        r"|ATTENTION_BACKEND='fa3' needs a Hopper|FlashAttention backward for head dim > \d+ requires"
        r"|Expected is_sm8[0x] (?:\|\| is_sm90 )?to be true, but got false", _I),
     ('flashattention', 'flash_attn', 'flash-attn', 'flashattn', 'flash attention 3', 'needs a hopper',
      'expected is_sm8')),
    ("BACKEND_NEEDS_CUDA_COMPILE", "CONFIG_INVALID", re.compile(
        r"ATTENTION_BACKEND='flex' needs CUDA and torch\.compile"),
     ("attention_backend='flex' needs",)),
    # A Triton kernel's block configuration needs more shared memory per block than this GPU has
    # (Pascal/Turing have 48-64 KiB): the GPU is too small for that kernel, not out of VRAM.
    ("TRITON_SHARED_MEMORY", "GPU_UNSUPPORTED", re.compile(
        r"out of resource: shared memory,? ?Required: ?\d+,? ?,? ?Hardware limit(?:ation)?: ?\d+"),
     ('out of resource: shared memory',)),
    ("TRITON_GPU_TOO_OLD", "GPU_UNSUPPORTED", re.compile(
        r"too old to be supported by the triton GPU compiler"),
     ('too old to be supported',)),
    # The whole GPU is below what the software supports (a P100 for vLLM, a Kepler for torch).
    ("GPU_TOO_OLD", "GPU_UNSUPPORTED", re.compile(
        r"GPUs? with compute capability (?:below|lower than|less than|< ?)\s*\d+(?:\.\d+)? (?:are|is) not supported"
        r"|(?:CUDA capability|compute capability) [\d.]+ (?:is )?(?:not supported|too old)|GPU is too old"
        r"|no longer supports this GPU because it is too old|minimum (?:required )?cuda capability (?:supported by this library )?is(?: \d+(?:\.\d+)?)?"
        # cuBLAS/cuDNN asked for a feature this GPU's architecture lacks.
        r"|CUBLAS_STATUS_ARCH_MISMATCH|CUDNN_STATUS_ARCH_MISMATCH", _I),
     ('not supported', 'too old', 'minimum cuda capability', 'minimum required cuda capability', 'status_arch_mismatch')),
    ("TORCH_ARCH_UNSUPPORTED", "GPU_UNSUPPORTED", re.compile(
        r"with CUDA capabilit(?:y|ies) sm_\d+ is not compatible with the current PyTorch installation"
        r"|no kernel image is available for execution on the device|(?:HIP|CUDA) error: invalid device function"
        r"|hipErrorInvalidDeviceFunction|HSA_STATUS_ERROR_INVALID_ISA|hipErrorNoBinaryForGpu"
        r"|Unable to find code object for all current devices|rocBLAS error: Cannot read [^\n]*TensileLibrary"
        r"|cudaErrorNoKernelImageForDevice|CUDA_ERROR_NO_BINARY_FOR_GPU", _I),
     ('is not compatible with the current pytorch', 'no kernel image', 'invalid device function',
      'invaliddevicefunction', 'invalid_isa', 'nobinaryforgpu', 'unable to find code object', 'tensilelibrary',
      'nokernelimage', 'no_binary_for_gpu')),
    # The accelerator's backend lacks an operator (MPS's prototype coverage, xformers built without CUDA).
    ("BACKEND_OP_MISSING", "GPU_UNSUPPORTED", re.compile(
        r"is not current(?:ly)? implemented for the (MPS|XPU|HPU|Meta) device|not currently supported on the (MPS) backend"
        r"|No operator found for `?\w+`?|\b(MPS) does not support \w+"
        # A runtime that says its device lacks the feature asked of it (Intel's XPU memory query).
        r"|The device \((?:[^()\n]|\([^()\n]*\))+\) (?:doesn't|does not) support \w+"
        # An aten operator with no kernel for a non-CUDA accelerator's dispatch key (its sparse and
        # quantized variants too: `SparseMPS`, `QuantizedXPU`).
        r"|Could not run 'aten::[\w.]+' with arguments from the '(?:Sparse(?:Csr)?|Quantized)?(MPS|XPU|HPU)' backend"
        # The same told in a user's words: an aten operator named as unsupported on MPS, in either order.
        r"|aten::[\w.]+\W{0,3}(?:is |are )?(?:still )?(?:unsupported|not (?:yet |currently )?(?:supported|implemented))[^\n]{0,40}?\b(MPS)\b"
        r"|\b(MPS)\b[^\n]{0,200}?\b(?:unsupported|not (?:yet |currently )?(?:supported|implemented))\b[^\n]{0,60}?aten::[\w.]+", _I),
     ('implemented for the', 'not currently supported on the', 'no operator found for', 'mps does not support',
      "doesn't support", 'does not support', "mps' backend", "xpu' backend", "hpu' backend", 'aten::')),
    # A CPU kernel without a half-precision version: fp16/bf16 weights run on the CPU.
    # AMP's GradScaler was given fp16 parameters: it keeps fp32 master weights and refuses them.
    # Its CUDA kernel has no bfloat16 version: bf16 weights (gradients) under fp16 AMP's scaler.
    ("FP16_WEIGHTS_SCALED", "CONFIG_INVALID", re.compile(
        r"Attempting to unscale FP16 gradients"
        r"|_amp_foreach_non_finite_check_and_unscale_cuda\W{0,3} not implemented for \W{0,2}(?:BFloat16|Half)\b"),
     ('attempting to unscale fp16', 'non_finite_check_and_unscale_cuda')),
    ("HALF_ON_CPU", "DTYPE_UNSUPPORTED", re.compile(
        r"\"\w+_cpu_?\" not implemented for '(?:Half|BFloat16)'|not implemented for 'Half'"),
     ("not implemented for 'half'", "not implemented for 'bfloat16'")),
    # Apple's MPS has no float64: a float64 tensor (numpy's default) moved to the GPU is refused.
    ("MPS_FLOAT64", "DTYPE_UNSUPPORTED", re.compile(
        r"MPS framework doesn't support float64|Cannot convert a MPS Tensor to float64"),
     ("doesn't support float64", 'mps tensor to float64')),
    ("XPU_FLOAT64", "DTYPE_UNSUPPORTED", re.compile(
        r"uses-fp64-math|Required aspect fp64 is not supported|aspect::fp64|fp64 is not supported (?:on|by) (?:the|this) device"
        r"|Double (?:precision|type) is not supported on this (?:device|platform)", _I),
     ('fp64', 'double precision is not supported', 'double type is not supported')),
    ("BF16_UNSUPPORTED", "DTYPE_UNSUPPORTED", re.compile(
        r"does not support bfloat16|bf16 is not supported|bfloat16 is not supported"
        r"|Bf16 requires|only supported on GPUs with compute capability of at least 8|setup doesn't support bf16"
        r"|Feature '[^']*bf16' requires \.target sm_80|bf16 mixed precision requires PyTorch >= [\d.]+ and a supported device"
        # cuBLAS refuses a bf16 GEMM (CUDA_R_16BF operands) on a GPU without bf16 units.
        r"|CUBLAS_STATUS_NOT_SUPPORTED[^\n]*CUDA_R_16BF", _I),
     ('bfloat16', 'bf16', 'compute capability of at least 8', 'cublas_status_not_supported')),
    # The driver is older than the CUDA runtime (torch's wheel, or a container's CUDA forward
    # compatibility on a GPU that has none). Often only a warning at CUDA initialisation, after
    # which the run falls back to the CPU or fails later: the warning is then the cause.
    ("DRIVER_TOO_OLD", "NO_ACCELERATOR", re.compile(
        r"NVIDIA driver on your system is too old|CUDA driver version is insufficient"
        r"|forward compatibility was attempted on non supported HW|cudaErrorCompatNotSupportedOnDevice"
        r"|This container was built for NVIDIA Driver Release|unsupported display driver / cuda driver combination"
        # The runtime's error names for the same, and PTX newer than the driver can JIT.
        r"|cudaErrorInsufficientDriver|CUDA_ERROR_INSUFFICIENT_DRIVER|provided PTX was compiled with an unsupported toolchain"
        r"|CUDA_ERROR_UNSUPPORTED_PTX_VERSION", _I),
     ('driver on your system is too old', 'driver version is insufficient', 'forward compatibility was attempted',
      'compatnotsupported', 'built for nvidia driver release', 'unsupported display driver', 'insufficientdriver',
      'insufficient_driver', 'unsupported toolchain', 'unsupported_ptx')),
    ("NO_CUDA_DEVICE", "NO_ACCELERATOR", re.compile(
        r"Torch not compiled with CUDA enabled|Found no NVIDIA driver|No (?:CUDA|HIP) GPUs are available"
        # (r6) a torch built without CUDA has no CUDA bindings in torch._C (`_cuda_setDevice`, `_cuda_getDeviceCount`).
        r"|module 'torch\._C' has no attribute '_cuda_\w+"
        r"|no CUDA-capable device is detected|invalid device ordinal|CUDA unavailable, invalid device"
        r"|The NVIDIA Driver was not detected|CUDA unknown error - this may be due to an incorrectly set up environment"
        # Lightning when torch sees no GPU; CUDA's error 999 (unknown) when the driver cannot start it.
        r"|(?:GPU|CUDA|MPS)Accelerator`? can not run on your system since the accelerator is not available|No supported gpu backend found"
        r"|cuda runtime error \(999\) : unknown error"
        # The driver cannot be reached or reports no device (nvidia-smi, the driver API, TensorFlow's cuInit).
        r"|NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver|CUDA_ERROR_NO_DEVICE"
        r"|cudaErrorNoDevice\b|failed call to cuInit"
        # ROCm/HIP's words for the same: a ROCm torch on a machine whose GPU its runtime cannot see.
        r"|hipErrorNoDevice\b|no ROCm-capable device is detected"
        r"|CUDA-capable device\(s\) is/are busy or unavailable|cudaErrorDevicesUnavailable|Driver/library version mismatch"
        r"|CUDA driver initialization failed|ProcessGroupNCCL is only supported with GPUs, no GPUs found"
        r"|Unexpected error from cudaGetDeviceCount\(\)|cudaErrorSystemNotReady"
        # A launcher asked for GPUs torch does not see: Lightning's `You requested gpu: [0, 1]` /
        # ` But your machine only has: [0]`, ultralytics' `Invalid CUDA '--device 0' requested`.
        r"|But your machine only has:? ?\[[\d, ]*\]|Invalid CUDA '(?:--)?device[= ]?[^'\n]*' requested"
        # torch's lazy CUDA init given a device index past the GPUs it sees.
        r"|device >= 0 && device < num_gpus INTERNAL ASSERT FAILED"
        # fp16 mixed precision asked of accelerate / the HF Trainer where torch sees no CUDA device;
        # old torch's CUDA initialisation failing with error 30 (unknown).
        r"|fp16 mixed precision requires a GPU|\(`--fp16_full_eval`\) can only be used on CUDA"
        r"|cuda runtime error \(30\) : unknown error at [^\n]*THCGeneral"
        r"|MPS backend is not available|MPS not available because|The MPS backend is supported on MacOS"
        r"|(?<!device but torch\.)cuda\.is_available(?:\(\))?\W{0,3}(?:returns?|returned|is|gives|=+|:)?\s*False"
        # A project's own check that stops the run when torch sees no GPU (`CUDA is not available, exiting!`).
        r"|\b(?:CUDA|GPU) (?:is )?(?:not available|unavailable)\W{0,3}(?:exiting|aborting|quitting|stopping)\b"),
     ("has no attribute '_cuda_", 'busy or unavailable', 'devicesunavailable', 'driver/library version mismatch', 'driver initialization failed',
      'no gpus found', 'cudagetdevicecount', 'systemnotready', 'mps backend is not available', 'mps not available',
      'mps backend is supported', 'is_available', 'not available', 'unavailable',
      "couldn't communicate with the nvidia driver", 'cuda_error_no_device', 'hiperrornodevice', 'no rocm-capable', 'cudaerrornodevice', 'failed call to cuinit',
      'gpuaccelerator can not run', 'no supported gpu backend', 'runtime error (999)', 'not compiled with cuda', 'no nvidia driver', 'no cuda gpus', 'no cuda-capable', 'invalid device ordinal',
      'cuda unavailable', 'driver was not detected', 'cuda unknown error', 'your machine only has', "invalid cuda '",
      'no hip gpus', 'accelerator` can not run', 'device < num_gpus', 'mixed precision requires a gpu',
      'can only be used on cuda', 'runtime error (30)', 'duplicate gpu detected')),
    # The build of a CUDA extension stopped on the toolchain: the host compiler is newer than nvcc
    # accepts, nvcc is older than the GPU, or the local toolkit is not the CUDA torch was built with.
    # A build failure comes before the missing module or undefined symbol it leaves behind.
    ("BUILD_TOOLCHAIN", "MISSING_DEPENDENCY", re.compile(
        r"unsupported GNU version! gcc versions later than [\d.]+ are not supported"
        r"|unsupported Microsoft Visual Studio version|Unsupported gpu architecture '(?:compute|sm)_\w+'"
        r"|The detected CUDA version \([\d.]+\) mismatches the version that was used to compile"
        r"|CUDAMismatchException|Installed CUDA version [\d.]+ does not match the version torch was compiled with"
        r"|Cuda extensions are being compiled with a version of Cuda that does not match the version used to compile Pytorch"
        r"|fatal error: (?:cuda\w*|cublas\w*|cusparse\w*|cudnn\w*|curand\w*|nccl)\.h: No such file or directory"
        r"|ptxas fatal\s*: Value 'sm_\d+a?' is not defined for option 'gpu-name'", _I),
     ('unsupported gnu version', 'unsupported microsoft visual studio', 'unsupported gpu architecture',
      'the detected cuda version', '.h: no such file', 'cudamismatchexception', 'installed cuda version',
      'cuda extensions are being compiled', 'ptxas fatal')),
    # An extension or wheel that did not build, or pip that found no build for this Python/platform.
    ("BUILD_FAILED", "MISSING_DEPENDENCY", re.compile(
        r"Error building extension '?[\w.-]+|Error compiling objects for extension\b|Failed building wheel for [\w.-]+"
        r"|Could not build wheels for [\w.-]+|^(?:ERROR: )?Failed to build (?:installable wheels|[\w.-]+[^\S\n]*$)"
        r"|No matching distribution found for \S+|Could not find a version that satisfies the requirement \S+"
        r"|\d+ errors? detected in the compilation of|Ninja is required to load C\+\+ extensions"
        # setuptools' words when the compiler or linker it ran failed, the linker's own, and pip's
        # when a package's build step failed (the compiler error above it is the cause).
        r"|error:? command ['\"“‘][^'\"“”‘’\n]*?\b(?:nvcc|hipcc|gcc|g\+\+|c\+\+|cc|clang\+*|cl|link|ninja|x86_64-linux-gnu-g(?:cc|\+\+))(?:\.exe)?['\"”’]"
        r" failed with exit (?:status|code)[\W_]{0,3}\d+|\bld(?:\.\w+)?: cannot find -l\w+|collect2: error: ld returned \d+ exit status"
        r"|error: subprocess-exited-with-error|error: metadata-generation-failed"
        r"|because these package versions have conflicting dependencies|\bResolutionImpossible\b"
        r"|(?:python setup\.py \w+|Getting requirements to build wheel|Building wheel for \S+(?: \([\w.]+\))?) did not run successfully"
        # A DeepSpeed optimizer whose compiled op never loaded (its JIT build failed earlier): the handle
        # its __init__ would have set is missing when it is used or deleted.
        r"|'DeepSpeed\w+' object has no attribute 'ds_opt_\w+'", _I | _M),
     ('error building extension', 'error compiling objects for extension', 'failed building wheel',
      'could not build wheels', 'failed to build', 'no matching distribution', 'could not find a version',
      'detected in the compilation of', 'ninja is required', "' failed with exit", '" failed with exit',
      '” failed with exit', '’ failed with exit', 'cannot find -l', 'ld returned',
      'subprocess-exited-with-error', 'metadata-generation-failed', 'did not run successfully',
      'conflicting dependencies', 'resolutionimpossible', 'ds_opt_')),
    ("MISSING_PACKAGE", "MISSING_DEPENDENCY", re.compile(
        r"ModuleNotFoundError: No module named '([\w.]+)'|ImportError: No module named ([\w.]+)"
        r"|\bpython[\d.]*: No module named ([\w.]+)|(?m:^)\s*No module named '([\w.]+)'"
        # transformers' words for an optional backend it needs (sentencepiece, protobuf, ...).
        r"|requires the (\w+) library but it was not found in your environment|You need to have (\w+) installed"
        # importlib/pkg_resources asked for the version of a package that is not installed.
        r"|PackageNotFoundError: No package metadata was found for ([\w.-]+)|DistributionNotFound: The '([\w.-]+)[^'\n]*' distribution was not found"),
     ('no module named', 'library but it was not found', 'you need to have', 'no package metadata was found',
      'distributionnotfound')),
    # The installed torch predates an API the code calls (torch.compile is 2.0, torch.compiler 2.1).
    ("TORCH_TOO_OLD", "MISSING_DEPENDENCY", re.compile(
        r"module 'torch(?:\.[\w.]+)?' has no attribute '(?!_cuda_)(\w+)'?|requires PyTorch (?:version )?([\d.]+) or (?:higher|newer|later)"
        r"|torch\.compile requires PyTorch [\d.]+", _I),
     ("module 'torch", 'requires pytorch')),
    # Another package's module lacks an attribute: a local file or folder shadows it, or the
    # installed version is not the one the code was written for.
    # transformers' collator asked to pad with a tokenizer that has no pad token (Llama, GPT-2, Mistral).
    ("TOKENIZER_NO_PAD_TOKEN", "TOKENIZER", re.compile(
        r"Asking to pad but the tokenizer does not have a padding token"
        # (r9) a collator that pads with `tokenizer.pad_token_id` when the tokenizer has none (Qwen's, Llama's):
        # torch's pad_sequence refuses the None it is handed as padding value.
        r"|pad_sequence\(\): argument 'padding_value' \(position 3\) must be float, not NoneType"),
     ('does not have a padding token', "'padding_value'")),
    # sentencepiece cannot parse tokenizer.model: a Git LFS pointer, an interrupted download, or a
    # file that is not a sentencepiece model (Llama 3's tiktoken file).
    ("TOKENIZER_CORRUPT", "TOKENIZER", re.compile(
        r"could not parse ModelProto from|sentencepiece_processor\.cc\(\d+\) \[model_proto-(?:>|&gt;)ParseFromArray"),
     ('modelproto', 'parsefromarray')),
    # DDP with reentrant activation checkpointing (or a module run twice in one step) marks a
    # parameter ready twice.
    ("DDP_REENTRANT_CHECKPOINT", "DISTRIBUTED", re.compile(
        r"Expected to mark a variable ready only once"),
     ('mark a variable ready only once',)),
    ("FSDP_MIXED_DTYPE", "DISTRIBUTED", re.compile(
        r"Must flatten tensors with uniform dtype"),
     ('flatten tensors with uniform dtype',)),
    # A model quantized by bitsandbytes and placed with device_map="auto" is trained by several processes.
    ("QUANTIZED_DEVICE_MAP", "CONFIG_INVALID", re.compile(
        r"You can't train a model that has been loaded in (?:8|4)-bit precision on (?:a different device|multiple devices)"),
     ('bit precision on',)),
    ("WANDB_NOT_LOGGED_IN", "CONFIG_INVALID", re.compile(
        r"api_key not configured \(no-tty\)|wandb\.errors\.UsageError: api_key not configured"),
     ('api_key not configured',)),
    ("CUDA_FORK_REINIT", "CONFIG_INVALID", re.compile(
        r"Cannot re-initialize CUDA in forked subprocess|To use CUDA with multiprocessing, you must use the 'spawn' start method"),
     ('re-initialize cuda in forked', "must use the 'spawn' start method")),
    ("TOO_MANY_OPEN_FILES", "CONFIG_INVALID", re.compile(
        r"Too many open files\. Communication with the workers is no longer possible|\[Errno 24\] Too many open files"),
     ('too many open files',)),
    # DeepSpeed's batch arithmetic: train_batch_size = micro batch x accumulation x world size.
    ("DEEPSPEED_BATCH_SIZE", "CONFIG_INVALID", re.compile(
        r"Check batch related parameters\. train_batch_s"
        r"|train_batch_size is not equal to micro_batch_per_gpu \* gradient_acc_step \* world_size"),
     ('check batch related parameters', 'train_batch_size is not equal')),
    # transformers/huggingface_hub took a local path that does not exist for a Hub repo id.
    ("MODEL_PATH_MISSING", "DATA", re.compile(
        r"HFValidationError: Repo id must (?:be in the form 'repo_name' or 'namespace/repo_name'|use alphanumeric)"),
     ('repo id must',)),
    # A data file in another format than the code reads: JSON Lines read as one JSON document,
    # text that is not UTF-8.
    ("DATA_FORMAT", "DATA", re.compile(
        r"(?:JSONDecodeError|ValueError): Extra data: line \d+ column \d+|UnicodeDecodeError: '[\w-]+' codec can't decode byte"),
     ('extra data: line', "codec can't decode byte")),
    # Extensions compiled against NumPy 1.x imported under NumPy 2 (the warning is the cause of
    # what fails after it).
    ("NUMPY2_ABI", "MISSING_DEPENDENCY", re.compile(
        r"A module that was compiled using NumPy 1\.x cannot be run in|_ARRAY_API not found"
        r"|RuntimeError: Numpy is not available|numpy\.dtype size changed, may indicate binary incompatibility"),
     ('compiled using numpy', '_array_api not found', 'numpy is not available', 'dtype size changed')),
    # The CPU lacks an instruction set the binary was built for (AVX/AVX2): SIGILL.
    ("CPU_ISA_UNSUPPORTED", "MISSING_DEPENDENCY", re.compile(
        r"Illegal instruction(?: \(core dumped\))?\s*$|signal 4 \(SIGILL\)|\bSIGILL\b", _M),
     ('illegal instruction', 'sigill')),
    ("PACKAGE_VERSION", "MISSING_DEPENDENCY", re.compile(
        r"\b[Mm]odule '(?!(?:train|prepare|model|models|config|utils|__main__)')([A-Za-z_][\w.]*)' has no attribute '(\w+)'"
        # A library's argument or config class refuses a keyword its other versions take
        # (transformers' TrainingArguments(evaluation_strategy=...), trl's SFTConfig, a model Config).
        r"|\b(\w*TrainingArguments|\w*Trainer|(?:SFT|DPO|GRPO|PPO|KTO|ORPO|CPO|Reward|Lora|BitsAndBytes|Generation|Peft)Config)"
        r"\.__init__\(\) got an unexpected keyword argument '(\w+)'"
        # (r4) An RL environment written for the Gym API before 0.26 driven by a library of the new API
        # (gym>=0.26, gymnasium, stable-baselines3 2.x), which reads the `render_mode` every new Env has.
        r"|'(\w+)' object has no attribute '(render_mode)'"),
     ("' has no attribute '", 'got an unexpected keyword argument', "no attribute 'render_mode'")),
    # A compiled extension does not match what is installed: a CUDA library, a torch ABI.
    ("BINARY_MISMATCH", "MISSING_DEPENDENCY", re.compile(
        r"undefined symbol: \S+|cannot open shared object file|DLL load failed|CUDA_HOME environment variable is not set"
        r"|No CUDA runtime is found|Microsoft Visual C\+\+ [\d.]+ or greater is required|nvcc: not found|nvcc fatal"
        r"|version `(?:GLIBCXX|GLIBC|CXXABI)_[\d.]+' not found|PyTorch and torchvision were compiled with different CUDA"
        r"|operator torchvision::\w+ does not exist|CUDA Setup failed despite (?:GPU|CUDA) being available"
        r"|CUDA SETUP: CUDA detection failed|CUDA SETUP: Required library version not found"
        # DeepSpeed's op builder when no CUDA toolkit (nvcc) is installed to compile its ops.
        r"|CUDA_HOME does not exist, unable to compile CUDA op|MissingCUDAException"
        # The dynamic loader's other refusals (Linux, macOS, Windows) of a library the import needs.
        r"|\.(?:so|dylib)[.\d]*: (?:cannot read file data|invalid ELF header|file too short|wrong ELF class)"
        r"|Symbol not found: \S+|\[WinError 126\]|Error loading \"[^\"\n]+\.dll\" or one of its dependencies"
        r"|No such file or directory: '[^'\n]*[/\\]nvcc(?:\.exe)?'"
        r"|Could not run '(?!aten::)\w+::\w+' with arguments from the '(?:CUDA|HIP|XPU|MPS)' backend"
        # torch finds a cuDNN other than the one it was built with (LD_LIBRARY_PATH, a system cuDNN).
        r"|cuDNN version incompatibility: PyTorch was compiled\s+against|CUDNN_STATUS_VERSION_MISMATCH"
        r"|Cannot dlopen some GPU libraries|libcuda\.so cannot found|bitsandbytes was compiled without GPU support|has no attribute 'cadam32bit_grad_fp32'", _I),
     ('undefined symbol', 'cannot open shared object', 'dll load failed', 'cuda_home', 'no cuda runtime',
      'missingcudaexception', 'cannot read file data', 'invalid elf header', 'file too short', 'wrong elf class',
      'symbol not found', 'winerror 126', '.dll" or one of its dependencies', 'could not run',
      'libcuda.so cannot found', 'compiled without gpu support', 'cadam32bit', 'cudnn version incompatibility',
      'status_version_mismatch', 'cannot dlopen some gpu libraries',
      'visual c++', 'nvcc', 'version `', 'compiled with different cuda', 'torchvision::', 'cuda setup')),
    # The shell could not start a command (exit 127): bash's `foo: command not found`, dash's
    # `sh: 1: foo: not found`, `bash: ./run.sh: No such file or directory`, a Chinese locale's
    # `foo：未找到命令`, or a launcher reporting status 127. Tied to the shell's wording so that
    # Python's `[Errno 2] No such file or directory: 'x'` is not taken for it.
    ("MISSING_COMMAND", "MISSING_DEPENDENCY", re.compile(
        r"(?:^|[\s\"'“`(])([^\s:'\"“”`]+): command not found"
        r"|\bsh: \d+: ([^\s:'\"]+): not found"
        r"|^[^\n:]*\b(?:bash|sh|zsh|dash)(?:: line \d+)?: ([^\s:'\"]+): No such file or directory\s*$"
        r"|([^\s:：'\"]+)\s*[:：]\s*未找到命令"
        r"|(?:failed with|exit(?:ed with)?) (?:code|status) 127\b", _M),
     ('command not found', ': not found', 'no such file or directory', '未找到命令', ' 127')),
    ("COMMAND_NOT_EXECUTABLE", "MISSING_DEPENDENCY", re.compile(
        r"^[^\n:]*\b(?:bash|sh|zsh|dash)(?:: line \d+)?: ([^\s:'\"]+): Permission denied\s*$", _M),
     ('permission denied',)),
    ("TORCH_COMPILE_FAILED", "COMPILE_FAILURE", re.compile(
        r"Windows not yet supported for torch\.compile|Cannot find a working triton installation"
        r"|BackendCompilerFailed|InductorError|torch\._dynamo\.exc\.\w+|InvalidCxxCompiler"
        r"|CppCompileError|not yet supported for torch\.compile|LLVM ERROR|[/\\]\.triton[/\\]llvm[/\\]"
        r"|triton\.compiler\.errors\.\w+|CompilationError: at \d+:\d+|Failed to find C compiler"
        r"|Python\.h: No such file or directory|Command '\['which', 'c\+\+'\]' returned non-zero"
        # Inductor on Windows without MSVC; Triton compiling its CUDA driver stub (main.c) with gcc.
        r"|Compiler: cl is not found|Command '\['[^'\n]*\b(?:gcc|cc|clang)(?:\.exe)?', '[^'\n]*[/\\]main\.c'"),
     ('torch.compile', 'triton installation', 'backendcompilerfailed', 'inductorerror', 'torch._dynamo.exc',
      'invalidcxxcompiler', 'cppcompileerror', 'llvm error', '.triton', 'compilationerror', 'c compiler',
      'python.h', "'which', 'c++'", 'compiler: cl is not found', "main.c'")),
    # /dev/shm ran out (Docker gives a container 64 MB): DataLoader workers pass batches through
    # it (`/torch_<pid>_...` files), NCCL puts its intra-node buffers there (`nccl-shm`). Both
    # report the kernel's ENOSPC, "No space left on device", which is why this comes before DISK_FULL.
    ("SHM_EXHAUSTED", "OOM", re.compile(
        r"insufficient shared memory \(shm\)|Unexpected bus error encountered in worker|No space left on device[^\n]*/dev/shm"
        r"|out of shared memory|killed by signal: Bus\b|exits with return code = -7\b|unable to (?:write to|mmap|open shared memory object)[^\n]*</?torch_"
        r"|Error while creating shared memory segment|shm\.h:\d+ NCCL WARN Call to posix_fallocate failed"
        r"|failed to extend /dev/shm/"
        # SIGBUS (signal 7): a process touched shared memory that /dev/shm could not back.
        r"|exitcode\s*:\s*-7\b|Signal 7 \(SIGBUS\)|Caught signal 7 \(Bus error|Bus error \(core dumped\)", _I),
     ('shared memory', 'bus error', '/dev/shm', 'unable to write to file', 'unable to mmap', 'posix_fallocate',
      'sigbus', 'exitcode', 'killed by signal: bus', 'return code = -7')),
    ("DISK_FULL", "DATA", re.compile(
        r"No space left on device|\[Errno 28\]|Not enough disk space|Disk quota exceeded|\bENOSPC\b"
        # torch.save's zip writer when the disk or the quota fills during a checkpoint.
        r"|PytorchStreamWriter failed writing file|unexpected pos \d+ vs \d+"
        # torch's own writers when the device under the file fails mid-write (full, or quota).
        r"|write\(\): fd \d+ failed with Input/output error|write error: wrote \d+ blocks instead of \d+"
        # torch.save's zip writer could not even create the file (a full disk, a missing or read-only folder).
        r"|RuntimeError: File [^\n]+ cannot be opened\.?\s*$|PyTorchFileWriter[^\n]*(?:cannot be opened|failed)"
        r"|\bfile ?system is full\b|No usable temporary directory found", _I | _M),
     ('system is full', 'filesystem is full', 'no usable temporary directory', 'cannot be opened',
      'failed with input/output error', 'write error: wrote', 'no space left', 'errno 28', 'not enough disk space', 'disk quota', 'enospc', 'pytorchstreamwriter failed writing',
      'unexpected pos')),
    ("PERMISSION_DENIED", "DATA", re.compile(
        r"PermissionError|\[Errno 13\] Permission denied|\bEACCES\b"),
     ('permissionerror', 'errno 13', 'eacces')),
    ("TOKENIZER_INCOMPATIBLE", "TOKENIZER", re.compile(
        r"data did not match any variant of untagged enum \w+|Tokenizer class \S+ does not exist or is not currently imported"),
     ('untagged enum', 'tokenizer class')),
    ("TOKENIZER_MISSING", "TOKENIZER", re.compile(
        r"(?:FileNotFoundError|No such file|NoSuchFileException|Unable to open|Failed to open|Could not find|cannot find"
        r"|not found)[^\n]*tokeni[sz]er|no tokenizer at|AssertionError: [^\n]*tokeni[sz]er|Can't load tokenizer", _I),
     ('filenotfounderror', 'no such file', 'nosuchfileexception', 'unable to open', 'failed to open',
      'could not find', 'cannot find', 'not found', 'no tokenizer at', 'assertionerror', "can't load tokenizer")),
    ("HUB_ACCESS_DENIED", "DATA", re.compile(
        r"GatedRepoError|401 Client Error|403 Client Error|RepositoryNotFoundError|Invalid user token"
        r"|Access to model [^\n]* is restricted|You are trying to access a gated repo"),
     ('gatedrepoerror', '401 client error', '403 client error', 'repositorynotfounderror', 'invalid user token',
      'is restricted', 'gated repo')),
    ("HUB_UNREACHABLE", "DATA", re.compile(
        r"LocalEntryNotFoundError|OfflineModeIsEnabled|cannot reach Hugging Face"
        r"|host='[\w.-]*huggingface\.co'[^\n]*(?:Max retries|Failed to establish|timed out)"
        r"|We couldn't connect to 'https://huggingface\.co'|Temporary failure in name resolution|Network is unreachable"
        r"|Name or service not known|Max retries exceeded with url"
        r"|ConnectionError: Couldn.t reach https?://|CERTIFICATE_VERIFY_FAILED"),
     ('couldn’t reach http', "couldn't reach http", 'certificate_verify_failed', 'localentrynotfounderror', 'offlinemodeisenabled', 'cannot reach hugging face', "huggingface.co'",
      'name resolution', 'network is unreachable', 'service not known', 'max retries exceeded')),
    # The template's evaluator: a prepared file differs from the sha256 manifest.json recorded.
    ("DATA_CHANGED", "DATA", re.compile(r"the prepared data changed: "), ('the prepared data changed',)),
    ("DATA_CORRUPT", "DATA", re.compile(
        r"Parquet magic bytes not found|Parquet file size is 0 bytes|Couldn't deserialize thrift"
        r"|ArrowInvalid[^\n]*(?:corrupt|parquet|file)|file is corrupted|not a zip file|Unexpected end of file"
        r"|HeaderTooLarge|invalid load key|PytorchStreamReader failed|failed finding central directory"
        r"|Error while deserializing header|EOFError: Ran out of input|Unable to load weights from pytorch checkpoint"
        r"|image file is truncated", _I),
     ('image file is truncated', 'magic bytes', 'file size is 0 bytes', 'thrift', 'arrowinvalid', 'corrupted', 'not a zip file',
      'unexpected end of file', 'headertoolarge', 'invalid load key', 'pytorchstreamreader', 'central directory',
      'deserializing header', 'ran out of input', 'unable to load weights')),
    ("DATA_SHARDS_MISSING", "DATA", re.compile(
        r"(?:FileNotFoundError|No such file or directory)[^\n]*(?:\.parquet|\.bin\b|\.npy|\.arrow|\.jsonl?|shard_|[/\\]data\b|dataset)"
        r"|No (?:parquet|data|training) (?:files|shards) found|no prepared data in|dataset files not found"
        r"|the prepared split has no documents|Training dataset files not found", _I),
     ('filenotfounderror', 'no such file', 'files found', 'shards found', 'no prepared data',
      'prepared split has no documents', 'files not found')),
    # argparse refused the command line (`prog: error: the following arguments are required: x`).
    ("USAGE_ERROR", "CONFIG_INVALID", re.compile(
        r"^[\w./-]+(?:\.py)?: error: (?:the following arguments are required|unrecognized arguments"
        r"|argument [-\w/]+: (?:invalid|expected|ignored|not allowed)|one of the arguments)", _M),
     (': error: ',)),
    ("BATCH_NOT_DIVISIBLE", "CONFIG_INVALID", re.compile(
        r"assert[^\n]*TOTAL_BATCH_SIZE\s*%|TOTAL_BATCH_SIZE[^\n]*(?:not divisible|must be divisible|not a multiple)"),
     ('total_batch_size',)),
    ("WINDOW_PATTERN_INVALID", "CONFIG_INVALID", re.compile(
        r"WINDOW_PATTERN=[^\n]*use only the letters S and L"),
     ('window_pattern=',)),
    ("SHAPE_MISMATCH", "CONFIG_INVALID", re.compile(
        r"mat1 and mat2 shapes cannot be multiplied|shape '\[[^\]]*\]' is invalid for input of size"
        r"|The size of tensor a \(\d+\) must match|size mismatch for|must be divisible by"
        r"|[Ee]xpected [^\n]* to have [^\n]* but got|Expected input batch_size \(\d+\) to match target batch_size"
        r"|stack expects each tensor to be equal size|Sizes of tensors must match except in dimension"
        r"|The expanded size of the tensor \(\d+\) must match"),
     ('mat1 and mat2', 'is invalid for input of size', 'the size of tensor a', 'size mismatch for', 'must be divisible by',
      'but got', 'to match target batch_size', 'equal size', 'sizes of tensors must match', 'expanded size')),
    ("DEVICE_MISMATCH", "CONFIG_INVALID", re.compile(
        r"Expected all tensors to be on the same device|Input type \([^)]*\) and weight type \([^)]*\) should be the same"
        r"|expected (?:scalar type|mat1 and mat2 to have the same dtype)|found dtype \w+ but expected \w+"
        r"|Input, output and indices must be on the current device|Placeholder storage has not been allocated on MPS device"
        r"|Expected tensor for argument #\d+ '\w+' to have the same type as tensor for argument"
        # torch_xla given a CPU tensor for an op on the TPU (its bridge's check on the operand).
        r"|Input tensor is not an XLA tensor|aten_xla_bridge\.cpp:\d+ : Check failed: xtensor\b", _I),
     ('to have the same type as tensor', 'expected all tensors', 'should be the same', 'expected scalar type', 'same dtype', 'but expected',
      'must be on the current device', 'placeholder storage', 'not an xla tensor', 'check failed: xtensor')),
    ("AUTOGRAD_ERROR", "CONFIG_INVALID", re.compile(
        r"modified by an inplace operation|Trying to backward through the graph a second time"
        r"|element 0 of tensors does not require grad and does not have a grad_fn"
        r"|a leaf Variable that requires grad is being used in an in-place operation", _I),
     ('inplace operation', 'backward through the graph', 'does not require grad', 'in-place operation')),
    ("DEVICE_ASSERT", "CONFIG_INVALID", re.compile(
        r"device-side assert triggered|Assertion `[^`]*(?:srcIndex < srcSelectDimSize|t >= 0 && t < n_classes|index out of bounds)"),
     ('device-side assert', 'srcindex', 'n_classes', 'index out of bounds')),
    ("CHECKPOINT_MISMATCH", "CONFIG_INVALID", re.compile(
        r"Error\(s\) in loading state_dict|Missing key\(s\) in state_dict|Unexpected key\(s\) in state_dict"),
     ('in loading state_dict', 'in state_dict')),
    # The kernel's OOM killer (or a cgroup limit) ended the process: SIGKILL, exit 137 (128+9).
    ("HOST_OOM_KILLED", "OOM", re.compile(
        r"exitcode\s*:\s*-9\b|Signal 9 \(SIGKILL\)|exit code 137\b|interrupted by signal 9|killed by signal: ?Killed"
        r"|Memory cgroup out of memory|Out of memory: Kill(?:ed)? process|\boom-kill(?:er)?\b|^Killed\s*$|\]Killed\s*$"
        r"|exit status 137\b|returned non-zero exit status -9|exits with return code = -9\b"
        r"|killed due to memory pressure \(OOM\)|Task was killed due to the node running low on memory"
        # Host RAM refused an allocation instead (ENOMEM): fork() of DataLoader workers, torch's CPU
        # allocator, numpy, C++'s operator new, Python's own MemoryError.
        r"|\[Errno 12\] Cannot allocate memory|DefaultCPUAllocator: (?:can't allocate memory|not enough memory)"
        r"|Unable to allocate [\d.]+ ?[KMGTP]i?B for an array|std::bad_alloc|^MemoryError\b"
        # People telling it: "ran out of RAM", "the training process was killed" (the OOM killer's SIGKILL).
        r"|\bout of (?:RAM|system memory|host memory|CPU memory)\b"
        r"|\bprocess (?:was|is|got|gets|will be|has been|being) killed\b"
        r"|\[WinError 1455\]|paging file is too small|\boom[_ ]kill event|\bOOM Killed\b"
        r"|killed by the cgroup out-of-memory handler"
        # (r6) a shell's report of a child it ran that SIGKILL ended: bash's `line 27:   318 Killed   sh start.sh`, zsh's `zsh: killed  python train.py`.
        r"|: line \d+:\s+\d+ Killed\b|^zsh: killed\b"
        # (r7) the OOM killer named in prose ("I get a error : killed by OOM killer"), and a terminal
        # that showed nothing but the word ("the terminal shows \"killed\"", "it just prints Killed").
        r"|\bkilled by (?:the )?(?:linux |kernel(?:'s)? )?OOM[- ]?killer\b"
        r"|\b(?:shows?|showed|prints?|printed|says?|said|outputs?|displays?|displayed)[^\S\n]+(?:just |only |simply )?"
        r"(?:[\"'`\u201c\u2018]killed[\"'`\u201d\u2019]|Killed(?=[^\S\n]*(?:[.,;!]|$)))", _I | _M),
     ('memory pressure', 'running low on memory', 'return code = -9', 'exitcode', 'signal 9', '137', 'killed', 'out of memory: kill', 'oom-kill',
      'cannot allocate memory', 'defaultcpuallocator', 'for an array', 'bad_alloc', 'memoryerror', 'out of ram',
      'winerror 1455', 'paging file', 'oom_kill', 'oom kill', 'cgroup out-of-memory')),
    ("NCCL_TIMEOUT", "DISTRIBUTED", re.compile(
        r"Watchdog caught collective"
        # (r9) ProcessGroupNCCL's heartbeat monitor: its watchdog itself made no progress on the enqueued
        # collectives (a collective or CUDA call that never returns), and it takes the process down.
        r"|ProcessGroupNCCL'?s watchdog got stuck for \d+ seconds"),
     ('watchdog caught', 'watchdog got stuck')),
    ("NCCL_ERROR", "DISTRIBUTED", re.compile(
        r"NCCL error\b|DistBackendError|ncclUnhandledCudaError|ncclSystemError|ncclInternalError"
        r"|Distributed package doesn't have NCCL built in|Invalid backend: 'nccl'|ncclInvalidUsage|NCCL communicator was aborted"
        r"|ncclCommInitRank failed|ncclRemoteError|NCCL Error \d|NCCL failure [^\n]*'unhandled system error'"
        # (r3) an InfiniBand verbs call that failed (ibv_create_qp, ibv_modify_qp, ...: the IB transport between
        # nodes), and ProcessGroupNCCL's own words when it takes the process down after a failed collective.
        r"|NCCL WARN Call to ibv_\w+ failed|Some NCCL operations have failed or timed out"
        # NCCL's socket transport losing a peer (a network between nodes that drops or blocks it).
        r"|NCCL WARN (?:Net|NET/\w+) ?: (?:Call to (?:recv|send|connect)\b[^\n]*failed|socket progress error)"),
     ('nccl', 'distbackenderror')),
    ("DIST_INIT_FAILED", "DISTRIBUTED", re.compile(
        r"MPI support is disabled|Default process group has not been initialized|DistNetworkError"
        r"|connect\(\) timed out\. Original timeout was \d+ ms|RuntimeError: Socket Timeout\b"
        r"|(?:errno: 98 - |os error 98|EADDRINUSE|\[Errno 98\] )Address already in use|Address already in use \(os error 98\)"
        # torch's own TCPStore/THD words (Python's socket says OSError): the rendezvous port is taken.
        r"|RuntimeError: Address already in use\b"
        r"|server socket has failed to (?:bind|listen)|RendezvousTimeoutError|RendezvousClosedError"
        r"|The client socket has timed out after|Connection reset by peer[^\n]*(?:TCPStore|c10d)|\bc10d\b[^\n]*(?:failed|timed out)"
        r"|store->get\('\w+'\) got error: Socket Timeout|Timed out initializing process group in store based barrier"
        # gloo's transport, the c10d store and the elastic rendezvous in their own words; Ascend's HCCL.
        r"|Gloo connectFullMesh failed|gloo::EnforceNotMet|gloo[/\\]transport[/\\]\w+[/\\]\w+\.cc:\d+\]"
        r"|DistStoreError|Timed out after \d+ seconds waiting for (?:clients|workers)|Rendezvous\w*Error"
        r"|ProcessGroupHCCL[^\n]*(?:[Tt]imeout|[Ee]rror|failed)|HCCL (?:error|timeout|function error)"
        r"|The wait execution of the Notify register times out|\bEI0002\b"
        r"|Error initializing torch\.distributed using env:// rendezvous|Distributed package doesn't have (?:MPI|Gloo|UCC) built in"
        r"|retrieving ncclUniqueId from \[\d+\] via c10d key-value store[^\n]*got error"
        # (r3) the TCPStore client got a reply that is not the store's (MASTER_ADDR/port empty or another service's).
        r"|(?:Stop_waiting|ready or not_ready) response (?:is )?expected"),
     ('connectfullmesh', 'gloo', 'diststoreerror', 'waiting for clients', 'waiting for workers', 'rendezvous', 'hccl', 'notify register', 'ei0002', 'error initializing torch.distributed',
      "doesn't have mpi", "doesn't have gloo", "doesn't have ucc", 'via c10d key-value store',
      'mpi support is disabled', 'process group has not been initialized', 'distnetworkerror',
      'client socket has timed out', 'c10d', 'address already in use', 'server socket has failed', 'rendezvous',
      'store based barrier', 'original timeout was', 'socket timeout', 'response is expected', 'response expected')),
    # DDP found parameters that got no gradient (a layer unused in forward, or a branch skipped).
    ("DDP_UNUSED_PARAMETERS", "DISTRIBUTED", re.compile(
        r"Expected to have finished reduction in the prior iteration|parameters that were not used in producing loss"
        r"|Parameter indices which did not receive grad for rank", _I),
     ('finished reduction', 'not used in producing loss', 'did not receive grad')),
    ("FP16_LOSS_SCALE_OVERFLOW", "NAN_LOSS", re.compile(
        r"Overflow detected\. Skipping step|Gradient overflow\.\s+Skipping step|Minimum loss scale reached"
        r"|OVERFLOW! Rank \d+ Skipping step|Current loss scale already at minimum"),
     ('overflow detected', 'gradient overflow', 'minimum loss scale', 'overflow! rank', 'already at minimum')),
    ("LOSS_DIVERGED", "NAN_LOSS", re.compile(
        r"(?<![^\W_])loss\b['\"`]*\s*(?:is\s+|[:=]\s*|\d+\s+)?['\"]*[-+]?(?:nan|inf)\b|Loss is (?:NaN|inf)|non-finite loss|(?-i:^FAIL\s*$)"
        r"|the run diverged|val_bpb is (?:nan|inf)|nonfinite (?:grad|param)|returned nan values"
        r"|\bgrad[_ ]norm['\"]?\s*[:=]?\s*(?:nan|inf)\b"
        r"|\bloss\b(?:[^\n.;]|\.(?=\d)){0,40}\b(?:and|but|then|becomes?|became|turns?(?: into)?|goes to|went to)\s+(?:-?nan|-?inf)\b"
        # (r9) the loss told to return or give NaN: "the loss starts returning NaN values", "loss gives nan".
        r"|\bloss\b(?:[^\n.;]|\.(?=\d)){0,40}\b(?:returns?|returning|returned|gives?|giving|outputs?|outputting|shows?|showing)\s+(?:-?nan|-?inf)\b"
        # (r6) the same told in Chinese: `loss变为nan`, `loss变成了nan`, `loss出现nan` (no word boundary between the scripts).
        r"|(?<![A-Za-z])loss\s*(?:值)?\s*(?:变为|变成|变得|出现|都是|为)了?\s*(?:-?nan|-?inf)(?![A-Za-z])", _I | _M),
     ('nan', 'inf', 'fail', 'non-finite', 'nonfinite', 'diverged')),
    # A native crash: no Python exception, the process died on SIGSEGV.
    ("SEGFAULT", "UNKNOWN", re.compile(
        r"Segmentation fault|exitcode\s*:\s*-11\b|signal: Segmentation|SIGSEGV|exit code 139\b", _I),
     ('segmentation', 'exitcode', 'sigsegv', '139')),
    # A DataLoader worker died without saying how: in containers nearly always /dev/shm, else the
    # host's OOM killer. Ranked after SEGFAULT: a worker that segfaulted says so.
    ("DATALOADER_WORKER_EXITED", "OOM", re.compile(
        r"DataLoader worker \(pid\(?s?\)? [\d, ]+\) exited unexpectedly"),
     ('exited unexpectedly',)),
    # A user's own report that the loss fell to about zero (the leak shows as a too-good loss).
    ("LOSS_NEAR_ZERO", "LOSS_TOO_GOOD", re.compile(
        r"\bloss\b[^\n]{0,12}?\b(?:goes|went|go|dropp?(?:ed|s)?|fell|falls?|becomes?|became|collapses?d?)\s+(?:down\s+)?"
        r"(?:to\s+)?(?:almost\s+|nearly\s+)?(?:zero|0(?:\.0+)?)\b(?!\.\d*[1-9])"
        r"|(?:almost|nearly|near)\s+(?:0|zero)\s+(?:training\s+|train\s+|validation\s+|val\s+|and\s+)*loss", _I),
     ('zero', 'to 0', 'become 0', 'becomes 0', 'became 0', 'almost 0', 'nearly 0', 'near 0')),
]

# Codes whose line, when it is only a warning, must not outrank a real error elsewhere.
WARNING_LINE = re.compile(r"warn(?:ing)?\b|UserWarning|FutureWarning|DeprecationWarning", _I)


# Numbers inside PyTorch's OOM message (c10/cuda/CUDACachingAllocator.cpp).
_SIZE = r"([\d.]+) ?(bytes|[KMGT]i?B)"
OOM_TRIED = re.compile(r"Tried to allocate " + _SIZE)
OOM_TOTAL = re.compile(r"total capac(?:i)?ty of " + _SIZE + r" of which " + _SIZE + r" is free")
OOM_ALLOCATED = re.compile(r"Of the allocated memory " + _SIZE + r" is allocated by PyTorch")
OOM_RESERVED = re.compile(_SIZE + r" is reserved by PyTorch but unallocated")
# PyTorch's MPS allocator prints binary sizes as "GB"/"MB".
_UNIT = {"bytes": 1, "KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30, "TiB": 2 ** 40,
         "KB": 2 ** 10, "MB": 2 ** 20, "GB": 2 ** 30, "TB": 2 ** 40}
# The message before PyTorch 2.1: `(GPU 0; 15.78 GiB total capacity; 14.28 GiB already allocated; 620.69 MiB free; ...)`
OOM_OLD = re.compile(r"\(GPU \d+; " + _SIZE + r" total capacity; " + _SIZE + r" already allocated; " + _SIZE + r" free")
OOM_MPS = re.compile(r"MPS allocated: " + _SIZE + r", other allocations: " + _SIZE + r", max allowed: " + _SIZE)

# Progress lines: karpathy's `step 00042 (12.3%) | loss: 3.2 | ...` and generic `loss=3.2`.
# What the run itself printed about its shapes outranks the constants read from files:
# the template's `Batch: 4,096 tokens/step = 8 x 256 x 2 accum | ...` line, and its
# `... DEVICE_BATCH_SIZE*MAX_SEQ_LEN=1536` failure.
BATCH_LINE = re.compile(r"Batch: ([\d,]+) tokens/step = (\d+) x (\d+) x (\d+) accum")
TOKENS_PER_FWDBWD = re.compile(r"DEVICE_BATCH_SIZE\*MAX_SEQ_LEN=(\d+)")
# A count per step is a rate, not progress: the template's header says `tokens/step = 8 x ...`
# before its first step, and reading that as step 8 misdates every crash before training starts.
STEP = re.compile(r"(?<!/)(?<!per )\bstep[ =:]+(\d+)(?: \(([\d.]+)%\))?")
LOSS = re.compile(r"\b(?:[Ll]oss|LOSS)\b['\"]?\s*[:=]?\s*([-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|[Nn]a[Nn]|-?[Ii]nf)(?![\w.]))")
VAL_BPB = re.compile(r"^val_bpb:\s*([\d.]+)", _M)
ERROR_LINE = re.compile(r"^(?:[\w.]+(?:Error|Exception|Exit|Interrupt)|Killed|Traceback|FAIL)\b.*$", _M)


def scan(text, lower=None, start=0, stop=None):
    """[(code, family, last match)] of every signature found in text[start:stop] (whole lines
    only match from `start` on when it begins a line), highest priority first.

    A match on a warning line (`UserWarning: ... falling back`) ranks after every match on
    other lines: a warning the run survived is not what ended it.

    Speed: a regex over a whole 10,000-line log costs tens of milliseconds in Python's re
    (case-insensitive alternations have no literal prefix to skip ahead with). Every
    signature is one line long and names fixed words, so we look for those words with
    str.rfind (C speed) from the end, and run the regex only on the lines that hold them; a word
    absent from the log's distinct lines (`_probe`) is not searched at all.
    """
    lower = lowered(text) if lower is None else lower
    probe = _probe(lower)
    found, warned = [], []
    for code, family, regex, anchors in SIGNATURES:
        best = None
        require = REQUIRE.get(code)
        for anchor in anchors:
            if _DIGITS_TO_ZERO_ANCHOR(anchor) not in probe:
                continue   # absent from every line of the log: no need to search it
            match = _last_on_anchor_lines(text, lower, regex, anchor, require, start, stop)
            if match and (best is None or match.start() > best.start()):
                best = match
        if best is not None:
            (warned if on_warning_line(text, best) else found).append((code, family, best))
    return found + warned


_ZERO_DIGITS = str.maketrans("123456789", "000000000")


def _DIGITS_TO_ZERO_ANCHOR(anchor):
    return anchor.translate(_ZERO_DIGITS)


@functools.lru_cache(maxsize=4)
def _probe(lower):
    """The log's distinct lines with every digit made 0, for a presence test of the anchors.

    A 10,000-line log is mostly progress lines that differ only in their numbers: they collapse to
    a few dozen, so testing 250 anchor words against this costs far less than searching the whole
    log for each (str.rfind on 200 KB is 0.05-1 ms a word). Digits become 0 in the anchors too,
    so an anchor absent here is absent from the log."""
    return "\n".join(dict.fromkeys(lower.translate(_ZERO_DIGITS).split("\n")))


def on_warning_line(text, match):
    start = text.rfind("\n", 0, match.start()) + 1
    stop = text.find("\n", match.end())
    line = text[start:len(text) if stop < 0 else stop]
    return bool(WARNING_LINE.search(line)) and "Error" not in line.split("arning", 1)[0]


def lowered(text):
    """text.lower() with the same length (a few Unicode letters lower to two characters)."""
    lower = text.lower()
    if len(lower) != len(text):
        lower = "".join(ch if len(ch.lower()) != 1 else ch.lower() for ch in text)
    return lower


# Lines checked per anchor word before giving up (bounds the worst case on odd logs).
MAX_ANCHOR_LINES = 300


# Words one of which a line must hold before a signature's regex runs on it, for signatures
# whose anchors are common words ('inf' is in every 'NCCL INFO' line): a cheap `in` test
# keeps a 10,000-line log of such lines from costing a regex search each.
REQUIRE = {
    "LOSS_DIVERGED": ("loss", "fail", "non-finite", "nonfinite", "diverged", "val_bpb", "grad", "returned nan"),
    "NCCL_ERROR": ("error", "built in", "aborted", "failed", "invalidusage", "systemerror", "internalerror",
                   "unhandled"),
    "HOST_OOM_KILLED": ("-9", "sigkill", "137", "signal", "memory", "oom", "killed", "out of ram", "bad_alloc",
                        "1455", "paging file"),
    "SEGFAULT": ("segmentation", "-11", "sigsegv", "139"),
    "LOSS_NEAR_ZERO": ("loss",),
}


def _last_on_anchor_lines(text, lower, regex, anchor, require=None, begin=0, limit=None):
    limit = len(lower) if limit is None else limit
    end = limit
    for _ in range(MAX_ANCHOR_LINES):
        pos = lower.rfind(anchor, begin, end)
        if pos < 0:
            return None
        start = max(begin, lower.rfind("\n", 0, pos) + 1)
        stop = lower.find("\n", pos, limit)
        stop = limit if stop < 0 else stop
        if require and not any(word in lower[start:stop] for word in require):
            end = start
            continue
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
    match = _last(OOM_OLD, text)
    if match and "capacity" not in out:
        out["capacity"] = to_bytes(match.group(1), match.group(2))
        out.setdefault("allocated", to_bytes(match.group(3), match.group(4)))
        out["free"] = to_bytes(match.group(5), match.group(6))
    match = _last(OOM_MPS, text)
    if match and "capacity" not in out:
        out["capacity"] = to_bytes(match.group(5), match.group(6))
        out.setdefault("allocated", to_bytes(match.group(1), match.group(2)))
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


PROBE_PASSED = re.compile(r"^Causality probe: passed\b", re.M)


def causality_probe_passed(log):
    """True when the template's evaluate_bpb ran its causality probe and the model passed it."""
    return bool(PROBE_PASSED.search(log))
