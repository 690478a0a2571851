"""Accelerators other than CUDA, a project's own no-GPU checks and extension ops that never loaded,
read by the shape of their message (dev25 and the dev17/dev23 misses): one short synthetic line each,
in the shape of the real message (the corpus id it came from is named), and the near misses that
must not be read the same way."""

import pytest

from gpu_train_debug import diagnose

CASES = [
    # ROCm/HIP's own names for "no device" (gdss-6-hip-error-no-device).
    ("terminate called after throwing an instance of 'c10::HIPError'\n  what():  HIP error: hipErrorNoDevice",
     "NO_ACCELERATOR", "NO_CUDA_DEVICE"),
    ("RuntimeError: HIP error: no ROCm-capable device is detected", "NO_ACCELERATOR", "NO_CUDA_DEVICE"),
    # An aten operator without a kernel for a sparse/quantized MPS or XPU dispatch key
    # (ichigo-101-sparse-mps-backend-empty).
    ("NotImplementedError: Could not run 'aten::empty.memory_format' with arguments from the 'SparseMPS' backend.",
     "GPU_UNSUPPORTED", "BACKEND_OP_MISSING"),
    ("NotImplementedError: Could not run 'aten::add.out' with arguments from the 'QuantizedXPU' backend.",
     "GPU_UNSUPPORTED", "BACKEND_OP_MISSING"),
    # The same told in a user's words, the operator before or after the device
    # (imagen-pytorch-68-mps-ops-unsupported-prose).
    ("After moving the model to mps, some torch calls are still unsupported, including `aten::roll`.",
     "GPU_UNSUPPORTED", "BACKEND_OP_MISSING"),
    ("aten::grid_sampler_3d is not implemented yet on MPS, so training stops", "GPU_UNSUPPORTED", "BACKEND_OP_MISSING"),
    # torch_xla given a tensor left on the CPU (pytorch-xla-2960-input-not-xla-tensor).
    ("RuntimeError: Input tensor is not an XLA tensor: torch.FloatTensor", "CONFIG_INVALID", "DEVICE_MISMATCH"),
    ("RuntimeError: torch_xla/csrc/aten_xla_bridge.cpp:69 : Check failed: xtensor", "CONFIG_INVALID", "DEVICE_MISMATCH"),
    # A pasted title cut after the attribute's opening quote (ffb6d-103-torch-no-attribute-library-apex).
    ("AttributeError: module 'torch' has no attribute 'library", "MISSING_DEPENDENCY", "TORCH_TOO_OLD"),
    # A project's own check that torch sees no GPU (nnunet-892-training-on-cpu-warning, dmmr-6-cuda-not-available-exiting).
    ("WARNING!!! You are attempting to run training on a CPU (torch.cuda.is_available is False.)",
     "NO_ACCELERATOR", "NO_CUDA_DEVICE"),
    ("CUDA is not available, exiting!", "NO_ACCELERATOR", "NO_CUDA_DEVICE"),
    ("GPU unavailable - aborting", "NO_ACCELERATOR", "NO_CUDA_DEVICE"),
    # A DeepSpeed optimizer whose compiled op never loaded (xllm-17-cpu-adam-not-built).
    ("AttributeError: 'DeepSpeedCPUAdam' object has no attribute 'ds_opt_adam'", "MISSING_DEPENDENCY", "BUILD_FAILED"),
]


@pytest.mark.parametrize("text,family,code", CASES)
def test_accelerator_and_environment_wording(text, family, code):
    result = diagnose(text)
    assert (result["family"], result["codes"][0]) == (family, code), result["explanation"]


NOT_THESE = [
    # CUDA's own dispatch key missing an aten kernel is a CPU-only torch or a build question, not an MPS operator.
    ("NotImplementedError: Could not run 'aten::empty_strided' with arguments from the 'CUDA' backend.",
     "BACKEND_OP_MISSING"),
    # An operator named in prose without MPS is no statement about the accelerator.
    ("The profiler shows aten::addmm is not implemented in my custom kernel yet", "BACKEND_OP_MISSING"),
    # A run that goes on without CUDA did not stop for it.
    ("CUDA is not available, using the CPU instead", "NO_CUDA_DEVICE"),
]


@pytest.mark.parametrize("text,code", NOT_THESE)
def test_near_misses_are_not_read_as_the_class(text, code):
    assert code not in diagnose(text)["codes"]
