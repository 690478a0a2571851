"""Which torch build the ML template's pyproject.toml takes, decided from the NVIDIA driver.

`init --template ml` runs before torch is installed, so it reads the driver with nvidia-smi, not
through torch. The template pins torch 2.13, which PyTorch publishes for CUDA 12.6 and 13.0 only;
the package index (PyPI) carries the CUDA 13.0 build for Linux x86_64. NVIDIA's minimum drivers
on Linux: 580 for CUDA 13.x; 525.60.13 for CUDA 12.x (minor version compatibility). So: 580 or
newer, or no NVIDIA driver at all (macOS, CPU), keeps the package index; an older driver that runs
CUDA 12 gets PyTorch's CUDA 12.6 index for torch; anything older is refused with the upgrade hint.
Where uv is installed, init then locks the project (`uv lock`) so the night runs fixed versions.
"""

import re
import shutil
import subprocess
import time
from dataclasses import dataclass

CUDA13_DRIVER = (580,)
CUDA12_DRIVER = (525, 60, 13)
CU126_INDEX = "https://download.pytorch.org/whl/cu126"
LINUX_X86_64 = "sys_platform == 'linux' and platform_machine == 'x86_64'"
QUERY = ["--query-gpu=driver_version,name", "--format=csv,noheader"]
# Blackwell (sm_100, sm_120) needs a CUDA 12.8+ build: for torch 2.13 the CUDA 13.0 one.
_BLACKWELL = re.compile(r"Blackwell|RTX 50\d0|\bG?B[123]00\b|\bGB10\b|RTX PRO [2456]000", re.IGNORECASE)


class DriverTooOld(Exception):
    """The NVIDIA driver runs no CUDA build of the pinned torch (the message says what to do)."""


@dataclass(frozen=True)
class Gpu:
    driver: str      # as nvidia-smi prints it, e.g. "550.54.15"
    name: str        # e.g. "NVIDIA GeForce RTX 4090"


@dataclass(frozen=True)
class TorchRoute:
    build: str               # "index" (the package index's builds) or "cu126"
    gpu: Gpu | None
    why: str                 # one line, for init's summary

    def to_json(self):
        return {"build": self.build, "driver": self.gpu and self.gpu.driver, "gpu": self.gpu and self.gpu.name,
                "why": self.why}


def query_gpu(timeout=30):
    """(Gpu or None, problem or None): the first GPU nvidia-smi lists; None without nvidia-smi."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None, None
    try:
        done = subprocess.run([exe, *QUERY], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"nvidia-smi did not answer ({type(exc).__name__})"
    lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or not lines:
        said = (done.stdout + done.stderr).strip().splitlines()
        return None, f"nvidia-smi failed (exit {done.returncode}): {said[0] if said else 'no output'}"
    driver, _, name = lines[0].partition(",")
    if driver_version(driver.strip()) is None:
        return None, f"nvidia-smi printed no driver version: {lines[0]!r}"
    return Gpu(driver.strip(), name.strip()), None


def driver_version(text):
    """(580, 65, 6) for '580.65.06'; None for anything else."""
    if not re.fullmatch(r"\d+(\.\d+){0,2}", text or ""):
        return None
    return tuple(int(part) for part in text.split("."))


def decide(gpu):
    """The route for this machine's GPU (None: no NVIDIA driver); raises DriverTooOld."""
    if gpu is None:
        return TorchRoute("index", None, "no NVIDIA driver found: torch from the package index "
                                         "(CUDA 13.0 build on Linux x86_64, MPS on macOS)")
    version = driver_version(gpu.driver)
    if version >= CUDA13_DRIVER:
        return TorchRoute("index", gpu, f"driver {gpu.driver} ({gpu.name}) runs CUDA 13: torch's CUDA 13.0 "
                                        "build from the package index")
    if version < CUDA12_DRIVER:
        raise DriverTooOld(
            f"the NVIDIA driver {gpu.driver} ({gpu.name}) is too old for any build of torch 2.13 (CUDA 12.6 "
            "needs driver 525.60.13 or newer, CUDA 13.0 needs 580 or newer); update the NVIDIA driver, "
            "preferably to 580 or newer (https://www.nvidia.com/drivers), then run init again")
    if _BLACKWELL.search(gpu.name):
        raise DriverTooOld(
            f"{gpu.name} is a Blackwell GPU, which needs torch's CUDA 13.0 build, and its driver {gpu.driver} "
            "is older than 580, the minimum for CUDA 13; update the NVIDIA driver to 580 or newer "
            "(https://www.nvidia.com/drivers), then run init again")
    return TorchRoute("cu126", gpu, f"driver {gpu.driver} ({gpu.name}) is older than 580 (CUDA 13): torch's "
                                    "CUDA 12.6 build from PyTorch's index")


def pyproject_text(template, route):
    """The template's pyproject.toml as this machine needs it: unchanged, or with PyTorch's CUDA
    12.6 index for torch on Linux x86_64 and a comment saying why."""
    if route.build != "cu126":
        return template
    return template.rstrip("\n") + f"""

# Written by `autoresearch init`: this machine's NVIDIA driver, {route.gpu.driver} ({route.gpu.name}),
# is older than 580, the minimum for torch's CUDA 13.0 build on the package index; CUDA 12 runs on
# drivers from 525.60.13 on. So torch comes from PyTorch's CUDA 12.6 index on Linux x86_64 (the
# index serves torch only; everything else still comes from the package index). After a driver
# update to 580 or newer, delete the two sections below and run `uv lock`.
[[tool.uv.index]]
name = "pytorch-cu126"
url = "{CU126_INDEX}"
explicit = true

[tool.uv.sources]
torch = [{{ index = "pytorch-cu126", marker = "{LINUX_X86_64}" }}]
"""


@dataclass(frozen=True)
class LockResult:
    locked: bool
    seconds: float
    problem: str | None      # one line when not locked


def lock(root, timeout=600):
    """`uv lock` in `root` where uv is installed: the night then syncs the versions resolved now."""
    uv = shutil.which("uv")
    if not uv:
        return LockResult(False, 0.0, "uv is not installed, so nothing was locked (`uv sync` will lock)")
    t0 = time.monotonic()
    try:
        done = subprocess.run([uv, "lock"], cwd=root, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return LockResult(False, time.monotonic() - t0, f"`uv lock` took over {timeout} s; run it again yourself")
    except OSError as exc:
        return LockResult(False, time.monotonic() - t0, f"`uv lock` could not start ({exc})")
    seconds = time.monotonic() - t0
    if done.returncode != 0:
        return LockResult(False, seconds, f"`uv lock` failed ({_uv_error(done.stderr)}); run `uv lock` "
                                          "again where the package indexes are reachable")
    return LockResult(True, seconds, None)


def _uv_error(stderr):
    """uv's error line and its first cause (which names the URL or package), as one line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    error = next((i for i, line in enumerate(lines) if line.startswith("error:")), None)
    if error is None:
        return (lines[-1] if lines else "no output")[:300]
    cause = next((line for line in lines[error + 1:] if line.startswith(("cause:", "Caused by:"))), "")
    return f"{lines[error]} {cause}".strip()[:400]
