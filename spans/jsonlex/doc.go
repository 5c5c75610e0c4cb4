// Package jsonlex holds the pieces of JSON lexing and quoting that stormwatch's OTLP/JSON code
// shares: the span decoder (spans.DecodeJSON) and encoder in spans, and the trace file's
// JSON-to-protobuf transcoder and protobuf-to-JSON writer in tracefile. Each reads or writes the
// same JSON, so each piece exists once here; the scanners that call them differ only in how they
// report a problem (spans words a positioned error, tracefile hands the request to protojson).
//
// Everything here is a plain function over byte slices, with no state, so a call costs what it
// cost inside the scanners.
package jsonlex
