// Package unsafewriteretry defines the unsafe-write-retry detector.
//
// It proves that a write - an HTTP POST or PATCH - was sent more than once (retried or hedged)
// without an idempotency key, so a response lost after the server acted creates a second order,
// charge or e-mail (docs/principles.md#backoff-and-classification: "POST only with an
// Idempotency-Key"). The key is resilience.idempotency_key on the operation or its attempts, or the
// captured Idempotency-Key request header (http.request.header.idempotency-key). A policy class
// with idempotent: true declares the operation safe to repeat and silences it; idempotent: false
// makes any repeated operation of the class a finding, whatever its method (gRPC writes included),
// citing the rule.
//
// Evidence: method, attempts (sends of the write), key_present (false).
//
// Works on stock instrumentation when the method is recorded; the key is seen only if the
// instrumentation captures the Idempotency-Key request header.
//
// False positives: a POST that is idempotent by design (a search endpoint) - mark its class
// idempotent: true; a key sent but not captured by the instrumentation - capture the header.
//
// Seeds: 000 (what the mechanisms do not do), 001 (POST only with an Idempotency-Key), 002.
package unsafewriteretry
