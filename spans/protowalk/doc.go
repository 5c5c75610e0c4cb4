// Package protowalk is the one reader of protobuf fields in stormwatch, as jsonlex is the one JSON
// scanner: the span decoders in spans (DecodeProto, packed or not), the trace file's
// protobuf-to-JSON writer and replay's shift planner in tracefile each walk a request with a
// [Fields], so each reads a field by the rules of the generated protobuf code - field numbers 1 to
// 2^29-1, deprecated groups skipped as unknown fields - in the parts of a request it reads.
//
// It reads one field at a time and builds nothing; what a field holds aliases the message.
package protowalk
