#!/usr/bin/env bash
# tools/analyze-vs-pdata.sh: `stormwatch analyze -` side by side with pdata's JSON unmarshal of the
# same OTLP/JSON stream (BenchmarkAnalyzeAgainstPdata: realistic traffic, about 815 bytes a span,
# piped from the benchmark process into each arm's process; each iteration runs analyze, pdata,
# pdata, analyze). Builds the cmd/stormwatch test binary once, runs 100k and 1M spans COUNT times
# (and 10M spans once when TEN_M=1), and prints per size the medians over iterations - analyze's
# CPU over pdata's (the goal: 1.0 or less), CPU-ns per span of each arm, how per-span cost grows
# from 100k spans (the goal: within 1.2x) - and the highest peak RSS of each arm (the goal: at
# most 256 MiB whatever the size).
#
# Environment (defaults in brackets):
#   COUNT    iterations of 100k and 1M; each gives one ratio [3]
#   TEN_M    1 to run 10M spans once after them (about 5 minutes on 2 cores) []
#   PROFILE  FILE: the analyze arm writes a CPU profile to FILE.SPANS (go tool pprof FILE.SPANS) []
#   OUT      where the test binary and the raw output go [a new temporary directory, kept]
# Linux only (peak RSS from getrusage). About 2 minutes with the defaults on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT=${COUNT:-3}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/analyze-vs-pdata.XXXXXX")}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

echo "building the cmd/stormwatch test binary into $OUT" >&2
go test -c -o "$OUT/stormwatch.test" ./cmd/stormwatch

raw=$OUT/bench.txt
{
	echo "# $(date -u '+%Y-%m-%d %H:%M:%S UTC') commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo '+changes')"
	echo "# COUNT=$COUNT TEN_M=${TEN_M:-}"
	echo "# before: $(uptime)"
} | tee "$raw"
bench() {
	if ! (
		cd cmd/stormwatch
		env ${PROFILE:+STORMWATCH_ANALYZE_CPUPROFILE="$PROFILE"} "$@" \
			"$OUT/stormwatch.test" -test.run '^$' -test.bench "$BENCH" -test.benchtime 1x -test.count "$N" -test.timeout 4h
	) 2>&1 | tee -a "$raw"; then
		echo "the benchmark failed; its output is in $raw" >&2
		exit 1
	fi
}
BENCH='^BenchmarkAnalyzeAgainstPdata$/^spans=(100000|1000000)$' N=$COUNT bench
if [ -n "${TEN_M:-}" ]; then
	echo "# 10M: $(uptime)" | tee -a "$raw"
	BENCH='^BenchmarkAnalyzeAgainstPdata$/^spans=10000000$' N=1 bench STORMWATCH_ANALYZE_10M=1
fi
echo "# after: $(uptime)" | tee -a "$raw"

# One row per size and metric, then medians (highest for peak RSS) per size.
awk '$1 ~ /^BenchmarkAnalyzeAgainstPdata\/spans=/ {
	split($1, a, "="); sub(/-[0-9]+$/, "", a[2])
	for (i = 3; i < NF; i += 2) print a[2], $(i+1), $i
}' "$raw" | sort -k1,1n -k2,2 -k3,3g | awk '
function flush() {
	if (key == "") return
	split(key, k, SUBSEP)
	v = (k[2] ~ /RSS/) ? vals[n] : (n % 2 ? vals[(n+1)/2] : (vals[n/2] + vals[n/2+1]) / 2)
	fig[k[1], k[2]] = v; lo[k[1], k[2]] = vals[1]; hi[k[1], k[2]] = vals[n]; runs[k[1]] = n
	if (!(k[1] in seen)) { seen[k[1]] = 1; sizes[++ns] = k[1] }
}
{ if (($1 SUBSEP $2) != key) { flush(); key = $1 SUBSEP $2; n = 0 } vals[++n] = $3 }
END {
	flush()
	printf "\n%-9s %5s %-18s %10s %10s %10s %10s %12s %12s %8s\n", "spans", "runs", "x-pdata-cpu", "analyze", "pdata", "flat-an", "flat-pd", "analyze-RSS", "pdata-RSS", "B/span"
	printf "%-9s %5s %-18s %10s %10s %10s %10s %12s %12s %8s\n", "", "", "median (min-max)", "CPU-ns/sp", "CPU-ns/sp", "x 100k", "x 100k", "peak MiB", "peak MiB", ""
	base = sizes[1]
	for (i = 1; i <= ns; i++) {
		s = sizes[i]
		printf "%-9s %5d %5.2f (%.2f-%.2f) %10.0f %10.0f %10.2f %10.2f %12.0f %12.0f %8.0f\n", s, runs[s],
			fig[s, "x-pdata-cpu"], lo[s, "x-pdata-cpu"], hi[s, "x-pdata-cpu"],
			fig[s, "analyze-CPU-ns/span"], fig[s, "pdata-CPU-ns/span"],
			fig[s, "analyze-CPU-ns/span"] / fig[base, "analyze-CPU-ns/span"], fig[s, "pdata-CPU-ns/span"] / fig[base, "pdata-CPU-ns/span"],
			fig[s, "analyze-peak-RSS-MiB"], fig[s, "pdata-peak-RSS-MiB"], fig[s, "B/span"]
	}
	print "\nflat-an, flat-pd: the size'"'"'s median CPU-ns per span over the smallest size'"'"'s, per arm."
}'
echo "raw output: $raw" >&2
