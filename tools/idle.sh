#!/usr/bin/env bash
# tools/idle.sh [BIN]: what stormwatch costs while it holds spans and nothing arrives.
# Fills a process on loopback ports with replayed fixture traffic (fresh trace ids each pass), in
# rounds of $DUR (default 20s) until it holds 990,000 spans of its --max-spans 1000000 (at most
# 10 rounds: a loaded machine fills slower), lets the traces settle and the windowed detectors
# run once more, then reads the
# process's CPU time and RSS from /proc over $IDLE seconds (default 60; 300 for "flat over five
# minutes", RSS printed every minute) with no traffic, and times its exit after SIGTERM (until
# the process has exited, not until tmux has reaped it).
# MODE=collect (default) runs `stormwatch collect`; MODE=dashboard runs `stormwatch` (collector and
# dashboard in one process) in a detached tmux session of its own, 160x48, on the screen SCREEN
# (1 dependencies, the default; 2 operations; 3 findings). GRPC and HTTP are the addresses
# (127.0.0.1:14317 and :14318). Linux only (reads /proc); needs curl and bc, and tmux for the
# dashboard.
set -euo pipefail
BIN=${1:-bin/stormwatch}
DUR=${DUR:-20s}
IDLE=${IDLE:-60}
MODE=${MODE:-collect}
SCREEN=${SCREEN:-1}
GRPC=${GRPC:-127.0.0.1:14317}
HTTP=${HTTP:-127.0.0.1:14318}
cd "$(dirname "$0")/.."
BIN=$(realpath "$BIN")
log=$(mktemp)
ports=(--grpc "$GRPC" --http "$HTTP" --max-spans 1000000)
sock=stormwatch-idle-$$
case $MODE in
collect)
	"$BIN" collect "${ports[@]}" >"$log" 2>&1 &
	pid=$!
	trap 'kill "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
	;;
dashboard)
	tmux -L "$sock" new-session -d -x 160 -y 48 "exec $BIN ${ports[*]} --log-file $log 2>>$log"
	trap 'tmux -L "$sock" kill-server 2>/dev/null || true; rm -f "$log"' EXIT
	pid=$(tmux -L "$sock" list-panes -F '#{pane_pid}')
	;;
*)
	echo "MODE=$MODE: collect or dashboard" >&2
	exit 2
	;;
esac
for _ in $(seq 50); do curl -sf "$HTTP/metrics" >/dev/null && break; sleep 0.1; done
if [ "$MODE" = dashboard ]; then tmux -L "$sock" send-keys "$SCREEN"; fi
held() {
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "$MODE $BIN: the process is gone; its log:" >&2
		tail -20 "$log" >&2
		exit 1
	fi
	curl -sf "$HTTP/metrics" | awk '/^stormwatch_held_spans /{printf "%d", $2}'
}
for _ in $(seq 10); do
	"$BIN" replay --to "$GRPC" --max --duration "$DUR" --connections 2 fixtures/amplification-27-stock.jsonl >/dev/null 2>&1
	sleep 2
	[ "$(held)" -ge 990000 ] && break
done
# Past --settle, the windowed detectors' run after the last analysis, and the idle release (5 s
# later). That run comes up to the window interval after the one before, which is 10 s or, after a
# long run, longer (stormwatch_window_interval_seconds: about 50 s after a run of a second).
every=$(curl -sf "$HTTP/metrics" | awk '/^stormwatch_window_interval_seconds /{printf "%d", $2}')
sleep $((${every:-10} + 15 > 25 ? ${every:-10} + 15 : 25))
held=$(held)
clk=$(getconf CLK_TCK)
rss() { echo $(($(awk '/VmRSS/{print $2}' "/proc/$pid/status") / 1024)); }
t0=$(awk '{print $14+$15}' "/proc/$pid/stat")
r0=$(rss)
rs=$r0
for ((left = IDLE; left > 0; left -= 60)); do
	sleep $((left < 60 ? left : 60))
	rs="$rs -> $(rss)"
done
t1=$(awk '{print $14+$15}' "/proc/$pid/stat")
s=$(date +%s.%N)
kill -TERM "$pid"
if [ "$MODE" = collect ]; then
	wait "$pid" || true
else
	# The process has exited once it is a zombie. tmux (3.3a here) reaps its pane's process up to
	# 2 s later, the same for a plain sleep in the pane: that is tmux's time, not stormwatch's.
	while [ -e "/proc/$pid" ] && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]; do sleep 0.01; done
fi
e=$(date +%s.%N)
echo "$MODE $BIN: $held spans held; idle ${IDLE}s: $(echo "scale=2; ($t1-$t0)*100/$clk/$IDLE" | bc)% of a core, RSS $rs MiB; exit after SIGTERM $(echo "$e-$s" | bc) s"
