// Package retrybudgetexceeded defines the retry-budget-exceeded detector, a cross-trace one.
//
// It proves that retries added more load to a dependency than a retry budget would allow: per
// (caller service, dependency, policy class), over the window, more retries were sent than ratio x
// first attempts + reserve (ratio default 0.1 - the budget_ratio of docs/principles.md#retry-cost,
// one retry per ten requests, or the class's retryBudget when a policy file sets it, cited with its
// line; reserve default 10 retries per window, as token-bucket budgets keep a floor). The budget
// experiment's run, 10 retries for 40 requests, is within it and not reported. See
// docs/principles.md#retry-cost: retry=3 against a failing origin sent 120 calls for 40 requests
// (ratio 2.0); a budget of 0.1 would have kept it near 1.1x.
//
// Offline the window is the whole input (in chunks when it outgrows the analyzer's bound); live
// it is the policy's detectors.window (default one minute). The detector keeps no state between
// runs: counts per group are recomputed from the window's operations, which the analyzer bounds.
//
// Evidence: first_attempts, retries, ratio, budget, reserve, operations, traces, window_start,
// window_end, window_ms (and rule, policy when a file set the budget).
//
// Works on stock instrumentation: first attempts and retries are inferred per caller.
//
// False positives: a window with too few operations says little - nothing is judged under
// minSamples first attempts (default 10). A budget with a reserve of tokens (retries always
// allowed at a low rate) can legitimately exceed the ratio at low traffic.
//
// Seed: 000 (retry budget limits amplification).
package retrybudgetexceeded
