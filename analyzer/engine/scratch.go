package engine

import (
	"slices"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/cost"
	"github.com/stormwatch/stormwatch/analyzer/internal/build"
	"github.com/stormwatch/stormwatch/spans"
)

// The analysis scratch: every buffer one trace's analysis needs, pooled (intern.go) and reused
// trace after trace, so that analyzing a trace allocates little beyond what its result keeps.

// scratch holds one trace analysis's temporary buffers. The analyzer keeps a pool of them (in its
// interner), so a trace's analysis allocates what it returns and little else: the sort keys,
// the cycle walk's marks, the traversal stack, the attribute indexes, the grouping keys and the
// occurrence counts are reused from one trace to the next. A scratch is used by one analysis at a
// time (Settle's pass and an eviction may analyze at once, each with its own).
type scratch struct {
	costs         cost.Scratch // what analyzer/cost measures in, trace after trace
	sources       sources      // the packed bytes the trace is read from (see Engine.run)
	added         []int64      // rootAdded's, the trace index's RootAdded while detectors run
	keys          []idKey
	state         []uint8
	path, stack   []int32
	known         []known
	carry         *carriedIndex // the keys known.read marks (Config.carried), set by analyzeTrace
	group         []int32
	keyed         []keyed
	runs          []keyRun
	originService originServices
	occList       []occCount
	occurrences   map[scopeIntent]int
	scopes        []int32   // occurrenceScope's answer by span, -2 until asked (see resetScopes)
	bufs          opBufs    // the trace being inferred; its buffers go with the result
	spare         opsSpare  // buffers of operations gone on packed or evicted, for the next trace
	ops           opsPacker // packs the operations of a result to hold
	// calls are the trace's calls (trace.calls, while it is analyzed). Operation k of
	// the trace made calls opCalls[opStart[k]:opStart[k+1]] (indexes into calls); the
	// operations after len(opStart)-1 (refused before any call) made none.
	calls   []callInfo
	facts   []build.CallFacts // what the detectors read of calls (see publishCalls)
	opCalls []int32
	opStart []int32
	seen    []intentAt
	rows    []acctRow // the trace's accounting, until hold copies it out (see accountRows)
	// What inference reads below the instrumentation (see hidden.go): orphans attached to the
	// spans that made their calls, SERVER spans being read as calls, the walk's marks, and the
	// application loops found with their tries.
	bridge   []bridge
	attached []bridge // the attachments by span attached to, then in their order
	srvs     []int32
	lift     []int32 // bridgeOrphans: depth added to an attached orphan's subtree
	orphans  []int32 // bridgeOrphans: the orphan SERVER spans, by start on the root's clock
	// clockShifts' clocks, the calls that relate them, each span's clock and its shift.
	clocks     []clockRef
	clockEdges []clockEdge
	clockOf    []int32
	shift      []int64
	clockKnown []bool
	clockIndex map[clockKey]int32 // each clock's number, empty between traces
	clockFirst []int32            // the walk's adjacency: where each clock's calls start in clockAdj
	clockAdj   []int32
	clockFill  []int32
	clockLevel []int32 // the clocks in the order the walk reached them
	clockTries []int64
	clockFit   []int64     // fitUnknownClocks: the offset fitted, by clock
	fitOrphans []int32     // fitUnknownClocks: the orphans by clock (at most maxBridged)
	callers    []callerRef // fitUnknownClocks: the spans that may have called an orphan, by start
	// inferBridged: which spans are attached orphans, and the order they are walked in.
	bridged   []bool
	walkSeq   []int32
	walkOwner []int32
	walkPass  []int32
	loops     []int32
	wide      wideIndex
	// derived caches origins and targets in front of the interner's shared cache. Kept from
	// trace to trace (reset leaves it): what it holds is true for any trace, and is the shared
	// cache's own copies.
	derived derivedL1
	// unpacker and spans hold the trace's spans read back from their packed bytes (see
	// scratch.unpack).
	unpacker spans.Unpacker
	spans    []spans.Span
	// arena holds the trace index's arrays (see buildTrace) and trace the index itself, with the
	// result it belongs to: made per trace, they would be two allocations a trace.
	arena []int32
	// reporter is the detectors' pass over the trace, and report its Report (reporter.report,
	// made once per scratch).
	reporter reporter
	report   func(analyzer.Finding)
	trace    struct {
		r traceResult
		t trace
	}
}

// arenaFor is the scratch's index array, n zero elements.
func (sc *scratch) arenaFor(n int) []int32 {
	if cap(sc.arena) < n {
		sc.arena = make([]int32, n)
		return sc.arena
	}
	a := sc.arena[:n]
	clear(a)
	return a
}

// maxScratch is the largest buffer (in elements) a scratch keeps between traces: one huge trace
// must not leave a huge buffer pinned in the pool.
const maxScratch = 4096

// reset drops buffers grown beyond maxScratch and what the last analysis left that points
// into its result.
//
// The attribute indexes, the calls and the spans read back (with the unpacker's arrays) are only
// truncated, not cleared: clearing them cost more than a percent of the analysis (write barriers
// for every pointer), and the next traces overwrite them. Until then a pooled scratch keeps
// strings of the traces it analyzed last reachable, and with them their packed bytes: as many
// traces as its arrays' tails reach back to (the arrays are dropped past maxScratch elements, the
// unpacker's past 16,384), for as long as the scratch lives - a pool entry not taken again goes
// at the second garbage collection.
func (sc *scratch) reset() {
	// The spans read back alias their packed bytes and the unpacker's buffers: truncated only,
	// like the indexes below, they keep one trace's packed bytes reachable until the next.
	if cap(sc.spans) > maxScratch {
		sc.spans = nil
	} else {
		sc.spans = sc.spans[:0]
	}
	sc.unpacker.Reset()
	clear(sc.sources)
	sc.sources = sc.sources[:0]
	if cap(sc.arena) > 12*maxScratch {
		sc.arena = nil
	}
	sc.trace.r, sc.trace.t = traceResult{}, trace{}
	sc.known = sc.known[:0]
	sc.calls = sc.calls[:0]
	sc.facts = sc.facts[:0]
	sc.bufs = opBufs{} // the last trace's operations: its result holds them packed, not these
	sc.occList = sc.occList[:0]
	sc.occurrences = nil
	sc.wide.release()
	if cap(sc.keys) > maxScratch {
		sc.keys = nil
	}
	if cap(sc.clockOf) > maxScratch || cap(sc.clockAdj) > 2*maxScratch {
		sc.clocks, sc.clockEdges, sc.clockOf, sc.shift, sc.clockKnown = nil, nil, nil, nil, nil
		sc.clockFirst, sc.clockAdj, sc.clockFill, sc.clockLevel = nil, nil, nil, nil
	}
	// By span, root or child: one huge trace grows them. (The orphans, the attachments and the
	// clock fit's tries are at most maxBridged and maxClockTries.)
	if cap(sc.lift) > maxScratch || cap(sc.bridged) > maxScratch {
		sc.lift, sc.bridged = nil, nil
	}
	if cap(sc.added) > maxScratch || cap(sc.scopes) > maxScratch {
		sc.added, sc.scopes = nil, nil
	}
	if cap(sc.srvs) > maxScratch || cap(sc.loops) > maxScratch {
		sc.srvs, sc.loops = nil, nil
	}
	if cap(sc.callers) > maxScratch || cap(sc.clockFit) > maxScratch {
		sc.callers, sc.clockFit = nil, nil
	}
	if cap(sc.state) > maxScratch {
		sc.state = nil
	}
	sc.costs.Trim(maxScratch)
	if cap(sc.path) > maxScratch {
		sc.path = nil
	}
	if cap(sc.stack) > maxScratch {
		sc.stack = nil
	}
	if cap(sc.known) > maxScratch {
		sc.known = nil
	}
	if cap(sc.group) > maxScratch {
		sc.group = nil
	}
	if cap(sc.calls) > maxScratch {
		sc.calls = nil
	}
	if cap(sc.facts) > maxScratch {
		sc.facts = nil
	}
	if cap(sc.opCalls) > maxScratch {
		sc.opCalls = nil
	}
	if cap(sc.opStart) > maxScratch {
		sc.opStart = nil
	}
	if cap(sc.keyed) > maxScratch {
		sc.keyed = nil
	}
	if cap(sc.runs) > maxScratch {
		sc.runs = nil
	}
	if cap(sc.occList) > maxScratch {
		sc.occList = nil
	}
	if cap(sc.seen) > maxScratch {
		sc.seen = nil
	}
	clear(sc.rows) // the last trace's accounting, copied out by hold
	if cap(sc.rows) > maxScratch {
		sc.rows = nil
	} else {
		sc.rows = sc.rows[:0]
	}
}

// callsOf are the indexes into the trace's calls of the calls operation k made.
func (sc *scratch) callsOf(k int) []int32 {
	if k+1 >= len(sc.opStart) {
		return nil
	}
	return sc.opCalls[sc.opStart[k]:sc.opStart[k+1]]
}

// rootAdded is the added latency of each root of t (TraceIndex.RootAdded), from the requests
// cost.Measure returned for it, which follow the roots that are requests in order.
func (sc *scratch) rootAdded(t *analyzer.Trace, reqs []cost.Request) []int64 {
	roots := t.Roots()
	sc.added = slices.Grow(sc.added[:0], len(roots))[:len(roots)]
	k := 0
	for j, r := range roots {
		sc.added[j] = -1
		if cost.IsRequest(&t.Spans[r]) && k < len(reqs) {
			sc.added[j] = reqs[k].Parts.Added()
			k++
		}
	}
	return sc.added
}
