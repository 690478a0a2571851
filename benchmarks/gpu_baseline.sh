#!/usr/bin/env bash
# Device check: prepare data, fit the baseline to this machine's accelerator, run one full
# experiment (TIME_BUDGET seconds of training + eval + sample) and print what it measured:
# val_bpb, MFU, tokens/s, peak memory, attention backend, dtype.
#
#   bash benchmarks/gpu_baseline.sh [SOURCE]      # SOURCE: climbmix | tinystories | synthetic | PATH
#   PROFILE=smoke bash benchmarks/gpu_baseline.sh # the CPU smoke profile (checks this script in ~1 min)
#
# Default SOURCE is synthetic (works offline): throughput, MFU and memory are real, val_bpb is not
# comparable with real text (and the small synthetic vocabulary shrinks the lm_head).
# Files go under $OUT (device tool) or a temp dir: output.log, steps.jsonl, summary.json, sample.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${OUT:-$(mktemp -d)}/gpu-baseline
mkdir -p "$work/repo" "$work/run"
cp "$root"/assets/*.py "$root"/autoresearch.sh "$work/repo/"
export AUTORESEARCH_CACHE="$work/cache" AUTORESEARCH_PYTHON="${AUTORESEARCH_PYTHON:-python3}"
export AUTORESEARCH_RUN_DIR="$work/run" AUTORESEARCH_STEPS_FILE="$work/run/steps.jsonl"
cd "$work/repo"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$AUTORESEARCH_PYTHON -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
$AUTORESEARCH_PYTHON prepare.py --source "${1:-synthetic}" --profile "${PROFILE:-default}" --fit-baseline
sed -n '/>>> baseline/,/<<< baseline/p' train.py
bash autoresearch.sh > "$work/run/output.log" 2>&1 || { tail -n 40 "$work/run/output.log"; exit 1; }
grep -E '^(Device|Model|Batch):' "$work/run/output.log"
tail -n 4 "$work/run/steps.jsonl"
sed -n '/^---$/,$p' "$work/run/output.log"
