// Package breakercountsattempts defines the breaker-counts-attempts detector, a cross-trace one.
//
// It proves that a circuit breaker counted attempts instead of logical calls: it opened toward an
// origin while the logical calls to that origin were succeeding after retries, so it fought the
// retry policy it was meant to complement. In docs/principles.md#breakers: ten calls to a service
// that fails twice and then answers make 30 attempts and 10 successes when the breaker counts
// logical calls (0 refused, 0 transitions), but an attempt-counting breaker with threshold 5 opens
// during the third call and refuses 8 of the 10.
//
// Per (caller, origin) in the window: the first breaker refusal marks the opening; before it, the
// detector counts the failed attempts and the logical calls that completed, by final outcome. It
// reports when more logical calls had succeeded after retries than had failed, and the failed
// attempts outnumber the failed calls - the breaker saw failures the callers never did.
//
// Evidence: opened_at, attempts_before_open, failed_attempts_before_open,
// logical_calls_before_open, succeeded_after_retry, failed_logical_calls, refused_calls,
// window_start, window_end, window_ms.
//
// Works on stock instrumentation where refused calls leave a CLIENT span whose error names the
// open circuit, and attempts are inferred from sibling spans.
//
// False positives: a dependency degrading fast (successes after retries, then hard failures that
// the traces lost) - the evidence shows how many calls had really failed before the opening.
//
// Seed: 003 (one signal per logical call).
package breakercountsattempts
