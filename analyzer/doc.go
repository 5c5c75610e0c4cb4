// Package analyzer rebuilds logical operations from attempt spans and finds what retry policies do
// wrong: amplification across layers, unbounded fan-out, work after a deadline and the rest of the
// detectors listed in docs/detectors.md.
//
// It is pure: batches come in through ConsumeBatch (it implements spans.Consumer), reports and
// immutable snapshots go out. It opens no file, no socket, starts no goroutine and reads no clock of
// its own - the caller passes the time - so the collector, the trace-file reader, the TUI and the
// OpenTelemetry Collector connector can all drive it the same way.
package analyzer
