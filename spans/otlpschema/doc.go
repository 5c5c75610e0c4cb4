// Package otlpschema is the OTLP trace schema as the project's OTLP/JSON walkers read it:
// ExportTraceServiceRequest and every message under it, each field with its protobuf number and
// type, its OTLP/JSON names, and how the span decoder treats it. The JSON reader (spans' JSON to
// protobuf transcoder) looks fields up by name, the JSON writer (tracefile's protobuf to JSON
// transcoder) takes them in order; neither has a walk of its own per message.
package otlpschema
