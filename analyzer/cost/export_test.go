package cost

import "github.com/stormwatch/stormwatch/analyzer"

// MeasureWalked is Measure without the shortcut for traces in which nothing retried, and
// RetriedNothing the shortcut's test: for the test that it changes no figure.
func MeasureWalked(t *analyzer.Trace, ops []*analyzer.Operation, skew int64) []Request {
	var sc Scratch
	return sc.measure(t, ops, skew, true)
}

var RetriedNothing = retriedNothing

// Held is the most elements any of sc's arrays can hold without growing: what it keeps between
// traces.
func (sc *Scratch) Held() int {
	m := &sc.m
	return max(cap(sc.rootOf), cap(sc.reqs), cap(sc.deps), cap(m.ownPart), cap(m.part),
		cap(m.ownOp), cap(m.op), cap(m.ownCopy), cap(m.copied), cap(m.pauses), cap(m.kids), cap(m.segs))
}
