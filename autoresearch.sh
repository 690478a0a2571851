#!/usr/bin/env bash
# The ML benchmark: train.py trains and leaves its weights; the harness's evaluator (a process of
# its own, started alongside so its imports overlap training) computes val_bpb from them and prints
# the summary block, which becomes the `METRIC key=value` lines for the engine. Nothing train.py
# prints (in training, or from its model code while the evaluator runs it) can become a metric or
# pass for this script's verdict: that output passes through with `METRIC` and `autoresearch.sh:`
# defused. Exits non-zero when training or evaluation fails, with the reason as the last line, on
# stderr: `autoresearch.sh: train.py failed (exit N): ...` or `autoresearch.sh: the evaluation
# failed (exit N): ...` (the diagnoser trusts that line over what train.py printed).
#
# Python: $AUTORESEARCH_PYTHON if set (split on spaces, e.g. "uv run python"), else `uv run python`
# when uv is on PATH and pyproject.toml exists, else python3.
set -uo pipefail
cd "$(dirname "$0")" || exit 1

if [ -n "${AUTORESEARCH_PYTHON:-}" ]; then
    read -r -a PY <<< "$AUTORESEARCH_PYTHON"
elif command -v uv >/dev/null 2>&1 && [ -f pyproject.toml ]; then
    PY=(uv run python)
else
    PY=(python3)
fi

# What the processes print, with the tokens that only this script may write made inert (byte-wise,
# so no encoding can hide one): `METRIC` (a result) and `autoresearch.sh:` (this script's verdict).
defuse() { LC_ALL=C sed -u "s/METRIC/METRIC($1)/g; s/autoresearch\.sh:/autoresearch.sh($1):/g"; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/autoresearch-run.XXXXXX") || exit 1
evpid=
cleanup() { [ -n "$evpid" ] && { echo stop > "$tmp/go"; wait "$evpid" 2>/dev/null; }; rm -rf "$tmp"; }
trap cleanup EXIT

# What the evaluator scores with is fixed before train.py starts, here, where train.py cannot
# change it: the hash of manifest.json (which records the sha256 of every prepared file) and of
# train.py itself. The evaluator refuses a manifest, a prepared file or a train.py that differs
# (references/holdout.md).
sha256_of() {
    if [ ! -f "$1" ]; then
        echo none
    elif command -v sha256sum >/dev/null 2>&1; then
        sha256sum < "$1" | cut -d' ' -f1
    else
        shasum -a 256 < "$1" | cut -d' ' -f1
    fi
}
manifest_sha=$(sha256_of "${AUTORESEARCH_CACHE:-$(printf %s ~)/.cache/autoresearch}/prepared/manifest.json")
train_sha=$(sha256_of train.py)

# The evaluator starts once training has logged its first step (start-up and compilation are
# done, so its imports overlap the timed steps), then waits for "go".
(
    while [ -n "${AUTORESEARCH_STEPS_FILE:-}" ] && [ ! -s "$AUTORESEARCH_STEPS_FILE" ] && [ ! -e "$tmp/go" ]; do
        sleep 0.2
    done
    [ "$(cat "$tmp/go" 2>/dev/null)" = stop ] && exit 0
    "${PY[@]}" -I -u harness.py evaluate --go "$tmp/go" --parent $$ --manifest-sha "$manifest_sha" --train-sha "$train_sha" 2>&1 | defuse evaluate | tee "$tmp/eval"
) &
evpid=$!

# train.py runs sealed off the holdout (harness.py train: Landlock, then exec train.py); the
# evaluator above was started outside that seal and still reads it.
PYTHONUNBUFFERED=1 "${PY[@]}" -I harness.py train train.py 2>&1 | defuse train.py | tee "$tmp/train"
status=${PIPESTATUS[0]}

if [ "$status" -ne 0 ]; then
    why=$(grep -E '^(FAIL|[A-Za-z_.]*(Error|Exception|Interrupt)\b)' "$tmp/train" | tail -n 1)
    [ -n "$why" ] || why=$(grep -v '^[[:space:]]*$' "$tmp/train" | tail -n 1)
    echo "autoresearch.sh: train.py failed (exit $status): ${why:-no output}" >&2
    exit "$status"
fi

# A tool may have printed text without a final newline at exit (triton's "leaked ..." lines):
# everything from here starts on a fresh line.
[ -s "$tmp/train" ] && [ -n "$(tail -c 1 "$tmp/train")" ] && echo
echo go > "$tmp/go"
wait "$evpid"
evstatus=$?
evpid=
if [ "$evstatus" -ne 0 ]; then
    why=$(grep -E '^(FAIL|[A-Za-z_.]*(Error|Exception)\b)' "$tmp/eval" | tail -n 1)
    echo "autoresearch.sh: the evaluation failed (exit $evstatus): ${why:-no output}" >&2
    exit 1
fi
[ -s "$tmp/eval" ] && [ -n "$(tail -c 1 "$tmp/eval")" ] && echo

metrics=$(awk '
    /^---[[:space:]]*$/ { n = 0; split("", lines); started = 1; next }
    started && match($0, /^[A-Za-z_][A-Za-z0-9_]*:[[:space:]]+/) {
        key = substr($0, 1, index($0, ":") - 1)
        value = $0; sub(/^[^:]*:[[:space:]]+/, "", value); sub(/[[:space:]]+$/, "", value)
        if (value ~ /^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$/) lines[++n] = "METRIC " key "=" value
    }
    END { for (i = 1; i <= n; i++) print lines[i] }
' "$tmp/eval")

if ! grep -q '^METRIC val_bpb=' <<< "$metrics"; then
    echo "autoresearch.sh: the evaluation printed no numeric val_bpb after a '---' line" >&2
    exit 1
fi
echo "$metrics"
