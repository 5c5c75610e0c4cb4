// Package otlpsdk converts spans recorded by the OpenTelemetry Go SDK (sdktrace.ReadOnlySpan) to
// the OTLP protobuf export request the SDK's OTLP exporters would send. The SDK does this in an
// internal package, so stormwatch keeps its one copy here: tracefile's SDK exporter records through
// it, and spanstest.RequestFromSDK hands it to other packages' tests.
//
// It is a leaf package (it imports neither spans nor tracefile) so that both tracefile and the
// spanstest helpers, which tracefile's own tests import, can use it without an import cycle.
package otlpsdk
