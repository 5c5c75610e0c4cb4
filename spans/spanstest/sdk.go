package spanstest

import (
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"

	"github.com/stormwatch/stormwatch/tracefile/otlpsdk"
)

// RequestFromSDK converts spans recorded by the real OpenTelemetry Go SDK (tracetest.SpanRecorder,
// tracetest.InMemoryExporter's stubs via Snapshots) into the export request an OTLP exporter would
// send: one ResourceSpans per distinct resource, one ScopeSpans per instrumentation scope, in the
// order the spans were recorded. It is otlpsdk.Request - the one conversion, which the trace file
// exporter records through - kept under this name for the tests that want the request without a
// socket.
func RequestFromSDK(recorded []sdktrace.ReadOnlySpan) *coltracepb.ExportTraceServiceRequest {
	return otlpsdk.Request(recorded)
}
