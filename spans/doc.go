// Package spans is the compact span form that every part of stormwatch trades in, and its codecs.
//
// The collector and the trace-file reader produce [Batch] values; the analyzer consumes them. A Span
// holds only what the analyzer, the TUI's span detail and the reports need - ids, parent, kind, times,
// status, service and instance, the attributes in the well-known set (see semconv.go), links and event
// names - decoded straight from the OTLP wire format without building a protobuf object tree:
// [DecodeProto] for protobuf bodies, [DecodeJSON] for OTLP/JSON. [AppendProto] writes a batch back
// out as an OTLP protobuf request: replay sends that for a Jaeger or Zipkin file, and the TUI's
// trace export turns it into OTLP/JSON with the one protobuf-to-JSON writer (tracefile's
// ProtoToJSON). Strings may alias the buffer a batch was decoded from, so a Batch keeps that buffer
// alive for as long as its spans are held, and the buffer must not be reused.
//
// [AppendPacked] and [AppendUnpacked] turn one trace's spans into a single pointer-free byte string
// and back: the analyzer holds every span that way from the moment it arrives, so the garbage
// collector has nothing to scan in them and a held span costs tens to a few hundred bytes, strings
// included. An [Unpacker] reads packed spans back without allocating, for a reader that keeps none
// of them (an analysis): their strings alias the packed bytes.
//
// Producers pack for the analyzer where they decode, so that it files each trace's block as it is:
// [Batch.Pack] (the decoders with DecodeOptions.PackByTrace) packs a batch's spans by trace into
// [Batch.Packed], and a [Packing] does the same batch after batch in memory of its own - for the
// analyzer given span values, and for a producer that makes each span in the memory of the one
// before (the Collector connector, [Packing.PackFrom]).
//
// The decoders allocate per request, not per span or attribute, and agree with the slow reference
// conversion in spanstest (spanstest.FromProto over the generated protobuf types), which the tests
// and fuzz targets check them against. docs/performance.md has the figures.
//
// This package does no I/O and imports nothing else of stormwatch: it is the leaf that keeps the
// collector ignorant of the analyzer and the analyzer ignorant of sockets and files.
package spans
