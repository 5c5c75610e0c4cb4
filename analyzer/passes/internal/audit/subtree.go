package audit

import (
	"sort"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// CallsUnder finds the CLIENT spans to one dependency under a span of one trace, in pre-order
// (Trace.Walk's), without walking the span's subtree: a detector that asks it about every span
// of a deep trace - a fallback under each of n nested levels - would otherwise walk the levels
// below each one. It reads the trace once, the first time it is asked; the zero value is ready.
type CallsUnder struct {
	order    []int32            // the spans in pre-order
	pos, end []int32            // span i's place in pre-order, and just past its subtree's
	calls    []int32            // the CLIENT spans, in pre-order
	byDep    map[string][]int32 // the CLIENT spans to each dependency, in pre-order
}

// Of are the CLIENT spans to dep in span i's subtree (i not included), in pre-order; lent to read.
func (c *CallsUnder) Of(t *analyzer.Trace, i int, dep string) []int32 {
	if c.byDep == nil {
		c.index(t)
	}
	return c.under(c.byDep[dep], i)
}

// All are the CLIENT spans in span i's subtree (i not included), to any dependency, in pre-order;
// lent to read.
func (c *CallsUnder) All(t *analyzer.Trace, i int) []int32 {
	if c.byDep == nil {
		c.index(t)
	}
	return c.under(c.calls, i)
}

// Preorder are t's spans in pre-order (Trace.Walk's from each root): each span after its parent,
// so a pass from the end meets every span's children before it. Lent to read.
func (c *CallsUnder) Preorder(t *analyzer.Trace) []int32 {
	if c.byDep == nil {
		c.index(t)
	}
	return c.order
}

// under are the spans of calls (in pre-order) in span i's subtree, i not included.
func (c *CallsUnder) under(calls []int32, i int) []int32 {
	lo := sort.Search(len(calls), func(k int) bool { return c.pos[calls[k]] > c.pos[i] })
	hi := lo + sort.Search(len(calls)-lo, func(k int) bool { return c.pos[calls[lo+k]] >= c.end[i] })
	return calls[lo:hi]
}

func (c *CallsUnder) index(t *analyzer.Trace) {
	n := t.Len()
	order := make([]int32, 0, n)
	for _, r := range t.Roots() {
		order = append(order, r)
		t.Walk(int(r), func(j int) bool {
			order = append(order, int32(j))
			return true
		})
	}
	c.pos, c.end = make([]int32, n), make([]int32, n)
	for i := range c.pos {
		c.pos[i], c.end[i] = -1, -1 // in no root's tree: under nothing, nothing under it
	}
	c.order, c.calls, c.byDep = order, nil, map[string][]int32{}
	for k, j := range order {
		c.pos[j], c.end[j] = int32(k), int32(k+1)
		if t.Spans[j].Kind == spans.KindClient {
			d := t.Dependency(int(j))
			c.byDep[d] = append(c.byDep[d], j)
			c.calls = append(c.calls, j)
		}
	}
	// A subtree ends where its last descendant's does: children come after their parents.
	for k := len(order) - 1; k >= 0; k-- {
		if p := t.Parent(int(order[k])); p >= 0 {
			c.end[p] = max(c.end[p], c.end[order[k]])
		}
	}
}
