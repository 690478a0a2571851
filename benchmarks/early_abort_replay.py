"""Early abort, measured before it is trusted: replay recorded nights through the rule.

A corpus is a folder with `manifest.json` (the night's run records: run, status, metric,
description, repeat_of, scope_hash, duration_s, and the harness's training_seconds and
eval_seconds) and `runs/N/steps.jsonl` (each run's steps file, as the harness wrote it). The
recorded nights of `tests/fixtures/early_abort/` (one folder each) were made with the real ML template
on CPU (smoke profile) and varied edits of train.py (`--make` turns a research repo's night into
such a folder).

For each candidate of the night (not a baseline, not a re-measurement), in order, the rule is fed
its recorded curve against the reference the engine would have had then (earlyabort.reference_for
on the records before it). Printed: runs checked, runs stopped, how many of the stopped were
eventual keeps (the number that must be 0), and the time saved: on the corpus, (1 - p) of the
run's training time plus its evaluation; projected on the 5-minute GPU budget, (1 - p) * 300 s.
The night after a stop is replayed as recorded (a stopped run would have been discarded anyway
unless it was a keep, which is what the count reports).

    python benchmarks/early_abort_replay.py [CORPUS] [--sweep] [--json]
    python benchmarks/early_abort_replay.py --make REPO OUT      # a night into a corpus folder
"""

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from autoresearch.pipeline import earlyabort  # noqa: E402
from autoresearch.store import log

DEFAULT_CORPUS = ROOT / "tests" / "fixtures" / "early_abort"
GPU_BUDGET_S = 300.0
FIELDS = ("run", "status", "metric", "description", "repeat_of", "scope_hash", "duration_s")


def load(corpus):
    corpus = Path(corpus)
    manifest = json.loads((corpus / "manifest.json").read_text())
    runs = [log.Run.from_json(r) for r in manifest["runs"]]
    return manifest, runs, (lambda n: str(corpus / "runs" / str(n)))


def nights(corpus):
    """The night folders of a corpus: itself when it has a manifest, else its sub-folders that do."""
    corpus = Path(corpus)
    if (corpus / "manifest.json").exists():
        return [corpus]
    return sorted(p for p in corpus.iterdir() if (p / "manifest.json").exists())


def replay(corpus, rule):
    """The rule over every night of the corpus, added up."""
    parts = [replay_night(night, rule) for night in nights(corpus)]
    total = {"corpus": str(corpus), "nights": len(parts)}
    for key in ("runs", "checked", "stopped", "stopped_keeps", "saved_s", "night_s", "gpu_saved_s", "gpu_night_s"):
        total[key] = round(sum(p[key] for p in parts), 1) if isinstance(parts[0][key], float) else \
            sum(p[key] for p in parts)
    total["rule"] = parts[0]["rule"]
    total["stops"] = [dict(s, night=Path(p["corpus"]).name) for p in parts for s in p["stops"]]
    return total


def replay_night(corpus, rule):
    manifest, runs, run_dir_of = load(corpus)
    extra = {r["run"]: r for r in manifest["runs"]}
    checked, stopped = 0, []
    for i, r in enumerate(runs):
        prior = runs[:i]
        if r.repeat_of is not None or not any(p.status == "keep" for p in prior):
            continue   # a baseline or a re-measurement: the engine never checks those
        reference = earlyabort.reference_for(prior, run_dir_of)
        if reference is None:
            continue
        checked += 1
        curve = earlyabort.read_curve(os.path.join(run_dir_of(r.run), "steps.jsonl"))
        abort = earlyabort.replay(curve, reference, rule)
        if abort is None:
            continue
        info = extra[r.run]
        training = info.get("training_seconds") or 0.0
        saved = (1 - abort.progress) * training + (info.get("eval_seconds") or 0.0)
        stopped.append({"run": r.run, "status": r.status, "description": r.description,
                        "at": round(abort.progress, 3), "loss": round(abort.loss, 4),
                        "best_loss": round(abort.best_loss, 4), "saved_s": round(saved, 1),
                        "gpu_saved_s": round((1 - abort.progress) * GPU_BUDGET_S, 1)})
    total = sum(r.duration_s or 0 for r in runs)
    return {"corpus": str(corpus), "runs": len(runs), "checked": checked, "stopped": len(stopped),
            "stopped_keeps": sum(1 for s in stopped if s["status"] == "keep"),
            "saved_s": round(sum(s["saved_s"] for s in stopped), 1), "night_s": round(total, 1),
            "gpu_saved_s": round(sum(s["gpu_saved_s"] for s in stopped), 1),
            "gpu_night_s": round(len(runs) * GPU_BUDGET_S, 1),
            "rule": {"at": rule.at, "z": rule.z, "floor": rule.floor, "confirm": rule.confirm},
            "stops": stopped}


def summary_line(res):
    rule = res["rule"]
    return (f"at={rule['at']} z={rule['z']} floor={rule['floor']} confirm={rule['confirm']}: "
            f"{res['runs']} runs in {res['nights']} nights, {res['checked']} candidates checked, {res['stopped']} stopped, "
            f"{res['stopped_keeps']} of them eventual keeps; saved {res['saved_s']:.0f} s of "
            f"{res['night_s']:.0f} s on the corpus; projected {res['gpu_saved_s']:.0f} GPU-s of "
            f"{res['gpu_night_s']:.0f} at a 300 s budget")


def make(repo, out):
    """A research repo's recorded night (log + run folders) as a corpus folder: records and steps."""
    repo, out = Path(repo), Path(out)
    night = log.load(str(repo / log.LOG_NAME))
    seg = night.current
    records = []
    for r in seg.runs:
        folder = repo / ".autoresearch" / "runs" / str(r.run)
        entry = {k: getattr(r, k) for k in FIELDS}
        try:
            summary = json.loads((folder / "summary.json").read_text())
        except (OSError, ValueError):
            summary = {}
        entry.update(training_seconds=summary.get("training_seconds"), eval_seconds=summary.get("eval_seconds"))
        records.append(entry)
        if (folder / "steps.jsonl").exists():
            (out / "runs" / str(r.run)).mkdir(parents=True, exist_ok=True)
            shutil.copy(folder / "steps.jsonl", out / "runs" / str(r.run) / "steps.jsonl")
    meta = {"made_from": "the ML template (assets/) on CPU, smoke profile, synthetic data",
            "metric": seg.config.metric_name, "direction": seg.config.direction, "runs": records}
    (out / "manifest.json").write_text(json.dumps(meta, indent=1) + "\n")
    return len(records)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("corpus", nargs="?", default=str(DEFAULT_CORPUS))
    p.add_argument("--sweep", action="store_true", help="also replay other progress points and floors")
    p.add_argument("--json", action="store_true")
    p.add_argument("--make", nargs=2, metavar=("REPO", "OUT"))
    args = p.parse_args(argv)
    if args.make:
        print(f"wrote {make(*args.make)} runs into {args.make[1]}")
        return 0
    results = [replay(args.corpus, earlyabort.Rule())]
    if args.sweep:
        for at in (0.2, 0.3, 0.5, 0.7):
            results.append(replay(args.corpus, earlyabort.Rule(at=at)))
        for floor in (0.005, 0.02, 0.05, 0.1):
            results.append(replay(args.corpus, earlyabort.Rule(floor=floor)))
        results.append(replay(args.corpus, earlyabort.Rule(confirm=1)))
    if args.json:
        print(json.dumps(results[0] if len(results) == 1 else results))
        return 0
    for res in results:
        print(summary_line(res))
    for s in results[0]["stops"]:
        print(f"  {s['night']} run {s['run']} ({s['status']}): {s['description']}: stopped at {100 * s['at']:.0f}%, "
              f"loss {s['loss']} vs {s['best_loss']}, saves {s['saved_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
