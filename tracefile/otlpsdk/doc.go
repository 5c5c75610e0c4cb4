// Package otlpsdk converts spans recorded by the OpenTelemetry Go SDK (sdktrace.ReadOnlySpan) to
// the OTLP protobuf export request the SDK's OTLP exporters send, through the exporters' own
// conversion: tracefile's SDK exporter records through it, and spanstest.RequestFromSDK hands it
// to other packages' tests.
//
// It is a leaf package (it imports neither spans nor tracefile) so that both tracefile and the
// spanstest helpers, which tracefile's own tests import, can use it without an import cycle.
package otlpsdk
