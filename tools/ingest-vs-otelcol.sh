#!/usr/bin/env bash
# tools/ingest-vs-otelcol.sh: stormwatch's ingest with its store empty and full, side by side with
# the OpenTelemetry Collector, interleaved in one run. Builds the Collector from its Go modules
# (otelcol/cmd/otelcol-stormwatch) and the cmd/stormwatch test binary once, runs
# BenchmarkCollectorEndToEnd over gRPC, HTTP protobuf and HTTP JSON - each iteration blasts
# stormwatch, stormwatch-full, otelcol, otelcol, stormwatch-full, stormwatch from one blaster -
# and prints per protocol the medians (min-max) of the per-iteration ratios of spans per CPU-second:
#   x-measured-otelcol       stormwatch, store empty, over the OpenTelemetry Collector
#   x-measured-otelcol-full  stormwatch, store full, over the OpenTelemetry Collector
#   x-full-vs-empty          stormwatch with the store full over stormwatch with it empty
# and, with RECEIVE=1, a fourth arm - stormwatch-receive: stormwatch's collector with the same flags,
# its batches dropped instead of analyzed - and two more ratios:
#   x-measured-otelcol-receive  stormwatch-receive over the Collector: the most x-measured-otelcol
#                               could be if the analysis cost nothing
#   x-empty-vs-receive          stormwatch over stormwatch-receive: the share of collect's CPU that
#                               is receiving and decoding
# CPU is counted from each blast's start until every accepted span is analyzed (stormwatch) or the
# blast's end (the Collector, which has exported a request's spans when it answers it); the
# "to exit" table counts shutdown too. The benchmark's doc comment says why.
#
# Environment (defaults in brackets):
#   PREFILL    spans stormwatch-full is filled with first; both stormwatch arms run with
#              --max-spans PREFILL, so the full one starts at its bound [1000000]
#   BLAST_SECONDS  length of each blast [5]
#   COUNT      iterations; each gives one ratio of each kind [3]
#   PROTOCOLS  which protocols, an alternation of grpc, http-protobuf, http-json [all three]
#   REQUESTS   distinct requests the blaster cycles through [the benchmark's 8192]
#   OTELCOL    an otelcol-stormwatch binary already built (skips building it)
#   RECEIVE    1 adds the stormwatch-receive arm [unset]
#   WARM       1 sends stormwatch-full PREFILL more spans after its prefill, so that its heap has
#              grown to the garbage collector's goal before the measured blast [unset]
#   OUT        where the binaries and the raw output go [a new temporary directory, kept]
# Linux only (the benchmark reads /proc). Needs go, and the Collector's modules in the module cache
# or reachable. Takes about COUNT * 3 * (6 blasts + 2 prefills and their analysis) plus the builds:
# 10-15 minutes with the defaults on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
PREFILL=${PREFILL:-1000000}
BLAST_SECONDS=${BLAST_SECONDS:-5}
COUNT=${COUNT:-3}
PROTOCOLS=${PROTOCOLS:-grpc|http-protobuf|http-json}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/ingest-vs-otelcol.XXXXXX")}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

if [ -z "${OTELCOL:-}" ]; then
	echo "building the OpenTelemetry Collector (otelcol/cmd/otelcol-stormwatch) into $OUT" >&2
	(cd otelcol && go build -o "$OUT/otelcol-sw" ./cmd/otelcol-stormwatch)
	OTELCOL=$OUT/otelcol-sw
fi
echo "building the cmd/stormwatch test binary into $OUT" >&2
go test -c -o "$OUT/stormwatch.test" ./cmd/stormwatch

raw=$OUT/bench.txt
{
	echo "# $(date -u '+%Y-%m-%d %H:%M:%S UTC') commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo '+changes')"
	echo "# PREFILL=$PREFILL BLAST_SECONDS=$BLAST_SECONDS COUNT=$COUNT PROTOCOLS=$PROTOCOLS REQUESTS=${REQUESTS:-default} RECEIVE=${RECEIVE:-} WARM=${WARM:-}"
	echo "# before: $(uptime)"
} | tee "$raw"
if ! (
	cd cmd/stormwatch
	env STORMWATCH_E2E_OTELCOL="$OTELCOL" STORMWATCH_E2E_PREFILL="$PREFILL" STORMWATCH_E2E_SECONDS="$BLAST_SECONDS" \
		${REQUESTS:+STORMWATCH_E2E_REQUESTS="$REQUESTS"} ${RECEIVE:+STORMWATCH_E2E_RECEIVE="$RECEIVE"} \
		${WARM:+STORMWATCH_E2E_WARM="$WARM"} \
		"$OUT/stormwatch.test" -test.run '^$' -test.bench "^BenchmarkCollectorEndToEnd\$/^protocol=($PROTOCOLS)\$" \
		-test.benchtime 1x -test.count "$COUNT" -test.timeout 4h
) 2>&1 | tee -a "$raw"; then
	echo "the benchmark failed; its output is in $raw" >&2
	exit 1
fi
echo "# after: $(uptime)" | tee -a "$raw"

# Each result line is one iteration: "BenchmarkCollectorEndToEnd/protocol=P-CPUS 1 NS ns/op V UNIT ...".
awk '
function median(key,    n, i, j, v, a) {
	n = cnt[key]
	for (i = 1; i <= n; i++) a[i] = val[key, i]
	for (i = 2; i <= n; i++) { v = a[i]; for (j = i - 1; j >= 1 && a[j] > v; j--) a[j + 1] = a[j]; a[j + 1] = v }
	lo = a[1]; hi = a[n]
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function cell(key, fmt,    m) {
	if (!cnt[key]) return sprintf("%-28s", "-")
	m = median(key)
	return sprintf("%-28s", sprintf(fmt " (" fmt "-" fmt ")", m, lo, hi))
}
/^BenchmarkCollectorEndToEnd\/protocol=/ {
	p = $1; sub(/^[^=]*=/, "", p); sub(/-[0-9]+$/, "", p)
	if (!(p in seen)) { seen[p] = 1; protos[++np] = p }
	iters[p]++
	for (i = 3; i < NF; i += 2) { k = p SUBSEP $(i + 1); val[k, ++cnt[k]] = $i }
}
END {
	if (!np) { print "no benchmark results" > "/dev/stderr"; exit 1 }
	nr = split("x-measured-otelcol x-measured-otelcol-full x-full-vs-empty", ratios, " ")
	na = split("stormwatch stormwatch-full otelcol", arms, " ")
	for (i = 1; i <= np; i++) if (cnt[protos[i] SUBSEP "stormwatch-receive-spans/CPU-s"]) receive = 1
	if (receive) {
		ratios[++nr] = "x-measured-otelcol-receive"; ratios[++nr] = "x-empty-vs-receive"
		arms[++na] = "stormwatch-receive"
	}
	for (t = 1; t <= 2; t++) {
		sfx = t == 1 ? "" : "-exit"
		printf "\n%s\n", t == 1 ? "CPU from blast start to every accepted span analyzed (otelcol: to the blast end) - medians (min-max) of per-iteration values" \
			: "CPU from blast start to the collector process exit (shutdown included)"
		printf "%-14s %-5s", "protocol", "iters"
		# The receive ratios are of the first table only: they are about ingest, not shutdown.
		for (r = 1; r <= nr; r++) if (t == 1 || ratios[r] !~ /receive/) printf " %-28s", ratios[r] sfx
		printf "\n"
		for (i = 1; i <= np; i++) {
			p = protos[i]
			printf "%-14s %-5d", p, iters[p]
			for (r = 1; r <= nr; r++) if (t == 1 || ratios[r] !~ /receive/) printf " %s", cell(p SUBSEP ratios[r] sfx, "%.2f")
			printf "\n"
		}
		printf "%-14s %-5s", "spans/CPU-s", ""
		for (a = 1; a <= na; a++) printf " %-28s", arms[a]
		printf "\n"
		for (i = 1; i <= np; i++) {
			p = protos[i]
			printf "%-14s %-5s", p, ""
			for (a = 1; a <= na; a++) printf " %s", cell(p SUBSEP arms[a] "-spans/CPU-s" sfx, "%.0f")
			printf "\n"
		}
	}
}' "$raw" | tee -a "$raw"
echo "raw output: $raw" >&2
