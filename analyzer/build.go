package analyzer

import "github.com/stormwatch/stormwatch/analyzer/internal/build"

// The engine (analyzer/engine) builds a Trace and its Operations and Attempts; detectors read
// them through the methods of Trace, Operation and Attempt. What the engine writes besides their
// exported fields - a trace's index, an operation's intent key and child count, an attempt's
// recorded number - is kept here in unexported fields of the types of analyzer/internal/build,
// which only the engine imports; these accessors are its way to them. No exported name of this
// package writes any of it. What a Trace lends besides - its spans, the slices Children and Roots
// return, the exported fields of Operation and Attempt - is lent to read: appending is safe,
// writing an element changes it for the detectors after (docs/analyzer.md says so).
func init() {
	build.TraceIndexOf = func(t *Trace) *build.TraceIndex[*Operation] { return &t.ix }
	build.OperationOf = func(o *Operation) *build.Operation { return &o.built }
	build.AttemptOf = func(a *Attempt) *build.Attempt { return &a.built }
}
