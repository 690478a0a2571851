"""harness.py: the machine choices up to the device boundary, the ast check that lets the
evaluator import train.py, and the optimizer details that follow karpathy/autoresearch."""

import os
import stat

import pytest
import torch

from .template_helpers import ASSETS


def test_bf16_only_where_native_and_fp16_with_scaling_before_ampere(modules):
    h = modules[1].harness
    assert h.dtype_for("cuda", (9, 0)) == torch.bfloat16
    assert h.dtype_for("cuda", (8, 0)) == torch.bfloat16
    # V100 / T4: torch.cuda.is_bf16_supported() says True (emulation); the harness says fp16.
    assert h.dtype_for("cuda", (7, 0)) == torch.float16 and h.dtype_for("cuda", (7, 5)) == torch.float16
    assert h.muon_dtype(torch.device("cpu")) == torch.float32


def test_block_mask_cache_key_is_the_same_for_cuda_and_cuda_0(modules):
    h = modules[1].harness
    assert h.device_key("cuda", current_index=lambda: 0) == h.device_key("cuda:0") == "cuda:0"
    assert h.device_key("cuda", current_index=lambda: 1) == "cuda:1"
    assert h.device_key("cpu") == "cpu"


@pytest.mark.parametrize("visible, index, target", [
    (None, 0, ("index", 0)), ("", 1, ("index", 1)), ("3", 0, ("index", 3)), ("2,5", 1, ("index", 5)),
    ("GPU-8f3a1c2e-0000-1111-2222-333344445555", 0, ("uuid", "GPU-8f3a1c2e-0000-1111-2222-333344445555")),
])
def test_nvml_follows_cuda_visible_devices(modules, visible, index, target):
    assert modules[1].harness.nvml_target(index, visible or "") == target


def test_mfu_peak_uses_tf32_for_fp32_matmuls(modules):
    prepare, train = modules
    assert prepare.peak_flops("NVIDIA H100 80GB HBM3", "tf32") == pytest.approx(494.7e12)
    assert prepare.peak_flops("NVIDIA GeForce RTX 4090", "tf32") == pytest.approx(82.6e12)
    assert prepare.peak_flops("Tesla T4", "tf32") is None      # no TF32 before Ampere: MFU n/a


def test_a_gpu_torch_cannot_use_is_a_refusal_with_the_fix(modules, tmp_path, monkeypatch):
    """nvidia-smi (a script here, printing what the real one prints for `-L`) sees a GPU; this
    torch has no CUDA: the harness refuses instead of training on the CPU."""
    h = modules[1].harness
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-8f3a1c2e-0000-1111-2222-333344445555)'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("AUTORESEARCH_DEVICE", raising=False)
    with pytest.raises(h.HarnessError, match="nvidia-smi sees NVIDIA H100 80GB HBM3 but torch .* `uv sync`"):
        h.pick_device()
    monkeypatch.setenv("AUTORESEARCH_DEVICE", "cpu")
    assert h.pick_device().type == "cpu"


def test_compile_failure_is_a_loud_crash(modules):
    h = modules[1].harness

    def broken(*args):
        raise RuntimeError("BackendCompilerFailed: backend='inductor' raised: CompilationError")

    wrapped = h._LoudCompiled(broken)
    with pytest.raises(h.HarnessError, match="torch.compile failed .*COMPILE = False"):
        wrapped(torch.zeros(1))
    assert "suppress_errors = True" not in (ASSETS / "harness.py").read_text()


def test_normuon_statistics_run_along_the_larger_dimension(modules):
    train = modules[1]
    for shape, second in (((8, 32), (1, 1, 32)), ((32, 8), (1, 32, 1)), ((16, 16), (1, 16, 1))):
        p = torch.nn.Parameter(torch.randn(*shape))
        p.grad = torch.randn(*shape)
        opt = train.MuonAdamW([dict(params=[p], lr=0.02, kind="muon")])
        opt.step()
        assert tuple(opt.state[p]["second_buffer"].shape) == second


def test_cautious_weight_decay_uses_the_aspect_scaled_lr(modules):
    """With a zero update direction the whole step is the decay: lr * sqrt(rows/cols) * wd * p."""
    train = modules[1]
    rows, cols = 32, 8
    params = torch.ones(1, rows, cols)
    zeros = torch.zeros(1, rows, cols)
    t = lambda v: torch.tensor(float(v))   # noqa: E731
    train.muon_step(zeros.clone(), params, zeros.clone(), torch.zeros(1, rows, 1), t(0.0), t(0.1 * 2.0),
                    t(0.5), t(0.95), -1, torch.float32)
    torch.testing.assert_close(params, torch.full((1, rows, cols), 1 - 0.1 * 2.0 * 0.5))


TOP_LEVEL_REFUSED = [
    "print('hello')\n",
    "import prepare\nprepare.EVAL_TOKENS = 1\n",
    "X = open('/etc/passwd').read()\n",
    "if True:\n    import os\n",
    "for i in range(3):\n    pass\n",
    "@register()\ndef f():\n    pass\n",
    "def f(x=print('at import')):\n    pass\n",
    "class A:\n    x = print('at import')\n",
]
ANYWHERE_REFUSED = [
    "import harness\ndef main():\n    harness.evaluate_split = None\n",
    "import prepare as p\ndef main():\n    p.MAX_SEQ_LEN = 1\n",
    "def main():\n    setattr(object, 'x', 1)\n",
    "import torch.nn.functional as F\ndef main():\n    F.cross_entropy = None\n",
    "import torch\ndef main():\n    torch.sys.modules['x'] = 1\n",
    "import sys\n",
    "import gc\n",
    "import torch\nclass T(torch.Tensor):\n    def __torch_function__(self, *a):\n        return 0\n",
    "def main():\n    global X\n",
    "import torch\ndef f():\n    return torch.load('val.bin')\n",
    "import numpy as np\ndef f():\n    return np.memmap('x')\n",
]


@pytest.mark.parametrize("source", TOP_LEVEL_REFUSED + ANYWHERE_REFUSED)
def test_the_evaluator_refuses_a_train_py_that_runs_more_than_definitions(modules, source):
    h = modules[1].harness
    with pytest.raises(h.UnsafeTrainPy):
        h.check_train_py(source)


def test_the_template_and_torch_knobs_pass_the_check(modules):
    h = modules[1].harness
    h.check_train_py((ASSETS / "train.py").read_text())
    h.check_train_py("import torch\ndef main():\n    torch.backends.cudnn.benchmark = True\n"
                     "    torch._inductor.config.coordinate_descent_tuning = True\n"
                     "if __name__ == '__main__':\n    main()\n")
