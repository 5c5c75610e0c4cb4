// Package whatif predicts, from recorded logical operations, the physical calls each dependency
// would have received under a changed retry policy - fewer attempts in one layer, a retry budget,
// a narrower fan-out - so a recording becomes a regression test for a policy change.
//
// The model is stated with every prediction: each attempt's outcome is what was recorded (the
// n-th try fails or succeeds as it did), a success ends the loop, and work below an attempt
// (the callee's own operations) happens only if that attempt is still made. Attempts beyond
// those recorded, when a change raises maxAttempts, repeat the last recorded try. A retry budget
// allows a retry while retries stay within ratio x first attempts of the same (owner,
// dependency), counted in start order with no reserve. A breaker opens after its threshold of
// consecutive failed operations of the same (owner, dependency), in start order, and stays open
// for the rest of the recording: an operation it refuses makes no call and counts for nothing.
//
// Pure: operations in, a Prediction out. Rendering is in analyzer/render.
package whatif
