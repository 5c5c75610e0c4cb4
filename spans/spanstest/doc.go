// Package spanstest holds test helpers for the span form: a slow, obviously correct conversion from
// the generated OTLP protobuf types that the fast decoders are checked against, and builders.
package spanstest
