"""A hardware fingerprint for the config header: results from different machines don't compare.

Standard library only, and fast: `nvidia-smi` is asked once with a short timeout, when present.
"""

import os
import platform
import shutil
import subprocess


def fingerprint():
    info = {
        "host": platform.node(),
        "system": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "gpus": _nvidia_gpus(),
    }
    cpu = _cpu_model()
    if cpu:
        info["cpu"] = cpu
    return info


def _cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _nvidia_gpus():
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    try:
        out = subprocess.run([exe, "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3:
            name, driver, memory = parts
            gpus.append({"name": name, "driver": driver,
                         "memory_mib": int(memory) if memory.isdigit() else memory})
    return gpus
