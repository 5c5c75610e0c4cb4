// Package engine rebuilds logical operations from attempt spans and runs the detectors over them:
// it holds spans until their trace is complete, builds each trace's index, infers its operations
// (retries, hedges, fan-out, fallbacks, the layers that retried below the instrumentation),
// counts amplification per dependency and keeps the findings, within the memory bounds of its
// Config.
//
// It is pure: batches come in through ConsumeBatch (it implements spans.Consumer), reports and
// immutable snapshots go out. It opens no file, no socket, starts no goroutine and reads no
// clock of its own - the caller passes the time - so the collector, the trace-file reader, the
// TUI and the OpenTelemetry Collector connector can all drive it the same way.
//
// The model it builds and the detectors it runs are package analyzer's. Detectors import that
// package, never this one, so what they can see of a trace is what their Pass gives them.
package engine
