package engine

import (
	"cmp"
	"math"
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
// orphans each is judged on.
const (
	maxClockTries  = 32
	maxClockSample = 16
)

// fitWorkPerSpan bounds the steps fitUnknownClocks spends beyond its binary searches, per span of
// the trace: the spans of its index it passes over because they cannot have made the call of the
// orphan at hand (of the orphan's own service, or in its own subtree). Only a hostile trace spends
// them; past the bound a clock that needs such a step keeps the root's offset, and a note counts
// them.
const fitWorkPerSpan = 8

// fitUnknownClocks gives a clock no traced call reaches - a service seen only in orphans, behind a
// service that exports nothing - an offset when its orphans do not all fall inside a span that
// could have made their calls: the one that puts the most of them inside one, the smallest on a
// tie (and of two as small, the one read from the earlier span), tried from the spans of known
// clocks that started within maxClockFit of its earliest orphan. Without it, a dark middle
// service's callee whose clock runs 20 ms off had its calls land outside the calls that led to
// them, and counted nowhere. shift is updated in place.
//
// Only spans of known clocks are tried and judged against, and their offsets are settled, so the
// clocks are fitted one by one, each from an index of those spans by start (clockFitter): a
// judgement is a binary search, not a scan of the trace. The work is the index's sort, one look
// at each orphan's subtree, and at most 1+32 judgements of 16 orphans per clock; the steps of a
// hostile trace beyond that (spans of the index passed over) are bounded by fitWorkPerSpan.
func (t *trace) fitUnknownClocks(orphans []int32, shift []int64, skew int64, sc *scratch) {
	clk, known := sc.clockOf, sc.clockKnown
	if len(clk) != len(t.Spans) {
		return
	}
	// The orphans by clock, in their order within each.
	byClock := append(sc.fitOrphans[:0], orphans...)
	slices.SortStableFunc(byClock, func(a, b int32) int { return cmp.Compare(clk[a], clk[b]) })
	sc.fitOrphans = byClock[:0]
	f := clockFitter{t: t, shift: shift, skew: skew, known: known, clk: clk, sc: sc, work: fitWorkPerSpan * len(t.Spans)}
	var fit []int64 // by clock: the offsets fitted
	for len(byClock) > 0 {
		c, n := clk[byClock[0]], 1
		for n < len(byClock) && clk[byClock[n]] == c {
			n++
		}
		group := byClock[:n]
		byClock = byClock[n:]
		if known[c] {
			continue
		}
		// Fitted even past the bound: a clock whose orphans need no counted step (each judged by
		// a binary search) still gets its answer, and only one that ran out is noted.
		off, ok := f.fit(group)
		if !ok {
			t.issues.unfitted++ // read as the root's clock: the bound keeps the work linear
			continue
		}
		if off != shift[group[0]] {
			if fit == nil {
				fit = slices.Grow(sc.clockFit[:0], len(known))[:len(known)]
				clear(fit)
				sc.clockFit = fit[:0]
			}
			fit[c] = off
		}
	}
	if fit != nil {
		for j := range t.Spans {
			if !known[clk[j]] {
				shift[j] = fit[clk[j]]
			}
		}
	}
}

// clockFitter fits clocks no traced call reaches (fitUnknownClocks) against an index of the spans
// that can have made an orphan's call on known clocks, made at the first clock that needs it.
// work is what is left of the steps the trace may spend past its binary searches.
type clockFitter struct {
	t     *trace
	shift []int64
	skew  int64
	known []bool
	clk   []int32
	sc    *scratch
	index []callerRef
	built bool
	work  int
}

// callerRef is a span of a known clock that can have made an orphan's call (canCall), with its
// start and end on the root's clock widened by the skew tolerance (lo, hi). In the index (by lo,
// then span) top is the latest hi at or before it, of span topSpan's service, and top2 the latest
// hi there of any other service: an orphan starting at p is inside a span of another service that
// may have called it when the last lo <= p has top (or top2, its service being the orphan's) >= p.
type callerRef struct {
	lo, hi, top, top2 int64
	span, topSpan     int32
}

// callerAt is the first position of the index whose lo is at least v.
func callerAt(index []callerRef, v int64) int {
	lo, hi := 0, len(index)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if index[m].lo < v {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// build makes the index.
func (f *clockFitter) build() {
	t := f.t
	index := f.sc.callers[:0]
	for j := range t.Spans {
		if !f.known[f.clk[j]] || !t.canCall(int32(j)) {
			continue
		}
		index = append(index, callerRef{lo: t.Spans[j].StartUnixNano - f.shift[j] - f.skew, hi: t.End(j) - f.shift[j] + f.skew, span: int32(j)})
	}
	slices.SortFunc(index, func(a, b callerRef) int {
		if c := cmp.Compare(a.lo, b.lo); c != 0 {
			return c
		}
		return cmp.Compare(a.span, b.span)
	})
	top, top2, topSpan := int64(math.MinInt64), int64(math.MinInt64), int32(-1)
	for k := range index {
		e := &index[k]
		switch {
		case topSpan >= 0 && t.Spans[e.span].Service() == t.Spans[topSpan].Service():
			top = max(top, e.hi)
		case e.hi > top:
			top, top2, topSpan = e.hi, top, e.span
		default:
			top2 = max(top2, e.hi)
		}
		e.top, e.top2, e.topSpan = top, top2, topSpan
	}
	f.index, f.built = index, true
	f.sc.callers = index[:0]
}

// fit finds the offset of the clock of orphans group (in the trace's order), false when the work
// bound ran out first.
func (f *clockFitter) fit(group []int32) (int64, bool) {
	t := f.t
	if !f.built {
		f.build()
	}
	samples := group[:min(len(group), maxClockSample)]
	// An orphan whose own subtree holds a span of a known clock and another service that can
	// call (a hostile shape) is judged by a scan of the index: the index's latest end may be
	// that span's, which cannot have called it.
	var tangled [maxClockSample]bool
	for n, x := range samples {
		tangled[n] = f.tangled(x)
	}
	fits := func(delta int64) (int, bool) {
		in := 0
		for n, x := range samples {
			inside, ok := f.inside(x, t.Spans[x].StartUnixNano-delta, tangled[n])
			if !ok {
				return 0, false
			}
			if inside {
				in++
			}
		}
		return in, true
	}
	o := group[0]
	best := f.shift[o]
	bestFit, ok := fits(best)
	if !ok || bestFit == len(samples) {
		return best, ok
	}
	tries, ok := f.tries(o)
	if !ok {
		return 0, false
	}
	for _, d := range tries {
		n, ok := fits(d)
		if !ok {
			return 0, false
		}
		if n > bestFit {
			best, bestFit = d, n
			if bestFit == len(samples) {
				break // no later offset fits more
			}
		}
	}
	return best, true
}

// tangled reports whether orphan x's subtree holds a span of the index of another service.
func (f *clockFitter) tangled(x int32) bool {
	ix := f.t.Index()
	for k := ix.Pos[x]; k < ix.Pos[x]+ix.Size[x]; k++ {
		if j := ix.Order[k]; f.known[f.clk[j]] && f.t.Spans[j].Service() != f.t.Spans[x].Service() && f.t.canCall(j) {
			return true
		}
	}
	return false
}

// inside reports whether orphan x, starting at p on the root's clock, is inside a span of the index
// that may have made its call (mayHaveCalled); false as its second result when the work bound ran
// out.
func (f *clockFitter) inside(x int32, p int64, tangled bool) (bool, bool) {
	m := callerAt(f.index, p+1) // the spans that started by p (within the skew)
	if m == 0 {
		return false, true
	}
	if !tangled {
		e := &f.index[m-1]
		if f.t.Spans[e.topSpan].Service() != f.t.Spans[x].Service() {
			return e.top >= p, true
		}
		return e.top2 >= p, true
	}
	for _, e := range f.index[:m] {
		if f.work--; f.work < 0 {
			return false, false
		}
		if e.hi >= p && f.t.mayHaveCalled(e.span, x) {
			return true, true
		}
	}
	return false, true
}

// tries lists the offsets to try for the clock of orphan o: o's start less the start of each span
// of the index that may have made its call and started within maxClockFit of it, by distance (of
// two as far, the earlier span's first), at most maxClockTries; false when the work bound ran out.
// It goes out from o's start both ways, a run of spans that started at one moment at a time.
func (f *clockFitter) tries(o int32) ([]int64, bool) {
	index, skew := f.index, f.skew
	o0 := f.t.Spans[o].StartUnixNano
	tries := f.sc.clockTries[:0]
	r := callerAt(index, o0-skew) // the first that started at or after o
	l := r - 1
	for len(tries) < maxClockTries {
		dl, dr := int64(math.MaxInt64), int64(math.MaxInt64)
		if l >= 0 {
			dl = o0 - (index[l].lo + skew)
		}
		if r < len(index) {
			dr = index[r].lo + skew - o0
		}
		dist := min(dl, dr)
		if dist > maxClockFit {
			break
		}
		la, rb := l+1, r
		if dl == dist {
			la = callerAt(index, index[l].lo)
		}
		if dr == dist {
			rb = callerAt(index, index[r].lo+1)
		}
		left, right := index[la:l+1], index[r:rb]
		for (len(left) > 0 || len(right) > 0) && len(tries) < maxClockTries {
			var e *callerRef
			if len(right) == 0 || len(left) > 0 && left[0].span < right[0].span {
				e, left = &left[0], left[1:]
			} else {
				e, right = &right[0], right[1:]
			}
			if !f.t.mayHaveCalled(e.span, o) {
				if f.work--; f.work < 0 {
					f.sc.clockTries = tries[:0]
					return nil, false
				}
				continue
			}
			tries = append(tries, o0-(e.lo+skew))
		}
		l, r = la-1, rb
	}
	f.sc.clockTries = tries[:0]
	return tries, true
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
