package engine

import (
	"hash/maphash"
	"slices"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// Application retry loops: an application's own loop around a client that retries on its own
// shows as sibling INTERNAL spans of one name, each but the last failing, each with the client's
// attempts under it. Each such loop becomes an operation whose attempts are the tries, and the
// operations of the calls under the tries run inside it, so both loops count as layers.

// loopOf is the index in the trace's operations of the application loop whose try span i is, -1
// when it is none.
func (sc *scratch) loopOf(i int32) int32 {
	if op, ok := sc.wide.tryOp[i]; ok {
		return op
	}
	return -1
}

// appLoops finds an application's own retry loop among span i's children: sibling INTERNAL spans
// of one name (no resilience.operation.id: the reference client's operation spans say what they
// are), one after the other, with calls under each, where every try but the last failed. A try
// that succeeded ends the loop: the same name after a success is the caller's next intent (four
// reads in a row), not a retry. Each loop becomes an operation whose attempts are the tries; the
// operations of the calls under the tries run inside it, so both loops count as layers.
func (t *trace) appLoops(i int32, seed maphash.Seed, sc *scratch) {
	ch := t.Children(int(i))
	if t.countKind(ch, spans.KindInternal) < 2 {
		return
	}
	next := sc.wide.nextSameName(t, ch)
	for a := 0; a < len(ch); a++ {
		first := ch[a]
		if !t.loopCandidate(first, sc) {
			continue
		}
		asked := t.lastCall(first, sc)
		tries := []int32{first}
		last := a
		// Only siblings of the same name can be tries: the chain of them, not every later
		// sibling, so that many names under one span cost no more than one.
		for b, lastOK := next[a], t.tryOK(first, sc); b >= 0 && !lastOK; b = next[b] {
			c := ch[b]
			if !t.loopCandidate(c, sc) {
				continue
			}
			if t.Spans[c].StartUnixNano < t.End(int(tries[len(tries)-1]))-overlapTolerance {
				break // concurrent: not a loop
			}
			if !t.sameAsk(asked, t.lastCall(c, sc)) {
				break // another item of a batch, not the same thing tried again
			}
			tries = append(tries, c)
			last = int(b)
			lastOK = t.tryOK(c, sc)
		}
		if len(tries) < 2 {
			continue
		}
		t.loopOperation(i, tries, seed, sc)
		a = last
	}
}

// loopCandidate: an INTERNAL span, not an operation span of the reference client, not already a
// try, not itself a call (a client library's attempt span, grpcattempts.go), with a call under it.
func (t *trace) loopCandidate(i int32, sc *scratch) bool {
	return t.Spans[i].Kind == spans.KindInternal && sc.known[i].str(wkOpID) == "" && sc.loopOf(i) < 0 &&
		t.Index().Call[i] < 0 && t.lastCall(i, sc) >= 0
}

// lastCall is the last CLIENT span (by start; of equal starts, the last in pre-order) under span
// i, -1 when there is none. The first question of a trace answers it for every span at once, in
// one pass from the leaves up: asked of each span by a walk of its subtree, a deep trace would
// cost its depth times its spans.
func (t *trace) lastCall(i int32, sc *scratch) int {
	w := &sc.wide
	if !w.lastReady {
		ix := t.Index()
		below := slices.Grow(w.lastBelow[:0], len(t.Spans))[:len(t.Spans)]
		later := func(a, b int32) bool { // a is later than b by start, then by pre-order
			sa, sb := t.Spans[a].StartUnixNano, t.Spans[b].StartUnixNano
			return sa > sb || sa == sb && ix.Pos[a] > ix.Pos[b]
		}
		for k := len(ix.Order) - 1; k >= 0; k-- {
			j := ix.Order[k]
			best := int32(-1)
			for _, c := range t.Children(int(j)) {
				if t.Spans[c].Kind == spans.KindClient && (best < 0 || later(c, best)) {
					best = c
				}
				if b := below[c]; b >= 0 && (best < 0 || later(b, best)) {
					best = b
				}
			}
			below[j] = best
		}
		w.lastBelow, w.lastReady = below, true
	}
	return int(w.lastBelow[i])
}

// sameAsk reports whether two calls asked the same thing of the same place.
func (t *trace) sameAsk(a, b int) bool {
	if a < 0 || b < 0 {
		return false
	}
	x, y := &t.calls[t.Index().Call[a]], &t.calls[t.Index().Call[b]]
	return x.origin == y.origin && x.target == y.target
}

// tryOK reports whether a try succeeded: its span is not an error (status, or the OpenTracing
// error tag) and the last call under it (by start) was answered well.
func (t *trace) tryOK(i int32, sc *scratch) bool {
	if t.Spans[i].Status == spans.StatusError || sc.known[i].errorTag() {
		return false
	}
	last := t.lastCall(i, sc)
	if last < 0 {
		return true
	}
	outcome, _ := classify(&sc.known[last])
	return outcome == analyzer.OutcomeOK
}

// loopOperation makes the operation of an application loop under span i whose tries are tries.
func (t *trace) loopOperation(i int32, tries []int32, seed maphash.Seed, sc *scratch) {
	b := &sc.bufs
	if len(b.slab) == cap(b.slab) {
		b.slab = make([]analyzer.Operation, 0, 4) // earlier operations are pointed to: never grown in place
	}
	b.slab = b.slab[:len(b.slab)+1]
	op := &b.slab[len(b.slab)-1]
	first := &t.Spans[tries[0]]
	parent := t.Enclosing(int(i))
	op.TraceID, op.SpanID = t.ID, first.SpanID
	op.Caller = first.Service()
	op.Owner = first.Service() + "/" + first.Name
	op.Name = first.Name
	op.ID = first.SpanID.String()
	op.Parent = parent
	op.Inferred = true
	op.StartUnixNano, op.EndUnixNano = first.StartUnixNano, first.StartUnixNano
	if parent != nil {
		setChildCount(parent, parent.ChildCount()+1)
	}
	scope := t.occurrenceScope(int(i), sc)
	key := hashStrings(seed, "loop", op.Caller, op.Name)
	setIntentKey(op, intentKey(seed, parent, key, sc.nextOccurrence(scope, key)))
	opIdx := int32(len(t.Index().Ops))
	t.Index().Ops = append(t.Index().Ops, op)
	sc.opStart = append(sc.opStart, int32(len(sc.opCalls)))
	attStart := len(b.att)
	var prevEnd int64
	for n, tr := range tries {
		s := &t.Spans[tr]
		a := analyzer.Attempt{Number: n + 1, Kind: analyzer.KindInitial, SpanID: s.SpanID, StartUnixNano: s.StartUnixNano,
			EndUnixNano: t.End(int(tr)), Outcome: analyzer.OutcomeOK}
		setRecordedNumber(&a, -1)
		if !t.tryOK(tr, sc) {
			a.Outcome = analyzer.OutcomeRetryable
		}
		if n > 0 {
			a.Kind = analyzer.KindRetry
			a.BackoffNanos = max(0, s.StartUnixNano-prevEnd)
		}
		prevEnd = a.EndUnixNano
		op.EndUnixNano = max(op.EndUnixNano, a.EndUnixNano)
		b.att = append(b.att, a)
		sc.wide.addTry(tr, opIdx)
	}
	op.Attempts = b.att[attStart:len(b.att):len(b.att)]
	if op.Attempts[len(op.Attempts)-1].Outcome == analyzer.OutcomeOK {
		op.Terminal, op.StopReason = "complete", "succeeded"
	} else {
		op.Terminal = "fail-fast"
	}
	sc.loops = append(sc.loops, opIdx)
	t.issues.appLoops++
}

// finishLoops names each application loop's dependency after the first operation inside it, and
// forgets the trace's loops and attached orphans. One pass over the operations: the loop of each
// operation is looked up, not each loop's operations searched for.
func (t *trace) finishLoops(sc *scratch) {
	if len(sc.loops) > 0 {
		loops := make(map[*analyzer.Operation]bool, len(sc.loops))
		for _, l := range sc.loops {
			loops[t.Index().Ops[l]] = true
		}
		for _, op := range t.Index().Ops {
			if loop := op.Parent; loop != nil && op.Dependency != "" && loops[loop] {
				loop.Dependency, loop.DependencyService = op.Dependency, op.DependencyService
				loops[loop] = false // named by its first
			}
		}
	}
	sc.loops, sc.bridge = sc.loops[:0], sc.bridge[:0]
}
