"""train.py cannot change what the evaluator scores with.

The evaluator computes val_bpb (and the hidden holdout) from the prepared folder in the cache (the
split files, the token byte counts, the tokenizer, manifest.json) and from train.py's definitions.
train.py runs as the user, so nothing in the file system stops it from writing them. Each attack
here is a real train.py, run for real: `autoresearch.sh` hashes manifest.json and train.py before
training starts and hands the hashes to the evaluator, which checks them and every prepared file
it reads (the portable guard; AUTORESEARCH_SANDBOX=off turns the Linux write seal off, as where
there is no Landlock). On Linux the seal also makes the data folders read-only to training, so the
write itself fails.
"""

import json
import re
import shutil
import subprocess
import sys

import pytest

from autoresearch import metrics

from .template_helpers import ROOT
from .test_holdout_sealed import needs_landlock
from .test_smoke_run import run_benchmark

sys.path.insert(0, str(ROOT / "tests"))
from conftest import run_cli  # noqa: E402
from gitrepo import git_repo

sys.path.pop(0)

OFF = {"AUTORESEARCH_SANDBOX": "off"}   # the portable guard alone, as where Landlock is unavailable
LOOP_END = "        if step > harness.WARMUP_STEPS and training_time >= TIME_BUDGET:\n"
LOADER = "    loader = harness.train_batches(DEVICE_BATCH_SIZE, device)\n"


def capped(text, steps):
    """train.py stopping after `steps` steps (a legitimate edit: it keeps the tests short)."""
    assert LOOP_END in text
    return text.replace(LOOP_END, f"        if step >= {steps} or (step > harness.WARMUP_STEPS and training_time >= TIME_BUDGET):\n")


def poisoning_val(text, prepared):
    """The optimiser's move: overwrite every fifth document of the validation split in place with
    one token repeated, and teach the model that a document of that token goes on with it (the
    second half of every fifth training row). val_bpb drops by a share the engine finds plausible
    (under its 30% limit)."""
    assert LOADER in text
    return text.replace(LOADER, LOADER + f"""    from numpy import load as load_offsets, memmap as mapped
    val = mapped({prepared + "/val.bin"!r}, dtype="uint16", mode="r+")
    starts = load_offsets({prepared + "/val.idx.npy"!r})
    for a, b in zip(starts[:-1:5], starts[1::5]):
        val[a + 1:b] = 300
    val.flush()
    honest = loader

    def mixed():
        half = MAX_SEQ_LEN // 2
        for x, y, epoch in honest:
            x, y = x.clone(), y.clone()
            x[::5, half] = tokenizer.get_bos_token_id()
            x[::5, half + 1:] = 300
            y[::5, half:] = 300
            y[::5, half - 1] = tokenizer.get_bos_token_id()
            yield x, y, epoch
    loader = mixed()
""")


def own_cache(env, tmp_path):
    """A copy of the session's prepared cache (the attacks damage it)."""
    cache = tmp_path / "cache"
    shutil.copytree(env["AUTORESEARCH_CACHE"], cache, ignore=shutil.ignore_patterns("manual-run"))
    return dict(env, AUTORESEARCH_CACHE=str(cache)), cache / "prepared"


def test_poisoning_the_validation_split_is_never_kept(research_repo, tmp_path):
    """Through the real engine: a baseline, then a train.py that rewrites val.bin while it trains.
    It would be kept (a 10-20% gain); it is a crash that says what to do, and the baseline stays."""
    template, session_env = research_repo
    env, prepared = own_cache(session_env, tmp_path)
    env = dict(env, **OFF)
    repo = tmp_path / "night"
    shutil.copytree(template, repo, ignore=shutil.ignore_patterns("autoresearch.sh", "__pycache__"))
    for key in ("AUTORESEARCH_RUN", "AUTORESEARCH_RUN_DIR", "AUTORESEARCH_STEPS_FILE"):
        env.pop(key, None)

    def cli(*args):
        proc = run_cli(list(args), cwd=repo, env=env, timeout=600)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc
    git_repo(repo)
    cli("init", "--template", "ml", "--noise-runs", "1")
    (repo / "train.py").write_text(capped((repo / "train.py").read_text(), 60))
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "the template, shorter runs"], cwd=repo, check=True)
    cli("run", "-m", "baseline")
    honest = (prepared / "val.bin").read_bytes()
    (repo / "train.py").write_text(poisoning_val((repo / "train.py").read_text(), str(prepared)))
    out = cli("run", "-m", "a better model").stdout
    runs = [json.loads(line) for line in (repo / "autoresearch.jsonl").read_text().splitlines() if '"run"' in line]
    assert (prepared / "val.bin").read_bytes() != honest        # the write itself went through
    assert [r["status"] for r in runs] == ["keep", "crash"], out
    assert "diagnosis: DATA (DATA_CHANGED)" in out and "val.bin is not what prepare.py wrote" in out
    assert "`python prepare.py --force`" in out.split("diagnosis:")[1]
    status = json.loads(cli("status", "--json").stdout)
    assert status["best"]["run"] == 1


TOKENIZER = "    tokenizer = Tokenizer.from_directory()\n"


def rewriting_manifest(text, prepared):
    """Poison val.bin, then record the poisoned file's sha256 in manifest.json, keeping data_sha
    (the printed fingerprint) as it was: the per-file check alone would pass."""
    return text.replace(TOKENIZER, TOKENIZER + f"""    import hashlib
    import json
    from numpy import memmap as mapped
    val = mapped({prepared + "/val.bin"!r}, dtype="uint16", mode="r+")
    val[1:200] = 300
    val.flush()
    with torch.serialization._open_file_like({prepared + "/manifest.json"!r}, "r") as f:
        manifest = json.loads(f.read())
    manifest["files"]["val.bin"] = hashlib.sha256(val.tobytes()).hexdigest()
    with torch.serialization._open_file_like({prepared + "/manifest.json"!r}, "w") as f:
        f.write(json.dumps(manifest, indent=1))
""")


# A pickle that, when the evaluator loads "the tokenizer", prints a summary of its own and exits.
PAYLOAD = b"cbuiltins\nexec\n(Vprint('---\\nval_bpb:          0.010000', flush=True); import os; os._exit(0)\ntR."


def replacing_tokenizer(text, prepared):
    return text.replace(TOKENIZER, TOKENIZER + f"""    with torch.serialization._open_file_like({prepared + "/tokenizer.pkl"!r}, "wb") as f:
        f.write({PAYLOAD!r})
""")


def rewriting_itself(text, prepared):
    """train.py rewrites itself once it has started: the evaluator would rebuild the model from
    definitions that neither trained nor are recorded in the commit."""
    return text.replace(TOKENIZER, TOKENIZER + """    with torch.serialization._open_file_like("train.py", "r") as f:
        me = f.read()
    with torch.serialization._open_file_like("train.py", "w") as f:
        f.write(me.replace("self.config.softcap * torch.tanh(", "0.9 * self.config.softcap * torch.tanh("))
""")


@pytest.mark.parametrize("attack, refusal", [
    (rewriting_manifest, "manifest.json is not what it was when training started; rebuild it with `python prepare.py --force`"),
    (replacing_tokenizer, "tokenizer.pkl is not what prepare.py wrote (sha256 differs from manifest.json); rebuild"),
    (rewriting_itself, "train.py changed while it ran"),
], ids=["val-and-its-manifest-entry", "tokenizer-pickle", "train-py-rewrites-itself"])
def test_rewriting_what_the_evaluator_trusts_is_refused(research_repo, tmp_path, attack, refusal):
    template, session_env = research_repo
    env, prepared = own_cache(session_env, tmp_path)
    repo = tmp_path / "repo"
    shutil.copytree(template, repo)
    text = (repo / "train.py").read_text()
    assert TOKENIZER in text
    (repo / "train.py").write_text(attack(capped(text, 12), str(prepared)))
    before = (prepared / "manifest.json").read_bytes()
    done = run_benchmark(repo, dict(env, **OFF), tmp_path / "run")
    assert (prepared / "manifest.json").read_bytes() != before or attack is not rewriting_manifest
    assert done.returncode == 1, done.stdout[-3000:]
    assert "val_bpb" not in metrics.parse(done.stdout)[0]
    last = done.stderr.strip().splitlines()[-1]
    assert refusal in last, last
    assert not (tmp_path / "run" / "summary.json").exists()


def corrupt_copy(prepared, tmp_path, name):
    copy = tmp_path / "prepared"
    shutil.copytree(prepared, copy)
    if name:
        data = bytearray((copy / name).read_bytes())
        data[len(data) // 2] ^= 1          # one bit, in the middle
        (copy / name).write_bytes(bytes(data))
    return copy


@pytest.mark.parametrize("name", [None, "val.bin", "val.idx.npy", "holdout.bin", "holdout.idx.npy",
                                  "token_bytes.pt", "token_bytes_karpathy.pt", "tokenizer.pkl"])
def test_every_file_the_evaluator_reads_is_checked(modules, tmp_path, name):
    prepare = modules[0]
    assert set(prepare.EVALUATED_FILES) <= set(prepare.MANIFEST["files"])
    copy = corrupt_copy(prepare.PREPARED_DIR, tmp_path, name)
    try:
        if name is None:
            assert prepare.check_prepared(prepared_dir=copy) is None
            tokens, offsets = prepare.load_split("val", copy)          # served from the checked copy
            (copy / "val.bin").write_bytes(b"\0" * (copy / "val.bin").stat().st_size)
            assert tokens.any() and (prepare.load_split("val", copy)[0] == tokens).all()
        else:
            with pytest.raises(prepare.PrepareError, match=rf"the prepared data changed: {re.escape(name)} is not "
                               r"what prepare.py wrote .*prepare\.py --force"):
                prepare.check_prepared(prepared_dir=copy)
    finally:
        for key in [k for k in prepare._CHECKED if str(k).startswith(str(copy))]:
            del prepare._CHECKED[key]


def test_a_changed_manifest_is_refused_and_an_old_one_warned_about(modules, tmp_path):
    import hashlib
    prepare = modules[0]
    copy = corrupt_copy(prepare.PREPARED_DIR, tmp_path, None)
    manifest = copy / "manifest.json"
    sha = hashlib.sha256(manifest.read_bytes()).hexdigest()
    try:
        assert prepare.check_prepared(sha, prepared_dir=copy) is None
        old = json.loads(manifest.read_text())
        del old["files"]                        # as written by a prepare.py before per-file sums
        manifest.write_text(json.dumps(old))
        with pytest.raises(prepare.PrepareError, match="manifest.json is not what it was when training started"):
            prepare.check_prepared(sha, prepared_dir=copy)
        (copy / "val.bin").write_bytes((copy / "val.bin").read_bytes()[::-1])
        warning = prepare.check_prepared(hashlib.sha256(manifest.read_bytes()).hexdigest(), prepared_dir=copy)
        assert "no per-file checksums" in warning and "prepare.py --force" in warning
    finally:
        for key in [k for k in prepare._CHECKED if str(k).startswith(str(copy))]:
            del prepare._CHECKED[key]


WRITE_PROBE = r"""
import json, os, sys
cache, scratch, run_dir = sys.argv[1:4]
prepared = os.path.join(cache, "prepared")


def attempt(act):
    try:
        act()
        return "done"
    except PermissionError:
        return "denied"
    except OSError as e:
        return type(e).__name__


def write(path, mode="wb"):
    with open(path, mode) as f:
        f.write(b"x")


out = {
    "read val.bin": attempt(lambda: open(os.path.join(prepared, "val.bin"), "rb").read(4)),
    "read holdout.bin": attempt(lambda: open(os.path.join(prepared, "holdout.bin"), "rb").read(4)),
    "run dir": attempt(lambda: write(os.path.join(run_dir, "note.txt"))),
    "scratch": attempt(lambda: write(os.path.join(scratch, "note.txt"))),
    "the repo": attempt(lambda: write("note.txt")),
    "rewrite val.bin": attempt(lambda: write(os.path.join(prepared, "val.bin"), "r+b")),
    "truncate tokenizer.pkl": attempt(lambda: os.truncate(os.path.join(prepared, "tokenizer.pkl"), 0)),
    "new file in prepared": attempt(lambda: write(os.path.join(prepared, "extra.bin"))),
    "remove manifest.json": attempt(lambda: os.unlink(os.path.join(prepared, "manifest.json"))),
    "rename val.bin": attempt(lambda: os.rename(os.path.join(prepared, "val.bin"), os.path.join(prepared, "v"))),
    "rewrite a shard": attempt(lambda: write(os.path.join(cache, "climbmix", "shard_00000.parquet"), "r+b")),
    "new folder in cache": attempt(lambda: os.mkdir(os.path.join(cache, "prepared.new"))),
    "swap prepared": attempt(lambda: os.rename(prepared, prepared + ".old")),
    "move the cache": attempt(lambda: os.rename(cache, cache + ".old")),
}
print(json.dumps(out))
"""
WRITES = ["rewrite val.bin", "truncate tokenizer.pkl", "new file in prepared", "remove manifest.json",
          "rename val.bin", "swap prepared", "new folder in cache", "move the cache", "rewrite a shard"]


def probe(repo, env, args, sealed=True):
    cmd = [sys.executable, "-I", "harness.py", "train"] if sealed else [sys.executable]
    done = subprocess.run(cmd + ["-c", WRITE_PROBE, *args], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@needs_landlock
def test_a_sealed_process_cannot_write_the_data_folders(research_repo, tmp_path):
    template, session_env = research_repo
    env, prepared = own_cache(session_env, tmp_path)
    shards = prepared.parent / "climbmix"
    shards.mkdir()
    (shards / "shard_00000.parquet").write_bytes(b"PAR1")
    repo, scratch, run_dir = tmp_path / "repo", tmp_path / "scratch", tmp_path / "run"
    shutil.copytree(template, repo)
    scratch.mkdir()
    env = dict(env, AUTORESEARCH_RUN_DIR=str(run_dir), TMPDIR=str(scratch))
    args = [str(prepared.parent), str(scratch), str(run_dir)]
    before = {p.name: p.read_bytes() for p in prepared.iterdir()}
    sealed = probe(repo, env, args)
    assert {k for k, v in sealed.items() if v == "denied"} == set(WRITES) | {"read holdout.bin"}, sealed
    assert {p.name: p.read_bytes() for p in prepared.iterdir()} == before
    assert (run_dir / "note.txt").exists() and (repo / "note.txt").exists()    # made before the seal
    # AUTORESEARCH_SANDBOX=off: the data folders are writable again (the evaluator's checks remain);
    # the holdout stays unreadable. Unsealed, everything goes through.
    off = probe(repo, dict(env, **OFF), args)
    assert off["read holdout.bin"] == "denied" and {off[k] for k in WRITES} == {"done"}, off
    shutil.rmtree(tmp_path / "cache.old")
    env, prepared = own_cache(session_env, tmp_path)
    plain = probe(repo, env, args, sealed=False)
    assert plain["read holdout.bin"] == "done" and plain["rewrite val.bin"] == "done", plain


def test_a_warning_raised_in_the_harness_is_not_taken_for_a_rebinding(modules):
    """A warning attributed to a harness frame (an unclosed file, a torch deprecation) adds
    `__warningregistry__` to the harness's namespace after the evaluator's snapshot of it; that is
    the warnings machinery, not train.py's code (importing train.py from checked bytes made the
    first such warning come after the snapshot)."""
    harness = modules[1].harness
    saved, original = dict(harness._WATCHED), harness.probe_batch
    registry = vars(harness).pop("__warningregistry__", None)
    harness._WATCHED.update(harness._snapshot_namespaces())
    try:
        vars(harness)["__warningregistry__"] = {"version": 1}
        harness._check_untouched()
        vars(harness)["probe_batch"] = lambda *a: None          # a real rebinding is still caught
        with pytest.raises(harness.UnsafeTrainPy, match=r"harness\.probe_batch"):
            harness._check_untouched()
    finally:
        vars(harness)["probe_batch"] = original
        vars(harness).pop("__warningregistry__", None)
        if registry is not None:
            vars(harness)["__warningregistry__"] = registry
        harness._WATCHED.clear()
        harness._WATCHED.update(saved)


FINISH = "    recorder.finish(model, asdict(config), training_time, step, timed_steps, depth=DEPTH)\n"


def test_a_holdout_value_written_by_train_py_never_stands(research_repo, tmp_path):
    """Data prepared without a holdout split (a cache from before it existed): train.py writes a
    holdout.json of its own into its run folder, where the person's table reads holdout values;
    the evaluator, which writes none, removes it."""
    template, session_env = research_repo
    env, prepared = own_cache(session_env, tmp_path)
    manifest = json.loads((prepared / "manifest.json").read_text())
    del manifest["splits"]["holdout"]
    for name in ("holdout.bin", "holdout.idx.npy"):
        del manifest["files"][name]
        (prepared / name).unlink()
    (prepared / "manifest.json").write_text(json.dumps(manifest))
    repo = tmp_path / "repo"
    shutil.copytree(template, repo)
    text = capped((repo / "train.py").read_text(), 12)
    assert FINISH in text
    (repo / "train.py").write_text(text.replace(FINISH, FINISH + """    with torch.serialization._open_file_like(harness.run_dir() + "/holdout.json", "w") as f:
        f.write('{"holdout_bpb": 0.5, "tokens": 4096}')
"""))
    run_dir = tmp_path / "run"
    done = run_benchmark(repo, env, run_dir)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "val_bpb" in metrics.parse(done.stdout)[0]
    assert (run_dir / "summary.json").exists() and not (run_dir / "holdout.json").exists()
