package engine

import (
	"hash/maphash"
	"slices"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// The rule in this file reads a broker that delivers one message several times as a retry layer.
// It follows from who makes which span: the publisher's messaging instrumentation makes a
// PRODUCER span and writes its context into the message's headers; the consumer's makes one
// CONSUMER span per delivery, whose parent is read from those headers. A message the broker
// delivers again - requeued by a nack or a reject, or dead-lettered through a delay queue and back
// (dead-lettering keeps the headers) - carries the same headers, so every delivery is a CONSUMER
// child of the one PRODUCER span. The deliveries are the attempts of one layer, the broker's (or the
// consumer's that requeues: the trace cannot tell which decided), and the consumer's own calls
// under each delivery are copies of one intent, as under any retrying layer.

// The notes of the messaging rules, shared by a trace's notes and the report's.
const (
	redeliveredNote      = "%d messages were delivered more than once to one consumer (CONSUMER spans under one PRODUCER span): each broker that redelivered is a layer named SYSTEM DESTINATION (redelivery), whose tries are the deliveries"
	linkedDeliveriesNote = "%d failed deliveries start a trace of their own (a CONSUMER span linked to the publish span of another trace, not its child): if the broker redelivered them, the deliveries of one message are in separate traces and are not counted together as a retry layer; parent the CONSUMER span to the PRODUCER span to have them counted"
)

// maxDeliveries bounds the deliveries one PRODUCER span's consumers are read for.
const maxDeliveries = 1024

// messaging is inference's step at a PRODUCER or CONSUMER span i: a PRODUCER span's deliveries
// (redeliveries), or a failed delivery that starts a trace of its own (linkedDelivery).
func (t *trace) messaging(i int32, seed maphash.Seed, in *interner, sc *scratch) {
	if t.Spans[i].Kind == spans.KindProducer {
		t.redeliveries(i, seed, in, sc)
	} else {
		t.linkedDelivery(i)
	}
}

// linkedDelivery counts CONSUMER span i when it failed and starts a trace of its own that links to
// a span of another trace: consumers that link to the publish span rather than continue its trace
// (amqplib's useLinksForConsume, the messaging conventions' choice for batches) put every delivery
// of a message in a trace of its own. A trace is analyzed alone, so its delivery cannot be
// counted with the others; the report says so rather than under-count in silence.
func (t *trace) linkedDelivery(i int32) {
	s := &t.Spans[i]
	if t.Index().Parent[i] >= 0 || s.Status != spans.StatusError {
		return
	}
	for _, l := range s.Links {
		if l.TraceID != t.ID {
			t.issues.linkedDeliveries++
			return
		}
	}
}

// redeliveries makes, for PRODUCER span i, one broker operation per consuming service: its
// attempts are that service's CONSUMER spans under i, in the order they started. Each delivery is
// registered as a call (seen from the consumer's side), so the operations of the calls a delivery
// makes run inside the broker's and multiply with it.
func (t *trace) redeliveries(i int32, seed maphash.Seed, in *interner, sc *scratch) {
	var buf [8]int32
	cons := buf[:0]
	for _, ch := range t.Children(int(i)) {
		if t.Spans[ch].Kind == spans.KindConsumer && t.Index().Call[ch] < 0 && len(cons) < maxDeliveries {
			cons = append(cons, ch)
		}
	}
	for len(cons) > 0 {
		// Deliveries to one consuming service are one message tried again; other services
		// (fan-out through an exchange to several queues) each receive their own copy.
		svc := t.Spans[cons[0]].Service()
		var one, rest []int32
		for _, c := range cons {
			if t.Spans[c].Service() == svc {
				one = append(one, c)
			} else {
				rest = append(rest, c)
			}
		}
		t.brokerLayer(i, one, seed, in, sc)
		cons = rest
	}
}

// brokerLayer makes the operation of the broker that delivered PRODUCER span p's message to one
// consuming service as the CONSUMER spans dels.
func (t *trace) brokerLayer(p int32, dels []int32, seed maphash.Seed, in *interner, sc *scratch) {
	slices.SortStableFunc(dels, func(a, b int32) int {
		sa, sb := t.Spans[a].StartUnixNano, t.Spans[b].StartUnixNano
		switch {
		case sa < sb:
			return -1
		case sa > sb:
			return 1
		}
		return 0
	})
	system, dest := messagingName(&t.Spans[dels[0]])
	if dest == "" {
		system, dest = messagingName(&t.Spans[p])
	}
	if dest == "" {
		dest = t.Spans[dels[0]].Service() // a broker that names nothing: named after its consumer
	}
	if system == "" {
		system = "broker"
	}
	origin := system + "://" + dest
	callees := make([]int32, len(dels))
	for n, d := range dels {
		k := t.calleeCall(d, origin, "deliver "+dest, in, sc)
		if cc := &t.calls[k]; cc.outcome == analyzer.OutcomeRetryable && cc.status == "" {
			// A failed delivery (nacked, rejected, or the handler failed) is not a connect
			// error: the broker reached the consumer.
			cc.status = "failed"
		}
		callees[n] = k
	}
	c := &t.calls[callees[0]]
	parent := t.Enclosing(int(p))
	op := t.newOperation(&sc.known[p], c, parent, sc)
	op.ID = t.Spans[p].SpanID.String()
	op.Name = "deliver " + dest
	op.Owner = system + " " + dest + " (redelivery)"
	op.Terminal, op.StopReason, op.DeadlineUnixNano = "", "", 0
	// Occurrences are counted in the publisher's scope (the span that published, above any
	// INTERNAL spans), so two messages published by one request are two intents, and the same
	// message published again under a retry of the layer above is a copy of one.
	scope := t.Index().Parent[p]
	for scope >= 0 && t.Spans[scope].Kind == spans.KindInternal && t.Index().Parent[scope] >= 0 && sc.loopOf(scope) < 0 {
		scope = t.Index().Parent[scope]
	}
	if scope < 0 {
		scope = p
	}
	key := hashStrings(seed, "deliver", c.service, origin)
	op.SetIntentKey(intentKey(seed, parent, key, sc.nextOccurrence(scope, key)))
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
		a.SetRecordedNumber(-1)
		if n > 0 {
			a.Kind = analyzer.KindRetry
			// The pause is the broker's: from the end of the delivery that was refused (its
			// nack, or the handler's failure) to the next delivery, read on the consumer's
			// clock - one clock only when both deliveries reached one instance.
			a.BackoffNanos = -1
			if prev := &t.Spans[t.calls[callees[n-1]].idx]; prev.Instance() == s.Instance() {
				a.BackoffNanos = max(0, s.StartUnixNano-prevEnd)
			}
		}
		prevEnd = a.EndUnixNano
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
	if len(dels) > 1 {
		t.issues.redelivered++
	}
}

// messagingName is the messaging system and the destination a PRODUCER or CONSUMER span names:
// the destination (current semantic conventions, then the older attribute), else the routing key,
// which is the queue's name when a message is published to RabbitMQ's default exchange (an empty
// exchange name).
func messagingName(s *spans.Span) (system, dest string) {
	system = s.Str(spans.AttrMessagingSystem)
	for _, key := range [...]string{spans.AttrMessagingDestinationName, spans.AttrLegacyMessagingDestination,
		spans.AttrMessagingRabbitMQRoutingKey, spans.AttrLegacyMessagingRabbitMQRoutingKey} {
		if d := s.Str(key); d != "" {
			return system, d
		}
	}
	return system, ""
}
