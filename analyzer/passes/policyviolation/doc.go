// Package policyviolation defines the policy-violation detector.
//
// It checks each logical operation against the rules of its class in a policy file (docs/
// policy.md) that no other detector owns, and reports every rule broken with the rule's name, the
// file:line where it is written, and the spans that broke it:
//   - owner: a layer other than the class's owner retried the operation ("leave one layer the
//     owner of retries", docs/principles.md#intents-and-attempts);
//   - deadline: the operation took longer than the class's deadline (attempts and pauses
//     together);
//   - backoff: a pause outside what base, cap and jitter allow (longer than the cap; without
//     jitter, not the scheduled base*2^n);
//   - terminal / fallback: an exhausted operation ended with another terminal action, or another
//     fallback, than the class names.
//
// The other rules are checked by the detector that owns the evidence, which cites the policy
// line the same way: maxAttempts by unbounded-retries, retryable by retry-non-retryable,
// idempotent by unsafe-write-retry, maxFanout by unbounded-fanout, retryBudget by
// retry-budget-exceeded. Without a policy file this detector reports nothing: built-in defaults
// are not a team's declared policy.
//
// Evidence: rule, policy (file:line), class, expected, observed.
//
// Works on stock instrumentation for owner (the caller is the owner), deadline and backoff; the
// terminal action needs resilience.terminal.
//
// False positives: a class matched too widely (a service-wide class catching a batch job) - give
// the exception its own class before the wide one; classes match in file order.
//
// Seed: 004 (a policy per operation class: owner, retryable outcomes, maxAttempts, deadline,
// backoff, maxFanout, fallback, terminal action).
package policyviolation
