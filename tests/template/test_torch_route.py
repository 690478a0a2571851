"""`init --template ml` picks the torch build from the NVIDIA driver and locks the template against
the real package index.

nvidia-smi is the device boundary: a script on PATH answers the query init makes, as the real one
prints it (`550.54.15, NVIDIA GeForce RTX 4090`). uv is the real, pinned one (.tools/uv), resolving
against PyPI with no local wheel. PyTorch's own index (download.pytorch.org) serves the CUDA 12.6
route; where it cannot be reached (this machine), the test checks that uv went there for torch and
failed only there, and that the index and source entries are exactly right.
"""

import json
import os
from pathlib import Path

import pytest

from autoresearch.setup import torch_route
from tests.conftest import require_tool, run_cli

from .template_helpers import ROOT
from gitrepo import git, git_repo

tomllib = pytest.importorskip("tomllib")

TEMPLATE = (ROOT / "assets" / "pyproject.toml").read_text()
QUERY = " ".join(torch_route.QUERY)


def fake_nvidia_smi(folder, answer=None, exit_code=0):
    """A nvidia-smi that answers init's query only (any other arguments: exit 2)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "nvidia-smi"
    lines = "" if answer is None else f"echo \"{answer}\"\n"
    script.write_text(f'#!/bin/sh\n[ "$*" = "{QUERY}" ] || exit 2\n{lines}exit {exit_code}\n')
    script.chmod(0o755)
    return folder


def _path_without(*tools):
    """PATH with no folder that holds one of `tools` (a developer's own uv or nvidia-smi)."""
    keep = [d for d in os.environ["PATH"].split(os.pathsep)
            if d and not any((Path(d) / t).exists() for t in tools)]
    return os.pathsep.join(keep)


def _uv():
    return require_tool(ROOT / ".tools" / "uv" / "bin" / "uv", "run scripts/install-test-tools.sh (pip installs uv)")


def init_ml(tmp_path, fake_bin=None, uv=None, timeout=600):
    lab = git_repo(tmp_path / "lab")
    path = [str(fake_bin)] if fake_bin else []
    path += [str(Path(uv).parent)] if uv else []
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "VIRTUAL_ENV"))}
    env.update(PATH=os.pathsep.join(path + [_path_without("uv", "nvidia-smi")]), AUTORESEARCH_HOME=str(ROOT),
               UV_CACHE_DIR=str(tmp_path / "uv-cache"))   # cold: the lock resolves against the index itself
    done = run_cli(["init", "--template", "ml", "--noise-runs", "1", "--json"], cwd=lab, env=env, timeout=timeout)
    return lab, done


def packages(lab, name):
    return [p for p in tomllib.loads((lab / "uv.lock").read_text())["package"] if p["name"] == name]


def wheel_names(package):
    return [w["url"].rsplit("/", 1)[1] for w in package.get("wheels", [])]


def test_a_current_driver_keeps_the_package_index_and_init_locks_it(tmp_path):
    """Driver 580+: the template as it ships, locked by the real uv against PyPI: Linux x86_64 gets
    torch's CUDA 13 build, macOS arm64 a wheel, Linux x86_64 a `kernels` that selects FA3's builds."""
    uv = _uv()
    lab, done = init_ml(tmp_path, fake_nvidia_smi(tmp_path / "bin", "580.95.05, NVIDIA H100 80GB HBM3"), uv)
    assert done.returncode == 0, done.stdout + done.stderr
    out = json.loads(done.stdout)
    assert out["torch"]["build"] == "index" and out["torch"]["driver"] == "580.95.05"
    assert out["lock"]["locked"], out["lock"]
    assert (lab / "pyproject.toml").read_text() == TEMPLATE
    tracked = git(lab, "ls-files").stdout.split()
    assert "uv.lock" in tracked and "pyproject.toml" in tracked
    [torch] = packages(lab, "torch")
    assert torch["version"] == "2.13.0" and torch["source"] == {"registry": "https://pypi.org/simple"}
    wheels = wheel_names(torch)
    assert any("manylinux" in w and w.endswith("_x86_64.whl") for w in wheels)
    assert any("macosx" in w and w.endswith("_arm64.whl") for w in wheels)
    linux_deps = {d["name"] for d in torch["dependencies"] if "sys_platform == 'linux'" in d.get("marker", "")}
    assert {"nvidia-cudnn-cu13", "nvidia-nccl-cu13", "triton"} <= linux_deps, linux_deps   # the CUDA 13 build
    [kernels] = packages(lab, "kernels")
    assert tuple(int(x) for x in kernels["version"].split(".")[:3]) >= (0, 15, 1)


def test_an_older_driver_gets_pytorchs_cuda_12_6_index_for_torch(tmp_path):
    uv = _uv()
    lab, done = init_ml(tmp_path, fake_nvidia_smi(tmp_path / "bin", "550.54.15, NVIDIA GeForce RTX 4090"), uv)
    assert done.returncode == 0, done.stdout + done.stderr
    out = json.loads(done.stdout)
    assert out["torch"]["build"] == "cu126"
    text = (lab / "pyproject.toml").read_text()
    assert text.startswith(TEMPLATE.rstrip("\n"))
    added = text[len(TEMPLATE.rstrip("\n")):]
    assert "550.54.15 (NVIDIA GeForce RTX 4090)" in added and "older than 580" in added   # says why
    project = tomllib.loads(text)
    assert project["tool"]["uv"]["index"] == [
        {"name": "pytorch-cu126", "url": "https://download.pytorch.org/whl/cu126", "explicit": True}]
    assert project["tool"]["uv"]["sources"] == {
        "torch": [{"index": "pytorch-cu126", "marker": "sys_platform == 'linux' and platform_machine == 'x86_64'"}]}
    assert project["project"]["dependencies"] == tomllib.loads(TEMPLATE)["project"]["dependencies"]
    if out["lock"]["locked"]:   # PyTorch's index reachable: Linux x86_64 gets the CUDA 12 build
        linux = [t for t in packages(lab, "torch") if t["version"] == "2.13.0+cu126"]
        assert linux and linux[0]["source"] == {"registry": "https://download.pytorch.org/whl/cu126"}
        assert any(d["name"].endswith("-cu12") for d in linux[0]["dependencies"])
        assert any(w.endswith("_arm64.whl") for t in packages(lab, "torch") for w in wheel_names(t))
    else:   # not reachable from here: uv asked PyTorch's CUDA 12.6 index for torch, and failed there
        problem = out["lock"]["problem"]
        assert "download.pytorch.org/whl/cu126/torch" in problem, problem
        assert not (lab / "uv.lock").exists()


def test_a_driver_too_old_for_torch_is_refused_before_anything_is_written(tmp_path):
    lab, done = init_ml(tmp_path, fake_nvidia_smi(tmp_path / "bin", "470.256.02, Tesla V100-SXM2-16GB"))
    assert done.returncode != 0
    said = json.loads(done.stdout)["message"]
    assert "470.256.02" in said and "update the NVIDIA driver" in said and "580" in said
    assert not (lab / "pyproject.toml").exists() and not (lab / ".autoresearch").exists()


FAILED = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
          "Make sure that the latest NVIDIA driver is installed and running.")


@pytest.mark.parametrize("answer, exit_code", [(None, None), (FAILED, 9)])
def test_no_driver_keeps_the_package_index_and_without_uv_nothing_is_locked(tmp_path, answer, exit_code):
    """No nvidia-smi (macOS, a CPU machine), or one that fails: the template as it ships."""
    fake = None if exit_code is None else fake_nvidia_smi(tmp_path / "bin", answer, exit_code)
    lab, done = init_ml(tmp_path, fake)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["torch"]["build"] == "index" and out["torch"]["driver"] is None
    assert (lab / "pyproject.toml").read_text() == TEMPLATE and not (lab / "uv.lock").exists()
    assert not out["lock"]["locked"] and "uv is not installed" in out["lock"]["problem"]
    if exit_code:
        assert any("nvidia-smi failed (exit 9): NVIDIA-SMI has failed" in w for w in out["warnings"])


@pytest.mark.parametrize("driver, name, build", [
    ("580.65.06", "NVIDIA H100 80GB HBM3", "index"), ("590.44.01", "NVIDIA GeForce RTX 5090", "index"),
    ("579.99", "NVIDIA A100-SXM4-80GB", "cu126"), ("525.60.13", "Tesla T4", "cu126"),
    ("525.60.12", "Tesla T4", None), ("575.51.03", "NVIDIA GeForce RTX 5090", None),
    ("575.57.08", "NVIDIA B200", None),
])
def test_the_driver_boundaries(driver, name, build):
    """580: CUDA 13's minimum; 525.60.13: CUDA 12's (minor version compatibility); Blackwell needs
    the CUDA 13.0 build of torch 2.13, so 580."""
    gpu = torch_route.Gpu(driver, name)
    if build is None:
        with pytest.raises(torch_route.DriverTooOld, match="update the NVIDIA driver"):
            torch_route.decide(gpu)
    else:
        assert torch_route.decide(gpu).build == build
