package cost

import (
	"cmp"
	"slices"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// Part says what a stretch of a request's critical path was spent on.
type Part uint8

// Parts of a critical path. Added latency is PartFailed and PartPause.
const (
	// PartRest is everything else: the work the request needed anyway.
	PartRest Part = iota
	// PartFailed is time in an attempt that failed and was retried (and everything under it).
	PartFailed
	// PartPause is time between two attempts of one operation, the caller waiting to try again.
	PartPause
	// PartHedge is time in a hedge's losing copy.
	PartHedge
)

var partNames = [...]string{"rest", "failed", "pause", "hedge"}

func (p Part) String() string {
	if int(p) < len(partNames) {
		return partNames[p]
	}
	return "part?"
}

// Segment is one stretch of a request's critical path: span Span (an index into Trace.Spans)
// working with none of its children on the path, from From to To (Unix ns).
type Segment struct {
	Span     int32
	From, To int64
	Part     Part
	// Op is the index (into the operations given) of the operation whose retries the stretch is
	// charged to, -1 for PartRest.
	Op int32
}

// Parts are a critical path's time by part, in nanoseconds. They add up to the request's
// duration.
type Parts struct {
	Failed, Paused, Hedged, Rest int64
}

// Added is the latency retries added: failed attempts and pauses.
func (p Parts) Added() int64 { return p.Failed + p.Paused }

// Sum is the critical path's length: the request's duration.
func (p Parts) Sum() int64 { return p.Failed + p.Paused + p.Hedged + p.Rest }

func (p *Parts) add(s Segment) {
	d := s.To - s.From
	switch s.Part {
	case PartFailed:
		p.Failed += d
	case PartPause:
		p.Paused += d
	case PartHedge:
		p.Hedged += d
	default:
		p.Rest += d
	}
}

// pause is a wait between two attempts of operation op, charged to span (the parent of the
// attempts' calls) while it has no child on the path.
type pause struct {
	span     int32
	op       int32
	from, to int64
}

// marks are what each span of a trace is charged to: own* as the operations' attempts say, the
// rest propagated down the tree from the root (a span inside a failed attempt is failed time,
// however deep).
type marks struct {
	t   *analyzer.Trace
	ops []*analyzer.Operation
	// ownPart/ownOp: the span is a call of an attempt that failed and was retried, or of a losing
	// hedge; ownCopy: of a retry or hedge (its calls are extra).
	ownPart []Part
	ownOp   []int32
	ownCopy []bool
	// part/op/copied are ownPart/ownOp/ownCopy inherited from the outermost marked ancestor.
	part   []Part
	op     []int32
	copied []bool
	pauses []pause // by span, then from
	kids   []kid   // the walk's stack of children
	segs   []Segment
}

type kid struct {
	span  int32
	s, e  int64
	shift int64 // added to the span's own times to put them on the root's clock
}

// newMarks charges t's spans to the operations' attempts (see reset).
func newMarks(t *analyzer.Trace, ops []*analyzer.Operation) *marks {
	m := &marks{}
	m.reset(t, ops)
	return m
}

// reset charges t's spans to the operations' attempts, in m's memory of the trace before. It
// reads each attempt's calls once (a binary search each) and sorts the pauses: linear in the
// calls but for the logarithms.
func (m *marks) reset(t *analyzer.Trace, ops []*analyzer.Operation) {
	n := t.Len()
	m.t, m.ops = t, ops
	m.ownPart, m.part = resize(m.ownPart, n), resize(m.part, n)
	m.ownOp, m.op = resize(m.ownOp, n), resize(m.op, n)
	m.ownCopy, m.copied = resize(m.ownCopy, n), resize(m.copied, n)
	clear(m.ownPart)
	clear(m.ownCopy)
	for i := range m.ownOp {
		m.ownOp[i] = -1
	}
	m.pauses, m.kids, m.segs = m.pauses[:0], m.kids[:0], m.segs[:0]
	for k, o := range ops {
		m.markOp(int32(k), o)
	}
	slices.SortFunc(m.pauses, func(a, b pause) int {
		if c := cmp.Compare(a.span, b.span); c != 0 {
			return c
		}
		return cmp.Compare(a.from, b.from)
	})
	m.pauses = mergePauses(m.pauses)
	for _, r := range t.Roots() {
		m.inherit(int(r))
	}
}

// resize is s with length n, reusing its array when it is large enough (contents undefined).
func resize[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// release drops what m points into, so a Scratch kept between traces holds none of them.
func (m *marks) release() { m.t, m.ops = nil, nil }

// isTry: an attempt of the retry loop (not a hedged copy, a fan-out branch or a redirect's resend).
func isTry(k analyzer.AttemptKind) bool {
	return k != analyzer.KindHedge && k != analyzer.KindFanout && k != analyzer.AttemptKindResend
}

func (m *marks) markOp(k int32, o *analyzer.Operation) {
	at := o.Attempts
	// The hedge that answered first wins; the copies that ran beside it lost.
	winner := -1
	for i := range at {
		if at[i].Kind == analyzer.KindHedge {
			for j := range at {
				if at[j].Outcome == analyzer.OutcomeOK && (winner < 0 || at[j].EndUnixNano < at[winner].EndUnixNano) {
					winner = j
				}
			}
			break
		}
	}
	lastTry := -1
	for i := range at {
		if isTry(at[i].Kind) {
			lastTry = i
		}
	}
	prevTry, tries := -1, 0
	for i := range at {
		a := &at[i]
		part := PartRest
		switch {
		case winner >= 0 && i != winner && a.StartUnixNano < at[winner].EndUnixNano && a.EndUnixNano > at[winner].StartUnixNano:
			part = PartHedge
		case isTry(a.Kind) && i < lastTry && a.Outcome != analyzer.OutcomeOK:
			part = PartFailed
		}
		isCopy := a.Kind == analyzer.KindHedge || a.Kind == analyzer.KindRetry || (isTry(a.Kind) && tries > 0)
		parent := int32(-2)
		for _, id := range a.Calls {
			j, ok := m.t.Lookup(id)
			if !ok {
				continue
			}
			if part != PartRest {
				m.ownPart[j], m.ownOp[j] = part, k
			}
			m.ownCopy[j] = m.ownCopy[j] || isCopy
			if parent == -2 {
				parent = int32(m.t.Parent(j))
			}
		}
		if len(a.Calls) > 1 && len(a.Origins) <= 1 && part == PartRest {
			m.markHedgedCalls(k, a)
		}
		if !isTry(a.Kind) {
			continue
		}
		tries++
		if prevTry >= 0 && parent >= 0 {
			p := &at[prevTry]
			if from, to := p.EndUnixNano, a.StartUnixNano; to > from {
				m.pauses = append(m.pauses, pause{span: parent, op: k, from: from, to: to})
			}
		}
		prevTry = i
	}
}

// markHedgedCalls marks the copies within one attempt: several calls to one origin at once (a
// hedging library inside one attempt, as stock spans show it). The call that answered ok first
// won; the others that ran beside it lost; every call after the first is a copy.
func (m *marks) markHedgedCalls(k int32, a *analyzer.Attempt) {
	first, win := -1, -1
	idx := make([]int, 0, len(a.Calls))
	for _, id := range a.Calls {
		j, ok := m.t.Lookup(id)
		if !ok {
			continue
		}
		idx = append(idx, j)
		if first < 0 || m.t.Start(j) < m.t.Start(first) {
			first = j
		}
		if out, _ := m.t.Outcome(j); out == analyzer.OutcomeOK && (win < 0 || m.t.End(j) < m.t.End(win)) {
			win = j
		}
	}
	for _, j := range idx {
		if j != first {
			m.ownCopy[j] = true
		}
		if win >= 0 && j != win && m.t.Start(j) < m.t.End(win) && m.t.End(j) > m.t.Start(win) {
			m.ownPart[j], m.ownOp[j] = PartHedge, k
		}
	}
}

// inherit propagates the marks down root's subtree (pre-order: a parent before its children).
func (m *marks) inherit(root int) {
	m.part[root], m.op[root], m.copied[root] = m.ownPart[root], m.ownOp[root], m.ownCopy[root]
	m.t.Walk(root, func(j int) bool {
		p := m.t.Parent(j)
		if m.part[p] != PartRest {
			m.part[j], m.op[j] = m.part[p], m.op[p]
		} else {
			m.part[j], m.op[j] = m.ownPart[j], m.ownOp[j]
		}
		m.copied[j] = m.copied[p] || m.ownCopy[j]
		return true
	})
}

// path appends root's critical path to m.segs, latest first.
//
// The path is chosen as Jaeger's trace view chooses it: from the root's end, walk back through
// the child that finished last; inside it, the same, recursively; back in the parent, the child
// that finished last before the start of the one just walked, and so on; time when no child is
// on the path is the span's own. Children are clipped to their parent's time first (a child that
// ends after a caller that gave up counts only within it), so the segments tile the root's
// duration exactly. A callee's span that another clock put outside its caller's is moved into it
// first (see walk).
func (m *marks) path(root int) {
	m.segs = m.segs[:0]
	m.walk(int32(root), m.t.Start(root), m.t.End(root), 0)
}

// walk appends the path through span i within [lo, hi) (on the root's clock; shift puts span
// i's own times there).
func (m *marks) walk(i int32, lo, hi, shift int64) {
	base := len(m.kids)
	ps, pe := m.t.Start(int(i))+shift, m.t.End(int(i))+shift
	svc := m.t.Spans[i].Service()
	for _, c := range m.t.Children(int(i)) {
		sh := shift
		cs, ce := m.t.Start(int(c))+sh, m.t.End(int(c))+sh
		if (cs < ps || cs >= pe) && m.t.Spans[c].Service() != svc {
			// Another service's clock put the child outside its parent: it is moved, with
			// everything under it, to the middle of the parent (as Jaeger's clock skew adjuster
			// does), or to its start when longer. A child that starts inside its parent and ends
			// after it (a callee working on after its caller gave up) is not moved.
			d := pe - ps - (ce - cs)
			sh += ps + max(d, 0)/2 - cs
			cs, ce = m.t.Start(int(c))+sh, m.t.End(int(c))+sh
		}
		s, e := max(cs, lo), min(ce, hi)
		if e <= s {
			continue // outside the parent's time, or of no length: never on the path
		}
		m.kids = append(m.kids, kid{c, s, e, sh})
	}
	slices.SortFunc(m.kids[base:], func(a, b kid) int {
		if c := cmp.Compare(b.e, a.e); c != 0 {
			return c
		}
		if c := cmp.Compare(b.s, a.s); c != 0 {
			return c
		}
		return cmp.Compare(a.span, b.span)
	})
	cursor := hi
	for j := base; j < len(m.kids) && cursor > lo; j++ {
		k := m.kids[j] // copied: the walk below may grow m.kids
		if k.e > cursor {
			continue // overlaps the child already on the path
		}
		m.own(i, k.e, cursor, shift)
		m.walk(k.span, k.s, k.e, k.shift)
		cursor = k.s
	}
	m.kids = m.kids[:base]
	m.own(i, lo, cursor, shift)
}

// own charges span i's own time [from, to) on the path (on the root's clock; shift puts span i's
// times there): to what the span is inside, else to the pauses between attempts it waited in
// (measured on its own clock, as its calls were), else to the rest.
func (m *marks) own(i int32, from, to, shift int64) {
	if to <= from {
		return
	}
	if p := m.part[i]; p != PartRest {
		m.segs = append(m.segs, Segment{Span: i, From: from, To: to, Part: p, Op: m.op[i]})
		return
	}
	// The span's pauses are disjoint and sorted (mergePauses): the last one starting before to
	// is found by a binary search, and the walk back stops at the first that ends by from, so a
	// span with many pauses costs a logarithm per stretch, not a scan of them all.
	j, _ := slices.BinarySearchFunc(m.pauses, pause{span: i, from: to - shift}, func(p, x pause) int {
		if c := cmp.Compare(p.span, x.span); c != 0 {
			return c
		}
		return cmp.Compare(p.from, x.from)
	})
	for j--; j >= 0 && m.pauses[j].span == i && m.pauses[j].to+shift > from; j-- {
		p := m.pauses[j]
		s, e := max(p.from+shift, from), min(p.to+shift, to)
		if e <= s {
			continue
		}
		if e < to {
			m.segs = append(m.segs, Segment{Span: i, From: e, To: to, Part: PartRest, Op: -1})
		}
		m.segs = append(m.segs, Segment{Span: i, From: s, To: e, Part: PartPause, Op: p.op})
		to = s
	}
	if to > from {
		m.segs = append(m.segs, Segment{Span: i, From: from, To: to, Part: PartRest, Op: -1})
	}
}

// CriticalPath is the critical path of the request rooted at span root of t, earliest first, each
// stretch charged to what it was spent on (see Part); ops are the trace's operations.
func CriticalPath(t *analyzer.Trace, ops []*analyzer.Operation, root int) []Segment {
	m := newMarks(t, ops)
	m.path(root)
	out := slices.Clone(m.segs)
	slices.Reverse(out)
	return out
}

// IsRequest reports whether root span s is a request: it names no parent (an orphan, whose
// parent never arrived, is not one).
func IsRequest(s *spans.Span) bool { return s.ParentID == spans.SpanID{} }

// mergePauses joins the overlapping pauses of each span (two retry loops under one parent
// waiting at once), sorted by span and start, into disjoint ones, charged to the first.
func mergePauses(ps []pause) []pause {
	out := ps[:0]
	for _, p := range ps {
		if n := len(out); n > 0 && out[n-1].span == p.span && p.from < out[n-1].to {
			out[n-1].to = max(out[n-1].to, p.to)
			continue
		}
		out = append(out, p)
	}
	return out
}
