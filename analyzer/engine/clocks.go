package engine

import (
	"cmp"
	"slices"
	"time"

	"github.com/stormwatch/stormwatch/spans"
)

// Service clocks: how far each service instance's clock runs ahead of the trace root's, estimated
// from the calls whose both ends are traced. Only traces with orphans to attach by time
// (hidden.go) need it: across clocks that disagree, attaching by time put calls under the wrong
// layer.

// clockRef is one service instance's clock, and its offset from the trace root's when known.
type clockRef struct {
	service, instance string
	off               int64
	known             bool
}

// clockEdge says that clock b read d later than clock a when a call left a for b: a CLIENT span on
// a and the callee's SERVER span under it on b start at about the same moment.
type clockEdge struct {
	a, b int32
	d    int64
}

// clockShifts estimates how far each span's clock (its service instance's) runs ahead of the
// trace root's, from the calls whose both ends are in the trace: a callee's SERVER span starts when
// its caller's CLIENT span did, give or take the request's flight, so the difference of their
// starts is the difference of their clocks. Offsets chain along calls (root -> api -> adapter); a
// clock no traced call reaches (a service only seen in orphans) is read as the root's. The result
// is by span; it is made only for traces with orphans to attach (bridgeOrphans), where attaching by
// time across clocks that disagree by more than the skew tolerance put calls under the wrong layer.
func (t *trace) clockShifts(sc *scratch) []int64 {
	clocks, edges := sc.clocks[:0], sc.clockEdges[:0]
	clk := sc.clockOf[:0]
	find := func(s *spans.Span) int32 {
		svc, inst := s.Service(), s.Instance()
		for k := range clocks {
			if clocks[k].service == svc && clocks[k].instance == inst {
				return int32(k)
			}
		}
		clocks = append(clocks, clockRef{service: svc, instance: inst})
		return int32(len(clocks) - 1)
	}
	for j := range t.Spans {
		clk = append(clk, find(&t.Spans[j]))
	}
	for j := range t.Spans {
		p := t.Index().Parent[j]
		if p < 0 || t.Spans[j].Kind != spans.KindServer || clk[p] == clk[j] {
			continue
		}
		edges = append(edges, clockEdge{a: clk[p], b: clk[j], d: t.Spans[j].StartUnixNano - t.Spans[p].StartUnixNano})
	}
	// The root's clock: the trace's own root (no parent named), else the earliest root.
	if roots := t.Index().Roots; len(roots) > 0 {
		r := roots[0]
		for _, x := range roots {
			if t.Spans[x].ParentID.IsZero() {
				r = x
				break
			}
		}
		clocks[clk[r]].known = true
	}
	// Relaxed until nothing changes: at most one pass per clock.
	for changed := true; changed; {
		changed = false
		for _, e := range edges {
			a, b := &clocks[e.a], &clocks[e.b]
			switch {
			case a.known && !b.known:
				b.off, b.known, changed = a.off+e.d, true, true
			case b.known && !a.known:
				a.off, a.known, changed = b.off-e.d, true, true
			}
		}
	}
	shift := sc.shift[:0]
	for j := range t.Spans {
		shift = append(shift, clocks[clk[j]].off)
	}
	known := sc.clockKnown[:0]
	for k := range clocks {
		known = append(known, clocks[k].known)
	}
	clear(clocks) // they hold the trace's strings
	// clockOf and clockKnown are read by fitUnknownClocks, until the next trace.
	sc.clocks, sc.clockEdges, sc.clockOf, sc.shift, sc.clockKnown = clocks[:0], edges[:0], clk, shift[:0], known
	return shift
}

// maxClockFit is how far fitUnknownClocks looks for a clock's offset: the clock skew the analyzer
// allows between services elsewhere (post-deadline-work's alignment).
const maxClockFit = int64(100 * time.Millisecond)

// maxClockTries bounds the offsets fitUnknownClocks tries for one clock, and maxClockSample the
// orphans each is judged on: each judgement scans the trace once per orphan.
const (
	maxClockTries  = 32
	maxClockSample = 16
)

// fitUnknownClocks gives a clock no traced call reaches - a service seen only in orphans, behind a
// service that exports nothing - an offset when its orphans do not all fall inside a span that
// could have made their calls: the one that puts the most of them inside one, the smallest on a
// tie, tried from the spans of known clocks that started within maxClockFit of its earliest
// orphan. Without it, a dark middle service's callee whose clock runs 20 ms off had its calls
// land outside the calls that led to them, and counted nowhere. shift is updated in place.
func (t *trace) fitUnknownClocks(orphans []int32, shift []int64, skew int64, sc *scratch) {
	clk, known := sc.clockOf, sc.clockKnown
	if len(clk) != len(t.Spans) {
		return
	}
	for n, o := range orphans {
		c := clk[o]
		if known[c] || slices.ContainsFunc(orphans[:n], func(p int32) bool { return clk[p] == c }) {
			continue // a known clock, or one already fitted from an earlier orphan
		}
		fits := func(delta int64) int {
			in, seen := 0, 0
			for _, x := range orphans {
				if clk[x] != c {
					continue
				}
				if seen++; seen > maxClockSample {
					break // enough to tell offsets apart; the work stays bounded
				}
				start := t.Spans[x].StartUnixNano - delta
				for j := range t.Spans {
					if known[clk[j]] && t.mayHaveCalled(int32(j), x) &&
						start >= t.Spans[j].StartUnixNano-shift[j]-skew && start <= t.End(j)-shift[j]+skew {
						in++
						break
					}
				}
			}
			return in
		}
		all := 0
		for _, x := range orphans {
			if clk[x] == c {
				all++
			}
		}
		all = min(all, maxClockSample)
		best, bestFit := shift[o], fits(shift[o])
		if bestFit == all {
			continue
		}
		tries := sc.clockTries[:0]
		o0 := t.Spans[o].StartUnixNano
		for j := range t.Spans {
			if !known[clk[j]] || !t.mayHaveCalled(int32(j), o) {
				continue
			}
			if d := o0 - (t.Spans[j].StartUnixNano - shift[j]); d >= -maxClockFit && d <= maxClockFit {
				tries = append(tries, d)
			}
		}
		slices.SortFunc(tries, func(a, b int64) int { return cmp.Compare(abs64(a), abs64(b)) })
		for _, d := range tries[:min(len(tries), maxClockTries)] {
			if f := fits(d); f > bestFit {
				best, bestFit = d, f
			}
		}
		sc.clockTries = tries[:0]
		for j := range t.Spans {
			if clk[j] == c {
				shift[j] = best
			}
		}
	}
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// sameClock reports whether two spans were timed by one clock: made by one service instance.
// Attempts of one operation usually are (the caller's CLIENT spans); where a lost call is stood
// for by the callee's SERVER span they are not, and the pause between them is not measured.
func sameClock(a, b *spans.Span) bool {
	if a.Resource == b.Resource {
		return true // one resource: one process (decoders share it among a batch's spans)
	}
	return a.Service() == b.Service() && a.Instance() == b.Instance()
}
