// Package build holds what the engine writes into the model the detectors read: a Trace's index
// and the facts about an Operation and an Attempt that only inference knows (an operation's
// intent key and child count, an attempt's recorded number). Package analyzer keeps them in
// unexported fields and answers from them through read-only methods (Trace.Parent,
// Operation.IntentKey, Attempt.RecordedNumber); the engine (analyzer/engine), which builds the
// model, reaches them through the accessors below and no other way. As go/types keeps its
// setters out of its API, nothing here is part of analyzer's: a detector cannot write what the
// detectors after it read.
//
// Go's internal rule would let the detectors (analyzer/passes/...) import this package too; they
// must not, and analyzer's TestDetectorsDoNotImportTheBuild fails when one does.
package build

// TraceIndex is the index of a Trace's spans that the engine builds and Trace's methods answer
// from. Span i is Trace.Spans[i]; every per-span slice has one entry per span. Op is
// *analyzer.Operation, which this package cannot name (analyzer imports it).
type TraceIndex[Op any] struct {
	// IDs are the spans' ids, in the order of Spans (sorted), as pairs of big-endian halves, the
	// high one first: what Lookup searches, eight bytes a step next to each other, with no
	// pointer for the garbage collector.
	IDs []int32
	// Parent is the index of each span's parent, -1 for roots, orphans and broken links.
	Parent []int32
	// The children of span i are Child[ChildOff[i]:ChildOff[i+1]], by start time (ChildOff has
	// one entry more than there are spans).
	ChildOff []int32
	Child    []int32
	// Roots are the spans with Parent -1, by start time.
	Roots []int32
	// Order is the pre-order of the tree, siblings by start time; span i is at Order[Pos[i]] and
	// its subtree, i included, is Order[Pos[i]:Pos[i]+Size[i]] (what Walk runs through).
	Order []int32
	Pos   []int32
	Size  []int32
	// Call is each span's index into Calls, -1 for a span that is not a call.
	Call []int32
	// Calls are the facts about each call the detectors read (Operation, Outcome, Origin). The
	// engine sets them for the detectors' pass and clears them when it ends.
	Calls []CallFacts
	// Enclosing is, for each span, the index into Ops of the innermost operation whose call is
	// the span or an ancestor of it, -1 for none. Indexes, not pointers: nothing for the garbage
	// collector to trace.
	Enclosing []int32
	// Ops are the trace's operations.
	Ops []Op
	// RootAdded is, for each of Roots, the latency retries added to that request (analyzer/cost:
	// failed tries and pauses on its critical path), in ns; -1 for a root that is not a request.
	// The engine sets it for the detectors' pass (Trace.AddedLatency) and clears it after.
	RootAdded []int64
	// CarriedKeys are the attribute keys whose presence the engine indexed in its pass over
	// every attribute (the keys the run's detectors declared, Detector.CarriedAttrs), nil when
	// it indexed none; bit k of Carried is set when some span has an attribute named
	// CarriedKeys[k]. Trace.CarriesAttr scans the spans for any other key.
	CarriedKeys []string
	Carried     uint64
}

// CallFacts are what Trace answers about one call: the index of its operation in
// TraceIndex.Ops (-1 for none), its destination (scheme://host:port), outcome class and status,
// and when its caller gave up on it (Trace.GiveUp).
type CallFacts struct {
	Op int32
	// Origin is the call's scheme://host:port; Dependency the name of its dependency (see
	// DependencyStats.Dependency).
	Origin, Dependency, Outcome, Status string
	GiveUp                              int64
}

// Operation is what inference writes of an analyzer.Operation besides its exported fields.
type Operation struct {
	// Intent is what Operation.IntentKey returns: equal for the copies of one operation made by
	// the retries of the layers above it in one trace.
	Intent uint64
	// Children counts the operations whose Parent is this one (Operation.ChildCount).
	Children int
}

// Attempt is what inference writes of an analyzer.Attempt besides its exported fields.
type Attempt struct {
	// RecordedNumber is the attempt's number as its span recorded it (resilience.attempt), -1
	// when absent (Attempt.RecordedNumber).
	RecordedNumber int64
}

// The accessors, set by package analyzer when it initializes: the one way from a model value to
// what it keeps unexported. This package cannot name analyzer's types, so each is held as any,
// with its type beside it; the engine asserts them once, when it initializes, so a wrong type
// stops every program and test at the start.
var (
	TraceIndexOf any // func(*analyzer.Trace) *TraceIndex[*analyzer.Operation]
	OperationOf  any // func(*analyzer.Operation) *Operation
	AttemptOf    any // func(*analyzer.Attempt) *Attempt
)
