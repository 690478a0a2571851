"""Environment, build, accelerator, distributed and resource failures read by the message's shape:
one line each, in the words each runtime uses (written here, not copied from a thread)."""

import pytest

from gpu_train_debug import diagnose

CASES = [
    # Memory, whatever the allocator.
    ("Out of memory error on GPU 0. Cannot allocate 98.0MB memory on GPU 0", "OOM"),
    ("RuntimeError: ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY", "OOM"),
    ("OSError: [Errno 12] Cannot allocate memory", "OOM"),
    ("DefaultCPUAllocator: can't allocate memory: you tried to allocate 1024 bytes", "OOM"),
    ("OSError: [WinError 1455] The paging file is too small for this operation to complete. "
     "Error loading \"C:\\env\\torch\\lib\\cudnn64_8.dll\" or one of its dependencies.", "OOM"),
    ("slurmstepd: error: Detected 1 oom_kill event in StepId=7.batch", "OOM"),
    # Drivers and devices.
    ("RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable", "NO_ACCELERATOR"),
    ("Failed to initialize NVML: Driver/library version mismatch", "NO_ACCELERATOR"),
    ("RuntimeError: CUDA error: the provided PTX was compiled with an unsupported toolchain.", "NO_ACCELERATOR"),
    ("RuntimeError: Unexpected error from cudaGetDeviceCount(). Error 802: system not yet initialized", "NO_ACCELERATOR"),
    # GPUs older (or newer) than the build, and their dtypes.
    ("RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasGemmEx(h, a, CUDA_R_16BF, b)`",
     "DTYPE_UNSUPPORTED"),
    ("Found GPU0 Tesla K40 which is of cuda capability 3.5. PyTorch no longer supports this GPU because it is too old.",
     "GPU_UNSUPPORTED"),
    # Builds and binaries.
    ("error: command '/usr/local/cuda/bin/nvcc' failed with exit code 1", "MISSING_DEPENDENCY"),
    ("/usr/bin/ld: cannot find -lcudart", "MISSING_DEPENDENCY"),
    ("ImportError: /env/lib/libcufft.so.10: cannot read file data", "MISSING_DEPENDENCY"),
    ("error: [Errno 2] No such file or directory: ':/usr/local/cuda/bin/nvcc'", "MISSING_DEPENDENCY"),
    ("deepspeed.ops.op_builder.builder.CUDAMismatchException: >- DeepSpeed Op Builder: Installed CUDA version 12.1 "
     "does not match the version torch was compiled with 11.8", "MISSING_DEPENDENCY"),
    ("NotImplementedError: Could not run 'torchvision::nms' with arguments from the 'CUDA' backend.",
     "MISSING_DEPENDENCY"),
    ("RuntimeError: Failed to import transformers.trainer because of the following error (look up to see its "
     "traceback):\nNo module named 'torch._six'", "MISSING_DEPENDENCY"),
    ("torch.cuda.is_available() returns False", "NO_ACCELERATOR"),
    # Launchers asked for GPUs torch does not see.
    ("MisconfigurationException: You requested gpu: [0, 1, 2]\n But your machine only has: [0]", "NO_ACCELERATOR"),
    ("AssertionError: Invalid CUDA 'device=1' requested. Use 'device=cpu' or pass valid CUDA device(s)", "NO_ACCELERATOR"),
    ("lightning_fabric.utilities.exceptions.MisconfigurationException: `CUDAAccelerator` can not run on your system "
     "since the accelerator is not available.", "NO_ACCELERATOR"),
    ("RuntimeError: No HIP GPUs are available", "NO_ACCELERATOR"),
    ("torch.cuda.DeferredCudaCallError: CUDA call failed lazily at initialization with error: device >= 0 && "
     "device < num_gpus INTERNAL ASSERT FAILED at \"CUDAContext.cpp\":50. device=3, num_gpus=2", "NO_ACCELERATOR"),
    # Packages asked for by version that are not installed; a cuDNN other than torch's.
    ("importlib.metadata.PackageNotFoundError: No package metadata was found for peft", "MISSING_DEPENDENCY"),
    ("pkg_resources.DistributionNotFound: The 'tokenizers>=0.13' distribution was not found and is required by "
     "transformers", "MISSING_DEPENDENCY"),
    ("RuntimeError: cuDNN version incompatibility: PyTorch was compiled  against (9, 1, 0) but found runtime version "
     "(8, 9, 7).", "MISSING_DEPENDENCY"),
    ("RuntimeError: Error compiling objects for extension", "MISSING_DEPENDENCY"),
    ("ValueError: Invalid backend: 'nccl'", "DISTRIBUTED"),
    ("RuntimeError: The device (Intel(R) Arc(TM) A770 Graphics) does not support querying the free memory",
     "GPU_UNSUPPORTED"),
    # A build's compiler failing, however the command is quoted.
    ('error: command "/opt/cuda/bin/nvcc" failed with exit status 2', "MISSING_DEPENDENCY"),
    ("error command \u201c/usr/bin/x86_64-linux-gnu-gcc\u201d failed with exit status1", "MISSING_DEPENDENCY"),
    # fp16 AMP's scaler given bf16 gradients (its CUDA kernel has no bf16 version).
    ("RuntimeError: \"_amp_foreach_non_finite_check_and_unscale_cuda\" not implemented for 'BFloat16'", "CONFIG_INVALID"),
    # TensorFlow's loader warning is not the cause of a Python error of another kind printed with it.
    ("Traceback (most recent call last):\n  File \"train.py\", line 100, in train\n    plots = not opt.epochs\n"
     "AttributeError: 'Namespace' object has no attribute 'epochs'\n2022-07-15 16:05:06.789337: W tensorflow/stream_executor/"
     "platform/default/dso_loader.cc:59] Could not load dynamic library 'libcudart.so.10.1'; dlerror: libcudart.so.10.1: "
     "cannot open shared object file: No such file or directory", "CONFIG_INVALID"),
    # torchvision's warning for its image extension, wrapped onto a second line, is not the cause either.
    ("/env/lib/python3.9/site-packages/torchvision/io/image.py:13: UserWarning: Failed to load image Python extension: "
     "libtorch_cuda_cu\n.so: cannot open shared object file: No such file or directory\n  warn(f\"Failed to load image "
     "Python extension: {e}\")\nTraceback (most recent call last):\n  File \"train.py\", line 81, in <module>\n    "
     "logger = Logger(config, git_info)\nNameError: name 'git_info' is not defined", "CONFIG_INVALID"),
    # ... but it is when nothing else failed (TensorFlow ran on the CPU).
    ("2021-04-23 23:23:33.996250: W tensorflow/stream_executor/platform/default/dso_loader.cc:55] Could not load dynamic "
     "library 'libcudart.so.10.0'; dlerror: libcudart.so.10.0: cannot open shared object file: No such file or directory",
     "MISSING_DEPENDENCY"),
    # Collectives other than NCCL's own words, and runs started without a launcher.
    ("ValueError: Error initializing torch.distributed using env:// rendezvous: environment variable RANK expected, "
     "but not set", "DISTRIBUTED"),
    ("RuntimeError: Gloo connectFullMesh failed with [../gloo/transport/tcp/pair.cc:144] no error", "DISTRIBUTED"),
    ("torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/3 clients joined.",
     "DISTRIBUTED"),
    ("EI0002: The wait execution of the Notify register times out.", "DISTRIBUTED"),
    ("RuntimeError: Address already in use at /pytorch/torch/lib/THD/process_group/General.cpp:20", "DISTRIBUTED"),
    ("worker-3:83:2526 [0] misc/socket.cc:503 NCCL WARN Net : Call to recv from 10.0.0.7<41468> failed : "
     "Connection reset by peer", "DISTRIBUTED"),
    ("node1:15:91 [3] transport/net_socket.cc:219 NCCL WARN NET/Socket : socket progress error", "DISTRIBUTED"),
    # More runtimes' words for a known cause (no corpus log yet; written from the libraries' messages).
    ("Some of your processes may have been killed by the cgroup out-of-memory handler.", "OOM"),
    ("ValueError: fp16 mixed precision requires a GPU (not 'mps').", "NO_ACCELERATOR"),
    ("ValueError: FP16 Mixed precision training with AMP or APEX (`--fp16`) and FP16 half precision evaluation "
     "(`--fp16_full_eval`) can only be used on CUDA or MLU devices or NPU devices", "NO_ACCELERATOR"),
    ("RuntimeError: cuda runtime error (30) : unknown error at /pytorch/aten/src/THC/THCGeneral.cpp:51", "NO_ACCELERATOR"),
    ("torch.cuda.is_available() returned False", "NO_ACCELERATOR"),
    ("subprocess.CalledProcessError: Command '['/usr/bin/gcc', '/tmp/tmpab/main.c', '-O3', '-shared', '-fPIC', '-o', "
     "'/tmp/tmpab/cuda_utils.so', '-lcuda']' returned non-zero exit status 1.", "COMPILE_FAILURE"),
    ("torch._inductor.exc.InductorError: RuntimeError: Compiler: cl is not found.", "COMPILE_FAILURE"),
    ("NotImplementedError: Could not run 'aten::_upsample_bilinear2d_aa.out' with arguments from the 'MPS' backend.",
     "GPU_UNSUPPORTED"),
    ("RuntimeError: CUDA error: invalid device function", "GPU_UNSUPPORTED"),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_ARCH_MISMATCH when calling `cublasLtMatmul(...)`", "GPU_UNSUPPORTED"),
    ("ptxas fatal   : Value 'sm_90a' is not defined for option 'gpu-name'", "MISSING_DEPENDENCY"),
    ("ERROR: Cannot install torch==2.1.0 and torchvision==0.17.0 because these package versions have conflicting "
     "dependencies.", "MISSING_DEPENDENCY"),
    ("ValueError: numpy.dtype size changed, may indicate binary incompatibility. Expected 96 from C header, got 88 "
     "from PyObject", "MISSING_DEPENDENCY"),
    ("RuntimeError: cuDNN error: CUDNN_STATUS_VERSION_MISMATCH", "MISSING_DEPENDENCY"),
    # ... and what stays UNKNOWN: an op that needs CUDA from a CPU-only build is not read as MPS.
    ("NotImplementedError: Could not run 'aten::empty_strided' with arguments from the 'CUDA' backend.", "UNKNOWN"),
    # Precision first: without the CUDA error NCCL passes on, the cause is not in the log.
    ("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:33, unhandled cuda error, NCCL version 2.7.8", "UNKNOWN"),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasGemmEx(h, a, CUDA_R_16F, b)`",
     "UNKNOWN"),
    ("FileNotFoundError: [Errno 2] No usable temporary directory found in ['/tmp', '/var/tmp', '/usr/tmp']", "DATA"),
    # A GPU checkpoint on a machine without CUDA: the fix may be map_location or a GPU; no family.
    ("RuntimeError: Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False.",
     "UNKNOWN"),
    # A user's own class refusing a keyword says nothing about versions.
    ("TypeError: Net.__init__() got an unexpected keyword argument 'depht'", "UNKNOWN"),
]


@pytest.mark.parametrize("line, family", CASES)
def test_a_wording_is_read_for_its_family(line, family):
    assert diagnose(line + "\n", {}, {"status": "crash"})["family"] == family


def test_enospc_beside_a_multiprocessing_lock_is_shared_memory_not_the_disk():
    log = ("UserWarning: [Errno 28] No space left on device.  joblib will operate in serial mode\n"
           "  File \"/env/lib/python3.8/multiprocessing/queues.py\", line 336, in __init__\n"
           "    self._rlock = ctx.Lock()\n")
    assert diagnose(log, {}, {"status": "crash"})["codes"] == ["SHM_EXHAUSTED"]
