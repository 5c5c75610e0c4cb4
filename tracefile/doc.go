// Package tracefile reads and writes trace files: the recordings the collector makes, the files
// `analyze` and `replay` take, the fixtures and the lab's output.
//
// Three layouts are read and written, each optionally gzip-compressed (".gz" when writing; the
// magic bytes when reading):
//
//   - OTLP/JSON lines (".jsonl"): one ExportTraceServiceRequest per line, `{"resourceSpans":[...]}`,
//     exactly as the OpenTelemetry Collector's file exporter writes them.
//   - One OTLP/JSON request (".json"), possibly pretty-printed over many lines.
//   - The file exporter's length-prefixed protobuf (".pb"): a 4-byte big-endian length, then the
//     request's protobuf bytes, repeated. The cheapest to write under load: the bytes as received.
//
// Two more are read, detected by content, so traces kept in a tracing backend can be analyzed
// where they are: the Jaeger query service's JSON ({"data":[...]}, as the Jaeger UI downloads it)
// and Zipkin's v2 JSON (an array of spans). Each is read as one document and handed on one trace
// per record; their mapping onto the compact span form, and what each format cannot carry, is in
// docs/sources.md.
//
// A [Writer] writes whole records, so a crash leaves a file that reads back to its last complete
// record; a [Reader] streams with bounded buffers, reports a malformed record with its file and line
// and goes on with the next one (unless Strict), and ignores a record cut short at the end of the file.
// [NewSpanExporter] records the OpenTelemetry SDK's spans through a Writer. [ProtoToJSON] and
// [JSONToProto] transcode one request between the two OTLP encodings.
package tracefile
