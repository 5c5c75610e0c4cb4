package analyzer

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"

	"github.com/stormwatch/stormwatch/spans"
)

// Trace is one assembled trace: its spans indexed by id, the parent/child tree repaired where the
// data is broken, and the logical operation each CLIENT span belongs to. Detectors read it through
// their Pass; it is immutable once built.
type Trace struct {
	ID spans.TraceID
	// Spans are deduplicated and sorted by span id (so Lookup is a binary search, no map).
	Spans []spans.Span
	// Truncated is true when the trace hit the per-trace span cap and spans were dropped.
	Truncated bool

	parent   []int32 // index of the parent, -1 for roots, orphans and broken links
	childOff []int32 // children of i are child[childOff[i]:childOff[i+1]], by start time
	child    []int32
	roots    []int32 // by start time
	order    []int32 // display order: pre-order, siblings by start
	depth    []int32

	call      []int32      // index into calls for CLIENT spans, -1 otherwise
	calls     []callInfo   // one per CLIENT span
	enclosing []*Operation // the innermost operation whose call is span i or an ancestor of it

	issues      traceIssues
	notes       []string
	occurrences map[scopeIntent]int // only while inferring
	occList     []occCount
}

// traceIssues counts what was wrong with the data; the report turns them into notes.
type traceIssues struct {
	duplicates  int
	orphans     int
	selfParent  int
	cycles      int
	badTimes    int // end before start
	zeroTimes   int // zero-length or missing timestamps
	truncated   int // spans dropped by the per-trace cap
	clientRoots int // operations whose first call has no parent span
	splitLinked int // operations joined to an earlier trace by a link or an operation id
}

func (a *traceIssues) add(b traceIssues, sign int) {
	a.duplicates += sign * b.duplicates
	a.orphans += sign * b.orphans
	a.selfParent += sign * b.selfParent
	a.cycles += sign * b.cycles
	a.badTimes += sign * b.badTimes
	a.zeroTimes += sign * b.zeroTimes
	a.truncated += sign * b.truncated
	a.clientRoots += sign * b.clientRoots
	a.splitLinked += sign * b.splitLinked
}

// Len is the number of spans.
func (t *Trace) Len() int { return len(t.Spans) }

// Lookup finds a span's index by id.
func (t *Trace) Lookup(id spans.SpanID) (int, bool) {
	return slices.BinarySearchFunc(t.Spans, id, func(s spans.Span, id spans.SpanID) int {
		return bytes.Compare(s.SpanID[:], id[:])
	})
}

// Parent is the index of span i's parent, or -1 for a root, an orphan (parent never arrived) or a
// link the analyzer broke (a span that is its own parent, a cycle).
func (t *Trace) Parent(i int) int { return int(t.parent[i]) }

// Children are span i's children ordered by start time.
func (t *Trace) Children(i int) []int32 { return t.child[t.childOff[i]:t.childOff[i+1]] }

// Roots are the spans without a (usable) parent, by start time.
func (t *Trace) Roots() []int32 { return t.roots }

// Start and End are span i's times with bad data repaired: an end before the start is taken as
// the start (a zero-length span).
func (t *Trace) Start(i int) int64 { return t.Spans[i].StartUnixNano }

// End is span i's end, never before its start.
func (t *Trace) End(i int) int64 {
	s := &t.Spans[i]
	return max(s.StartUnixNano, s.EndUnixNano)
}

// Operation is the operation whose attempt made CLIENT span i, or nil.
func (t *Trace) Operation(i int) *Operation {
	if c := t.call[i]; c >= 0 {
		return t.calls[c].op
	}
	return nil
}

// Enclosing is the innermost operation that span i works for: the operation of the nearest
// CLIENT call at or above it. nil for work done directly for the root request.
func (t *Trace) Enclosing(i int) *Operation { return t.enclosing[i] }

// Outcome is the outcome class (ok, retryable, permanent, timeout, cancelled, refused) and the
// status text (HTTP status, gRPC code, "" when no answer) of CLIENT span i; "" for other spans.
func (t *Trace) Outcome(i int) (outcome, status string) {
	if c := t.call[i]; c >= 0 {
		return t.calls[c].outcome, t.calls[c].status
	}
	return "", ""
}

// Origin is CLIENT span i's destination (scheme://host:port), "" for other spans.
func (t *Trace) Origin(i int) string {
	if c := t.call[i]; c >= 0 {
		return t.calls[c].origin
	}
	return ""
}

// Walk visits the subtree under span i (not i itself) in pre-order; fn returns false to skip a
// node's descendants.
func (t *Trace) Walk(i int, fn func(j int) bool) {
	stack := append([]int32(nil), t.Children(i)...)
	slices.Reverse(stack)
	for len(stack) > 0 {
		j := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !fn(int(j)) {
			continue
		}
		ch := t.Children(int(j))
		for k := len(ch) - 1; k >= 0; k-- {
			stack = append(stack, ch[k])
		}
	}
}

// Notes are what the analysis of this trace had to work around.
func (t *Trace) Notes() []string { return t.notes }

// buildTrace sorts, deduplicates and indexes the spans of one trace. It owns ss.
func buildTrace(id spans.TraceID, ss []spans.Span, truncated int) *Trace {
	t := &Trace{ID: id, Truncated: truncated > 0}
	t.issues.truncated = truncated
	sortByID(ss)
	w := 0
	for i := range ss {
		if w > 0 && ss[w-1].SpanID == ss[i].SpanID {
			t.issues.duplicates++
			continue
		}
		ss[w] = ss[i]
		w++
	}
	clear(ss[w:])
	ss = ss[:w]
	t.Spans = ss
	n := len(ss)

	// The per-span index arrays share one allocation: parent, childOff (n+1), child (at most
	// n), order, depth, and the inference's call index.
	arena := make([]int32, 6*n+1)
	carve := func(size int) []int32 {
		c := arena[:size:size]
		arena = arena[size:]
		return c
	}
	t.parent = carve(n)
	for i := range ss {
		s := &ss[i]
		t.parent[i] = -1
		if s.EndUnixNano < s.StartUnixNano {
			t.issues.badTimes++
		} else if s.EndUnixNano == s.StartUnixNano || s.StartUnixNano <= 0 {
			t.issues.zeroTimes++
		}
		if s.ParentID.IsZero() {
			continue
		}
		if s.ParentID == s.SpanID {
			t.issues.selfParent++
			continue
		}
		if p, ok := t.Lookup(s.ParentID); ok {
			t.parent[i] = int32(p)
		} else {
			t.issues.orphans++
		}
	}
	t.breakCycles()

	// Children in CSR form, each list by start time (then id, for determinism).
	t.childOff = carve(n + 1)
	for i := range n {
		if p := t.parent[i]; p >= 0 {
			t.childOff[p+1]++
		} else {
			t.roots = append(t.roots, int32(i))
		}
	}
	for i := range n {
		t.childOff[i+1] += t.childOff[i]
	}
	t.child = carve(n)[:n-len(t.roots)]
	t.depth = carve(n)
	fill := t.depth // scratch until the depths are computed below
	copy(fill, t.childOff[:n])
	for i := range n {
		if p := t.parent[i]; p >= 0 {
			t.child[fill[p]] = int32(i)
			fill[p]++
		}
	}
	byStart := func(a, b int32) int {
		if c := cmp.Compare(ss[a].StartUnixNano, ss[b].StartUnixNano); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	}
	for i := range n {
		if ch := t.Children(i); len(ch) > 1 {
			slices.SortFunc(ch, byStart)
		}
	}
	slices.SortFunc(t.roots, byStart)

	// Display order and depth.
	t.order = carve(n)[:0]
	clear(t.depth)
	t.call = carve(n)
	stack := make([]int32, 0, 64)
	for k := len(t.roots) - 1; k >= 0; k-- {
		stack = append(stack, t.roots[k])
	}
	for len(stack) > 0 {
		j := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		t.order = append(t.order, j)
		ch := t.Children(int(j))
		for k := len(ch) - 1; k >= 0; k-- {
			t.depth[ch[k]] = t.depth[j] + 1
			stack = append(stack, ch[k])
		}
	}
	return t
}

// breakCycles cuts parent links that form a loop (a->b->a): the span where the walk found the loop
// becomes a root. Each span is walked once, so this is linear.
func (t *Trace) breakCycles() {
	const (
		unseen = iota
		onPath
		done
	)
	state := make([]uint8, len(t.parent))
	path := make([]int32, 0, 16)
	for i := range t.parent {
		if state[i] != unseen {
			continue
		}
		path = path[:0]
		j := int32(i)
		for j >= 0 && state[j] == unseen {
			state[j] = onPath
			path = append(path, j)
			j = t.parent[j]
		}
		if j >= 0 && state[j] == onPath {
			// j is on the current path: the walk came round to it. Cut j's link.
			t.parent[j] = -1
			t.issues.cycles++
		}
		for _, k := range path {
			state[k] = done
		}
	}
}

// makeNotes turns the counts into sentences for the trace view.
func (t *Trace) makeNotes() {
	is := t.issues
	add := func(n int, format string) {
		if n > 0 {
			t.notes = append(t.notes, fmt.Sprintf(format, n))
		}
	}
	add(is.duplicates, "%d duplicate spans dropped (same span id received again)")
	add(is.orphans, "%d orphan spans: their parent never arrived; analyzed as roots of their own subtrees")
	add(is.selfParent, "%d spans named themselves as parent; treated as roots")
	add(is.cycles, "%d parent cycles broken; the span where each loop closed is treated as a root")
	add(is.badTimes, "%d spans end before they start; taken as zero-length")
	add(is.truncated, "%d spans dropped: the trace is over the per-trace span cap (truncated)")
	add(is.clientRoots, "%d operations start at a CLIENT span with no parent: retries of a client without a parent span land in separate traces, and nothing links these, so attempts across traces cannot be counted")
	add(is.splitLinked, "%d operations continue an operation of another trace (joined by a link or resilience.operation.id)")
}

// sortByID sorts spans by span id, stably (the first copy of a duplicate to arrive stays first).
// It sorts small pointer-free keys and then moves each span once, following the permutation's
// cycles: sorting the 180-byte span structs themselves moved each several times, with a write
// barrier for every pointer in it.
func sortByID(ss []spans.Span) {
	type key struct {
		id spans.SpanID
		i  int32
	}
	keys := make([]key, len(ss))
	sorted := true
	for i := range ss {
		keys[i] = key{ss[i].SpanID, int32(i)}
		if i > 0 && bytes.Compare(ss[i-1].SpanID[:], ss[i].SpanID[:]) > 0 {
			sorted = false
		}
	}
	if sorted {
		return
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := bytes.Compare(a.id[:], b.id[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})
	// Position k must receive the span now at keys[k].i. Walk each cycle once.
	for k := range keys {
		if keys[k].i < 0 || int(keys[k].i) == k {
			continue
		}
		tmp := ss[k]
		j := k
		for {
			src := int(keys[j].i)
			keys[j].i = -1
			if src == k {
				ss[j] = tmp
				break
			}
			ss[j] = ss[src]
			j = src
		}
	}
}
