package engine

import (
	"fmt"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/cost"
	"github.com/stormwatch/stormwatch/spans"
)

// Snapshot is an immutable view of the analyzer at one moment. The TUI and /metrics read snapshots
// while ingestion goes on; nothing in a snapshot changes after it is taken, and taking one never
// waits for ingestion to finish a trace.
type Snapshot struct {
	// AtUnixNano is the time the snapshot was taken (the caller's clock).
	AtUnixNano int64
	// Report holds dependencies (worst amplification first), findings and notes.
	Report analyzer.Report
	// HeldOperations is how many logical operations the traces held have: what Operations would
	// list, without reading them.
	HeldOperations int
	// History is each dependency's amplification per interval, oldest first, for sparklines.
	History map[string][]float64
	// Stats describes the store behind the snapshot.
	Stats StoreStats
	// LastAttempts is, per dependency, when it was last attempted and last refused, over every
	// trace analyzed, evicted ones included: whether a breaker (or a retry budget) refuses calls
	// to it now, or did before, without reading the operations back. They are the latest ever
	// seen: a maximum cannot be taken back when a trace is evicted or analyzed again, and
	// "refusing now" asks for the latest attempt, whichever trace still holds it.
	LastAttempts map[string]LastAttempt

	// TraceLookup finds one trace's analysis. The analyzer sets it; tests may set their own. It must
	// be safe to call from any goroutine and return immutable views.
	TraceLookup func(spans.TraceID) (*TraceView, bool)

	// held are the held analyses with operations at the snapshot, oldest first: what Operations
	// reads. Snapshots of one state share it. bad, when set, is told of operations that do not
	// read back.
	held []heldRef
	bad  func(string)
}

// LastAttempt is when one dependency was last attempted (see Snapshot.LastAttempts).
type LastAttempt struct {
	// StartUnixNano is the start of the latest attempt, refused or not.
	StartUnixNano int64
	// RefusedStartUnixNano is the start of the latest attempt refused (outcome "refused": a
	// breaker or budget said no); Refused says whether any was.
	RefusedStartUnixNano int64
	Refused              bool
}

// merge makes l the latest of l and o.
func (l *LastAttempt) merge(o LastAttempt) {
	l.StartUnixNano = max(l.StartUnixNano, o.StartUnixNano)
	if o.Refused && (!l.Refused || o.RefusedStartUnixNano > l.RefusedStartUnixNano) {
		l.RefusedStartUnixNano, l.Refused = o.RefusedStartUnixNano, true
	}
}

// heldRef is one held analysis in a snapshot. Results are immutable once held.
type heldRef struct {
	id spans.TraceID
	r  *traceResult
}

// Operations reads back the logical operations of the traces held at the snapshot, oldest trace
// first. A live analyzer holds them packed and keeps nothing of what it reads: each call unpacks
// them into memory of the caller's (about 1 us an operation, see BenchmarkSnapshot), which the
// caller keeps for as long as it shows them. The values are immutable.
func (s *Snapshot) Operations() []*analyzer.Operation {
	if s == nil || len(s.held) == 0 {
		return nil
	}
	var packs [][]byte
	for _, h := range s.held {
		if h.r.ops == nil {
			packs = append(packs, h.r.packedOps)
		}
	}
	var ar opsArena
	ar.reserve(packs...)
	ops := make([]*analyzer.Operation, 0, s.HeldOperations)
	for _, h := range s.held {
		if h.r.ops != nil {
			ops = append(ops, h.r.ops...)
			continue
		}
		var err error
		if ops, err = ar.unpack(ops, h.r.packedOps); err != nil && s.bad != nil {
			// Only a bug in the packed form gets here; the report says so rather than hiding it.
			s.bad(fmt.Sprintf("analyzer: operations of trace %s: %v", h.id, err))
		}
	}
	return ops
}

// SameOperations reports whether s and o list the same operations because they are snapshots of
// one state: a reader that kept what Operations read for s may keep it for o.
func (s *Snapshot) SameOperations(o *Snapshot) bool {
	if s == nil || o == nil || len(s.held) != len(o.held) {
		return false
	}
	return len(s.held) == 0 || &s.held[0] == &o.held[0]
}

// HeldTraceIDs lists the traces held at the snapshot that have operations, oldest first.
func (s *Snapshot) HeldTraceIDs() []spans.TraceID {
	if s == nil {
		return nil
	}
	ids := make([]spans.TraceID, len(s.held))
	for i, h := range s.held {
		ids[i] = h.id
	}
	return ids
}

// SetOperations makes ops what the snapshot lists, as values, and LastAttempts theirs: for a
// snapshot made by hand (tests, tools). Each operation's trace counts as held.
func (s *Snapshot) SetOperations(ops []*analyzer.Operation) {
	s.held, s.HeldOperations = nil, len(ops)
	last := map[string]*LastAttempt{}
	addLastAttempts(last, appendLastAttempts(nil, ops))
	s.LastAttempts = copyLastAttempts(last)
	for i := 0; i < len(ops); {
		j := i + 1
		for j < len(ops) && ops[j].TraceID == ops[i].TraceID {
			j++
		}
		s.held = append(s.held, heldRef{id: ops[i].TraceID, r: &traceResult{ops: ops[i:j:j], nOps: j - i}})
		i = j
	}
}

// StoreStats describes what the analyzer holds and what it had to drop.
type StoreStats struct {
	SpansHeld int
	// TracesHeld counts the traces held as the analyzer analyzes them: a delivery's trace filed
	// with its publisher's (see joinDeliveries) is part of that one.
	TracesHeld int
	// PackedBytes is the memory of the spans held (SpansHeld), all packed from their arrival:
	// about 70-250 bytes a span, strings included (the bytes in use; a trace whose spans came in
	// several batches may hold up to twice its pending bytes until it is analyzed).
	PackedBytes int
	// PendingTraces are traces still waiting for their settle period.
	PendingTraces int
	// EvictedTraces and EvictedSpans count what the --max-spans bound pushed out, oldest first.
	EvictedTraces int
	EvictedSpans  int
	// TruncatedTraces hit the per-trace span cap; TruncatedSpans are the spans it refused, every
	// one of them, those that came after the trace was analyzed included.
	TruncatedTraces int
	TruncatedSpans  int
	// DuplicateSpans were received more than once and dropped.
	DuplicateSpans int
	// WindowRun is how long the windowed detectors' last live run took (0 before the first),
	// and WindowEvery the least time from it to the next: WindowInterval, or longer after a long
	// run (Config.WindowShare). Negative WindowEvery: never live (an offline analyzer).
	WindowRun, WindowEvery time.Duration
	// SettledThroughUnixNano: every trace whose last span arrived before it has been analyzed
	// (the last span of the oldest trace still settling, or the analyzer's clock when none is).
	// WindowThroughUnixNano: the operations analyzed before it have been judged by the windowed
	// detectors too (their last run, or the clock when none has been analyzed since, or when the
	// suite has none). Live readers that compare reports wait for both to pass the moment they
	// asked (stormwatch diff against a collector); 0 before the analyzer has seen a clock.
	SettledThroughUnixNano, WindowThroughUnixNano int64
}

// Trace returns the analysis of one held trace, or false when it is not (or no longer) held.
func (s *Snapshot) Trace(id spans.TraceID) (*TraceView, bool) {
	if s == nil || s.TraceLookup == nil {
		return nil, false
	}
	return s.TraceLookup(id)
}

// TraceView is one trace as the TUI's waterfall and the span detail need it. Immutable.
type TraceView struct {
	TraceID spans.TraceID
	// Spans are ordered for display: parents before children, siblings by start time.
	Spans []spans.Span
	// Depth[i] is Spans[i]'s depth in the tree (0 for roots and orphans).
	Depth []int
	// Operations are the logical operations found in the trace.
	Operations []*analyzer.Operation
	Findings   []analyzer.Finding
	// Layers is the worst root-to-leaf chain of retrying layers, top first: the
	// "3 x 3 x 3 = 27 calls to dep" line. Empty when no layer retried.
	Layers []analyzer.Layer
	// LeafDependency is the dependency at the bottom of Layers.
	LeafDependency string
	// Path is the critical path of each request (root span) of the trace, earliest first, each
	// stretch charged to what it was spent on (analyzer/cost); Segment.Span indexes Spans.
	Path      []cost.Segment
	Truncated bool
	Notes     []string
}
