"""`prepare.py` run by a Python without the template's packages ends in one line that says the
step (`uv sync`, then the same command under `uv run`), not in a traceback."""

import subprocess
import sys

from .template_helpers import ASSETS


def _run(tmp_path, argv, env_extra=None):
    return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "AUTORESEARCH_CACHE": str(tmp_path / "cache"),
                               **(env_extra or {})})


def _one_line_with_the_fix(done, package, again):
    assert done.returncode != 0
    assert "Traceback" not in done.stderr + done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"has no package '{package}'" in lines[0]
    assert "run `uv sync` in this repo, then `" + again + "`" in lines[0]
    assert "uv add" not in lines[0]


def test_no_numpy_or_torch(tmp_path):
    # -S: no site-packages, so neither numpy nor torch can be imported
    done = _run(tmp_path, [sys.executable, "-I", "-S", str(ASSETS / "prepare.py"), "--source", "synthetic",
                           "--profile", "smoke"])
    _one_line_with_the_fix(done, "numpy", "uv run prepare.py --source synthetic --profile smoke")


def test_a_package_imported_where_it_is_used(tmp_path):
    # torch and numpy import; the BPE trainer (rustbpe) is missing when the tokenizer is trained
    code = ("import runpy, sys; sys.modules['rustbpe'] = None; sys.argv = sys.argv[1:]; "
            "runpy.run_path(sys.argv[0], run_name='__main__')")
    done = _run(tmp_path, [sys.executable, "-c", code, str(ASSETS / "prepare.py"), "--source", "synthetic",
                           "--profile", "smoke"])
    _one_line_with_the_fix(done, "rustbpe", "uv run prepare.py --source synthetic --profile smoke")
    assert not (tmp_path / "cache" / "prepared" / "manifest.json").exists()
