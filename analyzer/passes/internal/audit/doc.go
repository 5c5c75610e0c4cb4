// Package audit holds what the policy-aware detectors share: reading the policy a run was
// configured with, finding an operation's class, quoting the rule and its file:line in a finding,
// and reading the few span attributes the rules need (method, idempotency key, Retry-After).
//
// It is internal to analyzer/passes: the detectors are the product, these are their common words.
package audit
