// Package hedgenotcancelled defines the hedge-not-cancelled detector.
//
// It proves that hedged copies kept running after one of them answered: a copy that ended later
// than the winner, with an answer or a timeout rather than a cancellation, so the dependency did
// the work twice and the caller paid for a connection it no longer needed. See
// docs/principles.md#intents-and-attempts: "hedging leaves several requests in flight, so it needs
// the losers cancelled and proven idempotence".
//
// Copies are the attempts the reference client marks resilience.attempt.kind=hedge together with
// the attempt they overlap, or, with stock instrumentation, overlapping CLIENT calls of one
// attempt to the same origin. A cancelled copy (error "context canceled", outcome cancelled)
// is healthy.
//
// Evidence: copies, winner (span id), losers_completed, wasted_ms (the losers' time after the
// winner answered).
//
// False positives: overlapping calls to one origin that were not meant as copies (two different
// reads with the same method and path at once) look like hedges to inference; the reference
// client's attempt kinds remove the doubt. Fan-out to several origins is not judged here
// (unbounded-fanout is).
//
// Seed: 004 (retry vs hedging: cancel the losers).
package hedgenotcancelled
