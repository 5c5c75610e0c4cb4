package engine

import (
	"fmt"
	"slices"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/cost"
	"github.com/stormwatch/stormwatch/spans"
)

// What the Engine hands out to readers that are not the report: the Snapshot (the TUI, /metrics),
// the store's figures (StoreStats), the sparklines' history, and the trace views a snapshot looks up.

// Snapshot is an immutable view of the analyzer at one moment. The TUI and /metrics read snapshots
// while ingestion goes on; nothing in a snapshot changes after it is taken, and taking one never
// waits for ingestion to finish a trace.
type Snapshot struct {
	// AtUnixNano is the time the snapshot was taken (the caller's clock).
	AtUnixNano int64
	// Report holds dependencies (worst amplification first), findings and notes.
	Report analyzer.Report
	// HeldOperations is how many logical operations the traces held keep: what Operations would
	// list, without reading them. Released traces that are to be forgotten keep none
	// (Config.ForgetAfter); the report's Input.Operations counts every operation analyzed.
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
	// about 70-250 bytes a span, strings included (the bytes in use: each of the first four
	// batches' blocks of a trace not analyzed yet is a buffer of its own, exactly sized; later
	// ones share a buffer that may hold up to twice their bytes until the trace is analyzed).
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
	// WindowRuns counts the windowed detectors' live runs: a caller that ticks Settle learns
	// from it whether a tick ran them (their run holds the window's operations as values for
	// its length, a peak of the heap a memory limit should not follow).
	WindowRuns int
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

// Stats describes what the analyzer holds.
func (a *Engine) Stats() StoreStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats()
}

func (a *Engine) stats() StoreStats {
	return StoreStats{
		SpansHeld:       a.spansHeld,
		PackedBytes:     a.packedBytes,
		TracesHeld:      a.held.len, // a.traces also maps the ids of traces filed with another
		PendingTraces:   a.pending.len,
		EvictedTraces:   a.evictedT,
		EvictedSpans:    a.evictedS,
		TruncatedTraces: a.truncatedT,
		TruncatedSpans:  a.truncatedS,
		DuplicateSpans:  a.issues.duplicates,
		WindowRun:       a.windowRun,
		WindowRuns:      a.windowRuns,
		WindowEvery:     a.windowEvery(),

		SettledThroughUnixNano: a.settledThrough(),
		WindowThroughUnixNano:  a.windowThrough(),
	}
}

// settledThrough is StoreStats.SettledThroughUnixNano: the last arrival of the trace that has
// waited longest, pending (the pending list is in the order of last arrival, so its front) or
// being analyzed by a pass, else now. Under a.mu.
func (a *Engine) settledThrough() int64 {
	through := a.now
	if t := a.pending.front(); t != nil {
		through = t.lastSeen
	}
	if a.analyzing != 0 {
		through = min(through, a.analyzing)
	}
	return through
}

// Snapshot is an immutable view for the TUI. When nothing changed since the last one, the same
// report, operations and history are shared (they are immutable), so taking a few snapshots a
// second costs a pointer copy; when only the history moved (every HistoryInterval, idle or not),
// only the history is new. The operations stay packed in the analyzer: a snapshot lists the held
// analyses, and Snapshot.Operations reads them back for a reader that shows them.
func (a *Engine) Snapshot(now time.Time) *Snapshot {
	n := now.UnixNano()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.now = max(a.now, n)
	cur := [2]uint64{a.version, a.histVersion}
	switch {
	case a.snapCache != nil && a.snapCached == cur:
	case a.snapCache != nil && a.snapCached[0] == a.version:
		s := *a.snapCache
		s.History = a.history()
		a.snapCache, a.snapCached = &s, cur
	default:
		var s *Snapshot
		if a.sumCache != nil && a.sumCached == cur {
			c := *a.sumCache // the figures a summary made of this state already
			s = &c
		} else {
			s = a.summary()
		}
		s.held = make([]heldRef, 0, len(a.traces))
		for t := a.held.front(); t != nil; t = a.held.next(t) {
			if t.res == nil {
				continue
			}
			if n := t.res.keptOps(); n > 0 {
				s.held = append(s.held, heldRef{id: t.id, r: t.res})
				s.HeldOperations += n
			}
		}
		s.held = slices.Clip(s.held)
		s.bad = a.badOps
		a.snapCache, a.snapCached = s, cur
	}
	out := *a.snapCache
	out.AtUnixNano = n
	a.clockStats(&out.Stats)
	return &out
}

// clockStats brings the stats that follow the clock up to now in a snapshot that shares a cached
// one's figures. The cache is kept for as long as nothing changes, but an idle analyzer is settled
// and judged through every moment it is asked at: a reader waiting for those to pass the time it
// asked (stormwatch diff) would otherwise wait for the next span. Under a.mu.
func (a *Engine) clockStats(st *StoreStats) {
	st.SettledThroughUnixNano, st.WindowThroughUnixNano = a.settledThrough(), a.windowThrough()
}

// badOps notes held operations that did not read back for a snapshot (only a bug in the packed
// form gets here): the next report says so rather than hiding it.
func (a *Engine) badOps(msg string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.detErrs[msg] {
		a.detErrs[msg] = true
		a.version++
	}
}

// Summary is a Snapshot without its operations (it lists none): the report, history and store
// figures, for readers of the figures alone (/metrics, the status line). It shares a current
// Snapshot's figures when there is one.
func (a *Engine) Summary(now time.Time) *Snapshot {
	n := now.UnixNano()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.now = max(a.now, n)
	cur := [2]uint64{a.version, a.histVersion}
	var out Snapshot
	switch {
	case a.snapCache != nil && a.snapCached == cur:
		out = *a.snapCache
		out.held, out.HeldOperations, out.bad = nil, 0, nil
	case a.sumCache != nil && a.sumCached == cur:
		out = *a.sumCache
	default:
		var s Snapshot
		switch {
		// Only the history moved (idle, every interval): the report is the same one.
		case a.sumCache != nil && a.sumCached[0] == a.version:
			s = *a.sumCache
			s.History = a.history()
		case a.snapCache != nil && a.snapCached[0] == a.version:
			s = *a.snapCache
			s.held, s.HeldOperations, s.bad = nil, 0, nil
			s.History = a.history()
		default:
			s = *a.summary()
		}
		a.sumCache, a.sumCached = &s, cur
		out = s
	}
	out.AtUnixNano = n
	a.clockStats(&out.Stats)
	return &out
}

// summary makes a snapshot's figures: everything but the operations. Under a.mu.
func (a *Engine) summary() *Snapshot {
	s := &Snapshot{Report: a.report(), Stats: a.stats(), History: a.history(), LastAttempts: copyLastAttempts(a.lastAttempts)}
	// Looked up when asked, not indexed per snapshot: the TUI opens one trace at a time.
	// The result found is immutable; a trace re-analyzed since shows its newer analysis.
	s.TraceLookup = a.lookup
	return s
}

// history is a copy of the sparklines' points. Under a.mu.
func (a *Engine) history() map[string][]float64 {
	h := make(map[string][]float64, len(a.hist))
	for k, v := range a.hist {
		h[k] = slices.Clone(v)
	}
	return h
}

// tickHistory appends one point per elapsed interval: each dependency's amplification over the
// calls counted during the interval.
func (a *Engine) tickHistory(n int64) {
	iv := int64(a.cfg.HistoryInterval)
	if iv <= 0 {
		iv = int64(DefaultHistoryInterval)
	}
	if a.histAt == 0 {
		a.histAt = n
		return
	}
	if n-a.histAt < iv {
		return
	}
	a.histAt = n
	hl := orDefault(a.cfg.HistoryLen, DefaultHistoryLen)
	for dep, g := range a.deps {
		prev := a.histPrev[dep]
		dp, dl := g.physical-prev[0], g.logical-prev[1]
		v := 0.0
		if dp > 0 && dl > 0 {
			v = float64(dp) / float64(dl)
		}
		h := append(a.hist[dep], v)
		if len(h) > hl {
			h = slices.Delete(h, 0, len(h)-hl)
		}
		a.hist[dep] = h
		a.histPrev[dep] = [2]int{g.physical, g.logical}
	}
	a.histVersion++
}

// lookup finds a held trace's latest analysis (Snapshot.TraceLookup). A trace held packed is
// unpacked and indexed again outside the lock: the view is the same as the analysis's own.
func (a *Engine) lookup(id spans.TraceID) (*TraceView, bool) {
	a.mu.Lock()
	t := a.traces[id]
	var r traceResult // a copy: the view reads back its operations into it
	var packed []byte
	var meta *heldTrace
	found := t != nil && t.res != nil
	if found {
		// A delivery's trace is analyzed with its publisher's (joinDeliveries): that view.
		id, r, packed, meta = t.id, *t.res, t.packed, t.meta
	}
	a.mu.Unlock()
	if !found {
		return nil, false
	}
	return a.viewHeld(id, r, meta, packed), true
}

// viewHeld is the trace view of a held analysis r: its operations read back when they are
// packed, with its spans when they are held (packed).
func (a *Engine) viewHeld(id spans.TraceID, r traceResult, meta *heldTrace, packed []byte) *TraceView {
	var lost error
	if r.ops == nil && r.nOps > 0 {
		r.ops, lost = unpackOps(make([]*analyzer.Operation, 0, r.nOps), r.packedOps)
	}
	var v *TraceView
	if packed != nil {
		v = a.viewPacked(id, &r, meta, packed)
	} else {
		v = r.view()
	}
	if lost != nil {
		// Only a bug in the packed form gets here: show what is left, and say why.
		v.Notes = append(slices.Clip(v.Notes), fmt.Sprintf("operations lost: %v", lost))
	}
	return v
}
