"""Every GPU figure of the ML template in one JSON object: benchmarks/gpu_baseline.sh runs this.

Two experiments through the template's own benchmark (`bash autoresearch.sh`: train.py sealed by
the harness where Landlock exists, then the evaluator process and the hidden holdout), in a fresh
research repo made from assets/, on text every machine has offline (the lent GPU machine has no
network): the Python standard library's sources, which train the full 8,192-token vocabulary:

- "default": the baseline `prepare.py --fit-baseline` picks for this GPU (80/141 GiB: karpathy's
  H100 settings);
- "24GiB": the 24 GiB tier's settings (`--fit-baseline 24`), what an RTX 3090/4090 runs.

Per run: steps, tokens/s (median of the timed steps), MFU, val_bpb and val_bpb_karpathy, the
attention backend and the harness's reason for it, peak memory, time to first step (process start
to the end of step 0, compilation included), the time outside the training budget (the script's
wall time minus training_seconds) and the evaluator's and holdout's parts of it.

WARM_RUN=1 adds a third run, the default tier again for BUDGET_WARM seconds (default 10), whose
first_step_s against the first run's is the compile cache's warm/cold ratio on this GPU.

Each run's budget is set in its copy of train.py (a TIME_BUDGET constant instead of prepare.py's),
so both fit one device call: BUDGET (default 150 s) and BUDGET_24 (default 60 s). The JSON says
the budget each ran with. On source code val_bpb does not compare with climbmix's (nor with
karpathy's 0.9979); throughput, MFU, memory and the times are those of the real baseline model.

    python benchmarks/gpu_baseline.py [--dry-run] [--out DIR]

--dry-run (or no CUDA): the smoke profile and the smoke tier for both runs, with budgets of a few
CPU seconds: checks this script and the JSON's shape on a CPU (tests/template/test_gpu_baseline.py).
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMPORT_LINE = "from prepare import MAX_SEQ_LEN, TIME_BUDGET, Tokenizer, budget_clock\n"
DESCRIBE = re.compile(r"^Device: (?P<device>.*?) \| dtype: (?P<dtype>\S+) \| attention: (?P<backend>\S+) "
                      r"\((?P<why>.*)\) \| compile: (?P<compile>\S+)$", re.M)
NOT_SEALED = "NOT sealed"


def python_cmd():
    """$AUTORESEARCH_PYTHON (a relative path made absolute: the runs start in the repo) or this Python."""
    words = (os.environ.get("AUTORESEARCH_PYTHON") or sys.executable).split()
    if os.sep in words[0]:
        words[0] = os.path.abspath(words[0])
    return " ".join(words)


def probe(py):
    """What this machine runs the template with: GPU, driver, torch, kernels."""
    code = ("import json, torch\n"
            "out = {'torch': torch.__version__, 'cuda': torch.version.cuda, 'gpu': None}\n"
            "if torch.cuda.is_available():\n"
            "    p = torch.cuda.get_device_properties(0)\n"
            "    out.update(gpu=p.name, memory_gib=round(p.total_memory / 2**30, 1),\n"
            "               capability='.'.join(map(str, torch.cuda.get_device_capability(0))))\n"
            "try:\n"
            "    import kernels\n"
            "    out['kernels'] = getattr(kernels, '__version__', 'installed')\n"
            "except ImportError:\n"
            "    out['kernels'] = None\n"
            "import platform\n"
            "out['python'] = platform.python_version()\n"
            "print(json.dumps(out))\n")
    done = subprocess.run([*py.split(), "-c", code], capture_output=True, text=True, timeout=300)
    if done.returncode:
        raise SystemExit(f"gpu_baseline: {py} cannot import torch: {done.stderr.strip()[-300:]}")
    info = json.loads(done.stdout.strip().splitlines()[-1])
    smi = shutil.which("nvidia-smi")
    if smi:
        q = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                           text=True, timeout=30)
        info["driver"] = (q.stdout.strip().splitlines() or [None])[0]
    return info


def stdlib_corpus(py, dest):
    """Text that every machine has offline: the Python standard library's sources, one document
    per module, as JSONL (the last 5% of documents become the validation split). Unlike the
    synthetic corpus (a vocabulary of a few hundred tokens) it trains the template's full
    8,192-token vocabulary, so the model, its FLOPs and its memory are the real baseline's."""
    code = ("import json, pathlib, sys, sysconfig\n"
            "root = pathlib.Path(sysconfig.get_paths()['stdlib'])\n"
            "with open(sys.argv[1], 'w', encoding='utf-8') as out:\n"
            "    for path in sorted(root.rglob('*.py')):\n"
            "        if 'site-packages' in path.parts:\n"
            "            continue\n"
            "        try:\n"
            "            text = path.read_text(encoding='utf-8')\n"
            "        except (OSError, UnicodeDecodeError):\n"
            "            continue\n"
            "        if text.strip():\n"
            "            out.write(json.dumps({'text': text}) + '\\n')\n")
    subprocess.run([*py.split(), "-c", code, str(dest)], check=True, timeout=300)
    return dest


def make_repo(base, py, dry):
    """A research repo from assets/ with its own cache and its data prepared: synthetic for the
    dry run, the standard library's sources on a GPU."""
    repo, cache = base / "lab", base / "cache"
    shutil.copytree(ROOT / "assets", repo, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "autoresearch.sh", repo / "autoresearch.sh")
    env = dict(os.environ, AUTORESEARCH_CACHE=str(cache), AUTORESEARCH_PYTHON=py)
    for key in ("AUTORESEARCH_RUN", "AUTORESEARCH_RUN_DIR", "AUTORESEARCH_STEPS_FILE",
                "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        env.pop(key, None)
    t0 = time.perf_counter()
    source = "synthetic" if dry else str(stdlib_corpus(py, base / "stdlib.jsonl"))
    done = subprocess.run([*py.split(), "prepare.py", "--source", source, "--profile",
                           "smoke" if dry else "default"], cwd=repo, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"gpu_baseline: prepare.py failed: {(done.stdout + done.stderr)[-1500:]}")
    return repo, env, round(time.perf_counter() - t0, 1)


def with_budget(text, budget):
    """train.py with its own TIME_BUDGET constant (an edit any experiment may make)."""
    if IMPORT_LINE not in text:
        raise SystemExit("gpu_baseline: train.py no longer imports TIME_BUDGET from prepare: update this script")
    return text.replace(IMPORT_LINE, IMPORT_LINE.replace(" TIME_BUDGET,", "")
                        + f"\nTIME_BUDGET = {budget:g}   # gpu_baseline: shorter than prepare.py's, to fit one call\n")


def one_run(repo, env, py, tier, budget, run_dir, pristine):
    """Fit `tier` into the template's train.py, run the benchmark once, and return its figures
    (or what went wrong)."""
    (repo / "train.py").write_text(pristine)
    fit = subprocess.run([*py.split(), "prepare.py", "--fit-baseline", tier], cwd=repo, env=env,
                         capture_output=True, text=True)
    if fit.returncode:
        return {"tier": tier, "error": f"--fit-baseline {tier} failed: {(fit.stdout + fit.stderr).strip()[-300:]}"}
    train = repo / "train.py"
    train.write_text(with_budget(train.read_text(), budget))
    run_dir.mkdir(parents=True)
    env = dict(env, AUTORESEARCH_RUN_DIR=str(run_dir), AUTORESEARCH_STEPS_FILE=str(run_dir / "steps.jsonl"))
    t0 = time.perf_counter()
    done = subprocess.run(["bash", "autoresearch.sh"], cwd=repo, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    log = done.stdout + done.stderr
    (run_dir / "output.log").write_text(log)
    figures = {"tier": tier, "budget_s": budget, "wall_s": round(wall, 1), "exit": done.returncode}
    m = DESCRIBE.search(log)
    if m:
        figures.update(attention=m["backend"], attention_why=m["why"], dtype=m["dtype"],
                       compile=m["compile"] == "True", device=m["device"])
    figures["sandbox"] = "none: detection only (no Landlock)" if NOT_SEALED in log else "landlock"
    if done.returncode:
        figures["error"] = (log.strip().splitlines() or ["no output"])[-1][-500:]
        return figures
    summary = json.loads((run_dir / "summary.json").read_text())
    info = json.loads((run_dir / "train.json").read_text())
    holdout_path = run_dir / "holdout.json"
    holdout = json.loads(holdout_path.read_text()) if holdout_path.exists() else {}
    rates = [json.loads(line).get("tok_per_s") for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    timed = [r for r in rates[10:] if r] or [r for r in rates if r]   # after the 10 warm-up steps
    outside = wall - float(summary["training_seconds"])
    figures.update(
        steps=summary["num_steps"], tokens_per_s=round(statistics.median(timed), 1) if timed else None,
        mfu_percent=summary["mfu_percent"], val_bpb=summary["val_bpb"], val_bpb_karpathy=summary["val_bpb_karpathy"],
        peak_vram_mb=summary["peak_vram_mb"], first_step_s=info.get("first_step_s"),
        training_seconds=summary["training_seconds"], outside_budget_s=round(outside, 2),
        eval_seconds=round(float(summary.get("eval_seconds") or 0), 2), holdout_seconds=holdout.get("seconds"),
        total_tokens_M=summary["total_tokens_M"], num_params_M=summary["num_params_M"], depth=summary["depth"],
        batch_tokens=_batch_tokens(train.read_text()), compile_cache=info.get("compile_cache"))
    return figures


def _batch_tokens(text):
    m = re.search(r"^TOTAL_BATCH_SIZE = (\d+)", text, re.M)
    return int(m.group(1)) if m else None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="smoke profile on the CPU: checks the script")
    parser.add_argument("--out", default=os.environ.get("OUT"), help="where figures.json and the logs go")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    py = python_cmd()
    machine = probe(py)
    dry = args.dry_run or not machine.get("gpu")
    budgets = (float(os.environ.get("BUDGET", 2 if dry else 150)), float(os.environ.get("BUDGET_24", 1 if dry else 60)))
    tiers = ("smoke", "smoke") if dry else ("auto", "24")
    base = Path(tempfile.mkdtemp(prefix="gpu-baseline-"))
    out = Path(args.out) if args.out else base / "out"
    out.mkdir(parents=True, exist_ok=True)
    result = {"machine": machine, "dry_run": dry,
              "data": ("synthetic, smoke profile" if dry else "the Python standard library's sources (code)")
              + ": val_bpb does not compare with climbmix's"}
    try:
        repo, env, result["prepare_s"] = make_repo(base, py, dry)
        result["runs"] = {}
        pristine = (repo / "train.py").read_text()
        plan = [("default", tiers[0], budgets[0]), ("24GiB", tiers[1], budgets[1])]
        if os.environ.get("WARM_RUN") == "1":   # the default tier again: its compile cache is now warm
            plan.append(("default-warm", tiers[0], float(os.environ.get("BUDGET_WARM", 1 if dry else 10))))
        for name, tier, budget in plan:
            figures = one_run(repo, env, py, tier, budget, base / "runs" / name, pristine)
            result["runs"][name] = figures
            for kept, as_name in (("output.log", f"{name}.log"), ("steps.jsonl", f"{name}.steps.jsonl")):
                if (base / "runs" / name / kept).exists():
                    shutil.copy(base / "runs" / name / kept, out / as_name)
            print(f"gpu_baseline: {name}: " + ", ".join(f"{k}={figures.get(k)}" for k in
                  ("steps", "tokens_per_s", "mfu_percent", "val_bpb", "attention", "first_step_s", "outside_budget_s",
                   "error") if k in figures), file=sys.stderr, flush=True)
    finally:
        result["wall_s"] = round(time.perf_counter() - started, 1)
        (out / "figures.json").write_text(json.dumps(result, indent=1) + "\n")
        for name in ("lab", "cache", "runs"):
            shutil.rmtree(base / name, ignore_errors=True)
        if args.out:
            shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(result))
    return 0 if all("error" not in r for r in result.get("runs", {}).values()) else 1


if __name__ == "__main__":
    sys.exit(main())
