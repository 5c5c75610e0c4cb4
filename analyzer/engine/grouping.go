package engine

import (
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"hash/maphash"
	"math/bits"
	"slices"
	"strings"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// Grouping: the calls one caller makes become operations and their attempts (groupCalls says by
// which rules), and each operation gets its intent key, which makes the copies of one request
// made by different layers count as one logical operation. The other rules that make operations
// (loops.go, messaging.go, hidden_ops.go) carve them and number their intents with the helpers
// here (newOperation, intentKey, occurrenceScope, nextOccurrence).

// overlapTolerance is how far a call may start before the previous one's answer and still be
// read as sequential: SDKs that stamp whole milliseconds (Node's) make back-to-back attempts
// overlap by up to a millisecond.
const overlapTolerance = int64(1e6)

// groupCalls turns the CLIENT children of one caller into operations, appended to the trace's: per
// destination, attempts in start order; overlapping calls are one attempt's copies (hedges to one
// origin, fan-out to several); a call after a success starts a new operation; a call after a
// redirect or 401 is a resend, not a retry. parent is the operation the calls run inside, nil for
// none.
func (t *trace) groupCalls(caller int, calls []int32, parent *analyzer.Operation, seed maphash.Seed, skew int64, sc *scratch) {
	ks := t.keyCalls(calls, parent, seed, sc)
	var callerKnown *known
	if caller >= 0 {
		callerKnown = &sc.known[caller]
	}
	first := len(t.Index().Ops)
	scope := t.occurrenceScope(caller, sc)
	g := grouping{b: &sc.bufs}
	g.attStart, g.callStart, g.originStart = len(g.b.att), len(g.b.calls), len(g.b.origins)
	for _, run := range t.groupsInOrder(ks, sc) {
		g.op, g.opIdx, g.cur, g.curEnd, g.curAnswer = nil, -1, nil, 0, 0
		for _, kc := range ks[run.lo:run.hi] {
			i := kc.idx
			c := &t.calls[t.Index().Call[i]]
			s := &t.Spans[i]
			start, end := s.StartUnixNano, max(s.StartUnixNano, s.EndUnixNano)
			newAttempt, newOp := g.next(c, start)
			if newOp {
				g.closeOp()
				op := t.newOperation(callerKnown, c, parent, sc)
				intent := kc.intent
				if kc.byOpID {
					intent = callIntent(seed, c)
				}
				occurrence := sc.nextOccurrence(scope, intent)
				setIntentKey(op, intentKey(seed, parent, intent, occurrence))
				g.op, g.opIdx = op, int32(len(t.Index().Ops))
				t.Index().Ops = append(t.Index().Ops, op)
				sc.opStart = append(sc.opStart, int32(len(sc.opCalls)))
				g.cur = nil
				newAttempt = true
			}
			if newAttempt {
				g.openAttempt(c, s, start, end)
			} else if c.outcome == analyzer.OutcomeOK && g.cur.Outcome != analyzer.OutcomeOK {
				// Of several copies, the attempt's outcome is the best one.
				g.cur.Outcome, g.cur.Status = c.outcome, c.status
			}
			g.addCall(c, s, start, end)
			sc.opCalls = append(sc.opCalls, t.Index().Call[i])
			c.op = g.opIdx
		}
		g.closeOp()
	}
	endOperations(t.Index().Ops[first:])
}

// keyCalls keys each of a caller's calls for grouping, in sc.keyed, sorted by grouping key, then
// start time: one sort, then runs (taken in the order they began, see groupsInOrder). No pairwise
// matching.
func (t *trace) keyCalls(calls []int32, parent *analyzer.Operation, seed maphash.Seed, sc *scratch) []keyed {
	ks := slices.Grow(sc.keyed[:0], len(calls))[:len(calls)]
	sc.keyed = ks
	for k, i := range calls {
		c := &t.calls[t.Index().Call[i]]
		if parent != nil && c.opID != "" && c.opID == parent.ID {
			// The caller's operation id, propagated in baggage: it names the operation
			// above, not this layer's own, so it does not group these calls.
			c.opID = ""
		}
		if c.opID != "" {
			// The intent is hashed for the first call of each operation alone (groupCalls):
			// the others are retries of it.
			ks[k] = keyed{key: hashStrings(seed, "op", c.opID, ""), idx: i, byOpID: true}
		} else {
			intent := callIntent(seed, c)
			ks[k] = keyed{key: intent, intent: intent, idx: i}
		}
	}
	if len(ks) > 1 {
		slices.SortStableFunc(ks, func(a, b keyed) int {
			if c := cmp.Compare(a.key, b.key); c != 0 {
				return c
			}
			return cmp.Compare(t.Spans[a.idx].StartUnixNano, t.Spans[b.idx].StartUnixNano)
		})
	}
	return ks
}

// occurrenceScope is the span within which the operations of one intent are numbered (see
// nextOccurrence): the caller span, or, when the caller is an INTERNAL span (the reference
// client wraps each call in an operation span), the nearest SERVER (or other non-INTERNAL) span
// above it. Four reads in a row under one request are four intents even when each has its own
// operation span.
//
// Each span's answer is kept (sc.scopes), and a walk up stops at the first span answered before
// and answers every span it passed: a chain of n INTERNAL spans with a call at each level costs n,
// not n squared. Kept answers stay true because inference asks in pre-order: whether a span is an
// application loop's try (which stops the walk) is settled when its parent is visited, before
// any span under it asks.
func (t *trace) occurrenceScope(caller int, sc *scratch) int32 {
	if caller < 0 {
		return -1
	}
	scopes := sc.scopes
	path := sc.path[:0]
	scope := int32(caller)
	for scopes[scope] == -2 && t.Spans[scope].Kind == spans.KindInternal && t.Index().Parent[scope] >= 0 && sc.loopOf(scope) < 0 {
		path = append(path, scope)
		scope = t.Index().Parent[scope]
	}
	if scopes[scope] != -2 {
		scope = scopes[scope]
	} else {
		scopes[scope] = scope
	}
	for _, i := range path {
		scopes[i] = scope
	}
	sc.path = path[:0]
	return scope
}

// resetScopes makes occurrenceScope's answers unknown for a trace of n spans.
func (sc *scratch) resetScopes(n int) {
	sc.scopes = slices.Grow(sc.scopes[:0], n)[:n]
	for i := range sc.scopes {
		sc.scopes[i] = -2
	}
}

// grouping is groupCalls' state within one group of calls: the operation being made and its
// attempt in flight, carved from the trace's buffers b, and where the attempt's calls and
// origins and the operation's attempts begin in them. A value on groupCalls' stack.
type grouping struct {
	b     *opBufs
	op    *analyzer.Operation
	opIdx int32
	cur   *analyzer.Attempt
	// curEnd and curAnswer are the latest end and answer of the attempt's calls; curFirst when
	// its first call started, curSpan that call.
	curEnd, curAnswer, curFirst      int64
	curSpan                          *spans.Span
	attStart, callStart, originStart int
	// originSet holds the attempt in flight's origins once they are more than a few (a call
	// sent at once to each of many replicas), so that each call's origin is found without a
	// scan of them all; nil until then.
	originSet map[string]struct{}
}

// hasOrigin reports whether the attempt in flight reached origin already.
func (g *grouping) hasOrigin(origin string) bool {
	if len(g.originSet) > 0 {
		_, ok := g.originSet[origin]
		return ok
	}
	return slices.Contains(g.b.origins[g.originStart:], origin)
}

// addOrigin adds an origin the attempt in flight had not reached.
func (g *grouping) addOrigin(origin string) {
	b := g.b
	b.origins = append(b.origins, origin)
	switch {
	case len(g.originSet) > 0:
		g.originSet[origin] = struct{}{}
	case len(b.origins)-g.originStart > 16:
		g.originSet = make(map[string]struct{}, 64)
		for _, o := range b.origins[g.originStart:] {
			g.originSet[o] = struct{}{}
		}
	}
}

// closeAttempt caps the attempt in flight's calls and origins, so that nothing appended later
// spills into them.
func (g *grouping) closeAttempt() {
	if g.cur != nil {
		b := g.b
		g.cur.Calls = b.calls[g.callStart:len(b.calls):len(b.calls)]
		g.cur.Origins = b.origins[g.originStart:len(b.origins):len(b.origins)]
		g.callStart, g.originStart = len(b.calls), len(b.origins)
		g.originSet = nil // not cleared: a map as wide as one attempt was costs its width to clear
	}
}

// closeOp closes the operation being made: its last attempt, then its list of attempts, capped.
func (g *grouping) closeOp() {
	if g.op != nil {
		g.closeAttempt()
		b := g.b
		g.op.Attempts = b.att[g.attStart:len(b.att):len(b.att)]
		g.attStart = len(b.att)
	}
}

// next says what call c, starting at start, is to the attempt in flight: a new attempt of its
// operation, a new operation, or (both false) a copy sent within the attempt.
func (g *grouping) next(c *callInfo, start int64) (newAttempt, newOp bool) {
	newAttempt, newOp = true, g.op == nil
	cur := g.cur
	if cur == nil {
		return newAttempt, newOp
	}
	switch {
	case c.attempt >= 0 && cur.RecordedNumber() >= 0:
		newAttempt = c.attempt != cur.RecordedNumber() && c.kind != string(analyzer.KindFanout)
		newOp = c.attempt < cur.RecordedNumber() && c.opID == ""
	case c.kind == string(analyzer.KindFanout) || c.kind == string(analyzer.KindHedge):
		newAttempt = c.kind == string(analyzer.KindHedge)
	default:
		// Overlap with the attempt in flight means a copy, not a retry. A call that starts
		// within the tolerance of the previous answer is still sequential: whole-millisecond
		// timestamps round that way.
		newAttempt = start >= g.curAnswer-overlapTolerance
		if newAttempt && cur.Outcome == analyzer.OutcomeOK && !isRedirect(cur.Status) && c.resend <= 0 && c.opID == "" {
			// After a success nothing is retried. A call to another instance started within
			// a millisecond of the attempt's first call is a copy sent together with it
			// (fan-out to replicas too fast to overlap); anything later is the caller's next
			// operation.
			if start <= g.curFirst+overlapTolerance && !g.hasOrigin(c.origin) {
				newAttempt = false
			} else {
				newOp = true
			}
		}
	}
	return newAttempt, newOp
}

// openAttempt starts the operation's next attempt with call c (span s): its kind - as recorded,
// else the first, a resend after a redirect or a 401, a hedge when it overlaps the attempt before,
// a retry - and the pause before it.
func (g *grouping) openAttempt(c *callInfo, s *spans.Span, start, end int64) {
	b := g.b
	cur := g.cur
	kind := analyzer.AttemptKind(c.kind)
	prevStatus := ""
	if cur != nil {
		prevStatus = cur.Status
	}
	nAttempts := len(b.att) - g.attStart
	switch {
	case kind != "":
	case nAttempts == 0:
		kind = analyzer.KindInitial
	case isRedirect(prevStatus) || prevStatus == "401":
		kind = analyzer.AttemptKindResend
	case cur != nil && start < g.curAnswer-overlapTolerance:
		kind = analyzer.KindHedge
	default:
		kind = analyzer.KindRetry
	}
	backoff := int64(0)
	if c.backoff >= 0 {
		backoff = c.backoff * 1e6
	} else if cur != nil && start >= g.curEnd {
		backoff = start - g.curEnd
	} else if cur != nil {
		backoff = max(0, start-g.curAnswer)
	}
	if cur != nil && c.backoff < 0 && !sameClock(g.curSpan, s) {
		backoff = -1 // read on two clocks (a callee's SERVER span standing for a lost call)
	}
	g.closeAttempt()
	// Filled in place, as operations are. Within capacity: cur stays valid.
	if len(b.att) == cap(b.att) {
		b.att = append(b.att, analyzer.Attempt{})
	} else {
		b.att = b.att[:len(b.att)+1]
	}
	cur = &b.att[len(b.att)-1]
	cur.Number, cur.Kind, cur.SpanID = nAttempts+1, kind, s.SpanID
	cur.StartUnixNano, cur.EndUnixNano = start, end
	setRecordedNumber(cur, c.attempt)
	cur.BackoffNanos = backoff
	cur.Outcome, cur.Status = c.outcome, c.status
	g.cur = cur
	g.curEnd, g.curAnswer, g.curFirst, g.curSpan = end, c.answer, start, s
}

// addCall adds call c (span s) to the attempt in flight and widens the attempt and its operation
// to it.
func (g *grouping) addCall(c *callInfo, s *spans.Span, start, end int64) {
	b := g.b
	b.calls = append(b.calls, s.SpanID)
	if !g.hasOrigin(c.origin) {
		g.addOrigin(c.origin)
	}
	g.cur.EndUnixNano = max(g.cur.EndUnixNano, end)
	g.curEnd = max(g.curEnd, end)
	g.curAnswer = max(g.curAnswer, c.answer)
	op := g.op
	op.StartUnixNano = min(op.StartUnixNano, start)
	op.EndUnixNano = max(op.EndUnixNano, end)
	if d := c.deadline; d > 0 && op.DeadlineUnixNano == 0 {
		op.DeadlineUnixNano = d
	}
	if c.attempt >= 0 || c.opID != "" {
		op.Inferred = false
	}
}

// endOperations ends each operation that no span ended as its last attempt did: complete when it
// succeeded, fail-fast otherwise (stopped by a permanent failure when that is how it failed).
func endOperations(ops []*analyzer.Operation) {
	for _, op := range ops {
		if len(op.Attempts) > 0 && op.Terminal == "" {
			last := op.Attempts[len(op.Attempts)-1]
			if last.Outcome == analyzer.OutcomeOK {
				op.Terminal, op.StopReason = "complete", "succeeded"
			} else {
				op.Terminal = "fail-fast"
				if last.Outcome == analyzer.OutcomePermanent {
					op.StopReason = "permanent"
				}
			}
		}
	}
}

// groupsInOrder cuts ks, sorted by grouping key, into its groups (runs of one key) and orders
// them by their first call: its start, then its span id. Each group's first call is its earliest
// (ties: the caller's children are ordered by start, then span id, and the sort is stable), so
// this is the order in which the groups began. The keys are hashes seeded per analyzer: they
// find the groups, but their order must not be the groups' order, for what follows it - the
// order of the trace's operations and, through the occurrence numbering, which operations
// under another caller are copies of which (intent keys, hence logical operations) - would
// then change from one analyzer to the next on the same input.
func (t *trace) groupsInOrder(ks []keyed, sc *scratch) []keyRun {
	runs := sc.runs[:0]
	for lo := 0; lo < len(ks); {
		hi := lo + 1
		for hi < len(ks) && ks[hi].key == ks[lo].key {
			hi++
		}
		runs = append(runs, keyRun{int32(lo), int32(hi)})
		lo = hi
	}
	if len(runs) <= 16 {
		// Most callers have one or two groups: an insertion sort, no call per comparison.
		for i := 1; i < len(runs); i++ {
			r := runs[i]
			j := i
			for ; j > 0 && t.beganAfter(ks[runs[j-1].lo].idx, ks[r.lo].idx); j-- {
				runs[j] = runs[j-1]
			}
			runs[j] = r
		}
	} else {
		slices.SortFunc(runs, func(a, b keyRun) int {
			x, y := ks[a.lo].idx, ks[b.lo].idx
			if t.beganAfter(x, y) {
				return 1
			}
			if x == y {
				return 0
			}
			return -1
		})
	}
	sc.runs = runs
	return runs
}

// beganAfter reports whether span x started after span y: later, or at the same time with a
// greater span id (spans are sorted by id, so the index orders them as their ids do).
func (t *trace) beganAfter(x, y int32) bool {
	sx, sy := t.Spans[x].StartUnixNano, t.Spans[y].StartUnixNano
	return sx > sy || sx == sy && x > y
}

// keyRun is one group of a caller's calls: ks[lo:hi] share a grouping key.
type keyRun struct{ lo, hi int32 }

// callIntent is what call c asked, for its operation's intent key (never the per-call operation
// id): hashes, not concatenated strings, so no allocation per call.
func callIntent(seed maphash.Seed, c *callInfo) uint64 {
	if c.service != "" {
		return hashStrings(seed, "svc", c.service, c.target)
	}
	return hashStrings(seed, "origin", c.origin, c.target)
}

// keyed is one call of a caller with its grouping keys.
type keyed struct {
	key    uint64 // grouping: the operation id when given, else the destination
	intent uint64 // callIntent, unless byOpID
	idx    int32
	// byOpID: key is the call's operation id; intent is not set.
	byOpID bool
}

// newOperation starts an operation with what the caller span and the first call say. The
// operation is carved from the trace's buffers.
func (t *trace) newOperation(callerKnown *known, c *callInfo, parent *analyzer.Operation, sc *scratch) *analyzer.Operation {
	b := &sc.bufs
	s := &t.Spans[c.idx]
	if len(b.slab) == cap(b.slab) {
		// Not reached (a trace has no more operations than calls), but never grow the slab in
		// place: earlier operations are pointed to.
		b.slab = make([]analyzer.Operation, 0, 4)
	}
	// Filled in place (the slab is zeroed): no 250-byte struct copied with a write barrier for
	// each of its pointers.
	b.slab = b.slab[:len(b.slab)+1]
	op := &b.slab[len(b.slab)-1]
	op.TraceID = t.ID
	op.Dependency, op.DependencyService = c.dep, c.service
	op.Parent = parent
	op.Inferred = true
	op.StartUnixNano, op.EndUnixNano = s.StartUnixNano, s.EndUnixNano
	if parent != nil {
		setChildCount(parent, parent.ChildCount()+1)
	}
	src := &sc.known[c.idx]
	if callerKnown != nil {
		cs := callerKnown.s
		op.SpanID = cs.SpanID
		op.Caller = cs.Service()
		if callerKnown.str(wkOpID) != "" {
			src = callerKnown
		}
	} else {
		op.SpanID = s.SpanID
		op.Caller = s.Service()
	}
	op.ID = src.str(wkOpID)
	if op.ID == "" {
		op.ID = c.opID
	}
	if op.ID == "" {
		op.ID = t.hexID(c, b)
	}
	op.Name = src.str(wkOpName)
	if op.Name == "" {
		op.Name = c.target
	}
	op.Owner = src.str(wkOwner)
	if op.Owner == "" {
		op.Owner = op.Caller
	}
	op.Terminal = src.str(wkTerminal)
	op.StopReason = src.str(wkStopReason)
	if d := src.intOr(wkDeadline); d > 0 {
		op.DeadlineUnixNano = d
	}
	return op
}

// hexID is call c's span id in hex (SpanID.String), cut from one string made for the trace's
// calls the first time an operation needs one.
func (t *trace) hexID(c *callInfo, b *opBufs) string {
	k := int(t.Index().Call[c.idx])
	if b.hexIDs == "" {
		var sb strings.Builder
		sb.Grow(16 * len(t.calls))
		var digits [16]byte
		for j := range t.calls {
			id := t.Spans[t.calls[j].idx].SpanID
			hex.Encode(digits[:], id[:])
			sb.Write(digits[:])
		}
		b.hexIDs = sb.String()
	}
	if 16*k+16 > len(b.hexIDs) {
		// A call added after the string was made (the callee's side of an untraced hop): its
		// own string, rather than the whole table again for every such call.
		return t.Spans[c.idx].SpanID.String()
	}
	return b.hexIDs[16*k : 16*k+16]
}

// intentKey identifies what an operation was asked to do, independent of which attempt of its
// parent asked: the same read under the second retry of the layer above has the same key. The
// per-dependency "logical operations" are the distinct keys, so amplification counts every copy
// made by every layer against one request of the top layer.
func intentKey(seed maphash.Seed, parent *analyzer.Operation, key uint64, occurrence int) uint64 {
	var pk uint64
	if parent != nil {
		pk = parent.IntentKey()
	}
	var buf [24]byte
	binary.LittleEndian.PutUint64(buf[0:], pk)
	binary.LittleEndian.PutUint64(buf[8:], uint64(occurrence))
	binary.LittleEndian.PutUint64(buf[16:], key)
	return maphash.Bytes(seed, buf[:])
}

// hashStrings hashes a few strings as one key, without building the joined string: each hashed
// on its own, the three mixed by position, so that moving text from one to the next makes
// another key. It runs twice per call (its operation id and its intent); a maphash.Hash, which
// copies the strings into its buffer before hashing them, cost twice as much. The seed is the
// Engine's own, random: nothing may depend on the values but their equality.
func hashStrings(seed maphash.Seed, a, b, c string) uint64 {
	ha, hb, hc := maphash.String(seed, a), maphash.String(seed, b), maphash.String(seed, c)
	h := ha*0x9e3779b97f4a7c15 ^ bits.RotateLeft64(hb*0xc2b2ae3d27d4eb4f, 21) ^ bits.RotateLeft64(hc*0x165667b19e3779f9, 42)
	return h ^ h>>29
}

// nextOccurrence numbers the operations of one intent within one scope, in the order they are
// made (pre-order, siblings by start time).
func (sc *scratch) nextOccurrence(scope int32, intent uint64) int {
	k := scopeIntent{scope, intent}
	if sc.occurrences == nil {
		// Few per trace: a slice, becoming a map past 16 (ten thousand distinct siblings).
		for i := range sc.occList {
			if sc.occList[i].k == k {
				sc.occList[i].n++
				return sc.occList[i].n - 1
			}
		}
		sc.occList = append(sc.occList, occCount{k, 1})
		if len(sc.occList) > 16 {
			sc.occurrences = make(map[scopeIntent]int, 64)
			for _, o := range sc.occList {
				sc.occurrences[o.k] = o.n
			}
		}
		return 0
	}
	n := sc.occurrences[k]
	sc.occurrences[k] = n + 1
	return n
}

type occCount struct {
	k scopeIntent
	n int
}

type scopeIntent struct {
	scope  int32
	intent uint64
}
