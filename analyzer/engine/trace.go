package engine

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// The engine's trace: the framework's analyzer.Trace plus what only the engine reads, and
// buildTrace, which sorts a trace's spans, deduplicates them and builds the index every later step
// and every detector reads (children, roots, pre-order, depth), noting the data's faults (orphans,
// cycles, bad times) on the way.

// trace is a Trace as the engine builds and infers it: the framework's Trace, which the
// detectors read, and what only the engine reads. calls has one entry per call (a CLIENT span, or
// a call inferred from the callee's SERVER spans) while the trace is analyzed: the analysis's
// scratch, dropped when it ends; depth is each span's depth in the tree, for views; issues are
// the data's faults, for the notes.
type trace struct {
	analyzer.Trace
	ix     *traceIndex // the Trace's index (Index), taken by buildTrace: a trace is never copied
	calls  []callInfo
	depth  []int32
	issues traceIssues
}

// opOf is the operation call c was grouped into, nil before it is.
func (t *trace) opOf(c *callInfo) *analyzer.Operation {
	if c.op < 0 {
		return nil
	}
	return t.Index().Ops[c.op]
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
	unbridged   int // orphan SERVER spans past maxBridged, left unattached
	unfitted    int // clocks no traced call reaches, read as the root's past fitWorkPerSpan
	appLoops    int // application retry loops read from sibling INTERNAL spans
	redelivered int // messages delivered more than once to one consumer (a broker layer)
	// failed deliveries whose CONSUMER span starts a trace of its own, linked to the publish span
	linkedDeliveries int
	// deliveries that started a trace of their own, filed with the trace of their publish span
	joinedDeliveries int
	unseenPublishes  int // messages whose deliveries were read without their publish span
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
	a.unbridged += sign * b.unbridged
	a.unfitted += sign * b.unfitted
	a.appLoops += sign * b.appLoops
	a.redelivered += sign * b.redelivered
	a.linkedDeliveries += sign * b.linkedDeliveries
	a.joinedDeliveries += sign * b.joinedDeliveries
	a.unseenPublishes += sign * b.unseenPublishes
}

// buildTrace sorts, deduplicates and indexes the spans of one trace into t, a zero trace. It owns
// ss; sc is the analysis's scratch.
func buildTrace(t *trace, id spans.TraceID, ss []spans.Span, truncated int, sc *scratch) {
	t.ix = indexOf(&t.Trace)
	ix := t.Index()
	t.ID, t.Truncated = id, truncated > 0
	t.issues.truncated = truncated
	ix.Carried, ix.CarriedKeys = 0, nil // inference indexes the attributes again
	sortByID(ss, &sc.keys)
	n := len(ss)
	// The per-span index arrays share one array, sized before duplicates are dropped: the ids
	// (two each), parent, childOff (n+1), child (at most n), roots (at most n), order, depth, pos,
	// size, and the inference's call and enclosing indexes. The scratch's: the index lives as
	// long as the analysis (a held result keeps none of it; a view copies what it shows).
	arena := carver(sc.arenaFor(12*n + 1))
	t.dedup(ss, &arena, sc)
	t.linkParents(&arena)
	t.breakCycles(sc)
	t.linkChildren(&arena)
	t.orderSpans(&arena, sc)
}

// carver cuts the index's arrays, one after another, out of one array.
type carver []int32

// carve is the next size elements, capped.
func (a *carver) carve(size int) []int32 {
	c := (*a)[:size:size]
	*a = (*a)[size:]
	return c
}

// dedup drops the spans whose id came before (ss is sorted by id, see sortByID), keeps the rest as
// t.Spans and their ids as the index's IDs.
func (t *trace) dedup(ss []spans.Span, arena *carver, sc *scratch) {
	ix := t.Index()
	ids := arena.carve(2 * len(ss))
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
	t.Spans = ss[:w]
	ix.IDs = ids[: 2*w : 2*w]
}

// linkParents finds each span's parent in the trace, noting the spans whose times are wrong, that
// name themselves as their parent or whose parent never arrived (orphans: roots of their own).
func (t *trace) linkParents(arena *carver) {
	ix := t.Index()
	ss := t.Spans
	ix.Parent = arena.carve(len(ss))
	for i := range ss {
		s := &ss[i]
		ix.Parent[i] = -1
		if s.EndUnixNano < s.StartUnixNano {
			t.issues.badTimes++
		} else if s.EndUnixNano == s.StartUnixNano || s.StartUnixNano <= 0 {
			t.issues.zeroTimes++
		}
		if s.ParentID.IsZero() {
			// A delivery filed with the trace of the message's publish span (see
			// joinDeliveries) hangs under that span, as a CONSUMER span that continued
			// the trace would: the deliveries of one message are then read as one.
			if msg := t.joinedDelivery(s); !msg.IsZero() {
				t.issues.joinedDeliveries++
				if p, ok := t.Lookup(msg); ok && ss[p].Kind == spans.KindProducer {
					ix.Parent[i] = int32(p)
				}
			}
			continue
		}
		if s.ParentID == s.SpanID {
			t.issues.selfParent++
			continue
		}
		if p, ok := t.Lookup(s.ParentID); ok {
			ix.Parent[i] = int32(p)
		} else {
			t.issues.orphans++
		}
	}
}

// linkChildren lists each span's children in CSR form, each list by start time (then id, for
// determinism), and the roots likewise.
func (t *trace) linkChildren(arena *carver) {
	ix := t.Index()
	ss := t.Spans
	n := len(ss)
	ix.ChildOff = arena.carve(n + 1)
	ix.Roots = arena.carve(n)[:0]
	for i := range n {
		if p := ix.Parent[i]; p >= 0 {
			ix.ChildOff[p+1]++
		} else {
			ix.Roots = append(ix.Roots, int32(i))
		}
	}
	ix.Roots = ix.Roots[:len(ix.Roots):len(ix.Roots)]
	for i := range n {
		ix.ChildOff[i+1] += ix.ChildOff[i]
	}
	ix.Child = arena.carve(n)[:n-len(ix.Roots)]
	t.depth = arena.carve(n)
	fill := t.depth // scratch until orderSpans computes the depths
	copy(fill, ix.ChildOff[:n])
	for i := range n {
		if p := ix.Parent[i]; p >= 0 {
			ix.Child[fill[p]] = int32(i)
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
	if len(ix.Roots) > 1 {
		slices.SortFunc(ix.Roots, byStart)
	}
}

// orderSpans makes the display order (pre-order), each span's depth, position in that order and
// subtree size, and carves the inference's call and enclosing indexes.
func (t *trace) orderSpans(arena *carver, sc *scratch) {
	ix := t.Index()
	n := len(t.Spans)
	ix.Order = arena.carve(n)[:0]
	clear(t.depth)
	ix.Pos = arena.carve(n)
	ix.Size = arena.carve(n)
	ix.Call = arena.carve(n)
	ix.Enclosing = arena.carve(n)
	stack := sc.stack[:0]
	for k := len(ix.Roots) - 1; k >= 0; k-- {
		stack = append(stack, ix.Roots[k])
	}
	for len(stack) > 0 {
		j := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		ix.Order = append(ix.Order, j)
		ch := t.Children(int(j))
		for k := len(ch) - 1; k >= 0; k-- {
			t.depth[ch[k]] = t.depth[j] + 1
			stack = append(stack, ch[k])
		}
	}
	sc.stack = stack
	// Subtree sizes, children before parents (a parent comes first in pre-order).
	for k := n - 1; k >= 0; k-- {
		j := ix.Order[k]
		ix.Pos[j] = int32(k)
		ix.Size[j]++
		if p := ix.Parent[j]; p >= 0 {
			ix.Size[p] += ix.Size[j]
		}
	}
}

// breakCycles cuts parent links that form a loop (a->b->a): the span where the walk found the loop
// becomes a root. Each span is walked once, so this is linear.
func (t *trace) breakCycles(sc *scratch) {
	ix := t.Index()
	const (
		unseen = iota
		onPath
		done
	)
	state := slices.Grow(sc.state[:0], len(ix.Parent))[:len(ix.Parent)]
	clear(state)
	path := sc.path[:0]
	for i := range ix.Parent {
		if state[i] != unseen {
			continue
		}
		path = path[:0]
		j := int32(i)
		for j >= 0 && state[j] == unseen {
			state[j] = onPath
			path = append(path, j)
			j = ix.Parent[j]
		}
		if j >= 0 && state[j] == onPath {
			// j is on the current path: the walk came round to it. Cut j's link.
			ix.Parent[j] = -1
			t.issues.cycles++
		}
		for _, k := range path {
			state[k] = done
		}
	}
	sc.state, sc.path = state, path
}

// notes are the counts as sentences, for the trace view. They are made when a view asks, not
// with each analysis: a held trace keeps its counts (heldTrace), and most traces are never viewed.
func (is *traceIssues) notes() []string {
	var notes []string
	add := func(n int, format string) {
		if n > 0 {
			notes = append(notes, fmt.Sprintf(format, n))
		}
	}
	is.shapeNotes(add)
	add(is.truncated, "%d spans dropped: the trace is over the per-trace span cap (truncated)")
	is.splitNotes(add)
	is.inferredNotes(add)
	return notes
}

// shapeNotes calls add with the count of each kind of broken trace shape and its note: the words
// a trace's notes and the report's share, in the order both give them.
func (is *traceIssues) shapeNotes(add func(n int, note string)) {
	add(is.duplicates, "%d duplicate spans dropped (the same span id received more than once)")
	add(is.orphans, "%d orphan spans: their parent never arrived; each was analyzed as the root of its own subtree")
	add(is.selfParent, "%d spans named themselves as their parent; treated as roots")
	add(is.cycles, "%d parent cycles broken; the span where each loop closed was treated as a root")
	add(is.badTimes, "%d spans end before they start; taken as zero-length")
}

// splitNotes is shapeNotes for the operations that start or continue in another trace.
func (is *traceIssues) splitNotes(add func(n int, note string)) {
	add(is.clientRoots, "%d failed operations start at a CLIENT span with no parent and nothing links them to another trace: if that client retried, its attempts are in separate traces and are not counted together (add a parent span, span links, or resilience.operation.id)")
	add(is.splitLinked, "%d operations continue an operation of another trace (joined by a span link, or by resilience.operation.id with an attempt number above 1); counted as physical calls, not as new logical operations")
}

// inferredNotes calls add with the count of each kind of figure inferred below the
// instrumentation and its note, in the order both a trace's notes and the report's give them.
func (is *traceIssues) inferredNotes(add func(n int, note string)) {
	add(is.untraced, untracedNote)
	add(is.bridged, bridgedNote)
	add(is.unbridged, unbridgedNote)
	add(is.unfitted, unfittedNote)
	add(is.appLoops, appLoopNote)
	add(is.redelivered, redeliveredNote)
	add(is.linkedDeliveries, linkedDeliveriesNote)
	add(is.joinedDeliveries, joinedDeliveriesNote)
	add(is.unseenPublishes, unseenPublishNote)
}

// The notes of figures inferred below the instrumentation, shared by a trace's notes and the
// report's.
const (
	untracedNote  = "%d physical calls were counted from the callee's SERVER spans, not from a CLIENT span: a hop that exports no spans (a proxy, a sidecar, or a library retrying inside one client span) sent them; it is shown as an \"(untraced, between CALLER and CALLEE)\" layer"
	bridgedNote   = "%d SERVER spans whose parent span never arrived were attached by time to the span that most likely made their call (the innermost span of another service open when they started); the calls they stand for are inferred from the callee's side, and the layer that made them may be an untraced service"
	unbridgedNote = "%d SERVER spans whose parent span never arrived were left as roots of their own, not attached to the span that made their call: a trace attaches at most 256 (each costs a scan of the trace)"
	unfittedNote  = "%d clocks that no traced call reaches (services seen only in SERVER spans whose parent span never arrived) were read as the root's, not fitted to where their orphans fall: fitting them would have cost more than a trace may (8 steps a span)"
	appLoopNote   = "%d application retry loops were read from sibling INTERNAL spans of one name, each failed try followed by the next; each is a layer named SERVICE/SPAN-NAME"
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

// isKind reports whether span i (-1: none) has kind k.
func (t *trace) isKind(i int32, k spans.Kind) bool { return i >= 0 && t.Spans[i].Kind == k }

// countKind is how many of the spans ss are of kind k.
func (t *trace) countKind(ss []int32, k spans.Kind) int {
	n := 0
	for _, s := range ss {
		if t.Spans[s].Kind == k {
			n++
		}
	}
	return n
}
