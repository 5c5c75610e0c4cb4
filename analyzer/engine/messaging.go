package engine

import (
	"cmp"
	"encoding/binary"
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
	linkedDeliveriesNote = "%d failed deliveries start a trace of their own (a CONSUMER span linked to the publish span of another trace, not its child) that could not be analyzed with the trace of that publish span (it was analyzed before the CONSUMER span arrived, or the two together pass the per-trace span cap): if the broker redelivered them, those deliveries are not counted together as a retry layer; raise the settle time, or parent the CONSUMER span to the PRODUCER span"
	unseenPublishNote    = "%d messages' deliveries were analyzed without the span that published them (the publisher's trace was not received, or was evicted or released before they came): their broker layer is counted, but not who published nor any retries above the publisher"
	joinedDeliveriesNote = "%d deliveries started a trace of their own (a CONSUMER span with no parent, linked to the publish span of another trace) and were analyzed with the trace of that publish span, whether it arrived or not: the deliveries of one message are the tries of its broker layer, whichever trace each started"
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

// deliveryLink is the publish span a delivery that starts a trace of its own links to: CONSUMER
// span s has no parent and exactly one link, into another trace. Consumers that link to the
// publish span rather than continue its trace (amqplib's useLinksForConsume) make one such trace
// per delivery; a batch receive links to several messages' spans and is no delivery of one. The
// analyzer files such a trace with the linked one (see joinDeliveries), so that the deliveries
// of one message are analyzed together, whatever trace each started.
func deliveryLink(s *spans.Span) (spans.Link, bool) {
	if s.Kind != spans.KindConsumer || !s.ParentID.IsZero() || len(s.Links) != 1 {
		return spans.Link{}, false
	}
	l := s.Links[0]
	if l.TraceID == s.TraceID || l.TraceID.IsZero() || l.SpanID.IsZero() {
		return spans.Link{}, false
	}
	return l, true
}

// linkedDelivery counts CONSUMER span i when it failed and starts a trace of its own that links to
// a span of another trace, and was not filed with it (see joinDeliveries): its delivery cannot be
// counted with the others; the report says so rather than under-count in silence.
func (t *trace) linkedDelivery(i int32) {
	s := &t.Spans[i]
	if t.Index().Parent[i] >= 0 || s.Status != spans.StatusError {
		return
	}
	if l, ok := deliveryLink(s); ok && l.TraceID != t.ID {
		t.issues.linkedDeliveries++
	}
}

// joinedDelivery is the span id of the publish span that CONSUMER span s, filed with the trace
// of that span (see joinDeliveries), links to; zero for any other span.
func (t *trace) joinedDelivery(s *spans.Span) spans.SpanID {
	if s.Kind != spans.KindConsumer || !s.ParentID.IsZero() || len(s.Links) != 1 || s.TraceID == t.ID {
		return spans.SpanID{}
	}
	if l := s.Links[0]; l.TraceID == t.ID {
		return l.SpanID
	}
	return spans.SpanID{}
}

// unseenPublishes makes the broker layers of the deliveries filed with the trace of a publish
// span that is not in it (never received, or released before they came: a fragment), so
// CONSUMER roots linking to one absent span. They are read among the roots, ordered by the span
// they link to, then by start, so that each message's deliveries are one run: n log n, whatever
// their number.
func (t *trace) unseenPublishes(seed maphash.Seed, in *interner, sc *scratch) {
	type delivery struct {
		msg uint64
		i   int32
	}
	var dels []delivery
	for _, r := range t.Index().Roots {
		s := &t.Spans[r]
		if t.Index().Call[r] >= 0 {
			continue
		}
		if msg := t.joinedDelivery(s); !msg.IsZero() {
			if _, seen := t.Lookup(msg); !seen {
				dels = append(dels, delivery{binary.BigEndian.Uint64(msg[:]), r})
			}
		}
	}
	slices.SortFunc(dels, func(a, b delivery) int {
		if c := cmp.Compare(a.msg, b.msg); c != 0 {
			return c
		}
		return cmp.Compare(t.Index().Pos[a.i], t.Index().Pos[b.i]) // the roots' order: by start
	})
	var cons []int32
	for k := 0; k < len(dels); {
		cons = cons[:0]
		msg := dels[k].msg
		for ; k < len(dels) && dels[k].msg == msg; k++ {
			if len(cons) < maxDeliveries {
				cons = append(cons, dels[k].i)
			}
		}
		var id spans.SpanID
		binary.BigEndian.PutUint64(id[:], msg)
		t.deliveries(-1, id, cons, seed, in, sc)
		t.issues.unseenPublishes++
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
	t.deliveries(i, t.Spans[i].SpanID, cons, seed, in, sc)
}

// deliveries makes one broker operation per consuming service of the message msg, published by
// PRODUCER span p (-1 when it is not in the trace), out of its deliveries cons (CONSUMER spans).
func (t *trace) deliveries(p int32, msg spans.SpanID, cons []int32, seed maphash.Seed, in *interner, sc *scratch) {
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
		t.brokerLayer(p, msg, one, seed, in, sc)
		cons = rest
	}
}

// brokerLayer makes the operation of the broker that delivered message msg, published by PRODUCER
// span p (-1: not in the trace), to one consuming service as the CONSUMER spans dels.
func (t *trace) brokerLayer(p int32, msg spans.SpanID, dels []int32, seed maphash.Seed, in *interner, sc *scratch) {
	slices.SortStableFunc(dels, func(a, b int32) int {
		return cmp.Compare(t.Spans[a].StartUnixNano, t.Spans[b].StartUnixNano)
	})
	system, dest := messagingName(&t.Spans[dels[0]])
	if dest == "" && p >= 0 {
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
	var parent *analyzer.Operation
	var publisher *known
	if p >= 0 {
		parent, publisher = t.Enclosing(int(p)), &sc.known[p]
	}
	op := t.newOperation(publisher, c, parent, sc)
	if p < 0 {
		op.Caller = "" // the publisher is not in the trace
	}
	op.ID = msg.String()
	op.Name = "deliver " + dest
	op.Owner = system + " " + dest + " (redelivery)"
	op.Terminal, op.StopReason, op.DeadlineUnixNano = "", "", 0
	// Occurrences are counted in the publisher's scope (the span that published, above any
	// INTERNAL spans), so two messages published by one request are two intents, and the same
	// message published again under a retry of the layer above is a copy of one.
	key := hashStrings(seed, "deliver", c.service, origin)
	scope := int32(-1)
	if p >= 0 {
		scope = t.occurrenceScope(int(t.Index().Parent[p]), sc)
		if scope < 0 {
			scope = p
		}
	} else {
		// No publisher to count occurrences under: each message is an intent of its own.
		key = hashStrings(seed, "deliver "+msg.String(), c.service, origin)
	}
	setIntentKey(op, intentKey(seed, parent, key, sc.nextOccurrence(scope, key)))
	// The pause is the broker's: from the end of the delivery that was refused (its nack, or the
	// handler's failure) to the next delivery, read on the consumer's clock - one clock only when
	// both deliveries reached one instance.
	t.addCalleeAttempts(op, callees, func(prev, cur *spans.Span) bool { return prev.Instance() == cur.Instance() }, false, sc)
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
