// Package spanstest holds test helpers for the span form: a slow, obviously correct conversion from
// the generated OTLP protobuf types that the fast decoders are checked against (FromProto,
// OtherString), a batch comparison (Diff), the conversion of spans recorded by the real
// OpenTelemetry Go SDK to the export request an OTLP exporter sends (RequestFromSDK), the reference
// OTLP/JSON encoding of a request (RequestToJSON), and a loopback OTLP/HTTP receiver to point the
// SDK's own exporter at (OTLPHTTPReceiver), and the recorded fixtures decoded and grouped by trace
// (FixtureTraces).
package spanstest
