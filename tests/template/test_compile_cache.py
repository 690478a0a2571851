"""torch.compile's caches live in one folder per research repo, under the user's cache, shared by
every run of the repo and writable under training's seal.

The engine runs each experiment in its own snapshot (`<repo>/.autoresearch/snapshots/N`) with a fresh
$TMPDIR; Inductor's default cache is under $TMPDIR, so without the harness's folder every run of a
night compiled from nothing. Each test here starts the training process the way autoresearch.sh does
(`python -I harness.py train ...`: the seal, then exec) and asks torch itself where Inductor and
Triton will cache. How much faster a warm start is: benchmarks/compile_cache.py (a ratio).
"""

import json
import os
import shutil
import subprocess
import sys

from .test_holdout_sealed import needs_landlock

# Run in the sealed training process: where torch will cache, and a file written there.
ASK_TORCH = r"""
import json, os, sys
from torch._inductor.runtime.cache_dir_utils import cache_dir, triton_cache_dir
inductor, triton = cache_dir(), triton_cache_dir(0)
written = []
for folder in (inductor, triton):
    path = os.path.join(folder, "probe-" + sys.argv[1])
    try:
        with open(path, "w") as f:
            f.write("kernel")
        written.append(path)
    except OSError as e:
        written.append(type(e).__name__)
print(json.dumps({"inductor": inductor, "triton": triton, "written": written, "tmp": os.environ["TMPDIR"]}))
"""


# The same question without importing torch (the first test shows torch follows these variables).
ASK_ENV = r"""
import json, os
inductor = os.environ["TORCHINDUCTOR_CACHE_DIR"]
print(json.dumps({"inductor": inductor, "triton": os.environ["TRITON_CACHE_DIR"], "tmp": os.environ["TMPDIR"]}))
"""


def snapshot(repo, n):
    """The repo's files where the engine runs a commit: .autoresearch/snapshots/N."""
    dest = repo / ".autoresearch" / "snapshots" / str(n)
    if not dest.exists():
        shutil.copytree(repo, dest, ignore=shutil.ignore_patterns(".autoresearch"))
    return dest


def sealed_run(where, env, tmp, tag, ask=ASK_TORCH):
    tmp.mkdir(parents=True, exist_ok=True)
    env = dict(env, TMPDIR=str(tmp))
    for key in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        env.pop(key, None)
    done = subprocess.run([sys.executable, "-I", "harness.py", "train", "-c", ask, tag], cwd=where, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@needs_landlock
def test_every_run_of_a_repo_compiles_into_one_folder_of_the_user_cache(research_repo, tmp_path):
    repo, env = research_repo
    first = sealed_run(snapshot(repo, 1), env, tmp_path / "tmp1", "run1")
    second = sealed_run(snapshot(repo, 2), env, tmp_path / "tmp2", "run2")
    cache = os.path.realpath(env["AUTORESEARCH_CACHE"])
    # One folder for both runs, named for the repo the snapshots came from, in the autoresearch
    # cache, and not under either run's $TMPDIR (removed after each run).
    assert first["inductor"] == second["inductor"]
    assert first["triton"] == second["triton"] == os.path.join(first["inductor"], "triton")
    assert os.path.dirname(first["inductor"]) == os.path.join(cache, "compile")
    assert os.path.basename(first["inductor"]).startswith(repo.name + "-")
    assert not first["inductor"].startswith(first["tmp"]) and not first["inductor"].startswith(second["tmp"])
    # Training writes its kernels there under the seal (which denies the prepared data beside it),
    # and the second run finds what the first one wrote.
    for result in (first, second):
        assert all(os.path.isfile(p) for p in result["written"]), result["written"]
    assert os.path.isfile(os.path.join(second["inductor"], "probe-run1"))
    # The prepared data beside it stays sealed in the same process.
    probe = ("import sys\ntry:\n    open(sys.argv[1], 'a').close()\n    print('written')\n"
             "except OSError:\n    print('denied')\n")
    done = subprocess.run([sys.executable, "-I", "harness.py", "train", "-c", probe,
                           os.path.join(cache, "prepared", "manifest.json")], cwd=snapshot(repo, 1), env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "denied", done.stdout + done.stderr


def test_the_folder_follows_xdg_cache_home_and_a_users_own_setting_wins(research_repo, tmp_path):
    repo, env = research_repo
    home, xdg = tmp_path / "home", tmp_path / "xdg"
    home.mkdir()
    plain = {k: v for k, v in env.items() if k != "AUTORESEARCH_CACHE"}
    found = sealed_run(snapshot(repo, 3), dict(plain, HOME=str(home), XDG_CACHE_HOME=str(xdg)), tmp_path / "t1", "x",
                       ASK_ENV)
    assert os.path.dirname(found["inductor"]) == os.path.join(os.path.realpath(xdg), "autoresearch", "compile")
    assert os.path.basename(found["inductor"]).startswith(repo.name + "-")
    found = sealed_run(snapshot(repo, 3), dict(plain, HOME=str(home)), tmp_path / "t2", "h", ASK_ENV)
    assert os.path.dirname(found["inductor"]) == os.path.join(str(home), ".cache", "autoresearch", "compile")
    # A TORCHINDUCTOR_CACHE_DIR in the user's environment is kept (Triton's then goes beneath it).
    own = tmp_path / "mine"
    done = subprocess.run([sys.executable, "-I", "harness.py", "train", "-c", ASK_ENV, "own"],
                          cwd=snapshot(repo, 3), env=dict(env, TMPDIR=str(tmp_path), TORCHINDUCTOR_CACHE_DIR=str(own)),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["inductor"] == str(own) and found["triton"] == os.path.join(str(own), "triton")


def test_two_repos_do_not_share_a_folder_and_snapshots_belong_to_their_repo(modules, tmp_path):
    _, train = modules
    harness = train.harness
    a, b = tmp_path / "a" / "lab", tmp_path / "b" / "lab"
    assert harness.repo_id(str(a)) != harness.repo_id(str(b))
    assert harness.repo_id(str(a / ".autoresearch" / "snapshots" / "7")) == harness.repo_id(str(a))
    assert harness.repo_id(str(a)).startswith("lab-")


def test_python_train_py_unsealed_names_the_folder_before_its_first_torch_compile(research_repo, tmp_path):
    """`python train.py` skips the seal; importing the harness names the folder, before train.py's
    first torch.compile call writes Inductor's default ($TMPDIR/torchinductor_<user>) into the
    environment. A tool that imports the harness (anything but train.py) changes nothing."""
    repo, env = research_repo
    lab = tmp_path / "lab"
    lab.mkdir()
    for name in ("harness.py", "prepare.py"):
        shutil.copy(repo / name, lab / name)
    (lab / "train.py").write_text("import os\nimport torch\nimport harness\ntorch.compile(lambda x: x)\n"
                                  "print(os.environ['TORCHINDUCTOR_CACHE_DIR'])\n")
    env = {k: v for k, v in env.items() if k not in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")}
    done = subprocess.run([sys.executable, "train.py"], cwd=lab, env=dict(env, TMPDIR=str(tmp_path)),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    named = done.stdout.strip()
    assert os.path.dirname(named) == os.path.join(env["AUTORESEARCH_CACHE"], "compile")
    assert os.path.basename(named).startswith("lab-")
    (lab / "tool.py").write_text("import os\nimport harness\nprint(os.environ.get('TORCHINDUCTOR_CACHE_DIR'))\n")
    done = subprocess.run([sys.executable, "tool.py"], cwd=lab, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "None", done.stdout + done.stderr
