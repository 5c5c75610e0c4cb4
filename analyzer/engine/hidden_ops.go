package engine

import (
	"cmp"
	"hash/maphash"
	"slices"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// The operations of the hidden calls (see hidden.go): the walk when orphans were attached, the
// calls an attached orphan stands for, and the layer that an untraced hop (a proxy, a library
// retrying inside one span) makes of the requests its callee saw.

// inferBridged is inference's pre-order walk when orphans were attached: the trace's own tree
// first, each attached orphan's subtree after the span it is attached to, so that the operation
// the orphan stands for exists before the work under it is inferred.
func (t *trace) inferBridged(seed maphash.Seed, skew int64, in *interner, sc *scratch) {
	visited := slices.Grow(sc.visited[:0], len(t.Spans))[:len(t.Spans)]
	clear(visited)
	sc.visited = visited
	isBridged := func(i int32) bool {
		return slices.ContainsFunc(sc.bridge, func(b bridge) bool { return b.orphan == i })
	}
	walk := func(root int32) {
		for k, hi := t.Index().Pos[root], t.Index().Pos[root]+t.Index().Size[root]; k < hi; {
			i := t.Index().Order[k]
			if i != root && isBridged(i) {
				k += t.Index().Size[i]
				continue
			}
			visited[i] = true
			t.inferAt(i, seed, skew, in, sc)
			k++
		}
	}
	for _, r := range t.Index().Roots {
		if !isBridged(r) {
			walk(r)
		}
	}
	for {
		progress, left := false, false
		for _, b := range sc.bridge {
			if visited[b.orphan] {
				continue
			}
			if !visited[b.attach] {
				left = true
				continue
			}
			walk(b.orphan)
			progress = true
		}
		if !left {
			return
		}
		if !progress {
			// Attached to one another in a loop, out of reach of the trace's tree: walked as
			// roots of their own.
			for _, b := range sc.bridge {
				if !visited[b.orphan] {
					walk(b.orphan)
				}
			}
			return
		}
	}
}

// bridgedTo lists the orphans attached to span i.
func (t *trace) bridgedTo(i int32, sc *scratch) []int32 {
	out := sc.srvs[:0]
	for _, b := range sc.bridge {
		if b.attach == i {
			out = append(out, b.orphan)
		}
	}
	sc.srvs = out
	return out
}

// serverChildren lists the SERVER spans right under CLIENT span i, by start, but for those nested
// in another (see indexWide).
func (t *trace) serverChildren(i int32, sc *scratch) []int32 {
	out := sc.srvs[:0]
	for _, ch := range t.Children(int(i)) {
		if t.Spans[ch].Kind == spans.KindServer && !sc.wide.nested[ch] {
			out = append(out, ch)
		}
	}
	sc.srvs = out
	return out
}

// virtualCalls adds to the calls span i makes (group) the orphans attached to it: each stands for
// a CLIENT span of i's that was lost, and is registered as a call seen from the callee's side.
func (t *trace) virtualCalls(i int32, group []int32, in *interner, sc *scratch) []int32 {
	for _, b := range sc.bridge {
		if b.attach == i {
			t.calleeCall(b.orphan, "", "", in, sc)
			group = append(group, b.orphan)
		}
	}
	return group
}

// calleeCall registers SERVER span srv as a physical call seen from the callee's side and returns
// its index in t.calls. origin and target are the caller's words for it where the caller's span
// is known (an untraced hop below a CLIENT span); otherwise they are read from the SERVER span,
// and the origin is one a traced caller in the trace used for the same service, when there is one.
func (t *trace) calleeCall(srv int32, origin, target string, in *interner, sc *scratch) int32 {
	k := &sc.known[srv]
	// Named after the app behind a callee's own sidecar (envoy.go), as a call's callee is.
	c := callInfo{idx: srv, op: -1, origin: origin, target: target, service: t.serverService(srv, sc.known),
		attempt: -1, resend: -1, backoff: -1, deadline: -1, answer: t.End(int(srv))}
	c.outcome, c.status = classify(k)
	if c.target == "" {
		c.target = in.target(k, &sc.derived)
	}
	if c.origin == "" {
		c.origin = t.clientOrigin(c.service, sc)
	}
	if c.origin == "" {
		c.origin = serverOrigin(k)
	}
	if c.origin == "" {
		c.origin = c.service
	}
	c.dep = dependencyName(c.service, k.str(wkRPCService), c.origin)
	t.Index().Call[srv] = int32(len(t.calls))
	t.calls = append(t.calls, c)
	return t.Index().Call[srv]
}

// serverOrigin is scheme://host:port as a SERVER span states its own address (url.scheme,
// server.address, server.port), "" when it does not.
func serverOrigin(k *known) string {
	host, port := k.str(wkServerAddress), k.str(wkServerPort)
	if host == "" {
		return ""
	}
	scheme := k.str(wkURLScheme)
	if scheme == "" {
		scheme = "http"
		if k.str(wkRPCSystem) != "" {
			scheme = "grpc"
		}
	}
	if port == "" {
		port = defaultPort(scheme)
	}
	return scheme + "://" + joinHostPort(host, port)
}

// untracedHops makes one untraced hop per callee service and, for orphans, per thing asked: an
// untraced gateway that calls users then orders made two operations, not a retry of one. The
// hops are taken in the order of their first SERVER span; one pass and a map, however many
// services answered.
func (t *trace) untracedHops(i int32, srvs []int32, direct bool, seed maphash.Seed, in *interner, sc *scratch) {
	type hopKey struct{ service, target string }
	var keys []hopKey
	groups := map[hopKey][]int32{}
	for _, s := range srvs {
		k := hopKey{service: t.serverService(s, sc.known)}
		if !direct {
			k.target = in.target(&sc.known[s], &sc.derived)
		}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], s)
	}
	for _, k := range keys {
		t.untracedHop(i, groups[k], direct, seed, in, sc)
	}
}

// untracedHop makes the operation of a hop that sent CLIENT span i's request several times and
// exported no span of its own: its attempts are the callee's SERVER spans srvs. direct says the
// SERVER spans are i's own children (the same request resent: they replace i as the physical
// calls to i's destination); otherwise they are orphans attached to i by time (a service behind
// i's callee, reached by an untraced caller).
func (t *trace) untracedHop(i int32, srvs []int32, direct bool, seed maphash.Seed, in *interner, sc *scratch) {
	ci := t.Index().Call[i]
	origin, target := "", ""
	if direct {
		origin, target = t.calls[ci].origin, t.calls[ci].target
		t.calls[ci].below = true
	}
	// Envoy numbers the requests it sends: where every SERVER span has the number, it orders
	// them, whatever the callees' clocks say. Otherwise their starts do: one clock when they come
	// from one instance, and the order a retry loop sent them in either way.
	numbered, sameClock := true, true
	for _, srv := range srvs {
		if sc.known[srv].headerInt(wkEnvoyAttempt) < 0 {
			numbered = false
		}
		if t.Spans[srv].Instance() != t.Spans[srvs[0]].Instance() || t.Spans[srv].Service() != t.Spans[srvs[0]].Service() {
			sameClock = false
		}
	}
	ordered := slices.Clone(srvs)
	slices.SortStableFunc(ordered, func(a, b int32) int {
		if numbered {
			if x, y := sc.known[a].headerInt(wkEnvoyAttempt), sc.known[b].headerInt(wkEnvoyAttempt); x != y {
				return cmp.Compare(x, y)
			}
		}
		return cmp.Compare(t.Spans[a].StartUnixNano, t.Spans[b].StartUnixNano)
	})
	callees := make([]int32, len(ordered))
	for n, srv := range ordered {
		callees[n] = t.calleeCall(srv, origin, target, in, sc)
	}
	c := &t.calls[callees[0]]
	parent := t.opOf(&t.calls[ci])
	op := t.newOperation(&sc.known[i], c, parent, sc)
	op.ID = t.Spans[c.idx].SpanID.String()
	calleeName := c.service
	if calleeName == "" {
		calleeName = c.origin
	}
	op.Owner = "(untraced, between " + t.Spans[i].Service() + " and " + calleeName + ")"
	if !direct {
		// The calls came from whatever answers at i's destination, which exported nothing: i's
		// own service did not make them.
		op.Caller = "(untraced at " + t.calls[ci].dep + ")"
	}
	op.Terminal, op.StopReason = "", ""
	key := hashStrings(seed, "untraced", c.service, c.target)
	setIntentKey(op, intentKey(seed, parent, key, sc.nextOccurrence(i, key)))
	t.addCalleeAttempts(op, callees, func(_, _ *spans.Span) bool { return sameClock }, true, sc)
	t.issues.untraced += len(callees)
}

// addCalleeAttempts appends op to the trace's operations with one attempt per call of callees, in
// order, each the call a callee-side span stands for (an untraced hop's SERVER spans, a broker's
// deliveries), and ends it as its last attempt did. The pause before an attempt is read from the
// previous attempts' end only when oneClock says both spans are on one clock (-1 otherwise); with
// hedges, an attempt that starts before the previous ones ended is a hedge, not a retry.
func (t *trace) addCalleeAttempts(op *analyzer.Operation, callees []int32, oneClock func(prev, cur *spans.Span) bool, hedges bool, sc *scratch) {
	opIdx := int32(len(t.Index().Ops))
	t.Index().Ops = append(t.Index().Ops, op)
	sc.opStart = append(sc.opStart, int32(len(sc.opCalls)))
	b := &sc.bufs
	attStart := len(b.att)
	var prevEnd int64
	for n, k := range callees {
		cc := &t.calls[k]
		s := &t.Spans[cc.idx]
		a := analyzer.Attempt{Number: n + 1, Kind: analyzer.KindInitial, SpanID: s.SpanID, StartUnixNano: s.StartUnixNano,
			EndUnixNano: t.End(int(cc.idx)), Outcome: cc.outcome, Status: cc.status}
		setRecordedNumber(&a, -1)
		if n > 0 {
			a.Kind = analyzer.KindRetry
			a.BackoffNanos = -1 // unknown: the two spans' clocks may differ
			if oneClock(&t.Spans[t.calls[callees[n-1]].idx], s) {
				if hedges && s.StartUnixNano < prevEnd-overlapTolerance {
					a.Kind = analyzer.KindHedge
				}
				a.BackoffNanos = max(0, s.StartUnixNano-prevEnd)
			}
		}
		prevEnd = max(prevEnd, a.EndUnixNano)
		b.calls = append(b.calls, s.SpanID)
		b.origins = append(b.origins, cc.origin)
		a.Calls = b.calls[len(b.calls)-1 : len(b.calls) : len(b.calls)]
		a.Origins = b.origins[len(b.origins)-1 : len(b.origins) : len(b.origins)]
		b.att = append(b.att, a)
		sc.opCalls = append(sc.opCalls, k)
		cc.op = opIdx
		op.StartUnixNano = min(op.StartUnixNano, a.StartUnixNano)
		op.EndUnixNano = max(op.EndUnixNano, a.EndUnixNano)
	}
	op.Attempts = b.att[attStart:len(b.att):len(b.att)]
	if op.Attempts[len(op.Attempts)-1].Outcome == analyzer.OutcomeOK {
		op.Terminal, op.StopReason = "complete", "succeeded"
	} else {
		op.Terminal = "fail-fast"
	}
}
