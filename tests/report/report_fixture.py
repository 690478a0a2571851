"""A deterministic research repo for the report tests and benchmark: a night of N runs.

It writes what the engine and train.py leave behind (references/run-files.md): the log with
two config headers (a segment change), keeps, discards, crashes with diagnoses, a timeout,
failed checks, a few malformed lines, and hostile text in descriptions and ASI; and for each
run its folder (steps.jsonl, output.log, summary.json, sample.txt, diagnosis.json, diff.patch).
Same arguments, same bytes.
"""

import contextlib
import json
import math
import random
import re
import subprocess
import sys
import time
from pathlib import Path

HOSTILE = {
    5: "<script>document.documentElement.setAttribute('data-pwned','script')</script> try a <b>bold</b> idea",
    6: "<img src=x onerror=\"document.documentElement.setAttribute('data-pwned','img')\"> wider MLP",
    7: "line\u2028separator & </script><script>alert(1)</script> ampersand",
}
IDEAS = [
    ("MATRIX_LR", "raise MATRIX_LR to {v}", [0.03, 0.05, 0.06, 0.08]),
    ("DEPTH", "DEPTH {v} with a narrower model", [6, 8, 10, 12]),
    ("WARMDOWN_RATIO", "longer warmdown: WARMDOWN_RATIO {v}", [0.3, 0.4, 0.5, 0.6]),
    ("WEIGHT_DECAY", "weight decay {v} on matrices", [0.0, 0.05, 0.1, 0.2]),
    ("EMBEDDING_LR", "EMBEDDING_LR {v}", [0.2, 0.4, 0.6, 0.8]),
    ("WINDOW_PATTERN", "window pattern {v}", ["'SSSL'", "'SSLL'", "'L'", "'SL'"]),
    ("DEVICE_BATCH_SIZE", "DEVICE_BATCH_SIZE {v}", [16, 32, 64, 128]),
    ("ASPECT_RATIO", "ASPECT_RATIO {v}", [48, 64, 80, 96]),
]
CRASHES = [
    ("OOM", ["OOM_ACTIVATIONS"], {"DEVICE_BATCH_SIZE": 16},
     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
     "Activations of DEVICE_BATCH_SIZE 64 at sequence length 2048 need 26 GiB; the GPU has 24 GiB."),
    ("NAN_LOSS", ["NAN_LOSS_LR_TOO_HIGH"], {"MATRIX_LR": 0.04},
     "FAIL: loss is nan at step 212",
     "The loss diverged after the learning rate reached 0.08; earlier runs were stable at 0.04."),
    ("COMPILE_FAILURE", ["COMPILE_GRAPH_BREAK"], {"COMPILE": False},
     "torch._dynamo.exc.Unsupported: dynamic shape in flex attention",
     "torch.compile failed on the new attention mask; run eagerly or keep the old mask."),
]
START_MS = 1_795_986_000_000   # 2026-11-29 22:00 UTC


def make_repo(root, n_runs=300, steps=150, seed=0, malformed=True, segment_at=None, hostile=True):
    """Write the repo under `root`; return a dict of facts the tests check against."""
    root = Path(root)
    rng = random.Random(seed)
    runs_dir = root / ".autoresearch" / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    segment_at = segment_at or max(2, int(n_runs * 0.7))
    lines, facts = [], {"runs": n_runs, "statuses": {}, "segment_at": segment_at, "malformed": 0}
    lines.append(_config("nanochat on a 4090", 0))
    clock = START_MS
    best = None
    seg = 0
    baseline_level = best_level = 1.000   # the level the next segment's baseline starts below
    for n in range(1, n_runs + 1):
        if n == segment_at:
            seg, best, baseline_level = 1, None, best_level - 0.004
            lines.append(_config("nanochat on a 4090, after the driver update", 1))
        run = _run(rng, n, seg, best, baseline_level, hostile)
        best_level = run.pop("_level")
        if run["status"] == "keep":
            best, facts["best_run"] = run["metric"], n
        clock += int((run["duration_s"] + rng.uniform(20, 60)) * 1000)
        run["timestamp"] = clock
        lines.append(json.dumps(run, ensure_ascii=False))
        facts["statuses"][run["status"]] = facts["statuses"].get(run["status"], 0) + 1
        _write_run_files(runs_dir / str(n), rng, run, steps)
        if malformed and n in (40, 150, n_runs - 3):
            lines.append(['{"run": 999, "status": "keep", "metric": 0.5', "not json at all",
                          '["an", "array"]'][facts["malformed"]])
            facts["malformed"] += 1
    (root / "autoresearch.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    facts["best"] = best
    return facts


def _config(name, segment):
    return json.dumps({"type": "config", "name": name, "metricName": "val_bpb", "metricUnit": "bpb",
                       "bestDirection": "lower", "command": "bash autoresearch.sh", "scope": ["train.py"],
                       "segment": segment})


def _run(rng, n, seg, best, level, hostile=True):
    """One record with a plausible metric; the keep rule mirrors the engine's (beat best by 0.001)."""
    key, text, values = IDEAS[n % len(IDEAS)]
    value = values[(n // len(IDEAS)) % len(values)]
    description = HOSTILE[n] if hostile and n in HOSTILE else text.format(v=value)
    roll = rng.random()
    base = {"run": n, "commit": f"{rng.getrandbits(28):07x}", "segment": seg, "description": description,
            "asi": {"hypothesis": f"{key} is mistuned for 5-minute runs", "knob": key},
            "run_dir": f".autoresearch/runs/{n}", "ref": f"refs/autoresearch/runs/{n}"}
    if hostile and n == 6:
        base["asi"]["note"] = "<img src=x onerror=alert(2)>"
    first = best is None
    if not first and roll < 0.08:
        family, codes, fix, line, why = CRASHES[n % len(CRASHES)]
        base.update(status="crash", metric=None, metrics={}, duration_s=round(rng.uniform(20, 120), 1),
                    reason="the benchmark exited with status 1", confidence=None,
                    diagnosis={"family": family, "codes": codes, "fix": fix, "explanation": why,
                               "intermediates": {"peak_vram_gb": 23.6, "device": "RTX 4090"}})
        base["_level"] = level
        base["_crash_line"] = line
        return base
    if not first and roll < 0.09:
        base.update(status="timeout", metric=None, metrics={}, duration_s=600.0, confidence=None,
                    reason="killed after the 600 s timeout",
                    diagnosis={"family": "TIMEOUT", "codes": ["TIMEOUT_EVAL_SLOW"], "fix": {},
                               "explanation": "Evaluation did not finish inside the timeout."})
        base["_level"] = level
        return base
    drift = level - 0.00012 * n / (1 + seg)
    metric = round(drift + rng.gauss(0.004, 0.004), 6)
    if first:
        status, reason = "keep", "baseline of the segment"
    elif metric < best - 0.001:
        status, reason = "keep", f"beat the best {best:.6f} by more than the threshold 0.001"
    else:
        status, reason = "discard", f"not better than the best {best:.6f} by more than 0.001"
    if status == "discard" and roll > 0.985:
        status, reason = "checks_failed", "checks failed: tests/test_train.py exited 1"
    base.update(status=status, metric=metric, duration_s=round(rng.uniform(318, 345), 1), reason=reason,
                metrics={"val_bpb": metric, "peak_vram_mb": round(rng.uniform(18000, 23000), 1),
                         "mfu_percent": round(rng.uniform(38, 46), 2)},
                confidence=None if first else round(abs(best - metric) / 0.0012, 2),
                best_before=best, threshold=None if first else 0.001)
    base["_level"] = level
    return base


def _write_run_files(folder, rng, run, steps):
    folder.mkdir(parents=True, exist_ok=True)
    crash_line = run.pop("_crash_line", None)
    n, status = run["run"], run["status"]
    total = steps if status not in ("crash",) else max(3, steps // 5)
    final = run["metric"] if run["metric"] is not None else 1.0
    rows, energy = [], 0.0
    for i in range(total):
        progress = (i + 1) / steps
        elapsed = round(300 * progress, 3)
        loss = 3.0 * final + 6.0 * math.exp(-6 * progress) + rng.gauss(0, 0.02)
        if crash_line and crash_line.startswith("FAIL") and i > total * 0.7:
            loss = float("nan")
        power = 380 + rng.uniform(-25, 25)
        energy += power * 300 / steps
        rows.append({"step": i, "progress": round(progress, 5), "elapsed_s": elapsed, "loss": round(loss, 5)
                     if loss == loss else loss, "lr_mult": round(min(1.0, progress / 0.05, (1 - progress) / 0.5 + 0.0), 5),
                     "grad_norm": round(abs(rng.gauss(0.9, 0.3)), 4), "tok_per_s": round(rng.gauss(152000, 2500)),
                     "mfu": round(rng.gauss(42, 1.5), 2), "mem_mb": round(17800 + 40 * math.log1p(i), 1),
                     "power_w": round(power, 1), "energy_j": round(energy, 1)})
    (folder / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = [f"step {r['step']:05d} ({100 * r['progress']:.1f}%) | loss: {r['loss']:.6f} | tok/sec: {r['tok_per_s']}"
           for r in rows[-40:]]
    if crash_line:
        out += ["Traceback (most recent call last):", '  File "train.py", line 412, in <module>',
                "    loss.backward()", crash_line]
    elif run["metric"] is not None:
        out += ["---", f"val_bpb:          {run['metric']:.6f}", "training_seconds: 300.1",
                f"peak_vram_mb:     {run['metrics']['peak_vram_mb']}"]
        summary = {"val_bpb": run["metric"], "training_seconds": 300.1, "total_seconds": run["duration_s"],
                   "peak_vram_mb": run["metrics"]["peak_vram_mb"], "mfu_percent": run["metrics"]["mfu_percent"],
                   "total_tokens_M": 45.6, "num_steps": total, "num_params_M": 50.3, "depth": 8,
                   "settings": {"DEPTH": 8}}
        (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
        (folder / "sample.txt").write_text(f"Prompt: The capital of France is\nrun {n}: Paris, and the "
                                           f"<b>river</b> is the Seine.\n", encoding="utf-8")
    (folder / "output.log").write_text("\n".join(out) + "\n", encoding="utf-8")
    if run.get("diagnosis"):
        (folder / "diagnosis.json").write_text(json.dumps(run["diagnosis"]), encoding="utf-8")
    key = run["asi"]["knob"]
    (folder / "diff.patch").write_text(
        "diff --git a/train.py b/train.py\n--- a/train.py\n+++ b/train.py\n@@ -30,7 +30,7 @@\n"
        f" # hyperparameters\n-{key} = 1\n+{key} = 2  # {run['description'][:60]}\n", encoding="utf-8")


if __name__ == "__main__":
    # python tests/report/report_fixture.py DIR [RUNS]: a clean night to look at (docs/report.png)
    print(make_repo(sys.argv[1], n_runs=int(sys.argv[2]) if len(sys.argv) > 2 else 300, malformed=False, hostile=False))


@contextlib.contextmanager
def serving(root, err_path):
    """`autoresearch serve --port 0` in `root` (its stderr in `err_path`); yields the port it chose."""
    from conftest import engine_env  # tests only: the benchmarks import this module without tests/ on the path
    with open(err_path, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "autoresearch", "serve", "--port", "0"], cwd=root,
                                env=engine_env(), stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline, port = time.monotonic() + 20, None
        while port is None:
            found = re.search(r"http://127\.0\.0\.1:(\d+)/", err_path.read_text())
            port = int(found.group(1)) if found else None
            assert proc.poll() is None and time.monotonic() < deadline, err_path.read_text()
            time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)
