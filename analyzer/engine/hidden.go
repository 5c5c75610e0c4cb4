package engine

import (
	"cmp"
	"slices"

	"github.com/stormwatch/stormwatch/spans"
)

// The rules in this file, hidden_ops.go and loops.go read the retries that no CLIENT span shows.
// Each follows from who makes which span:
//
//   - A request sent again below the caller's instrumentation (a retrying proxy or sidecar that
//     exports nothing, a library that retries inside the one span its instrumentation wraps around
//     the whole call) reaches the callee each time with the same traceparent: the callee makes one
//     SERVER span per request, all children of the one CLIENT span. The SERVER spans are the
//     physical calls; the hop that repeated them is a layer of its own (untracedHop).
//   - A SERVER span whose parent never arrives answered a call whose span was lost: the caller's
//     service exports nothing, or its CLIENT span never ended (an instrumentation that ends the
//     span when the body is closed, under a retry loop that drops failed answers unclosed). The
//     orphan is attached by time to the span that most likely made the call (bridgeOrphans) and
//     stands for that call.
//   - An application loop around a client that retries on its own shows as sibling INTERNAL spans
//     of one name, each but the last failing, each with the client's attempts under it: both loops
//     are layers (appLoops, in loops.go).

// bridge is an orphan SERVER span and the span it is attached to.
type bridge struct {
	orphan, attach int32
}

// maxBridged bounds the orphans a trace attaches: each costs a scan of the trace.
const maxBridged = 256 // unbridgedNote states it

// bridgeOrphans attaches each orphan SERVER span (its parent span never arrived) to the span that
// most likely made the call it answered, and reports whether any was. The attach point is the
// innermost span of another service that was open when the orphan started (within the skew
// tolerance): a CLIENT span whose callee left no span of its own (the orphan's caller sat,
// untraced, behind it) or the SERVER or INTERNAL span whose CLIENT span was lost. Time decides
// only among spans that contain the orphan's start, so a skewed clock can misplace an orphan
// between two attempts of one layer but never invent a layer.
func (t *trace) bridgeOrphans(skew int64, sc *scratch) bool {
	sc.bridge = sc.bridge[:0]
	var lift []int32 // how much deeper each span hangs once its orphan root is attached
	if len(t.Index().Roots) < 2 {
		return false // an orphan is a root beside the trace's own root
	}
	orphans := sc.orphans[:0]
	for _, r := range t.Index().Roots {
		s := &t.Spans[r]
		if s.Kind != spans.KindServer || s.ParentID.IsZero() || s.ParentID == s.SpanID {
			continue
		}
		if _, found := t.Lookup(s.ParentID); found {
			continue // a broken cycle, not a lost parent
		}
		if len(orphans) == maxBridged {
			t.issues.unbridged++ // left as a root: the bound keeps the work linear
			continue
		}
		orphans = append(orphans, r)
	}
	sc.orphans = orphans[:0]
	if len(orphans) == 0 {
		return false
	}
	// Times are compared on the root's clock: each service's offset is read from the calls whose
	// both ends are in the trace (clockShifts), so a callee whose clock runs tens of milliseconds
	// off still falls inside the span that called it. Orphans are taken by start on that clock,
	// so a subtree that holds a later orphan's start was attached, and lifted, before it is
	// compared.
	shift := t.clockShifts(sc)
	t.fitUnknownClocks(orphans, shift, skew, sc)
	slices.SortStableFunc(orphans, func(a, b int32) int {
		return cmp.Compare(t.Spans[a].StartUnixNano-shift[a], t.Spans[b].StartUnixNano-shift[b])
	})
	lift = slices.Grow(sc.lift[:0], len(t.Spans))[:len(t.Spans)]
	clear(lift)
	sc.lift = lift
	for _, r := range orphans {
		s := &t.Spans[r]
		start := s.StartUnixNano - shift[r]
		lo, hi := t.Index().Pos[r], t.Index().Pos[r]+t.Index().Size[r]
		best := int32(-1)
		depth := func(j int32) int32 { return t.depth[j] + lift[j] }
		for j := range t.Spans {
			c := &t.Spans[j]
			// The times first: most spans of a wide trace were not open when the orphan started.
			if cStart := c.StartUnixNano - shift[j]; start < cStart-skew || start > t.End(j)-shift[j]+skew {
				continue
			}
			if !t.mayHaveCalled(int32(j), r) {
				continue
			}
			if best < 0 || depth(int32(j)) > depth(best) || depth(int32(j)) == depth(best) && c.StartUnixNano-shift[j] > t.Spans[best].StartUnixNano-shift[best] {
				best = int32(j)
			}
		}
		if best >= 0 {
			sc.bridge = append(sc.bridge, bridge{orphan: r, attach: best})
			t.issues.bridged++
			// The orphan's subtree now hangs under best: its spans are that much deeper, so an
			// orphan that started inside one of them (a hole below a hole: a middle service's
			// unended attempts under another's) is attached to it, not to a shallower span of the
			// trace's own tree that was open too.
			for k := lo; k < hi; k++ {
				lift[t.Index().Order[k]] = depth(best) + 1
			}
		}
	}
	attached := append(sc.attached[:0], sc.bridge...)
	slices.SortStableFunc(attached, func(a, b bridge) int { return cmp.Compare(a.attach, b.attach) })
	sc.attached = attached
	return len(sc.bridge) > 0
}

// mayHaveCalled reports whether span j can have made the call orphan o answered: a span of another
// service, outside o's own subtree, that can make such a call at all (canCall).
func (t *trace) mayHaveCalled(j, o int32) bool {
	if p, lo := t.Index().Pos[j], t.Index().Pos[o]; p >= lo && p < lo+t.Index().Size[o] {
		return false // its own subtree
	}
	return t.Spans[j].Service() != t.Spans[o].Service() && t.canCall(j)
}

// canCall reports whether span j can have made the call an orphan answered, whatever the orphan:
// not a PRODUCER; and if a CLIENT span, one whose callee is untraced, made over a protocol that
// carries the trace on (HTTP, RPC: it has a method) - not one whose callee answered with a span of
// its own, nor a database or cache call.
func (t *trace) canCall(j int32) bool {
	c := &t.Spans[j]
	if c.Kind == spans.KindProducer {
		return false
	}
	if c.Kind == spans.KindClient {
		if k := t.Index().Call[j]; k < 0 || t.calls[k].servers > 0 || t.calls[k].target == "" {
			return false
		}
	}
	return true
}
