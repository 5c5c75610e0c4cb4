package engine

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/stormwatch/stormwatch/spans"
)

// Trace is one assembled trace: its spans indexed by id, the parent/child tree repaired where the
// data is broken, and the logical operation each CLIENT span belongs to. Detectors read it through
// their Pass; it is immutable once built, and lives only as long as its analysis (see Pass.Trace).
type Trace struct {
	ID spans.TraceID
	// Spans are deduplicated and sorted by span id (so Lookup is a binary search, no map).
	Spans []spans.Span
	// Truncated is true when the trace hit the per-trace span cap and spans were dropped.
	Truncated bool

	// ids are Spans' ids (sorted) as pairs of big-endian halves, the high one first: what Lookup
	// searches, eight bytes a step next to each other, with no pointer for the collector.
	ids      []int32
	parent   []int32 // index of the parent, -1 for roots, orphans and broken links
	childOff []int32 // children of i are child[childOff[i]:childOff[i+1]], by start time
	child    []int32
	roots    []int32 // by start time
	order    []int32 // display order: pre-order, siblings by start
	depth    []int32
	pos      []int32 // position of span i in order
	size     []int32 // spans in the subtree under span i, i included: order[pos[i]:pos[i]+size[i]]

	call []int32 // index into calls for CLIENT spans, -1 otherwise
	// calls has one entry per CLIENT span while the trace is analyzed (the detectors' pass);
	// it is the analysis's scratch, dropped when the analysis ends.
	calls []callInfo
	// enclosing: index into ops of the innermost operation whose call is span i or an ancestor
	// of it, -1 for none. Indexes, not pointers: nothing for the garbage collector to trace.
	enclosing []int32
	ops       []*Operation // the trace's operations, as inference made them

	issues traceIssues
	notes  []string

	// carried: which of the keys indexed for CarriesAttr (see wkCarried) some span has, one bit
	// each, set by inference's pass over every attribute; carriedRead says that pass has run.
	carried     uint8
	carriedRead bool
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
	untraced    int // physical calls counted from the callee's SERVER spans (an untraced hop)
	bridged     int // orphan SERVER spans attached by time to the span that made their call
	appLoops    int // application retry loops read from sibling INTERNAL spans
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
	a.untraced += sign * b.untraced
	a.bridged += sign * b.bridged
	a.appLoops += sign * b.appLoops
}

// Len is the number of spans.
func (t *Trace) Len() int { return len(t.Spans) }

// CarriesAttr reports whether any span of t has an attribute named key. The keys the detectors
// ask about (deadline remaining, retry-after, idempotency key, as attribute or header) are
// answered from inference's index; any other key, or a trace not yet inferred, by a scan.
func (t *Trace) CarriesAttr(key string) bool {
	if t.carriedRead {
		if w, ok := wkOf(key); ok && w >= wkCarried {
			return t.carried&(1<<(w-wkCarried)) != 0
		}
	}
	for i := range t.Spans {
		for j := range t.Spans[i].Attrs {
			if t.Spans[i].Attrs[j].Key == key {
				return true
			}
		}
	}
	return false
}

// Lookup finds a span's index by id.
func (t *Trace) Lookup(id spans.SpanID) (int, bool) {
	// Compared as bytes.Compare compares the ids: the big-endian high halves, then the low ones.
	hi, lo := binary.BigEndian.Uint32(id[:4]), binary.BigEndian.Uint32(id[4:])
	ids := t.ids
	i, j := 0, len(ids)/2
	for i < j {
		h := int(uint(i+j) >> 1)
		if hh := uint32(ids[2*h]); hh < hi || hh == hi && uint32(ids[2*h+1]) < lo {
			i = h + 1
		} else {
			j = h
		}
	}
	return i, 2*i < len(ids) && uint32(ids[2*i]) == hi && uint32(ids[2*i+1]) == lo
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

// Operation is the operation whose attempt made CLIENT span i, or nil. Operation, Outcome and
// Origin answer while the trace is analyzed (for the detectors); afterwards they answer as for
// a span that is not a call.
func (t *Trace) Operation(i int) *Operation {
	if c := t.call[i]; c >= 0 && int(c) < len(t.calls) {
		return t.op(t.calls[c].op)
	}
	return nil
}

// Enclosing is the innermost operation that span i works for: the operation of the nearest
// CLIENT call at or above it. nil for work done directly for the root request.
func (t *Trace) Enclosing(i int) *Operation { return t.op(t.enclosing[i]) }

// op is operation k of the trace, nil for -1.
func (t *Trace) op(k int32) *Operation {
	if k < 0 {
		return nil
	}
	return t.ops[k]
}

// Outcome is the outcome class (ok, retryable, permanent, timeout, cancelled, refused) and the
// status text (HTTP status, gRPC code, "" when no answer) of CLIENT span i; "" for other spans.
func (t *Trace) Outcome(i int) (outcome, status string) {
	if c := t.call[i]; c >= 0 && int(c) < len(t.calls) {
		return t.calls[c].outcome, t.calls[c].status
	}
	return "", ""
}

// Origin is CLIENT span i's destination (scheme://host:port), "" for other spans.
func (t *Trace) Origin(i int) string {
	if c := t.call[i]; c >= 0 && int(c) < len(t.calls) {
		return t.calls[c].origin
	}
	return ""
}

// Walk visits the subtree under span i (not i itself) in pre-order; fn returns false to skip a
// node's descendants.
func (t *Trace) Walk(i int, fn func(j int) bool) {
	// The display order is the pre-order, so a subtree is one run of it: no stack to allocate.
	for k, end := t.pos[i]+1, t.pos[i]+t.size[i]; k < end; {
		j := t.order[k]
		if fn(int(j)) {
			k++
		} else {
			k += t.size[j]
		}
	}
}

// Notes are what the analysis of this trace had to work around.
func (t *Trace) Notes() []string { return t.notes }

// buildTrace sorts, deduplicates and indexes the spans of one trace into t, a zero Trace. It owns
// ss; sc is the analysis's scratch.
func buildTrace(t *Trace, id spans.TraceID, ss []spans.Span, truncated int, sc *scratch) {
	t.ID, t.Truncated = id, truncated > 0
	t.issues.truncated = truncated
	t.carried, t.carriedRead = 0, false // inference indexes the attributes again
	sortByID(ss, &sc.keys)
	n := len(ss)
	// The per-span index arrays share one array, sized before duplicates are dropped: the ids
	// (two each), parent, childOff (n+1), child (at most n), roots (at most n), order, depth, pos,
	// size, and the inference's call and enclosing indexes. The scratch's: the index lives as
	// long as the analysis (a held result keeps none of it; a view copies what it shows).
	arena := sc.arenaFor(12*n + 1)
	carve := func(size int) []int32 {
		c := arena[:size:size]
		arena = arena[size:]
		return c
	}
	ids := carve(2 * n)
	w := 0
	for i := range ss {
		k := sc.keys[i].id // sortByID left the ids in order
		if w > 0 && uint64(uint32(ids[2*w-2]))<<32|uint64(uint32(ids[2*w-1])) == k {
			t.issues.duplicates++
			continue
		}
		if w != i {
			ss[w] = ss[i]
		}
		ids[2*w], ids[2*w+1] = int32(uint32(k>>32)), int32(uint32(k))
		w++
	}
	clear(ss[w:])
	ss = ss[:w]
	t.Spans = ss
	t.ids = ids[: 2*w : 2*w]
	n = w

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
	t.breakCycles(sc)

	// Children in CSR form, each list by start time (then id, for determinism).
	t.childOff = carve(n + 1)
	t.roots = carve(n)[:0]
	for i := range n {
		if p := t.parent[i]; p >= 0 {
			t.childOff[p+1]++
		} else {
			t.roots = append(t.roots, int32(i))
		}
	}
	t.roots = t.roots[:len(t.roots):len(t.roots)]
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
	if len(t.roots) > 1 {
		slices.SortFunc(t.roots, byStart)
	}

	// Display order and depth.
	t.order = carve(n)[:0]
	clear(t.depth)
	t.pos = carve(n)
	t.size = carve(n)
	t.call = carve(n)
	t.enclosing = carve(n)
	stack := sc.stack[:0]
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
	sc.stack = stack
	// Subtree sizes, children before parents (a parent comes first in pre-order).
	for k := n - 1; k >= 0; k-- {
		j := t.order[k]
		t.pos[j] = int32(k)
		t.size[j]++
		if p := t.parent[j]; p >= 0 {
			t.size[p] += t.size[j]
		}
	}
}

// breakCycles cuts parent links that form a loop (a->b->a): the span where the walk found the loop
// becomes a root. Each span is walked once, so this is linear.
func (t *Trace) breakCycles(sc *scratch) {
	const (
		unseen = iota
		onPath
		done
	)
	state := slices.Grow(sc.state[:0], len(t.parent))[:len(t.parent)]
	clear(state)
	path := sc.path[:0]
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
	sc.state, sc.path = state, path
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
	add(is.untraced, untracedNote)
	add(is.bridged, bridgedNote)
	add(is.appLoops, appLoopNote)
}

// The notes of figures inferred below the instrumentation, shared by a trace's notes and the
// report's.
const (
	untracedNote = "%d physical calls were counted from the callee's SERVER spans, not from a CLIENT span: a hop that exports no spans (a proxy, a sidecar, or a library retrying inside one client span) sent them; it is shown as an \"(untraced, between CALLER and CALLEE)\" layer"
	bridgedNote  = "%d SERVER spans whose parent span never arrived were attached by time to the span that most likely made their call (the innermost span of another service open when they started); the calls they stand for are inferred from the callee's side, and the layer that made them may be an untraced service"
	appLoopNote  = "%d application retry loops were read from sibling INTERNAL spans of one name, each failed try followed by the next; each is a layer named SERVICE/SPAN-NAME"
)

// idKey is a span id as a number (big-endian, so numbers compare as the ids' bytes do) and the
// span's position before sorting.
type idKey struct {
	id uint64
	i  int32
}

// sortByID sorts spans by span id, stably (the first copy of a duplicate to arrive stays first).
// It sorts small pointer-free keys and then moves each span once, following the permutation's
// cycles: sorting the 180-byte span structs themselves moved each several times, with a write
// barrier for every pointer in it. keys is scratch, kept for the next call.
func sortByID(ss []spans.Span, scratchKeys *[]idKey) {
	keys := slices.Grow((*scratchKeys)[:0], len(ss))[:len(ss)]
	*scratchKeys = keys
	sorted := true
	for i := range ss {
		keys[i] = idKey{binary.BigEndian.Uint64(ss[i].SpanID[:]), int32(i)}
		if i > 0 && keys[i-1].id > keys[i].id {
			sorted = false
		}
	}
	if sorted {
		return
	}
	if len(keys) <= 32 {
		// Most traces: an insertion sort, stable as it moves a key only past greater ids.
		for i := 1; i < len(keys); i++ {
			k := keys[i]
			j := i
			for ; j > 0 && keys[j-1].id > k.id; j-- {
				keys[j] = keys[j-1]
			}
			keys[j] = k
		}
	} else {
		slices.SortFunc(keys, func(a, b idKey) int {
			if c := cmp.Compare(a.id, b.id); c != 0 {
				return c
			}
			return cmp.Compare(a.i, b.i)
		})
	}
	// Position k must receive the span now at keys[k].i. Walk each cycle once. keys[k].id stays
	// the id of the span that ends at k: buildTrace reads the sorted ids there.
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
