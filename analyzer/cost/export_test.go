package cost

import "github.com/stormwatch/stormwatch/analyzer"

// MeasureWalked is Measure without the shortcut for traces in which nothing retried, and
// RetriedNothing the shortcut's test: for the test that it changes no figure.
func MeasureWalked(t *analyzer.Trace, ops []*analyzer.Operation, skew int64) []Request {
	var sc Scratch
	return sc.measure(t, ops, skew, true)
}

var RetriedNothing = retriedNothing
