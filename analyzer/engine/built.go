package engine

import (
	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/internal/build"
)

// This file is the engine's one way to what it writes into the model besides the exported fields
// (analyzer/internal/build): a trace's index, an operation's intent key and child count, an
// attempt's recorded number. Package analyzer exports none of it, so that no detector can write
// what the detectors after it read, and hands the engine these accessors instead. Asserted here,
// when the engine initializes: a change of their types stops every program and test at the start.
var (
	indexOf  = build.TraceIndexOf.(func(*analyzer.Trace) *build.TraceIndex[*analyzer.Operation])
	opBuilt  = build.OperationOf.(func(*analyzer.Operation) *build.Operation)
	tryBuilt = build.AttemptOf.(func(*analyzer.Attempt) *build.Attempt)
)

// traceIndex is the index of a Trace that the engine builds (see [build.TraceIndex]).
type traceIndex = build.TraceIndex[*analyzer.Operation]

// Index is t's index, which the Trace's methods answer from: the pointer buildTrace took, so
// that the many reads and writes of it all over inference cost no call.
func (t *trace) Index() *traceIndex { return t.ix }

// setIntentKey sets what op.IntentKey returns.
func setIntentKey(op *analyzer.Operation, k uint64) { opBuilt(op).Intent = k }

// setChildCount sets what op.ChildCount returns.
func setChildCount(op *analyzer.Operation, n int) { opBuilt(op).Children = n }

// setRecordedNumber sets what a.RecordedNumber returns.
func setRecordedNumber(a *analyzer.Attempt, n int64) { tryBuilt(a).RecordedNumber = n }
