# stormwatch: the two commands a new user needs are `make run` and `make test`.
GO       ?= go
BIN      ?= bin/stormwatch
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS  := -X main.version=$(VERSION)
ARGS     ?=

.PHONY: run build test test-race lint bench fixtures fuzz clean

## run: the main job - the collector on 127.0.0.1:4317/4318 and the live dashboard
run:
	$(GO) run -ldflags "$(LDFLAGS)" ./cmd/stormwatch $(ARGS)

## build: the binary in ./bin
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/stormwatch

## test: every test, the fuzz seed corpora, and the race detector on the concurrent packages
test:
	$(GO) test -count=1 ./...
	$(GO) test -count=1 -race ./collector/...
	$(MAKE) test-otelcol

## lint: go vet, and gofmt must have nothing to say
lint:
	$(GO) vet ./...
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
FUZZTIME ?= 30s
FUZZ_TARGETS := ./spans:FuzzDecodeProto ./spans:FuzzDecodeJSON ./spans:FuzzUnpack ./tracefile:FuzzReader \
	./tracefile:FuzzProtoToJSON ./tracefile:FuzzJSONToProto
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "== $${t#*:} ($${t%%:*}) for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) $${t%%:*}; \
	done

clean:
	rm -rf bin

.PHONY: test-otelcol bench-otelcol

## test-otelcol: the OpenTelemetry Collector connector's nested module (otelcol/, its own go.mod):
## vet, every test (three in-process collectors included), the race detector on the connector
test-otelcol:
	cd otelcol && $(GO) vet ./... && $(GO) test -count=1 ./... && $(GO) test -count=1 -race ./stormwatchconnector/

## bench-otelcol: spans/s through one collector with the stormwatch connector and with the
## forward connector, the two arms interleaved five times (docs/performance.md, Connector)
bench-otelcol:
	cd otelcol && $(GO) test -run '^$$' -bench . -benchmem -count 5 ./stormwatchconnector/
	cd otelcol/distribution && for i in 1 2 3 4 5; do for arm in forward stormwatch; do \
		$(GO) test -run '^$$' -bench "ConnectorThroughput/connector=$$arm\$$" -benchtime 1000x -benchmem . || exit 1; \
	done; done
