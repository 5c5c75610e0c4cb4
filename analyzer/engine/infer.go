package engine

import (
	"hash/maphash"
	"slices"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// Inference: the walk that turns a trace's spans into its operations. inferOperations reads every
// span's attributes once (known.go) and every call once (callInfo), then walks the tree in
// pre-order so that a parent's operation exists before its children's; inferAt is the step at one
// span, which hands each rule its part: grouping.go (a caller's calls), messaging.go (deliveries),
// hidden_ops.go (requests sent below the instrumentation), loops.go (application retry loops).

// callInfo is what inference needs of one CLIENT span, computed once.
type callInfo struct {
	idx     int32
	op      int32  // index of its operation in the trace's ops; -1 until grouped
	origin  string // scheme://host:port
	service string // the callee's service.name, when a SERVER child (or another call to origin) says
	// dep names the dependency (see dependencyName): the key of the accounting, the operation's
	// Dependency. Until the trace's calls are all read, the span's rpc.service.
	dep     string
	target  string // method and path, or the RPC method: what was asked
	outcome string
	status  string
	// Reference-client and protocol hints; -1 when absent.
	attempt  int64
	resend   int64
	backoff  int64 // resilience.backoff_ms
	deadline int64 // resilience.deadline
	kind     string
	opID     string
	// answer is the earliest the caller can have had its answer: the start plus the callee's
	// SERVER time where the callee is traced, the span's end otherwise. A client span may end only
	// when the body is closed, long after the answer: where the next attempt starts before this
	// call's end, overlap and pause are judged from the answer instead.
	answer int64
	// servers counts the callee's SERVER spans right under this call; more than one means the
	// request was sent again below the instrumentation (see untracedHop).
	servers int32
	// below: the physical calls of this call are counted from the callee's SERVER spans under it
	// (an untraced hop), not from the call itself.
	below bool
	// giveUp is when the caller stopped waiting for the answer, on its clock; 0 when it waited
	// (see giveUpAt).
	giveUp int64
	// originHost is origin's analyzer.HostDependency when the interner's cache had it with the
	// origin, else "" (see hostNames).
	originHost string
}

// inferOperations groups the CLIENT spans of t into logical operations and links each operation
// to the one it runs inside. It runs in one pre-order pass over the tree, so parents' operations
// exist before their children's; grouping under one caller sorts the caller's calls once, so ten
// thousand siblings cost n log n, not n squared.
func (t *trace) inferOperations(seed maphash.Seed, skew int64, in *interner, sc *scratch) []*analyzer.Operation {
	nClient := t.readSpans(sc)
	t.indexWide(sc)
	sc.resetScopes(len(t.Spans))
	t.readCalls(nClient, skew, in, sc)
	if nClient > 0 {
		t.Index().Ops = sc.bufs.make(nClient, &sc.spare)
	}
	group := sc.group[:0]
	// Root CLIENT spans (a client without a parent span) are grouped together as if under one
	// unseen caller.
	for _, r := range t.Index().Roots {
		if t.Index().Call[r] >= 0 {
			group = append(group, r)
		}
	}
	if len(group) > 0 {
		t.groupCalls(-1, group, nil, seed, skew, sc)
	}
	sc.group = group
	// Deliveries whose publish span is not in the trace are roots too: their broker layers
	// are made before the walk reaches them (see messaging.go).
	t.unseenPublishes(seed, in, sc)
	if !t.bridgeOrphans(skew, sc) {
		for _, i := range t.Index().Order {
			t.inferAt(i, seed, skew, in, sc)
		}
	} else {
		t.inferBridged(seed, skew, in, sc)
	}
	t.finishLoops(sc)
	sc.calls = t.calls
	sc.opStart = append(sc.opStart, int32(len(sc.opCalls)))
	t.Index().Ops = t.refusedOperations(t.Index().Ops)
	return t.Index().Ops
}

// readSpans indexes every span's attributes once (sc.known), resets the index's Call and
// Enclosing (carved by buildTrace) and marks the attempt spans that are calls. It returns how many
// calls the trace has: its CLIENT spans and those attempt spans.
func (t *trace) readSpans(sc *scratch) int {
	n := len(t.Spans)
	kn := slices.Grow(sc.known[:0], n)[:n]
	sc.known = kn
	nClient := 0
	var carried uint64
	for i := range t.Spans {
		t.Index().Call[i] = -1
		t.Index().Enclosing[i] = -1
		s := &t.Spans[i]
		kn[i].read(s, sc.carry)
		carried |= kn[i].carried()
		if s.Kind == spans.KindClient {
			nClient++
		} else if t.attemptParent(i, &kn[i]) >= 0 {
			// An attempt span under a CLIENT span is a call too (grpcattempts.go): marked for
			// readCalls.
			nClient++
			t.Index().Call[i] = attemptMark
		}
	}
	t.Index().Carried, t.Index().CarriedKeys = carried, sc.carry.indexed()
	return nClient
}

// readCalls reads each of the trace's nClient calls once, into t.calls (see readCall), and names
// each call's dependency: a call that timed out has no SERVER child to name the callee, but
// another call to the same origin in the trace may.
func (t *trace) readCalls(nClient int, skew int64, in *interner, sc *scratch) {
	kn := sc.known
	// The calls are read only while the trace is analyzed (see analyzeTrace): scratch.
	t.calls = slices.Grow(sc.calls[:0], nClient)
	sc.opCalls, sc.opStart = sc.opCalls[:0], sc.opStart[:0]
	// origin -> service, for calls whose callee span is missing.
	originService := &sc.originService
	for i := range t.Spans {
		s := &t.Spans[i]
		attemptOf := int32(-1)
		if s.Kind != spans.KindClient {
			if t.Index().Call[i] != attemptMark {
				continue
			}
			attemptOf = t.Index().Parent[i]
		} else if t.ingressHop(int32(i), kn) {
			// The callee's sidecar handing the request to its app: the caller's call reached
			// the callee already (envoy.go).
			continue
		}
		// Read in place: a callInfo is some two hundred bytes, copied twice when returned.
		t.calls = append(t.calls, callInfo{})
		c := &t.calls[len(t.calls)-1]
		t.readCall(c, i, attemptOf, skew, in, sc)
		if c.service != "" {
			originService.add(c.origin, c.service)
		}
		t.Index().Call[i] = int32(len(t.calls) - 1)
	}
	t.inheritProxyTries(kn)
	var hosts hostNames
	for k := range t.calls {
		c := &t.calls[k]
		if c.service == "" {
			c.service = originService.get(c.origin)
		}
		c.dep = hosts.dependencyName(c.service, c.dep, c.origin, c.originHost)
	}
	originService.reset()
}

// readCall reads into c (a zero callInfo) what inference needs of call i (a CLIENT span, or an
// attempt span of the CLIENT span attemptOf): where it went and what it asked, the client's hints,
// its outcome, when the caller had its answer (from the callee's SERVER spans under it, when
// traced) and when it gave up.
func (t *trace) readCall(c *callInfo, i int, attemptOf int32, skew int64, in *interner, sc *scratch) {
	kn := sc.known
	s := &t.Spans[i]
	k := &kn[i]
	c.idx, c.op = int32(i), -1
	c.origin, c.target, c.originHost = in.originAndTarget(k, &sc.derived)
	c.attempt = k.intOr(wkAttempt)
	c.resend = k.intOr(wkHTTPResendCount)
	c.backoff = k.intOr(wkBackoff)
	c.deadline = k.intOr(wkDeadline)
	c.kind = k.str(wkAttemptKind)
	c.opID = k.str(wkOpID)
	c.dep = k.str(wkRPCService)
	if c.resend < 0 {
		c.resend = k.intOr(wkGRPCPreviousAttempts)
	}
	if c.resend < 0 {
		c.resend = k.intOr(wkGRPCAttemptPrevious) // gRPC's own per-attempt spans
	}
	if c.resend < 0 {
		c.resend = k.retryCount() // a proxy's per-try span
	}
	c.outcome, c.status = classify(k)
	c.answer = t.End(i)
	var srvStart, srvEnd int64
	srvFirst := int32(-1)
	for _, ch := range t.Children(i) {
		cs := &t.Spans[ch]
		if cs.Kind != spans.KindServer || sc.wide.nested[ch] {
			continue
		}
		if c.service == "" {
			// Named after the app behind the callee's own sidecar, when it is traced
			// (envoy.go): the sidecar's name may be every sidecar's.
			c.service = t.serverService(ch, kn)
		}
		if c.servers == 0 || cs.StartUnixNano < srvStart {
			srvStart, srvFirst = cs.StartUnixNano, ch
		}
		srvEnd = max(srvEnd, t.End(int(ch)))
		c.servers++
	}
	if c.servers > 0 {
		// The callee's time, aligned to start when the call did: its clock may be skewed,
		// its duration is not.
		c.answer = min(c.answer, s.StartUnixNano+max(0, srvEnd-srvStart))
	} else {
		c.service = k.calleeName() // the proxy's or the tracer's own word for the callee
	}
	c.giveUp = t.giveUpAt(int32(i), srvFirst, k, srvStart, srvEnd, c.outcome, c.status, skew, kn)
	if attemptOf >= 0 || c.origin == "" || c.target == "" {
		t.fillCallNames(c, attemptOf, in, sc)
	}
	if c.origin == "" {
		if c.service != "" {
			c.origin = c.service
		} else {
			c.origin = "unknown:" + s.Name
		}
	}
}

// inferAt is inference's step at span i, taken in pre-order (a span after every span above it):
// the operation i works for, then the operations of the calls i makes - its CLIENT children,
// the calls that orphans attached to it stand for, the attempts below the instrumentation of a
// call, and an application's own retry loop over its children.
func (t *trace) inferAt(i int32, seed maphash.Seed, skew int64, in *interner, sc *scratch) {
	if c := t.Index().Call[i]; c >= 0 && t.calls[c].op >= 0 {
		t.Index().Enclosing[i] = t.calls[c].op
	} else if lo := sc.loopOf(i); lo >= 0 {
		t.Index().Enclosing[i] = lo
	} else if p := t.Index().Parent[i]; p >= 0 {
		t.Index().Enclosing[i] = t.Index().Enclosing[p]
	}
	if k := t.Spans[i].Kind; k == spans.KindProducer || k == spans.KindConsumer {
		t.messaging(i, seed, in, sc) // see messaging.go
	}
	group := sc.group[:0]
	for _, ch := range t.Children(int(i)) {
		if t.sentCall(ch) {
			group = append(group, ch)
		}
	}
	isCall := t.sentCall(i)
	if !isCall && len(sc.bridge) > 0 {
		group = t.virtualCalls(i, group, in, sc)
	}
	sc.group = group
	if len(group) > 0 {
		t.groupCalls(int(i), group, t.Enclosing(int(i)), seed, skew, sc)
	}
	if isCall {
		// A CLIENT span whose own CLIENT children go where it goes is a wrapper, not a request on
		// the wire: two instrumentations at two levels (requests over urllib3, a gRPC call span
		// over its attempt spans). Its children are the physical calls; it stays the operation
		// above them.
		c := &t.calls[t.Index().Call[i]]
		for _, ch := range group {
			if cc := &t.calls[t.Index().Call[ch]]; cc.origin == c.origin || cc.service != "" && cc.service == c.service {
				c.below = true
				break
			}
		}
		if t.calls[t.Index().Call[i]].servers >= 2 {
			t.untracedHops(i, t.serverChildren(i, sc), true, seed, in, sc)
		}
		if len(sc.bridge) > 0 {
			if orphans := t.bridgedTo(i, sc); len(orphans) > 0 {
				t.untracedHops(i, orphans, false, seed, in, sc)
			}
		}
	}
	t.appLoops(i, seed, sc)
}

// sentCall reports whether span i is a call that its own service sent: a CLIENT span or an attempt
// span (grpcattempts.go). A SERVER span standing for a lost call (hidden.go) and a CONSUMER span
// standing for a delivery (messaging.go) are calls too, but the callee's side of them: they are
// grouped by the rules that made them, never again as their caller's children.
func (t *trace) sentCall(i int32) bool {
	if t.Index().Call[i] < 0 {
		return false
	}
	k := t.Spans[i].Kind
	return k != spans.KindServer && k != spans.KindConsumer
}
