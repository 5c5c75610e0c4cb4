package engine_test

import (
	"strings"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/spans"
)

// One message, nacked and requeued twice: three CONSUMER spans under the PRODUCER span, each
// with the consumer's three tries. The broker is a layer of three tries named after the queue,
// above the consumer's: 9 calls to dep for 1 request, and one finding names both layers.
func TestRedeliveriesAreABrokerLayer(t *testing.T) {
	ss := publisherTrace()
	ss = append(ss, delivery(1, 10, 2, "consumer", 5, false)...)
	ss = append(ss, delivery(1, 20, 2, "consumer", 40, false)...)
	ss = append(ss, delivery(1, 30, 2, "consumer", 75, false)...)
	a, r := run(t, engine.Config{}, ss...)

	d := depStats(t, r, "dep")
	if d.PhysicalCalls != 9 || d.LogicalOperations != 1 {
		t.Errorf("dep saw %d for %d, want 9 for 1: the deliveries' calls are copies of one intent", d.PhysicalCalls, d.LogicalOperations)
	}
	q := depStats(t, r, "consumer") // the queue, rabbitmq://orders, is its origin
	if q.PhysicalCalls != 3 || q.LogicalOperations != 1 || q.Service != "consumer" || q.Outcomes["failed"] != 3 {
		t.Errorf("queue = %+v, want consumer received 3 deliveries of 1 message, all failed", q)
	}
	amp := findingsOf(r, "retry-amplification")
	if len(amp) != 1 {
		t.Fatalf("retry-amplification findings = %+v, want 1", r.Findings)
	}
	if !strings.Contains(amp[0].Summary, "rabbitmq orders (redelivery) x3, consumer x3") ||
		amp[0].Evidence["factor"] != analyzer.Int(9) {
		t.Errorf("finding = %q %v, want the broker's layer and the consumer's, factor 9", amp[0].Summary, amp[0].Evidence)
	}
	var broker *analyzer.Operation
	for _, op := range a.Snapshot(testNow).Operations() {
		if op.Owner == "rabbitmq orders (redelivery)" {
			broker = op
		}
	}
	if broker == nil || broker.Tries() != 3 || broker.Caller != "publisher" {
		t.Fatalf("broker operation = %+v, want 3 tries, called by publisher", broker)
	}
	for n, at := range broker.Attempts[1:] {
		if at.BackoffNanos != 5*msec {
			t.Errorf("pause before delivery %d = %d ns, want the 5 ms from the nack to the redelivery", n+2, at.BackoffNanos)
		}
	}
	if !hasNote(r, "delivered more than once") {
		t.Errorf("no note says a broker layer was read: %q", r.Notes)
	}
}

// A message fanned out through an exchange to two consuming services, each delivered once, is
// two copies, not a retry: no amplification, one delivery each.
func TestFanoutToTwoConsumersIsNoRetry(t *testing.T) {
	ss := publisherTrace()
	ss = append(ss, delivery(1, 10, 2, "billing", 5, true)...)
	ss = append(ss, delivery(1, 20, 2, "shipping", 5, true)...)
	_, r := run(t, engine.Config{}, ss...)
	if len(r.Findings) != 0 {
		t.Errorf("fan-out to two consumers reported: %+v", r.Findings)
	}
	// Each consumer is a dependency of its own, the queue their origin.
	for _, name := range []string{"billing", "shipping"} {
		if q := depStats(t, r, name); q.PhysicalCalls != 1 || q.LogicalOperations != 1 {
			t.Errorf("%s = %+v, want 1 delivery for 1 intent", name, q)
		}
	}
}

// Two messages published by one request, each delivered once, are two intents: the second is
// not a redelivery of the first.
func TestTwoMessagesOfOneRequestAreTwoIntents(t *testing.T) {
	ss := append(publisherTrace(), sp(1, 3, 1, spans.KindProducer, "publisher", 3, 4, publish("orders")...))
	ss = append(ss, delivery(1, 10, 2, "consumer", 5, true)...)
	ss = append(ss, delivery(1, 20, 3, "consumer", 40, true)...)
	_, r := run(t, engine.Config{}, ss...)
	if q := depStats(t, r, "consumer"); q.PhysicalCalls != 2 || q.LogicalOperations != 2 {
		t.Errorf("queue = %+v, want 2 deliveries of 2 messages", q)
	}
	if len(r.Findings) != 0 {
		t.Errorf("two messages delivered once each reported: %+v", r.Findings)
	}
}

// Redeliveries that reach different instances of the consumer are on different clocks: their
// pauses are not measured, so no-backoff does not judge them.
func TestRedeliveriesAcrossInstancesHaveNoPause(t *testing.T) {
	inst := func(ss []spans.Span, instance string) []spans.Span {
		for i := range ss {
			if ss[i].Resource.ServiceName == "consumer" {
				ss[i] = onInstance(ss[i], instance)
			}
		}
		return ss
	}
	ss := publisherTrace()
	ss = append(ss, inst(delivery(1, 10, 2, "consumer", 5, false), "c-1")...)
	ss = append(ss, inst(delivery(1, 20, 2, "consumer", 35, false), "c-2")...)
	ss = append(ss, inst(delivery(1, 30, 2, "consumer", 65, false), "c-1")...)
	a, r := run(t, engine.Config{}, ss...)
	for _, op := range a.Snapshot(testNow).Operations() {
		if op.Owner != "rabbitmq orders (redelivery)" {
			continue
		}
		if op.Attempts[1].BackoffNanos != -1 || op.Attempts[2].BackoffNanos != -1 {
			t.Errorf("pauses across instances = %d, %d; want -1 (not measured)", op.Attempts[1].BackoffNanos, op.Attempts[2].BackoffNanos)
		}
	}
	if len(findingsOf(r, "no-backoff")) != 0 {
		t.Errorf("no-backoff judged pauses across clocks: %+v", findingsOf(r, "no-backoff"))
	}
}

// Under a publisher whose request is retried by the layer above, the same message published again
// is a copy of one intent: edge x3, the broker x3 and the consumer x3 are 27 calls for 1 request.
func TestRetryingPublisherMultipliesWithTheBroker(t *testing.T) {
	ss := []spans.Span{sp(1, 1, 0, spans.KindServer, "edge", 0, 1000)}
	for try := range 3 {
		base := 100 * (try + 1)
		start := int64(try) * 300
		ss = append(ss,
			sp(1, base, 1, spans.KindClient, "edge", start, start+5, get("http://publisher:8080/orders", 503)...),
			sp(1, base+1, base, spans.KindServer, "publisher", start+1, start+4, server(503)...),
			sp(1, base+2, base+1, spans.KindProducer, "publisher", start+2, start+3, publish("orders")...))
		for d := range 3 {
			ss = append(ss, delivery(1, base+10+10*d, base+2, "consumer", start+5+int64(d)*35, false)...)
		}
	}
	_, r := run(t, engine.Config{}, ss...)
	if d := depStats(t, r, "dep"); d.PhysicalCalls != 27 || d.LogicalOperations != 1 {
		t.Errorf("dep saw %d for %d, want 27 for 1", d.PhysicalCalls, d.LogicalOperations)
	}
	amp := findingsOf(r, "retry-amplification")
	if len(amp) != 1 || !strings.Contains(amp[0].Summary, "edge x3, rabbitmq orders (redelivery) x3, consumer x3") {
		t.Errorf("findings = %+v, want one naming edge, the broker and the consumer", amp)
	}
}
