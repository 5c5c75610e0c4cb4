// Package jsonlex holds the JSON lexing and quoting that stormwatch's OTLP/JSON code shares: the
// span decoder (spans.DecodeJSON) in spans, and the trace file's JSON-to-protobuf transcoder and
// protobuf-to-JSON writer (the one OTLP/JSON writer) in tracefile. Each reads or writes the same
// JSON, so each piece exists once here. Both readers walk the request with one [Scanner], which
// validates what it reads and words a positioned error; the decoder reports that error, the
// transcoder hands the request to protojson instead (and asks for the strictness protojson has).
// The Jaeger and Zipkin readers in tracefile walk their documents with a Scanner too (with Numbers,
// so that it refuses what encoding/json, their fallback, refuses).
//
// Apart from the Scanner, everything here is a plain function over byte slices, with no state, so
// a call costs what it would cost inside a scanner.
package jsonlex
