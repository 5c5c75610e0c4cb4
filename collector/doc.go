// Package collector receives OpenTelemetry traces over OTLP/gRPC and OTLP/HTTP and hands them, decoded
// into the compact span form, to one [spans.Consumer].
//
// It is modelled on the OpenTelemetry Collector's otlpreceiver: collector.go owns the lifecycle (both
// servers start together and shut down with errors.Join), grpc.go and http.go own their transports,
// export.go is the single path both of them use (authorize, decode, admit), and errors.go is the only
// place where an error class becomes a transport status. Between the transports and the consumer sits
// a bounded queue: a slow consumer makes the collector answer 429 / RESOURCE_EXHAUSTED, never block
// without bound and never drop accepted spans silently. An optional [Recorder] receives every accepted
// request whole, off the ingestion path.
//
// The collector knows nothing about the analyzer: whoever holds spans may report what it holds and
// evicts through [WithHeldStats], and add its own Prometheus collectors to [Collector.Registry].
package collector
