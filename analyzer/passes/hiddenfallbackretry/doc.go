// Package hiddenfallbackretry defines the hidden-fallback-retry detector.
//
// It proves that a fallback branch was not the cheap degraded path it looks like: after the
// primary's attempts failed, the fallback itself retried, or called the dependency that had just
// failed again (directly or through a service it called). See
// docs/principles.md#intents-and-attempts: "if the fallback retries, it is not a free spare branch:
// include its calls in the same budget or forbid them"; "the fallback calls the same dependency
// again - a hidden retry - find the child spans after the fallback".
//
// A fallback is an attempt or operation the reference client marks resilience.attempt.kind=
// fallback, or - stock instrumentation - the next operation the same caller started, toward
// another dependency, right after an operation whose attempts all failed. For the stock shape only
// the stronger evidence is reported (the fallback reached the failed dependency again), since a
// caller that simply goes on to its next call after a failure retries that call legitimately.
//
// Evidence: primary (the failed dependency), fallback (its dependency), fallback_attempts,
// calls_to_failed (calls that reached the failed dependency again), via (the service they went
// through, when indirect), calls_not_listed (the calls under a fallback branch past the 64 a
// finding lists: under n nested branches, each would list the calls of all the levels below it).
//
// False positives (stock shape): a handler whose next, unrelated call happens to reach the failed
// dependency through another service.
//
// Seed: 004 (fallback that retries hides work; observation/evidence/action table).
package hiddenfallbackretry
