#!/usr/bin/env bash
# tools/idle.sh [BIN]: what `stormwatch collect` costs while it holds spans and nothing arrives.
# Fills a collect on loopback ports with replayed fixture traffic (fresh trace ids each pass) for
# $DUR (default 45s: about 1M spans on a 2-core machine), lets the traces settle, then reads the
# process's CPU time and RSS from /proc over $IDLE seconds (default 60) with no traffic, and times
# its exit after SIGTERM. Linux only (reads /proc); needs curl and bc.
set -euo pipefail
BIN=${1:-bin/stormwatch}
DUR=${DUR:-45s}
IDLE=${IDLE:-60}
cd "$(dirname "$0")/.."
log=$(mktemp)
"$BIN" collect --grpc 127.0.0.1:14317 --http 127.0.0.1:14318 --max-spans 1000000 >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 50); do curl -sf 127.0.0.1:14318/metrics >/dev/null && break; sleep 0.1; done
"$BIN" replay --to 127.0.0.1:14317 --max --duration "$DUR" --connections 2 fixtures/amplification-27-stock.jsonl >/dev/null 2>&1
sleep 15 # past --settle and the first windowed pass
clk=$(getconf CLK_TCK)
t0=$(awk '{print $14+$15}' "/proc/$pid/stat"); r0=$(awk '/VmRSS/{print $2}' "/proc/$pid/status")
sleep "$IDLE"
t1=$(awk '{print $14+$15}' "/proc/$pid/stat"); r1=$(awk '/VmRSS/{print $2}' "/proc/$pid/status")
s=$(date +%s.%N); kill -TERM "$pid"; wait "$pid" || true; e=$(date +%s.%N)
held=$(grep -o '[0-9]* spans accepted' "$log" | tail -1)
echo "$BIN: $held; idle ${IDLE}s: $(echo "scale=2; ($t1-$t0)*100/$clk/$IDLE" | bc)% of a core, RSS $((r0/1024)) -> $((r1/1024)) MiB; exit after SIGTERM $(echo "$e-$s" | bc) s"
