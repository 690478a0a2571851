"""train.py trains sealed off the hidden holdout (Landlock, Linux): `harness.py train` confines
itself and then becomes train.py, so neither train.py nor anything it starts can read the
holdout's files, link them elsewhere or rename them away; the evaluator, started outside the
seal, still reads them and writes holdout.json."""

import os
import re
import shutil
import subprocess
import sys

import pytest

from .template_helpers import ROOT

sys.path.insert(0, str(ROOT / "src"))
from autoresearch.isolation import sandbox  # noqa: E402  (only to ask whether this kernel has Landlock)

sys.path.pop(0)

needs_landlock = pytest.mark.skipif(not sandbox.abi(), reason="Landlock not available on this kernel")

PROBE = r"""
import os, sys, shutil
prepared = sys.argv[1]
out = {}
for name in ("holdout.bin", "holdout.idx.npy", "val.bin", "train.bin", "manifest.json"):
    try:
        with open(os.path.join(prepared, name), "rb") as f:
            f.read(16)
        out[name] = "read"
    except PermissionError:
        out[name] = "denied"
for what, act in (("link", lambda: os.link(os.path.join(prepared, "holdout.bin"), sys.argv[2] + "/h")),
                  ("rename", lambda: os.rename(os.path.join(prepared, "holdout.bin"), sys.argv[2] + "/h")),
                  ("copy", lambda: shutil.copy(os.path.join(prepared, "holdout.bin"), sys.argv[2] + "/h"))):
    try:
        act()
        out[what] = "done"
    except OSError:
        out[what] = "denied"
print(sorted(out.items()))
"""


def test_the_launcher_finds_the_holdout_where_prepare_puts_it(research_repo, modules, monkeypatch):
    repo, env = research_repo
    prepare, train = modules
    monkeypatch.setenv("AUTORESEARCH_CACHE", env["AUTORESEARCH_CACHE"])
    found = set(train.harness.holdout_files())
    assert {os.path.realpath(prepare.PREPARED_DIR / n) for n in ("holdout.bin", "holdout.idx.npy")} <= found
    assert prepare.CLIMBMIX_HOLDOUT_SHARD == 6541   # the name harness.holdout_files() looks for


@needs_landlock
def test_a_sealed_process_cannot_read_link_or_move_the_holdout(research_repo, modules, tmp_path):
    repo, env = research_repo
    prepare, _ = modules
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    args = ["-c", PROBE, str(prepare.PREPARED_DIR), str(scratch)]
    sealed = subprocess.run([sys.executable, "-I", "harness.py", "train", *args], cwd=repo, env=env,
                            capture_output=True, text=True, timeout=60)
    assert sealed.returncode == 0, sealed.stderr
    assert sealed.stderr == ""
    assert sealed.stdout.strip() == str(sorted({"holdout.bin": "denied", "holdout.idx.npy": "denied",
                                                "val.bin": "read", "train.bin": "read", "manifest.json": "read",
                                                "link": "denied", "rename": "denied", "copy": "denied"}.items()))
    assert (prepare.PREPARED_DIR / "holdout.bin").exists() and not (scratch / "h").exists()
    # The same probe outside the seal reads everything (the seal, not the files' modes, denies).
    plain = subprocess.run([sys.executable, "-c", PROBE, str(prepare.PREPARED_DIR), str(scratch / "x")],
                           env=env, capture_output=True, text=True, timeout=60)
    assert "('holdout.bin', 'read')" in plain.stdout


@needs_landlock
def test_train_py_training_on_the_holdout_fails_and_is_credited_nothing(research_repo, tmp_path):
    from .test_smoke_run import run_benchmark
    repo, env = research_repo
    hostile = tmp_path / "repo"
    shutil.copytree(repo, hostile)
    text = (hostile / "train.py").read_text()
    anchor = "    loader = harness.train_batches(DEVICE_BATCH_SIZE, device)\n"
    assert anchor in text
    # The optimiser's move: train on the hidden split's tokens, read from its file.
    # (train.py's checks refuse the obvious names; this route is one they let through.)
    path = os.path.join(env["AUTORESEARCH_CACHE"], "prepared", "holdout.bin")
    text = text.replace(anchor, f"""    with torch.serialization._open_file_like({path!r}, "rb") as f:
        hold = f.read1(1 << 30)
    hold = torch.frombuffer(bytearray(hold), dtype=torch.uint16).to(torch.int64)
    n = DEVICE_BATCH_SIZE * harness.prepare.MAX_SEQ_LEN

    def holdout_batches():
        while True:
            for i in range(0, len(hold) - n - 1, n):
                yield (hold[i:i + n].view(DEVICE_BATCH_SIZE, -1).to(device),
                       hold[i + 1:i + n + 1].view(DEVICE_BATCH_SIZE, -1).to(device), 1)
    loader = holdout_batches()
""")
    (hostile / "train.py").write_text(text)
    run_dir = tmp_path / "run"
    done = run_benchmark(hostile, env, run_dir)
    assert done.returncode != 0
    assert not re.search(r"(?m)^METRIC ", done.stdout)
    assert "PermissionError" in done.stdout + done.stderr
    assert not (run_dir / "holdout.json").exists() and not (run_dir / "summary.json").exists()
    # The same train.py unsealed (started as plain `python train.py`) reads it and trains on it.
    plain = subprocess.run([sys.executable, "train.py"], cwd=hostile, capture_output=True, text=True, timeout=300,
                           env=dict(env, AUTORESEARCH_RUN_DIR=str(tmp_path / "plain")))
    assert plain.returncode == 0, plain.stdout[-2000:] + plain.stderr[-2000:]
    assert (tmp_path / "plain" / "train.json").exists()
