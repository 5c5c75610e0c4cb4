package engine

import (
	"cmp"
	"hash/maphash"
	"math"
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
//
// The orphans are walked in passes over the attachments, in their order: in each, those whose
// span has been walked (in the trace's tree, or under an orphan walked before them) are; orphans
// attached to one another in a loop, out of reach of the trace's tree, are walked last as roots
// of their own. Which pass takes an orphan follows from where its span hangs (walkOrder), so the
// passes are not run: the work is linear in spans, and in attachments times their log.
func (t *trace) inferBridged(seed maphash.Seed, skew int64, in *interner, sc *scratch) {
	bridged := slices.Grow(sc.bridged[:0], len(t.Spans))[:len(t.Spans)]
	clear(bridged)
	sc.bridged = bridged
	for _, b := range sc.bridge {
		bridged[b.orphan] = true
	}
	walk := func(root int32) {
		for k, hi := t.Index().Pos[root], t.Index().Pos[root]+t.Index().Size[root]; k < hi; {
			i := t.Index().Order[k]
			if i != root && bridged[i] {
				k += t.Index().Size[i]
				continue
			}
			t.inferAt(i, seed, skew, in, sc)
			k++
		}
	}
	for _, r := range t.Index().Roots {
		if !bridged[r] {
			walk(r)
		}
	}
	for _, q := range t.walkOrder(sc) {
		walk(sc.bridge[q].orphan)
	}
}

// walkOrder is the order inferBridged walks the attached orphans in (indexes into sc.bridge): by
// pass, then in the attachments' order, those in no pass (in a loop of attachments, or attached
// under one) last, in their order. An orphan attached under the trace's tree, or under a root left
// unattached, is walked in the first pass; one attached under the subtree of the orphan of an
// earlier attachment in the same pass as that one, under a later one's in the pass after.
func (t *trace) walkOrder(sc *scratch) []int32 {
	m := len(sc.bridge)
	// owner[q]: the attachment whose orphan's subtree holds attachment q's span, -1 for none. The
	// orphans are roots, so their subtrees are disjoint runs of the pre-order: searched by start.
	byPos := sc.walkSeq[:0]
	for q := range m {
		byPos = append(byPos, int32(q))
	}
	pos, size := t.Index().Pos, t.Index().Size
	slices.SortFunc(byPos, func(a, b int32) int { return cmp.Compare(pos[sc.bridge[a].orphan], pos[sc.bridge[b].orphan]) })
	owner := slices.Grow(sc.walkOwner[:0], m)[:m]
	for q, b := range sc.bridge {
		p := pos[b.attach]
		k, _ := slices.BinarySearchFunc(byPos, p, func(x int32, p int32) int {
			return cmp.Compare(pos[sc.bridge[x].orphan], p)
		})
		// k is the first orphan starting at or after p: the one before it may hold p.
		if k < len(byPos) && pos[sc.bridge[byPos[k]].orphan] == p {
			owner[q] = byPos[k]
		} else if o := k - 1; o >= 0 && p < pos[sc.bridge[byPos[o]].orphan]+size[sc.bridge[byPos[o]].orphan] {
			owner[q] = byPos[o]
		} else {
			owner[q] = -1
		}
	}
	// pass[q]: the pass attachment q's orphan is walked in, from its owner's; 0 not yet known,
	// -1 being followed, noPass in none.
	const noPass = math.MaxInt32
	pass := slices.Grow(sc.walkPass[:0], m)[:m]
	clear(pass)
	chain := byPos[:0] // byPos is done with: the attachments being followed to a known pass
	for q := range m {
		x := int32(q)
		for pass[x] == 0 {
			chain = append(chain, x)
			pass[x] = -1
			if owner[x] < 0 {
				break
			}
			x = owner[x]
		}
		// x's pass is known (or x is on the chain: a loop, or the chain's end, with no owner).
		for k := len(chain) - 1; k >= 0; k-- {
			y := chain[k]
			switch o := owner[y]; {
			case o < 0:
				pass[y] = 1
			case pass[o] == -1 || pass[o] == noPass:
				pass[y] = noPass // in a loop, or under one
			case o < y:
				pass[y] = pass[o]
			default:
				pass[y] = pass[o] + 1
			}
		}
		chain = chain[:0]
	}
	order := chain[:0]
	for q := range m {
		order = append(order, int32(q))
	}
	slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(pass[a], pass[b]) })
	sc.walkSeq, sc.walkOwner, sc.walkPass = order[:0], owner[:0], pass[:0]
	return order
}

// bridgedTo lists the orphans attached to span i, in the attachments' order.
func (t *trace) bridgedTo(i int32, sc *scratch) []int32 {
	out := sc.srvs[:0]
	for _, b := range attachedTo(sc.attached, i) {
		out = append(out, b.orphan)
	}
	sc.srvs = out
	return out
}

// attachedTo is the run of attached (the attachments by span, then in their order) at span i.
func attachedTo(attached []bridge, i int32) []bridge {
	lo, _ := slices.BinarySearchFunc(attached, i, func(b bridge, i int32) int { return cmp.Compare(b.attach, i) })
	hi := lo
	for hi < len(attached) && attached[hi].attach == i {
		hi++
	}
	return attached[lo:hi]
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
	for _, b := range attachedTo(sc.attached, i) {
		t.calleeCall(b.orphan, "", "", in, sc)
		group = append(group, b.orphan)
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
