package analyzer

import "github.com/stormwatch/stormwatch/spans"

// This file is for drivers, not detectors: the engine (analyzer/engine) builds a Trace and its
// Operations, and detectors read them through the methods of Trace, Operation and Attempt. Go
// lets another package write only exported names, so what the engine writes and those methods
// read is exported here, and only here: a Trace's index, an Operation's intent key and child
// count, an Attempt's recorded number. A detector that writes any of it breaks the analysis of
// the detectors after it.

// TraceIndex is the index of a Trace's spans that the driver builds and Trace's methods answer
// from. Span i is Trace.Spans[i]; every per-span slice has one entry per span.
type TraceIndex struct {
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
	// driver sets them for the detectors' pass and clears them when it ends.
	Calls []CallFacts
	// Enclosing is, for each span, the index into Ops of the innermost operation whose call is
	// the span or an ancestor of it, -1 for none. Indexes, not pointers: nothing for the garbage
	// collector to trace.
	Enclosing []int32
	// Ops are the trace's operations.
	Ops []*Operation
	// RootAdded is, for each of Roots, the latency retries added to that request (analyzer/cost:
	// failed tries and pauses on its critical path), in ns; -1 for a root that is not a request.
	// The driver sets it for the detectors' pass (Trace.AddedLatency) and clears it after.
	RootAdded []int64
	// Notes are what the analysis of the trace had to work around (Trace.Notes).
	Notes []string
	// Carried has bit k set when some span has an attribute named CarriedKeys[k]; CarriedRead
	// says the driver has indexed them (CarriesAttr scans the spans otherwise).
	Carried     uint8
	CarriedRead bool
}

// Index is t's index, for the driver that builds t (see TraceIndex).
func (t *Trace) Index() *TraceIndex { return &t.ix }

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

// CarriedKeys are the attribute keys whose presence a driver indexes for CarriesAttr (bit k of
// TraceIndex.Carried for CarriedKeys[k]): the ones detectors ask about.
var CarriedKeys = [...]string{
	spans.AttrDeadlineRemaining,
	spans.AttrRetryAfter,
	spans.AttrResHeaderRetryAfter,
	spans.AttrIdempotencyKey,
	spans.AttrReqHeaderIdempotencyKey,
}

// SetIntentKey sets what IntentKey returns: equal for the copies of one operation made by the
// retries of the layers above it in one trace.
func (o *Operation) SetIntentKey(k uint64) { o.intent = k }

// ChildCount counts the operations whose Parent is o (IsLeaf when there are none).
func (o *Operation) ChildCount() int { return o.children }

// SetChildCount sets ChildCount.
func (o *Operation) SetChildCount(n int) { o.children = n }

// RecordedNumber is the attempt's number as its span recorded it (resilience.attempt), -1 when
// absent; Number is the one the analysis counted.
func (a *Attempt) RecordedNumber() int64 { return a.refNumber }

// SetRecordedNumber sets RecordedNumber.
func (a *Attempt) SetRecordedNumber(n int64) { a.refNumber = n }
