#!/usr/bin/env bash
# Differential usage test: memoir against ccusage on generated Claude Code
# trees. Installs a pinned ccusage with npm into a temp dir, generates a tree
# (.ci/ccusage/gen_claude_tree.py), imports it with `memoir import`, and
# compares `memoir usage --by session|day --json` with `ccusage claude
# session|daily --offline --json` per session and per day
# (.ci/ccusage/compare.py). Fails on any difference not documented in
# docs/USAGE.md ("Comparison with ccusage").
#
# Usage: .ci/ccusage.sh [MEMOIR_BIN]   (default: builds target/debug/memoir)
# Environment: CCUSAGE_BIN (skip the npm install), SEEDS (default "7 11 23").
set -euo pipefail
cd "$(dirname "$0")/.."

# ccusage 20.0.26's Linux binary is not on npm; 20.0.24 is the newest that runs.
CCUSAGE_VERSION=20.0.24
SEEDS="${SEEDS:-7 11 23}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

if [ -z "${CCUSAGE_BIN:-}" ]; then
  npm install --silent --no-audit --no-fund --prefix "$WORK/npm" "ccusage@$CCUSAGE_VERSION" >/dev/null
  CCUSAGE_BIN="$(find "$WORK/npm/node_modules/@ccusage" -path '*/bin/ccusage' -type f | head -n 1)"
  chmod +x "$CCUSAGE_BIN"
fi
MEMOIR_BIN="${1:-}"
if [ -z "$MEMOIR_BIN" ]; then
  cargo build --quiet -p memoir-cli
  MEMOIR_BIN="${CARGO_TARGET_DIR:-target}/debug/memoir"
fi

status=0
for seed in $SEEDS; do
  run="$WORK/seed-$seed"
  mkdir -p "$run/home" "$run/memoir-home"
  python3 .ci/ccusage/gen_claude_tree.py "$run/claude" --seed "$seed"
  # Both tools read only the generated tree and their own empty homes.
  export HOME="$run/home" CLAUDE_CONFIG_DIR="$run/claude" MEMOIR_HOME="$run/memoir-home"
  "$CCUSAGE_BIN" claude session --offline --json --timezone UTC >"$run/c-session.json"
  "$CCUSAGE_BIN" claude daily --offline --json --timezone UTC >"$run/c-day.json"
  "$MEMOIR_BIN" import claude "$run/claude/projects" --dir "$run/store" >/dev/null
  "$MEMOIR_BIN" usage --dir "$run/store" --by session --timezone UTC --json >"$run/m-session.json"
  "$MEMOIR_BIN" usage --dir "$run/store" --by day --timezone UTC --json >"$run/m-day.json"
  echo "seed $seed:"
  python3 .ci/ccusage/compare.py \
    --memoir-session "$run/m-session.json" --memoir-day "$run/m-day.json" \
    --ccusage-session "$run/c-session.json" --ccusage-day "$run/c-day.json" || status=1
done
exit "$status"
