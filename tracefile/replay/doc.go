// Package replay plays trace files back: at the pace they were recorded (or faster, or as fast as
// possible), with timestamps shifted to now, either into a [spans.Consumer] (the live dashboard) or
// as OTLP to a collector over gRPC, HTTP protobuf or HTTP JSON (`stormwatch replay --to`).
//
// [Player] owns the timing (speed, pause, loop); [Sender] speaks OTLP to one endpoint; [Blast]
// sends pre-encoded requests from several connections at once for as long as asked - the load
// generator the end-to-end benchmark uses, since each request is encoded once, up front, the
// sending side costs little more than the sockets.
package replay
