package engine_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/spans"
)

// threeLinkedDeliveries: one message, nacked and requeued twice, each delivery a trace of its own
// (traces 2, 3, 4) linking to the publish span, the consumer trying dep three times in each.
func threeLinkedDeliveries() []spans.Span {
	var ss []spans.Span
	ss = append(ss, linkedDelivery(2, 10, 1, 2, "consumer", 5, false)...)
	ss = append(ss, linkedDelivery(3, 20, 1, 2, "consumer", 40, false)...)
	ss = append(ss, linkedDelivery(4, 30, 1, 2, "consumer", 75, false)...)
	return ss
}

// brokerOf is the broker layer's operation in a's snapshot, nil when there is none.
func brokerOf(a *engine.Engine) *analyzer.Operation {
	for _, op := range a.Snapshot(testNow).Operations() {
		if op.Owner == "rabbitmq orders (redelivery)" {
			return op
		}
	}
	return nil
}

// wantNine checks what a user relies on for one message delivered three times, each delivery
// tried three times by the consumer: 9 calls to dep for 1 intent, 3 deliveries of 1 message,
// one finding naming the broker's layer and the consumer's.
func wantNine(t *testing.T, r analyzer.Report) {
	t.Helper()
	if d := depStats(t, r, "dep"); d.PhysicalCalls != 9 || d.LogicalOperations != 1 {
		t.Errorf("dep saw %d for %d, want 9 for 1: the deliveries' calls are copies of one intent", d.PhysicalCalls, d.LogicalOperations)
	}
	if q := depStats(t, r, "consumer"); q.PhysicalCalls != 3 || q.LogicalOperations != 1 || q.Outcomes["failed"] != 3 {
		t.Errorf("queue = %+v, want 3 failed deliveries of 1 message", q)
	}
	amp := findingsOf(r, "retry-amplification")
	if len(amp) != 1 || !strings.Contains(amp[0].Summary, "rabbitmq orders (redelivery) x3, consumer x3") ||
		amp[0].Evidence["factor"] != analyzer.Int(9) {
		t.Fatalf("retry-amplification = %+v, want one finding naming the broker x3 and the consumer x3, factor 9", amp)
	}
}

// Deliveries in traces of their own that link to one publish span are one message's deliveries:
// analyzed with the publisher's trace, they are the tries of one broker layer, called by the
// publisher, and the consumer's retries multiply with it, as when the CONSUMER spans continue
// the publisher's trace. The input still counts four traces.
func TestLinkedDeliveriesAreABrokerLayer(t *testing.T) {
	a, r := run(t, engine.Config{}, append(publisherTrace(), threeLinkedDeliveries()...)...)
	wantNine(t, r)
	if r.Input.Traces != 4 {
		t.Errorf("input counts %d traces, want the 4 that arrived", r.Input.Traces)
	}
	b := brokerOf(a)
	if b == nil || b.Tries() != 3 || b.Caller != "publisher" || b.TraceID != tid(1) {
		t.Fatalf("broker operation = %+v, want 3 tries called by publisher, in the publisher's trace", b)
	}
	for n, at := range b.Attempts[1:] {
		if at.BackoffNanos != 5*msec {
			t.Errorf("pause before delivery %d = %d ns, want the 5 ms from the nack to the redelivery", n+2, at.BackoffNanos)
		}
	}
	if amp := findingsOf(r, "retry-amplification"); amp[0].TraceID != tid(1).String() {
		t.Errorf("finding in trace %s, want the publisher's %s", amp[0].TraceID, tid(1))
	}
	if !hasNote(r, "3 deliveries started a trace of their own") || hasNote(r, "could not be analyzed with") {
		t.Errorf("notes = %q, want the 3 joined deliveries said, none left alone", r.Notes)
	}
	// Each delivery's trace id finds the analysis it is part of.
	v, ok := a.Snapshot(testNow).Trace(tid(3))
	if !ok || v.TraceID != tid(1) || len(v.Spans) != 2+3*7 {
		t.Fatalf("view of a delivery's trace: ok %v, %+v", ok, v)
	}
}

// The publisher's trace need not arrive (not sampled, not exported, another tenant): the
// deliveries that link to one span are still one message's, its broker layer called by nobody
// the trace shows. Two messages are two intents.
func TestLinkedDeliveriesWithoutThePublisher(t *testing.T) {
	a, r := run(t, engine.Config{}, threeLinkedDeliveries()...)
	wantNine(t, r)
	b := brokerOf(a)
	if b == nil || b.Tries() != 3 || b.Caller != "" || b.ID != sid(2).String() {
		t.Fatalf("broker operation = %+v, want 3 tries, no caller, named after the publish span", b)
	}
	if r.Input.Traces != 3 {
		t.Errorf("input counts %d traces, want the 3 deliveries' (the publisher's never came)", r.Input.Traces)
	}
	if !hasNote(r, "1 messages' deliveries were analyzed without the span that published them") {
		t.Errorf("notes = %q, want the missing publisher said", r.Notes)
	}

	ss := threeLinkedDeliveries()
	ss = append(ss, linkedDelivery(5, 40, 1, 3, "consumer", 200, false)...)
	ss = append(ss, linkedDelivery(6, 50, 1, 3, "consumer", 240, true)...)
	_, r = run(t, engine.Config{}, ss...)
	if q := depStats(t, r, "consumer"); q.PhysicalCalls != 5 || q.LogicalOperations != 2 {
		t.Errorf("queue = %+v, want 5 deliveries of 2 messages", q)
	}
	if d := depStats(t, r, "dep"); d.PhysicalCalls != 15 || d.LogicalOperations != 2 {
		t.Errorf("dep saw %d for %d, want 15 for 2", d.PhysicalCalls, d.LogicalOperations)
	}
}

// Under a publisher whose request edge retries, each publish's deliveries linking to it: edge x3,
// the broker x3 and the consumer x3 are 27 calls for 1 request.
func TestLinkedDeliveriesUnderARetryingPublisher(t *testing.T) {
	ss := []spans.Span{sp(1, 1, 0, spans.KindServer, "edge", 0, 1000)}
	trace := byte(2)
	for try := range 3 {
		base := 100 * (try + 1)
		start := int64(try) * 300
		ss = append(ss,
			sp(1, base, 1, spans.KindClient, "edge", start, start+5, get("http://publisher:8080/orders", 503)...),
			sp(1, base+1, base, spans.KindServer, "publisher", start+1, start+4, server(503)...),
			sp(1, base+2, base+1, spans.KindProducer, "publisher", start+2, start+3, publish("orders")...))
		for d := range 3 {
			ss = append(ss, linkedDelivery(trace, base+10+10*d, 1, base+2, "consumer", start+5+int64(d)*35, false)...)
			trace++
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

// A message delivered once to each of two services through links is fan-out through an
// exchange, not a retry; and a healthy delivery reports nothing.
func TestLinkedFanoutIsNoRetry(t *testing.T) {
	ss := publisherTrace()
	ss = append(ss, linkedDelivery(2, 10, 1, 2, "billing", 5, true)...)
	ss = append(ss, linkedDelivery(3, 20, 1, 2, "shipping", 5, true)...)
	_, r := run(t, engine.Config{}, ss...)
	if len(r.Findings) != 0 {
		t.Errorf("fan-out to two linked consumers reported: %+v", r.Findings)
	}
	// Each consumer is a dependency of its own, the queue their origin.
	for _, name := range []string{"billing", "shipping"} {
		if q := depStats(t, r, name); q.PhysicalCalls != 1 || q.LogicalOperations != 1 {
			t.Errorf("%s = %+v, want 1 delivery for 1 intent", name, q)
		}
	}
}

// The consumer works when the broker delivers, whether its trace is the publisher's or one of
// its own: after the publisher's caller gave up (edge's call timed out), that is asynchronous by
// design, never post-deadline work.
func TestLinkedConsumerAfterGiveUpIsNoPostDeadlineWork(t *testing.T) {
	ss := []spans.Span{
		sp(1, 1, 0, spans.KindServer, "edge", 0, 100),
		failed(sp(1, 5, 1, spans.KindClient, "edge", 1, 31, get("http://publisher:8080/orders", 0)...), "context deadline exceeded"),
		sp(1, 6, 5, spans.KindServer, "publisher", 2, 60, server(202)...),
		sp(1, 2, 6, spans.KindProducer, "publisher", 50, 51, publish("orders")...),
	}
	ss = append(ss, linkedDelivery(2, 10, 1, 2, "consumer", 80, true)...)
	_, r := run(t, engine.Config{}, ss...)
	if pd := findingsOf(r, "post-deadline-work"); len(pd) != 1 || strings.Contains(pd[0].Summary, "consumer") || strings.Contains(pd[0].Summary, "dep") {
		// The publisher's own work past the timeout is work for nobody; the consumer's is not.
		t.Errorf("post-deadline-work = %+v, want the publisher's work alone", pd)
	}
}

// The join does not depend on how the spans arrive: the publisher's trace first or last, a
// delivery's CONSUMER span before or after its children, in one batch or many, spans held or
// released: one report, and the same view of every trace.
func TestLinkedDeliveriesAnyArrivalOrder(t *testing.T) {
	ss := append(publisherTrace(), threeLinkedDeliveries()...)
	ss = append(ss, linkedDelivery(5, 40, 1, 9, "consumer", 200, false)...) // its publisher never arrives
	ss = append(ss, linkedDelivery(6, 50, 1, 9, "consumer", 240, true)...)
	ids := []spans.TraceID{tid(1), tid(2), tid(3), tid(4), tid(5), tid(6)}
	rng := rand.New(rand.NewPCG(27, 9))
	for _, cfg := range []engine.Config{{}, {ReleaseSpans: true}} {
		want := analyze(t, cfg, ss, nil, ids)
		for k := range 9 {
			in, batches := arrivalOrder(rng, ss, k, 6, 4)
			requireSame(t, fmt.Sprintf("release %v, order %d", cfg.ReleaseSpans, k), want, analyze(t, cfg, in, batches, ids))
		}
	}
}

// Live, traces settle at different times. A delivery whose trace arrives after the publisher's
// was analyzed joins it (the publisher's trace is analyzed again, its first analysis replaced);
// so does one whose root CONSUMER span, which ends last, arrives after its children were
// analyzed alone (that analysis is taken back). Counted once: the report is the one all spans at
// once would give.
func TestLinkedDeliveriesJoinLive(t *testing.T) {
	clk := &clock{t: time.Unix(0, t0)}
	a := engine.New(engine.Config{Settle: time.Second, Now: clk.Now, Detectors: suite.Default()})
	dels := threeLinkedDeliveries()
	consume(t, a, publisherTrace()...)
	a.Settle(clk.Add(2 * time.Second)) // the publisher's trace analyzed alone
	consume(t, a, dels[:7]...)         // the first delivery, whole
	consume(t, a, dels[8:14]...)       // the second's children, not its CONSUMER span
	a.Settle(clk.Add(2 * time.Second))
	if r := a.Report(); r.Input.Traces != 3 {
		t.Fatalf("after the first settle, input %+v: want the publisher's trace (joined by the first delivery) and the second's children", r.Input)
	}
	consume(t, a, dels[7])      // the second's CONSUMER span, late
	consume(t, a, dels[14:]...) // the third
	a.Settle(clk.Add(2 * time.Second))
	r := a.Report()
	wantNine(t, r)
	if r.Input.Traces != 4 || r.Input.Spans != 2+3*7 {
		t.Errorf("input %+v, want 4 traces of 23 spans, each counted once", r.Input)
	}
	if hasNote(r, "could not be analyzed with") || hasNote(r, "orphan") {
		t.Errorf("notes = %q", r.Notes)
	}
	_, whole := run(t, engine.Config{}, append(publisherTrace(), dels...)...)
	if !slices.Equal(r.Notes, whole.Notes) || len(r.Dependencies) != len(whole.Dependencies) {
		t.Errorf("live report %+v\ndiffers from all spans at once %+v", r, whole)
	}
}

// Live, the publisher's trace may come last (its exporter is slower): the deliveries are first
// analyzed without it, then again with it once it arrives - the publisher named as the caller,
// each trace counted once, the note about the missing publisher gone.
func TestLinkedDeliveriesBeforeThePublisherLive(t *testing.T) {
	clk := &clock{t: time.Unix(0, t0)}
	a := engine.New(engine.Config{Settle: time.Second, Now: clk.Now, Detectors: suite.Default()})
	consume(t, a, threeLinkedDeliveries()...)
	a.Settle(clk.Add(2 * time.Second))
	if r := a.Report(); r.Input.Traces != 3 || !hasNote(r, "without the span that published them") {
		t.Fatalf("before the publisher: input %+v, notes %q", r.Input, r.Notes)
	}
	consume(t, a, publisherTrace()...)
	a.Settle(clk.Add(2 * time.Second))
	r := a.Report()
	wantNine(t, r)
	if r.Input.Traces != 4 || hasNote(r, "without the span that published them") {
		t.Errorf("after the publisher: input %+v, notes %q; want 4 traces, the publisher seen", r.Input, r.Notes)
	}
	if b := brokerOf(a); b == nil || b.Caller != "publisher" {
		t.Errorf("broker operation = %+v, want called by publisher", b)
	}
}

// What cannot be joined is said, not guessed: a delivery whose children were analyzed and
// released (ReleaseSpans) before its CONSUMER span arrived cannot move, and stays a trace of its
// own; so does one that would take the publisher's trace over the per-trace cap. A failed one
// is counted in a note; a healthy one says nothing.
func TestUnjoinedLinkedDeliveryIsNoted(t *testing.T) {
	clk := &clock{t: time.Unix(0, t0)}
	a := engine.New(engine.Config{Settle: time.Second, Now: clk.Now, ReleaseSpans: true, Detectors: suite.Default()})
	bad := linkedDelivery(2, 10, 1, 2, "consumer", 5, false)
	consume(t, a, publisherTrace()...)
	consume(t, a, bad[1:]...)
	a.Settle(clk.Add(2 * time.Second))
	consume(t, a, bad[0])
	a.Settle(clk.Add(2 * time.Second))
	if r := a.Report(); !hasNote(r, "1 failed deliveries start a trace of their own") {
		t.Errorf("no note for a failed delivery left alone: %q", r.Notes)
	}

	_, r := run(t, engine.Config{MaxTraceSpans: 8}, append(publisherTrace(), bad...)...)
	if !hasNote(r, "1 failed deliveries start a trace of their own") || r.Input.Traces != 2 {
		t.Errorf("over the cap: notes %q, input %+v; want the delivery left alone and noted", r.Notes, r.Input)
	}
	_, r = run(t, engine.Config{MaxTraceSpans: 8}, append(publisherTrace(), linkedDelivery(2, 10, 1, 2, "consumer", 5, true)...)...)
	if hasNote(r, "start a trace of their own") {
		t.Errorf("a healthy delivery left alone was noted: %q", r.Notes)
	}
}

// Live, the publisher's trace may be evicted (MaxSpans) before its deliveries come: they are
// still one message's deliveries, and the report says that the publisher was not seen with them.
func TestLinkedDeliveriesAfterThePublisherWasEvicted(t *testing.T) {
	clk := &clock{t: time.Unix(0, t0)}
	a := engine.New(engine.Config{Settle: time.Second, Now: clk.Now, MaxSpans: 22, Detectors: suite.Default()})
	consume(t, a, publisherTrace()...)
	a.Settle(clk.Add(2 * time.Second))
	var other []spans.Span
	for k := range 21 {
		other = append(other, sp(9, 1+k, 0, spans.KindServer, "other", 0, 1))
	}
	consume(t, a, other...) // 23 spans: the publisher's trace, least recent, goes
	consume(t, a, threeLinkedDeliveries()...)
	a.Settle(clk.Add(2 * time.Second))
	r := a.Report()
	if a.Stats().EvictedTraces == 0 {
		t.Fatalf("nothing evicted: %+v", a.Stats())
	}
	wantNine(t, r)
	if r.Input.Traces != 5 {
		t.Errorf("input counts %d traces, want 5: the publisher's, the other, 3 deliveries'", r.Input.Traces)
	}
	if !hasNote(r, "analyzed without the span that published them") {
		t.Errorf("notes = %q, want the evicted publisher said", r.Notes)
	}
}

// Bounded work: a thousand deliveries of one message (a redelivery loop with no limit), each a
// trace of its own, are joined by their one link each - no search over the traces held - and
// the broker's layer reads them up to its cap, as when the CONSUMER spans are children.
func TestManyLinkedDeliveriesAreBounded(t *testing.T) {
	ss := publisherTrace()
	for d := range 1200 {
		ss = append(ss, linkedDelivery(byte(2+d%200), 10+10*d, 1, 2, "consumer", 5+int64(d)*35, false)...)
	}
	// byte trace ids repeat every 200: six deliveries a trace, all linking to one span.
	a, r := run(t, engine.Config{}, ss...)
	b := brokerOf(a)
	if b == nil || b.Tries() != 1024 {
		t.Fatalf("broker tries = %v, want the cap, 1024", b)
	}
	if len(findingsOf(r, "unbounded-retries")) == 0 {
		t.Errorf("1200 deliveries not reported as unbounded retries: %+v", r.Findings)
	}
}
