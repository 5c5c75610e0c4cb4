#!/usr/bin/env bash
# tools/soak.sh [BIN]: is stormwatch's memory flat once its store is full, and what does its exit
# cost? Runs `stormwatch collect --max-spans $MAXSPANS` (default 1000000) on loopback ports, sends
# it fixture traffic at a steady rate for $DUR seconds (default 600: ten minutes) with `stormwatch
# replay --loop --speed $SPEED` (default 40: the 27x fixture's own pace 40 times over, about 4,000
# spans a second - 200 gave 21,500 in a 5 s check; each pass with fresh trace ids; the held spans
# printed show the rate it gives), and prints every $EVERY
# seconds (default 10) the spans held and the process's RSS. At the end: the RSS slope (MiB a minute) over the last half of the run, which is
# after the store filled at this rate and this bound, and then, still under load, SIGTERM: the exit's
# duration and the highest RSS seen while it exited (sampled every 10 ms) against the RSS before.
# The store is full when held spans stop growing; a slope near 0 over the last half says flat.
# GRPC and HTTP are the addresses (127.0.0.1:14317 and :14318). Linux only (reads /proc); needs
# curl and bc. Not a test: it takes minutes and its figures depend on the machine.
set -euo pipefail
BIN=${1:-bin/stormwatch}
DUR=${DUR:-600}
EVERY=${EVERY:-10}
SPEED=${SPEED:-40}
MAXSPANS=${MAXSPANS:-1000000}
GRPC=${GRPC:-127.0.0.1:14317}
HTTP=${HTTP:-127.0.0.1:14318}
cd "$(dirname "$0")/.."
BIN=$(realpath "$BIN")
log=$(mktemp)
"$BIN" collect --grpc "$GRPC" --http "$HTTP" --max-spans "$MAXSPANS" --status-interval 0 >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 50); do curl -sf "$HTTP/metrics" >/dev/null && break; sleep 0.1; done
"$BIN" replay --to "$GRPC" --loop --speed "$SPEED" fixtures/amplification-27-stock.jsonl >/dev/null 2>&1 &
sender=$!
trap 'kill "$pid" "$sender" 2>/dev/null || true; rm -f "$log"' EXIT
held() { curl -sf "$HTTP/metrics" | awk '/^stormwatch_held_spans /{printf "%d", $2}'; }
rss() { echo $(($(awk '/VmRSS/{print $2}' "/proc/$pid/status") / 1024)); }
start=$(date +%s)
samples=()
echo "seconds held_spans rss_mib"
while :; do
	sleep "$EVERY"
	t=$(($(date +%s) - start))
	r=$(rss)
	echo "$t $(held) $r"
	samples+=("$t $r")
	[ "$t" -ge "$DUR" ] && break
done
# Least-squares slope of RSS over the last half of the samples, in MiB a minute.
half=$((${#samples[@]} / 2))
slope=$(printf '%s\n' "${samples[@]:$half}" | awk '{n++; sx+=$1; sy+=$2; sxx+=$1*$1; sxy+=$1*$2}
	END {d = n*sxx - sx*sx; if (d == 0) print "n/a"; else printf "%.2f", 60*(n*sxy - sx*sy)/d}')
before=$(rss)
s=$(date +%s.%N)
kill -TERM "$pid"
peak=$before
while kill -0 "$pid" 2>/dev/null; do
	r=$(awk '/VmRSS/{print int($2/1024)}' "/proc/$pid/status" 2>/dev/null || echo 0)
	[ "${r:-0}" -gt "$peak" ] && peak=$r
	sleep 0.01
done
wait "$pid" || true
e=$(date +%s.%N)
echo "collect $BIN --max-spans $MAXSPANS, replay --speed $SPEED for ${DUR}s: RSS slope over the last half $slope MiB/min;"
kill "$sender" 2>/dev/null || true
echo "exit after SIGTERM under load $(echo "$e-$s" | bc) s, RSS $before MiB before, at most $peak MiB while exiting ($(echo "scale=1; ($peak-$before)*100/$before" | bc)%)"
