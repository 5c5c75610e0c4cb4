// Package passtest is the test harness of the detectors, in the manner of
// golang.org/x/tools/go/analysis/analysistest: [Run] analyzes each trace file in a detector's
// testdata/ with that detector alone and compares its findings with the expectations written
// beside the trace (NAME.want, one line per finding; empty where the detector must stay silent),
// under the policy beside it when there is one (NAME.policy.yaml). A mismatch fails with a diff.
//
// It also reads the recorded fixtures (fixtures/) through the whole suite, as `stormwatch
// analyze` does, for tests about how detectors and policies work together ([Analyze], [Load]).
package passtest
