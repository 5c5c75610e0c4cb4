# stormwatch: the two commands a new user needs are `make run` and `make test`.
GO       ?= go
BIN      ?= bin/stormwatch
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS  := -X main.version=$(VERSION)
ARGS     ?=

.PHONY: run build test lint bench fixtures fuzz clean jaeger

## run: the main job - the collector on 127.0.0.1:4317/4318 and the live dashboard
run:
	$(GO) run -ldflags "$(LDFLAGS)" ./cmd/stormwatch $(ARGS)

## build: the binary in ./bin
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/stormwatch

# RACE_PKGS are the packages whose code or tests run goroutines: the collector, the reference
# client and its lab, the analyzer, trace files and replay, the dashboard and the command. Their
# tests run under the race detector instead of plainly, not as well: a second, plain run would
# find nothing the raced one misses and would cost as much again. Every other package runs plain.
RACE_PKGS := ./collector/... ./reference/... ./analyzer/... ./tracefile/... ./tui/... ./cmd/...
# COST_TESTS weigh the engine's CPU on traces tens of thousands of spans wide (no shape may cost
# the square): under the race detector they take minutes and find nothing, so they skip under it
# and run here plainly.
COST_TESTS := ^Test(WideShapes|ManyDeliveries)CostNoSquare$$

## test: every test and the fuzz seed corpora; the packages that start goroutines under the race detector,
## the engine's cost tests without it
test:
	$(GO) test -count=1 -race $(RACE_PKGS)
	$(GO) test -count=1 $(filter-out $(shell $(GO) list $(RACE_PKGS)),$(shell $(GO) list ./...))
	$(GO) test -count=1 -run '$(COST_TESTS)' ./analyzer/engine/
	$(MAKE) test-otelcol

## lint: go vet, staticcheck (its default checks, unused code included) on both modules, and gofmt
## must have nothing to say. staticcheck is fetched through the module proxy at a fixed version.
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint:
	$(GO) vet ./...
	$(STATICCHECK) ./...
	cd otelcol && $(STATICCHECK) ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## bench: every benchmark, several counts so medians can be read (see docs/performance.md)
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 -timeout 60m ./...
	$(MAKE) bench-otelcol

## fixtures: regenerate fixtures/ from the generators (review the diff like code)
fixtures:
	$(GO) run ./fixtures/gen

## fuzz: run each fuzz target for FUZZTIME (default 30s); `make test` already runs their seed corpora
# FUZZMINIMIZE bounds the time spent shrinking each new interesting input: with Go's default of a
# minute, a short run spends itself minimizing its first finds (FuzzReader: 85 executions in 20 s,
# against 54,893 with 2 s).
FUZZTIME ?= 30s
FUZZMINIMIZE ?= 2s
FUZZ_TARGETS := ./spans:FuzzDecodeProto ./spans:FuzzDecodeJSON ./spans:FuzzUnpack ./tracefile:FuzzReader \
	./tracefile:FuzzProtoToJSON ./tracefile:FuzzJSONToProto ./tracefile:FuzzJaegerJSON ./tracefile:FuzzZipkinJSON \
	./spans/protowalk:FuzzFields ./analyzer/engine:FuzzUnpackOps
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "== $${t#*:} ($${t%%:*}) for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) $${t%%:*}; \
	done

clean:
	rm -rf bin

## jaeger: build the Jaeger (v2 binary, the version tools/jaeger/go.mod pins) that the Jaeger source
## tests run against; about 12 minutes once, then cached in the user cache directory by version.
## Without it those tests skip, saying so (under CI they fail).
jaeger:
	tools/jaeger/build.sh

.PHONY: test-otelcol bench-otelcol

## test-otelcol: the OpenTelemetry Collector connector's nested module (otelcol/, its own go.mod):
## vet, every test (three in-process collectors included); the connector's under the race detector
## instead of plainly, the distribution's plainly (its goroutines are the collector's own, and
## the connector's concurrency is raced in its own package)
test-otelcol:
	cd otelcol && $(GO) vet ./... && $(GO) test -count=1 -race ./stormwatchconnector/ && \
		$(GO) test -count=1 ./cmd/... ./distribution/...

## bench-otelcol: spans/s through one collector with the stormwatch connector and with the
## forward connector, the two arms interleaved in rounds, then the median of the per-round ratios
## (docs/performance.md, Connector). OTELCOL_ROUNDS and OTELCOL_BENCHTIME shorten it.
OTELCOL_ROUNDS ?= 1 2 3 4 5
OTELCOL_BENCHTIME ?= 1000x
bench-otelcol:
	cd otelcol && $(GO) test -run '^$$' -bench . -benchmem -count 5 ./stormwatchconnector/
	@out=$$(mktemp) && run=$$(mktemp) && cd otelcol/distribution && \
	for i in $(OTELCOL_ROUNDS); do for arm in forward stormwatch; do \
		$(GO) test -run '^$$' -bench "ConnectorThroughput/connector=$$arm\$$" -benchtime $(OTELCOL_BENCHTIME) -benchmem . >$$run 2>&1; \
		st=$$?; cat $$run; cat $$run >>$$out; [ $$st -eq 0 ] || { rm -f $$out $$run; exit 1; }; \
	done; done; \
	awk '/connector=forward/ { for (i = 1; i < NF; i++) if ($$(i+1) == "spans/cpu-s") f = $$i } \
	     /connector=stormwatch/ { for (i = 1; i < NF; i++) if ($$(i+1) == "spans/cpu-s" && f > 0) print $$i / f }' $$out | sort -n | \
	awk '{ r[NR] = $$1 } END { if (NR) printf "\nstormwatch / forward, spans per CPU-second of the collector, median of %d rounds: %.2f (min %.2f, max %.2f)\n", NR, r[int((NR + 1) / 2)], r[1], r[NR] }'; \
	rm -f $$out $$run
