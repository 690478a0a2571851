#!/usr/bin/env bash
# Installs what the browser and plugin tests drive for real:
#   - Debian's chromium (headless) for the report tests,
#   - the Claude Code CLI, pinned, into .tools/ for the plugin tests,
#   - uv, pinned, into .tools/uv/ for the ML template's uv route (uv sync + uv run),
#   - tmux, which `autoresearch night` starts itself in (tests/plugin/test_plugin_night.py),
#   - bubblewrap and socat: Claude Code's Bash sandbox needs both on Linux (`night` runs the agent
#     in it: tests/plugin/test_agent_sandbox.py), and the engine runs each benchmark in bubblewrap
#     (tests/integrity/test_benchmark_boundary.py).
# Tests that need them skip when they are missing, unless AUTORESEARCH_REQUIRE_ALL=1 (CI).
set -euo pipefail
cd "$(dirname "$0")/.."
CLAUDE_CODE_VERSION="${CLAUDE_CODE_VERSION:-2.1.332}"
UV_VERSION="${UV_VERSION:-0.13.9}"
PYTHON="${PYTHON:-python3}"

if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "install-test-tools: chromium is missing; install it with your package manager (Debian: apt-get install chromium)" >&2
  fi
fi

if ! command -v tmux >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >/dev/null
  else
    echo "install-test-tools: tmux is missing; install it with your package manager (Debian: apt-get install tmux)" >&2
  fi
fi

for tool in bwrap:bubblewrap socat:socat; do
  if ! command -v "${tool%%:*}" >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${tool#*:}" >/dev/null
    else
      echo "install-test-tools: ${tool%%:*} is missing; install it with your package manager (Debian: apt-get install ${tool#*:})" >&2
    fi
  fi
done

if [ ! -x .tools/node_modules/.bin/claude ] || \
   [ "$(.tools/node_modules/.bin/claude --version 2>/dev/null | cut -d' ' -f1)" != "$CLAUDE_CODE_VERSION" ]; then
  mkdir -p .tools
  npm install --silent --no-audit --no-fund --prefix .tools "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" >/dev/null
fi
if [ ! -x .tools/uv/bin/uv ] || [ "$(.tools/uv/bin/uv --version 2>/dev/null | cut -d' ' -f2)" != "$UV_VERSION" ]; then
  rm -rf .tools/uv
  "$PYTHON" -m pip install -q --disable-pip-version-check --target .tools/uv "uv==$UV_VERSION"
fi
echo "install-test-tools: chromium $(chromium --version 2>/dev/null | awk '{print $2}'), claude $(.tools/node_modules/.bin/claude --version 2>/dev/null), $(tmux -V 2>/dev/null), $(bwrap --version 2>/dev/null), socat $(socat -V 2>/dev/null | awk '/socat version/ {print $3}'), $(.tools/uv/bin/uv --version 2>/dev/null)"
