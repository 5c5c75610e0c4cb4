// Package nobackoff defines the no-backoff detector.
//
// It proves that a retrying layer did not wait between attempts. A layer's pauses are judged
// together (every retry of one owner toward one dependency in the trace; the pause is
// resilience.backoff_ms, or the gap between one attempt's answer and the next one's start on the
// client's clock), because that is where the two cases differ: a zero-delay default shows as pauses
// of the client's own turnaround on every retry (1.5-4 ms on Node's event loop), full jitter as a
// spread from near zero up to its cap. A layer is reported when it retried at least twice, the
// median of its pauses is under minPause (default 5 ms) and none is as long as 4 x minPause. The
// payment incident of docs/principles.md#backoff-and-classification: "5 instant attempts in
// except" kept hammering the provider for ten minutes after it recovered.
//
// Evidence: retries (the layer's measured retries), immediate_retries (under minPause), pauses_ms
// (every retry's pause, in order), threshold_ms.
//
// Works on stock instrumentation: attempts are sibling CLIENT spans and the pause is their gap.
//
// False positives: a deliberate constant pause under minPause is reported (it does not back off
// either). Full jitter is not: its long draws keep the layer out however many short ones it has.
// Transport-level retries of a connection that never opened (a refused connect) are immediate by
// design: lower minPause or disable the detector for them.
//
// Seed: 001 (exponential backoff with jitter).
package nobackoff
