// Package workload holds helpers for tests and benchmarks of the analyzer and its callers: a
// synthetic workload of realistic multi-layer traces (Workload), generated cheaply enough to
// measure the analyzer at a million spans without holding a second copy of them; traces shaped
// like the end-to-end benchmark's payload (PayloadTrace: ten attributes a span, an id in every
// URL) for the memory and packing benchmarks; and a shop's traffic as the OpenTelemetry
// Collector's file exporter records it (RealisticTraffic: OTLP/JSON lines of SDK exports, semconv
// attributes, reference-client retries), what `stormwatch analyze` and the live analyzer are
// measured on; and the end-to-end ingest benchmark's requests themselves (CollectorRequests: OTLP
// protobuf, 100 HTTP client attempt spans each), for measuring the live analyzer in process on
// what `collect` is measured on.
package workload
