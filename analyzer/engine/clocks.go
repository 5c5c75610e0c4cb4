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
// via is, while the walk in clockShifts is at the level before this clock's, the first call that
// reaches it from there (-1: none yet).
type clockRef struct {
	service, instance string
	off               int64
	known             bool
	via               int32
}

// clockKey names a clock: the service instance whose spans it timed.
type clockKey struct{ service, instance string }

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
//
// Where calls disagree about a clock (flights of different lengths, a clock that stepped), the
// offset is read along the fewest calls from the root's clock: each call adds its flight to the
// estimate, so the shortest chain carries the least error. Among calls at that distance, the first
// in the trace's span order wins: the spans give no reason to prefer another. The walk goes out
// from the root's clock one level of calls at a time (walkClocks), so each clock is set once and
// the work is linear in spans and calls, whatever order the spans came in.
func (t *trace) clockShifts(sc *scratch) []int64 {
	clocks, clk := t.numberClocks(sc)
	edges := sc.clockEdges[:0]
	for j := range t.Spans {
		p := t.Index().Parent[j]
		if p < 0 || t.Spans[j].Kind != spans.KindServer || clk[p] == clk[j] {
			continue
		}
		edges = append(edges, clockEdge{a: clk[p], b: clk[j], d: t.Spans[j].StartUnixNano - t.Spans[p].StartUnixNano})
	}
	// The root's clock: the trace's own root (no parent named), else the earliest root.
	root := int32(-1)
	if roots := t.Index().Roots; len(roots) > 0 {
		r := roots[0]
		for _, x := range roots {
			if t.Spans[x].ParentID.IsZero() {
				r = x
				break
			}
		}
		root = clk[r]
	}
	walkClocks(clocks, edges, root, sc)
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

// numberClocks numbers the trace's clocks, in the order of their first spans, and says each
// span's: a map from the clock's key, the scratch's, so the work is linear in spans.
func (t *trace) numberClocks(sc *scratch) (clocks []clockRef, clk []int32) {
	clocks, clk = sc.clocks[:0], sc.clockOf[:0]
	if sc.clockIndex == nil {
		sc.clockIndex = make(map[clockKey]int32)
	}
	index := sc.clockIndex
	var last *spans.Resource // spans of one resource are of one clock: runs of them skip the map
	lastClock := int32(-1)
	for j := range t.Spans {
		s := &t.Spans[j]
		if s.Resource == nil || s.Resource != last {
			key := clockKey{s.Service(), s.Instance()}
			c, ok := index[key]
			if !ok {
				c = int32(len(clocks))
				clocks = append(clocks, clockRef{service: key.service, instance: key.instance, via: -1})
				index[key] = c
			}
			last, lastClock = s.Resource, c
		}
		clk = append(clk, lastClock)
	}
	if len(index) > maxScratch {
		sc.clockIndex = nil // a cleared map keeps its buckets, and the next clear walks them all
	} else {
		clear(index) // it holds the trace's strings
	}
	return clocks, clk
}

// walkClocks sets the offset of every clock the calls (edges) join to the root's clock (root; -1:
// none), going out from it one level of calls at a time: each clock of the next level takes its
// offset from the first call, in the calls' order, that joins it to this level, forward (it
// answered the call) or back (it made it).
func walkClocks(clocks []clockRef, edges []clockEdge, root int32, sc *scratch) {
	if root < 0 {
		return
	}
	// The calls by clock, both ends, in the calls' order: adj[first[k]:first[k+1]] are the calls
	// clock k made or answered.
	first := slices.Grow(sc.clockFirst[:0], len(clocks)+1)[:len(clocks)+1]
	clear(first)
	for _, e := range edges {
		first[e.a+1]++
		first[e.b+1]++
	}
	for k := 1; k < len(first); k++ {
		first[k] += first[k-1]
	}
	adj := slices.Grow(sc.clockAdj[:0], 2*len(edges))[:2*len(edges)]
	fill := append(sc.clockFill[:0], first[:len(clocks)]...)
	for n, e := range edges {
		adj[fill[e.a]], adj[fill[e.b]] = int32(n), int32(n)
		fill[e.a]++
		fill[e.b]++
	}
	clocks[root].known = true
	level := append(sc.clockLevel[:0], root) // the clocks in the order they were reached
	for from := 0; from < len(level); {
		to := len(level)
		for _, x := range level[from:to] {
			for _, n := range adj[first[x]:first[x+1]] {
				y := edges[n].b
				if y == x {
					y = edges[n].a
				}
				switch c := &clocks[y]; {
				case c.known:
				case c.via < 0:
					c.via = n
					level = append(level, y)
				case n < c.via:
					c.via = n
				}
			}
		}
		for _, y := range level[to:] {
			c := &clocks[y]
			if e := edges[c.via]; e.b == y {
				c.off = clocks[e.a].off + e.d
			} else {
				c.off = clocks[e.b].off - e.d
			}
			c.known = true
		}
		from = to
	}
	sc.clockFirst, sc.clockAdj, sc.clockFill, sc.clockLevel = first[:0], adj[:0], fill[:0], level[:0]
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
