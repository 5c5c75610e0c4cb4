#!/usr/bin/env bash
# tools/soak.sh [BIN]: is stormwatch's memory flat once its store is full, and what does its exit
# cost? Runs `stormwatch collect --max-spans $MAXSPANS` (default 1000000) on loopback ports, sends
# it fixture traffic at a steady rate for $DUR seconds (default 600: ten minutes) with `stormwatch
# replay --loop --speed $SPEED` (default 40: the 27x fixture's own pace 40 times over, about 4,000
# spans a second - 200 gave 21,500 in a 5 s check; each pass with fresh trace ids; the held spans
# printed show the rate it gives), and prints every $EVERY
# seconds (default 10) the spans held, the process's RSS and its CPU time so far. At the end: the
# RSS slope (MiB a minute) over the last half of the run, which is after the store filled at this
# rate and this bound; the median and highest RSS sampled once the store was full (99% of
# $MAXSPANS held; the peaks last a few seconds, so EVERY=2 to see them) and the CPU-seconds from
# then to the end; and then, still under load, SIGTERM: the exit's duration and the highest RSS
# seen while it exited (sampled every 10 ms) against the RSS before.
# The store is full when held spans stop growing; a slope near 0 over the last half says flat.
# GRPC and HTTP are the addresses (127.0.0.1:14317 and :14318); LOG=FILE keeps collect's output
# there (with GODEBUG=gctrace=1 in the environment: its every garbage collection). Linux only
# (reads /proc); needs curl and bc. Not a test: it takes minutes and its figures depend on the
# machine.
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
log=${LOG:-$(mktemp)}
"$BIN" collect --grpc "$GRPC" --http "$HTTP" --max-spans "$MAXSPANS" --status-interval 0 >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; [ -n "${LOG:-}" ] || rm -f "$log"' EXIT
for _ in $(seq 50); do curl -sf "$HTTP/metrics" >/dev/null && break; sleep 0.1; done
"$BIN" replay --to "$GRPC" --loop --speed "$SPEED" fixtures/amplification-27-stock.jsonl >/dev/null 2>&1 &
sender=$!
trap 'kill "$pid" "$sender" 2>/dev/null || true; [ -n "${LOG:-}" ] || rm -f "$log"' EXIT
held() { curl -sf "$HTTP/metrics" | awk '/^stormwatch_held_spans /{printf "%d", $2}'; }
rss() { echo $(($(awk '/VmRSS/{print $2}' "/proc/$pid/status") / 1024)); }
# cpu is the collector's CPU time so far (user + system, its garbage collector's included), in seconds.
cpu() { awk -v hz="$(getconf CLK_TCK)" '{sub(/.*\) /, ""); printf "%.1f", ($12 + $13) / hz}' "/proc/$pid/stat"; }
start=$(date +%s)
samples=()
full=() # "rss cpu" once the store is full
echo "seconds held_spans rss_mib cpu_s"
while :; do
	sleep "$EVERY"
	t=$(($(date +%s) - start))
	r=$(rss)
	h=$(held)
	c=$(cpu)
	echo "$t $h $r $c"
	samples+=("$t $r")
	if [ "${#full[@]}" -gt 0 ] || [ "${h:-0}" -ge $((MAXSPANS * 99 / 100)) ]; then
		full+=("$r $c")
	fi
	[ "$t" -ge "$DUR" ] && break
done
whenfull="store not full"
if [ "${#full[@]}" -gt 1 ]; then
	whenfull=$(printf '%s\n' "${full[@]}" | sort -n | awk '{r[NR]=$1; if (NR==1 || $2<c0) c0=$2; if ($2>c1) c1=$2}
		END {printf "once full (%d samples): RSS median %d MiB, highest %d MiB; %.1f CPU-s", NR, r[int((NR+1)/2)], r[NR], c1-c0}')
fi
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
echo "$whenfull"
kill "$sender" 2>/dev/null || true
echo "exit after SIGTERM under load $(echo "$e-$s" | bc) s, RSS $before MiB before, at most $peak MiB while exiting ($(echo "scale=1; ($peak-$before)*100/$before" | bc)%)"
