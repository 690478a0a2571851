#!/usr/bin/env bash
# Device check: every GPU figure of the ML template as one JSON object (benchmarks/gpu_baseline.py
# says what it runs and measures). Made for one call on a lent GPU machine, under 8 minutes with the
# default budgets: offline, with the torch that machine already has, and where Landlock is missing
# (gVisor) the harness's seal says so and the run goes on (detection only; the JSON says which).
#
#   bash benchmarks/gpu_baseline.sh                 # on the GPU machine: figures.json + logs in $OUT
#   bash benchmarks/gpu_baseline.sh --dry-run       # on a CPU: the same script, smoke profile, seconds
#   bash benchmarks/gpu_baseline.sh --fetch-wheels  # here, with network: the packages it lacks, into .whl/
#
# Packages the GPU machine lacks (rustbpe for prepare.py's tokenizer; `kernels`, the FA3 loader)
# travel as wheels in .whl/ at the repo root (ignored by git; carry it with the call). They are
# installed into the machine's own Python environment, not with --target/PYTHONPATH: autoresearch.sh
# starts the harness with `python -I`, which ignores PYTHONPATH.
# Python: $AUTORESEARCH_PYTHON, else python3. BUDGET / BUDGET_24: training seconds of the two runs;
# WARM_RUN=1 adds the default tier once more on the warm compile cache (BUDGET_WARM seconds).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
wheels=${WHEELS:-$root/.whl}
py=${AUTORESEARCH_PYTHON:-python3}

if [ "${1:-}" = "--fetch-wheels" ]; then
    mkdir -p "$wheels"
    # keep the wheels out of git (in a worktree, add /.whl/ to the ignore rules yourself)
    if [ -d "$root/.git/info" ] && ! grep -qx '/.whl/' "$root/.git/info/exclude" 2>/dev/null; then
        echo '/.whl/' >> "$root/.git/info/exclude"
    fi
    # Python 3.12 on manylinux x86_64, as the lent machine has; the `kernels` lower bound is the
    # template's. Its other needs: huggingface_hub, packaging and pyyaml are on that machine;
    # sigstore and tomlkit serve only its command-line tools, never get_kernel.
    spec=$(sed -n 's/^ *"\(kernels[^";]*\).*/\1/p' "$root/assets/pyproject.toml" | head -n 1)
    for req in rustbpe "${spec:-kernels}"; do
        python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
            --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
            --platform manylinux2014_x86_64 --platform any -d "$wheels" "$req" || exit 1
    done
    ls -l "$wheels"
    exit 0
fi

if compgen -G "$wheels/*.whl" >/dev/null; then
    # --no-index: the machine is offline; --no-deps: each needed package is a wheel of its own.
    missing=()
    for whl in "$wheels"/*.whl; do
        name=$(basename "$whl" | cut -d- -f1)
        $py -c "import importlib.metadata as m, sys; m.version(sys.argv[1])" "$name" 2>/dev/null || missing+=("$whl")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        $py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir "${missing[@]}" \
            || { echo "gpu_baseline.sh: could not install ${missing[*]}" >&2; exit 1; }
    fi
fi

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >&2
export AUTORESEARCH_PYTHON="$py"
exec $py "$root/benchmarks/gpu_baseline.py" "$@"
