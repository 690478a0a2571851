#!/usr/bin/env bash
# The ML benchmark: run train.py, pass its output through, then print the summary block
# (the `key: value` lines after the last `---`) as `METRIC key=value` lines for the engine.
# Exits non-zero, with the reason on stderr, when training fails or leaves no val_bpb.
#
# Python: $AUTORESEARCH_PYTHON if set (split on spaces, e.g. "uv run python"), else `uv run`
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

out=$(mktemp "${TMPDIR:-/tmp}/autoresearch-train.XXXXXX") || exit 1
trap 'rm -f "$out"' EXIT

PYTHONUNBUFFERED=1 "${PY[@]}" train.py 2>&1 | tee "$out"
status=${PIPESTATUS[0]}

if [ "$status" -ne 0 ]; then
    why=$(grep -E '^(FAIL|[A-Za-z_.]*(Error|Exception|Interrupt)\b)' "$out" | tail -n 1)
    [ -n "$why" ] || why=$(grep -v '^[[:space:]]*$' "$out" | tail -n 1)
    echo "autoresearch.sh: train.py failed (exit $status): ${why:-no output}" >&2
    exit "$status"
fi

metrics=$(awk '
    /^---[[:space:]]*$/ { n = 0; split("", lines); started = 1; next }
    started && match($0, /^[A-Za-z_][A-Za-z0-9_]*:[[:space:]]+/) {
        key = substr($0, 1, index($0, ":") - 1)
        value = $0; sub(/^[^:]*:[[:space:]]+/, "", value); sub(/[[:space:]]+$/, "", value)
        if (value ~ /^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$/) lines[++n] = "METRIC " key "=" value
    }
    END { for (i = 1; i <= n; i++) print lines[i] }
' "$out")

if ! grep -q '^METRIC val_bpb=' <<< "$metrics"; then
    echo "autoresearch.sh: train.py exited 0 but printed no numeric val_bpb after a '---' line" >&2
    exit 1
fi
echo "$metrics"
