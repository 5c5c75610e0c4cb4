// Package synchronizedretries defines the synchronized-retries detector, a cross-trace one.
//
// It proves that retries toward one dependency are not spread out: the pause before the n-th retry
// is the same in operation after operation (no jitter), or retry start times bunch into waves. See
// docs/principles.md#backoff-and-classification: "10,000 clients refused at one moment with a fixed
// 5 s pause all return at t+5 - the load comes back in rhythmic waves; jitter smears the returns".
// Pauses are compared per retry ordinal (the first retry's pauses with each other, the second's
// with each other), so exponential growth is not mistaken for variation.
//
// Full jitter - sleep uniform(0, min(cap, base*2^n)) - has a coefficient of variation near 0.58
// and never bunches; it is not reported. Equal jitter (about 0.19) is not reported either. The
// threshold (maxCV, default 0.05) catches fixed pauses and pauses with a token jitter of a few
// percent.
//
// Offline the window is the whole input, judged in chunks when it outgrows the analyzer's bound;
// live, the policy's detectors.window. The detector keeps no state between runs; per run it holds
// one running sum per (dependency, retry ordinal) and the retry start times of the window.
//
// Evidence: retry (ordinal), samples, mean_pause_ms, cv, callers, waves, largest_wave,
// wave_starts, window_start, window_end, window_ms.
//
// Works on stock instrumentation: the pause is the gap between sibling attempts.
//
// False positives: a single client replaying a fixed schedule (one caller, one operation every
// few minutes) shows identical pauses without any herd; the evidence's callers and waves tell the
// two apart. Nothing is judged under minSamples (default 8) pauses.
//
// Seed: 001 (backoff with jitter: why a fixed pause synchronizes).
package synchronizedretries
