// Package nobackoff defines the no-backoff detector.
//
// It proves that a retry loop came back immediately, two or more times: retries whose pause
// (resilience.backoff_ms, or the gap between one attempt's end and the next one's start on the
// client's clock) is at or under minPause (default 1 ms). The payment incident of
// docs/principles.md#backoff-and-classification: "5 instant attempts in except" kept hammering the
// provider for ten minutes after it recovered.
//
// Evidence: retries (of the operation), immediate_retries, pauses_ms (every retry's pause),
// threshold_ms.
//
// Works on stock instrumentation: attempts are sibling CLIENT spans and the pause is their gap.
//
// False positives: full jitter draws a pause from uniform(0, cap), so one pause near zero is
// normal; two or more in one operation are unlikely (about 1 in 10,000 operations with a 100 ms
// base and a 1 ms threshold). Transport-level retries of a connection that never opened (a
// refused connect) are immediate by design: raise minPause or disable the detector for them.
//
// Seed: 001 (exponential backoff with jitter).
package nobackoff
