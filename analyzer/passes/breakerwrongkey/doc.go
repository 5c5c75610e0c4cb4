// Package breakerwrongkey defines the breaker-wrong-key detector, a cross-trace one.
//
// It proves that a circuit breaker is keyed wider than the origin: within the window, one client
// (caller service) had calls refused by a breaker toward an origin that had not failed once, after
// another origin behind the same client had failed. The keying experiment of
// docs/principles.md#breakers: a breaker keyed on the client refused 5 of 10 calls to stock and to
// pricing, which always answered 200, because reviews answered 503 - one failure became three. A
// breaker keyed per origin (scheme://host: port) refuses only reviews, and is not reported.
//
// A refusal is an attempt with resilience.outcome=refused that was not refused by a retry budget
// (resilience.stop_reason=breaker_open, or a refused first attempt - budgets never refuse those),
// or a stock CLIENT span whose error names an open circuit. Failures are what a breaker should
// count: 5xx, connect errors and timeouts, not 429 or other 4xx.
//
// Offline the window is the whole input, judged in chunks when it outgrows the analyzer's bound;
// live, the policy's detectors.window. No state is kept between runs: per run, counts per
// (caller, origin).
//
// Evidence: origin, refused_calls, answers (the origin's own outcomes, e.g. {"200": 5}),
// failed_origins (origin -> failures: at most 16, the earliest to fail),
// failed_origins_not_listed (the count of the others, when there are more), window_start,
// window_end, window_ms.
//
// Works on stock instrumentation when refused calls leave a CLIENT span whose error names the
// open circuit (a breaker inside the instrumented transport).
//
// False positives: two origins that really are one failure domain (replicas behind one load
// balancer, reached under different names) - key the breaker by the balancer's origin.
//
// Seed: 003 (the breaker must be keyed per origin).
package breakerwrongkey
