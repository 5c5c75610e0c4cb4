// Package retrynonretryable defines the retry-non-retryable detector.
//
// It proves that a retry loop sent another attempt after an outcome that cannot change by being
// asked again: HTTP 400, 401, 403, 404, 409, 422 or gRPC INVALID_ARGUMENT, NOT_FOUND,
// PERMISSION_DENIED, UNAUTHENTICATED, FAILED_PRECONDITION
// (docs/principles.md#backoff-and-classification: "a retry on a wrong request is pointless"), or an
// attempt the reference client marked resilience.outcome=permanent. When a policy file gives the
// class a retryable list, any retry after an outcome outside that list is reported, naming the rule
// and its line. 408, 429, 502, 503 and 504 are transient and never reported. Redirects (3xx) and
// the resend that answers a 401 challenge are resends, not retries: the analyzer marks them so and
// this detector ignores them.
//
// Evidence: status (the outcome retried after), retries_after (attempts sent after it),
// attempts; rule and policy when a policy file's retryable list decided.
//
// Works on stock instrumentation: the status codes are on every CLIENT span.
//
// False positives: a 409 or 404 that a team knows to be transient (eventual consistency after a
// write) - list it in the class's retryable outcomes.
//
// Seed: 001 (error classification before retry).
package retrynonretryable
