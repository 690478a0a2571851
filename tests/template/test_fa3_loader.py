"""The harness's Flash Attention 3 load against the real, newest `kernels` package (the project's
test extra installs it), with the Hub offline: the call passes `kernels`' own checks of its
arguments and of the repository and fails only because the kernel was never downloaded here."""

import json
import os
import subprocess
import sys

import pytest

PROBE = """
import json
import harness
from kernels import get_kernel
import kernels
out = {"kernels": getattr(kernels, "__version__", "?")}
try:
    harness.load_fa3((9, 0))
    out["ours"] = None
except Exception as e:
    out["ours"] = [type(e).__name__, str(e), harness.fa3_unavailable(e)]
try:   # the call the harness made before: no version
    get_kernel(harness.FA3_REPO)
    out["unversioned"] = None
except Exception as e:
    out["unversioned"] = [type(e).__name__, str(e)]
print(json.dumps(out))
"""


def _kernels_installed(env):
    done = subprocess.run([sys.executable, "-c", "import kernels"], env=env, capture_output=True, text=True)
    if done.returncode == 0:
        return
    message = "the `kernels` package is not installed (pip install -e '.[test]' installs it)"
    if os.environ.get("AUTORESEARCH_REQUIRE_ALL") == "1":
        pytest.fail(message)
    pytest.skip(message)


def test_the_fa3_load_passes_kernels_checks_and_fails_only_for_the_download(research_repo, tmp_path):
    repo, env = research_repo
    env = dict(env, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))   # an empty cache, no network
    env.pop("KERNELS_CACHE", None)
    env.pop("LOCAL_KERNELS", None)
    _kernels_installed(env)
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    kind, message, said = out["ours"]
    assert "kernels-community/flash-attn3" in message
    assert "offline" in message.lower() and "cache" in message.lower(), message   # the missing download
    assert "must be specified" not in message and "trust" not in message.lower()
    assert said.startswith(f"{kind}: ") and "Fix: " in said and "huggingface.co" in said
    # kernels' own argument check is live in this version: the unversioned call stops there
    assert out["unversioned"] is not None and "version or revision must be specified" in out["unversioned"][1]
