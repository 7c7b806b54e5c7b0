#!/usr/bin/env bash
# memoir sync throughput: a 1,000-session generated store pushed to a local
# memoir serve (file store, fsync), first sync and no-op re-sync; peer: rsync
# of the same store directory to a local directory (first and no-op).
set -euo pipefail
BIN=${BIN:?}
CORPUS=${CORPUS:?}
W=/tmp/sync/bench/w
rm -rf $W; mkdir -p $W/home
export HOME=$W/home MEMOIR_HOME=$W/home/memoir
$CORPUS --seed 7 --sessions 1000 --mb 200 --out $W/src >/dev/null
CLAUDE_CONFIG_DIR=$W/src/claude CODEX_HOME=$W/src/codex $BIN import --all --dir $W/store --json > $W/import.json
echo "store: $(ls $W/store/*.jsonl | wc -l) sessions, $(du -sm $W/store | cut -f1) MB on disk ($(cat $W/store/*.jsonl | wc -c) bytes of logs)"
TOKEN=bench-token-0123456789abcdef
$BIN serve --store $W/server --token team=$TOKEN --listen 127.0.0.1:18477 >/dev/null 2>&1 &
SERVE=$!
trap 'kill $SERVE 2>/dev/null || true' EXIT
for i in $(seq 100); do curl -sf http://127.0.0.1:18477/healthz >/dev/null && break; sleep 0.1; done
t() { local s=$(date +%s.%N); "$@"; local e=$(date +%s.%N); echo "wall_s=$(echo "$e - $s" | bc)"; }
echo "## memoir sync --dry-run"; t $BIN sync --remote http://127.0.0.1:18477 --token $TOKEN --dir $W/store --dry-run --json | tr -d '\n '; echo
echo "## memoir sync (first)"; t $BIN sync --remote http://127.0.0.1:18477 --token $TOKEN --dir $W/store --json | tr -d '\n '; echo
echo "## memoir sync (no-op re-sync)"; t $BIN sync --remote http://127.0.0.1:18477 --token $TOKEN --dir $W/store --json | tr -d '\n '; echo
rm -rf $W/store/sync
echo "## memoir sync (re-sync without the cursor file: heads query + read + digest check)"; t $BIN sync --remote http://127.0.0.1:18477 --token $TOKEN --dir $W/store --json | tr -d '\n '; echo
echo "## memoir sync --no-redact into a fresh project"; 
kill $SERVE; wait $SERVE 2>/dev/null || true
$BIN serve --store $W/server2 --token team=$TOKEN --listen 127.0.0.1:18477 >/dev/null 2>&1 &
SERVE=$!
for i in $(seq 100); do curl -sf http://127.0.0.1:18477/healthz >/dev/null && break; sleep 0.1; done
t $BIN sync --remote http://127.0.0.1:18477 --token $TOKEN --dir $W/store --no-redact --json | tr -d '\n '; echo
echo "## peer: rsync -a store/ (first)"; t rsync -a --exclude sync $W/store/ $W/rsync/
echo "## peer: rsync -a store/ (no-op)"; t rsync -a --exclude sync $W/store/ $W/rsync/
echo "server store: $(du -sm $W/server | cut -f1) MB"
