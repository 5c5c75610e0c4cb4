// Package retryafterignored defines the retry-after-ignored detector.
//
// It proves that the next attempt started before the pause the server asked for: the server said
// Retry-After (resilience.retry_after_ms on the attempt that got it, or the captured Retry-After
// response header, delay-seconds or an HTTP-date) and the client came back sooner. See
// docs/principles.md#backoff-and-classification: "429 with Retry-After - honour the header: the
// server said when; the backoff is no shorter". The pause is measured on the client's own clock
// (the end of one attempt to the start of the next), so clock skew between services does not enter;
// a small tolerance (the skew setting, or 2% of the hint) absorbs timestamp rounding.
//
// Evidence: retry_after_ms (the hint), waited_ms (the pause taken), status (of the attempt that
// carried the hint).
//
// Works on stock instrumentation when it captures the Retry-After response header.
//
// False positives: a hint that applied to another resource, or a deadline shorter than the hint
// where the right answer was to give up, not to wait - the finding still shows a retry that the
// server had refused in advance.
//
// Seed: 001 (error classification), 004 (Retry-After is a delay signal).
package retryafterignored
