#!/usr/bin/env bash
# Device check: every GPU figure the template's issues ask for, in one script (about 10 minutes on
# an H100-class GPU; run it once when a GPU is lent):
#   1. the uv route: `uv sync` (pinned CUDA 12.8 torch, kernels for FA3) and torch's view of the GPU;
#   2. the baseline: one full experiment through `bash autoresearch.sh` (TIME_BUDGET seconds of
#      training, the evaluator process, the hidden holdout): val_bpb (ours and karpathy's byte
#      count), MFU, steps, tokens, peak memory, attention backend, dtype, the time outside the
#      training budget and the holdout's share of it;
#   3. the attention backends at the 24 GiB tier (SSSL FlexAttention vs all-L SDPA vs FA3 vs a
#      dense SDPA window mask), from benchmarks/attention_backends.py.
#
#   bash benchmarks/gpu_baseline.sh [SOURCE]      # SOURCE: climbmix | tinystories | synthetic | PATH
#   PROFILE=smoke NO_UV=1 bash benchmarks/gpu_baseline.sh   # checks this script on a CPU in ~1 min
#
# Default SOURCE is synthetic (works offline): throughput, MFU and memory are real, val_bpb is not
# comparable with real text. Use climbmix (network) for the val_bpb <= 0.998 comparison.
# Python: uv's (`uv run python`) unless NO_UV=1, then $AUTORESEARCH_PYTHON or python3.
# Files go under $OUT (device tool) or a temp dir: output.log, steps.jsonl, summary.json, figures.json.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${OUT:-$(mktemp -d)}/gpu-baseline
mkdir -p "$work/repo" "$work/run"
cp "$root"/assets/*.py "$root"/assets/pyproject.toml "$root"/autoresearch.sh "$work/repo/"
export AUTORESEARCH_CACHE="$work/cache"
export AUTORESEARCH_RUN_DIR="$work/run" AUTORESEARCH_STEPS_FILE="$work/run/steps.jsonl"
cd "$work/repo"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

echo "== 1. the uv route"
if [ -z "${NO_UV:-}" ] && command -v uv >/dev/null; then
    t0=$(date +%s)
    uv sync -q
    echo "uv sync: $(( $(date +%s) - t0 ))s"
    export AUTORESEARCH_PYTHON="uv run python"
else
    export AUTORESEARCH_PYTHON="${AUTORESEARCH_PYTHON:-python3}"
fi
$AUTORESEARCH_PYTHON -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
    "| device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")'
$AUTORESEARCH_PYTHON -c 'import kernels; print("kernels", kernels.__version__)' 2>/dev/null || echo "kernels: not installed"

echo "== 2. the baseline"
$AUTORESEARCH_PYTHON prepare.py --source "${1:-synthetic}" --profile "${PROFILE:-default}" --fit-baseline
sed -n '/>>> baseline/,/<<< baseline/p' train.py
t0=$(date +%s.%N)
bash autoresearch.sh > "$work/run/output.log" 2>&1 || { tail -n 40 "$work/run/output.log"; exit 1; }
t1=$(date +%s.%N)
grep -E '^(Device|Model|Batch):|Causality probe' "$work/run/output.log"
tail -n 2 "$work/run/steps.jsonl"
sed -n '/^---$/,$p' "$work/run/output.log"
$AUTORESEARCH_PYTHON - "$work/run" "$t0" "$t1" <<'PY'
import json, sys
run, wall = sys.argv[1], float(sys.argv[3]) - float(sys.argv[2])
s = json.load(open(f"{run}/summary.json"))
h = json.load(open(f"{run}/holdout.json"))
outside = wall - s["training_seconds"]
fig = {"val_bpb": s["val_bpb"], "val_bpb_karpathy": s["val_bpb_karpathy"], "mfu_percent": s["mfu_percent"],
       "num_steps": s["num_steps"], "total_tokens_M": s["total_tokens_M"], "peak_vram_mb": s["peak_vram_mb"],
       "training_seconds": s["training_seconds"], "script_wall_s": round(wall, 1),
       "outside_budget_s": round(outside, 1), "eval_seconds": round(s["eval_seconds"], 1),
       "holdout_seconds": h["seconds"], "holdout_share_of_outside": round(h["seconds"] / outside, 4),
       "run": s["run"]}
json.dump(fig, open(f"{run}/figures.json", "w"), indent=1)
print(json.dumps(fig, indent=1))
PY

echo "== 3. attention backends at the 24 GiB tier (depth 6, device batch 32)"
if $AUTORESEARCH_PYTHON -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    $AUTORESEARCH_PYTHON "$root/benchmarks/attention_backends.py" --repo . --depth 6 --batch 32 --steps 20 \
        | tee "$work/run/attention.txt"
else
    echo "no CUDA: skipped"
fi
