// Package spanstest holds test helpers for the span form: a slow, obviously correct conversion from
// the generated OTLP protobuf types that the fast decoders are checked against (FromProto,
// OtherString), a batch comparison (Diff), the conversion of spans recorded by the real
// OpenTelemetry Go SDK to the export request an OTLP exporter sends (RequestFromSDK), and the
// reference OTLP/JSON encoding of a request (RequestToJSON).
package spanstest
