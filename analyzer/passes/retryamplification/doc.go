// Package retryamplification defines the retry-amplification detector.
//
// It proves that more than one layer on a path from the root request to a leaf dependency ran its
// own retry loop, so the attempts multiplied: 3 layers of 3 attempts in front of a failing
// dependency are 27 calls for one request, 4 x 4 x 4 are 64
// (docs/principles.md#one-budget-one-owner, docs/principles.md#intents-and-attempts). Copies of the
// leaf operation made by the retries of the layers above are counted together (see
// analyzer.LeafChains), and the finding is reported once per root request and leaf dependency, with
// the factor counted from the root, not again for each sub-path.
//
// Evidence: factor (physical calls that reached the leaf for this one request), leaf_calls (the
// same count; kept separate so a policy can later weigh factor differently), layers (the retrying
// layers, top first: service and the most attempts any of its copies made; inferred_from and
// inferred_tries on a layer some of whose tries were counted from the callee's SERVER spans
// because they have no span of their own, which the summary also says; past 64 layers, the 32 at
// the top and the 32 nearest the leaf), layers_not_listed (the layers between those, when a chain
// is deeper: the summary counts them too), added_latency_ms (the
// latency the retries added to this request: the time its critical path spent in failed attempts
// that were retried and in the pauses between attempts, docs/costs.md).
//
// Settings (policy detectors.retry-amplification): minRetryingLayers (default 2), the retrying
// layers on one path that make it fire; criticalFactor (default 9), see Severity.
//
// Severity: critical from criticalFactor (default 9: two layers of three already multiply a
// failing dependency's load by nine), otherwise warning.
//
// False positives: two layers that retry on purpose with a shared budget (an "inter-layer
// contract with one quota") look the same in a trace; a policy can lower the severity. A single
// retrying layer with a transient failure then a success is never reported.
package retryamplification
