// Package unboundedretries defines the unbounded-retries detector.
//
// It proves that a retry loop ran past its cap: more tries than maxAttempts (default 5, the upper
// end of "3-5 attempts" (docs/principles.md#backoff-and-classification); the policy class's
// maxAttempts when a policy file sets it, cited with its line), or - where the reference client's
// resilience.* attributes are present
// - a loop that ended in failure without a resilience.stop_reason, so nothing says what bounded
// it. Resends after a redirect or a 401 challenge and hedged copies are not tries; fallback
// attempts are not counted either (hidden-fallback-retry covers them).
//
// Evidence: attempts, limit (and rule, policy when a file set it); or attempts, stop_reason ("")
// for the missing stop reason.
//
// Works on stock instrumentation for the cap (attempts are sibling CLIENT spans); the missing
// stop reason needs the reference attributes.
//
// False positives: two separate operations to one destination, back to back, the first failing,
// are read as one operation by inference; resilience.operation.id removes the doubt.
//
// Seeds: 001 ("infinite retry is forbidden", 3-5 attempts within a total timeout), 004 (every
// attempt logs its stop reason).
package unboundedretries
