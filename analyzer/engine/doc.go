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
//
// # The files, by concern
//
// The Engine and its life cycle, in the order a span meets them:
//
//   - engine.go: the Engine, what it holds per trace (traceState), New; config.go its Config.
//   - ingest.go: ConsumeBatch, the per-trace cap and eviction by the span bound; join.go files a
//     delivery that starts a trace of its own with its publisher's trace.
//   - store.go: spans held packed (pointer-free bytes) and read back; heldops.go: a held
//     analysis's operations packed likewise; list.go: the held and pending lists.
//   - settle.go: Settle and Flush, the passes that analyze quiet traces (take, run, publish).
//   - report.go: what each analysis contributes to the report, and Report with its notes;
//     origins.go: the addresses counted per dependency.
//   - window.go: the windowed detectors' window and their runs; snapshot.go: Snapshot, Summary,
//     the store's figures, the history and the trace views.
//
// One trace's analysis, outside the Engine's lock:
//
//   - analysis.go: the pipeline (analyzeTrace) and the trace's detector run.
//   - trace.go: buildTrace, the sorted, deduplicated and indexed trace, and its data's faults;
//     built.go: the engine's one way to what it writes into the model (analyzer/internal/build).
//   - infer.go: the inference walk (readSpans, readCalls, inferAt); known.go reads a span's
//     attributes once, carried.go which of the keys the detectors declared it carries; outcome.go classifies a call's outcome; destination.go its origin and
//     target; depname.go names its dependency.
//   - grouping.go: a caller's calls into operations and attempts (retries, hedges, fan-out,
//     resends), and intent keys; opbufs.go: the memory the operations are made in.
//   - hidden.go, hidden_ops.go: the requests sent again below the instrumentation and the calls
//     whose spans were lost; clocks.go: service clocks, to attach lost calls by time.
//   - loops.go: an application's own retry loops; messaging.go: a broker's redeliveries;
//     grpcattempts.go: a call made in two levels of spans; envoy.go: what proxies write;
//     giveup.go: when a caller stopped waiting; refused.go: operations refused before any call.
//   - account.go: the per-dependency counts an analysis contributes; wide.go: the indexes that
//     keep inference linear on very wide traces; scratch.go and intern.go: the pooled buffers and
//     shared strings that keep an analysis from allocating.
package engine
