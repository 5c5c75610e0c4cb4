// Package idempotencykeychanged defines the idempotency-key-changed detector.
//
// It proves that the attempts of one logical operation carried different idempotency keys, or that
// some carried one and others none: the server sees each attempt as a new write and the key
// protects nothing (docs/principles.md#one-budget-one-owner: "the operation key is kept across
// attempts, the attempt id changes"). Keys are read from resilience.idempotency_key or the captured
// Idempotency-Key request header, and shown hashed (sha256 prefix), never raw.
//
// Evidence: keys (one hashed key per attempt, "" for none), distinct_keys, attempts.
//
// Works on stock instrumentation only when the instrumentation captures the Idempotency-Key
// request header.
//
// False positives: none known - two keys on one operation are a defect by definition. If the
// analyzer grouped two separate writes into one operation (same destination, back to back, the
// first failed), their keys differ rightly; the reference client's resilience.operation.id
// removes the doubt.
//
// Seeds: 002 (operation key vs attempt id), 001.
package idempotencykeychanged
