package engine_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/analyzer/workload"
	"github.com/stormwatch/stormwatch/spans"
)

// The engine's tests build their traces here, by hand, one span a line: sp makes a span, the
// attribute builders (get, server, publish) what an instrumentation writes on it, the span
// modifiers (named, failed, onInstance) what differs from the default, and the trace shapes used
// by several files (delivery, linkedDelivery, publisherTrace) are below them. run, consume and the
// report readers (depStats, findingsOf, hasNote) are at the end.

var t0 = time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC).UnixNano()

const msec = int64(time.Millisecond)

func tid(n byte) spans.TraceID { return spans.TraceID{0xaa, n, 1} }
func sid(n int) spans.SpanID   { return spans.SpanID{0x5, byte(n >> 16), byte(n >> 8), byte(n), 1} }

// resources shares one Resource per service among the spans tests build; tests build spans from
// several goroutines (TestConcurrentConsumeSettleSnapshot), hence the lock.
var (
	resourcesMu sync.Mutex
	resources   = map[string]*spans.Resource{}
)

func res(service string) *spans.Resource {
	resourcesMu.Lock()
	defer resourcesMu.Unlock()
	if r, ok := resources[service]; ok {
		return r
	}
	r := &spans.Resource{ServiceName: service}
	resources[service] = r
	return r
}

// sp builds a span: ids by number (0 parent = none), times in ms from t0.
func sp(trace byte, id, parent int, kind spans.Kind, service string, start, end int64, attrs ...spans.Attr) spans.Span {
	s := spans.Span{TraceID: tid(trace), SpanID: sid(id), Kind: kind, Name: "op", Resource: res(service),
		StartUnixNano: t0 + start*msec, EndUnixNano: t0 + end*msec, Attrs: attrs}
	if parent != 0 {
		s.ParentID = sid(parent)
	}
	return s
}

// get builds the attributes of an otelhttp-like GET to url with a status (0: none).
func get(url string, status int) []spans.Attr {
	a := []spans.Attr{spans.StringAttr(spans.AttrHTTPMethod, "GET"), spans.StringAttr(spans.AttrURLFull, url)}
	if status > 0 {
		a = append(a, spans.IntAttr(spans.AttrHTTPStatus, int64(status)))
	}
	return a
}

// server builds the attributes of the SERVER span answering a GET /x with a status, and extra.
func server(status int, extra ...spans.Attr) []spans.Attr {
	return append([]spans.Attr{spans.StringAttr(spans.AttrHTTPMethod, "GET"), spans.StringAttr(spans.AttrURLPath, "/x"),
		spans.IntAttr(spans.AttrHTTPStatus, int64(status))}, extra...)
}

// publish builds the attributes of amqplib-like PRODUCER and CONSUMER spans: the default exchange
// (an empty destination), the queue in the routing key.
func publish(queue string) []spans.Attr {
	return []spans.Attr{spans.StringAttr(spans.AttrMessagingSystem, "rabbitmq"),
		spans.StringAttr(spans.AttrLegacyMessagingDestination, ""),
		spans.StringAttr(spans.AttrLegacyMessagingRabbitMQRoutingKey, queue)}
}

// named sets a span's name.
func named(s spans.Span, name string) spans.Span {
	s.Name = name
	return s
}

// failed marks a span's status as an error with a message, as gRPC's own tracing does (it records
// no status code attribute).
func failed(s spans.Span, msg string) spans.Span {
	s.Status, s.StatusMessage = spans.StatusError, msg
	return s
}

// onInstance puts a span on one instance of its service (a resource of its own).
func onInstance(s spans.Span, instance string) spans.Span {
	s.Resource = &spans.Resource{ServiceName: s.Resource.ServiceName, ServiceInstance: instance}
	return s
}

// nackMessage is the status message amqplib gives a delivery that was nacked.
const nackMessage = "nack called on message with requeue"

// delivery is a CONSUMER span (id, under parent) whose consumer tries dep up to three times, one
// CLIENT span per try, each answered by dep's SERVER span; ok says whether the last try succeeds.
// It uses span ids id..id+6.
func delivery(trace byte, id, parent int, service string, start int64, ok bool) []spans.Span {
	end := start + 30
	c := sp(trace, id, parent, spans.KindConsumer, service, start, end, publish("orders")...)
	if !ok {
		c = failed(c, nackMessage)
	}
	out := []spans.Span{c}
	for try := range 3 {
		status := 503
		if ok && try == 2 {
			status = 200
		}
		at := start + 1 + int64(try)*10
		out = append(out,
			sp(trace, id+1+2*try, id, spans.KindClient, service, at, at+5, get("http://dep:8080/stock", status)...),
			sp(trace, id+2+2*try, id+1+2*try, spans.KindServer, "dep", at+1, at+4, server(status)...))
	}
	return out
}

// linkedDelivery is delivery in a trace of its own: its CONSUMER span has no parent and links to
// the publish span (pubSpan of trace pubTrace), as amqplib's useLinksForConsume makes it.
func linkedDelivery(trace byte, id int, pubTrace byte, pubSpan int, service string, start int64, ok bool) []spans.Span {
	ss := delivery(trace, id, 0, service, start, ok)
	ss[0].Links = []spans.Link{{TraceID: tid(pubTrace), SpanID: sid(pubSpan)}}
	return ss
}

// publisherTrace is trace 1: publisher's SERVER span and its PRODUCER span (span 2).
func publisherTrace() []spans.Span {
	return []spans.Span{
		sp(1, 1, 0, spans.KindServer, "publisher", 0, 10),
		sp(1, 2, 1, spans.KindProducer, "publisher", 1, 2, publish("orders")...),
	}
}

// workloadBatches makes about n spans of the synthetic workload in 512-span batches once, and
// returns a function giving a fresh copy of them for each run (the analyzer takes a batch's spans).
func workloadBatches(n int) func() []*spans.Batch {
	var batches []*spans.Batch
	w := workload.NewWorkload(t0)
	for done := 0; done < n; {
		b := &spans.Batch{}
		done += w.Fill(b, 512)
		batches = append(batches, b)
	}
	return func() []*spans.Batch {
		out := make([]*spans.Batch, len(batches))
		for i, b := range batches {
			out[i] = &spans.Batch{Spans: slices.Clone(b.Spans)}
		}
		return out
	}
}

// run analyzes ss offline (one batch, then Flush) with cfg, the default suite when cfg names no
// detectors, and returns the engine and its report.
func run(t testing.TB, cfg engine.Config, ss ...spans.Span) (*engine.Engine, analyzer.Report) {
	t.Helper()
	if cfg.Detectors == nil {
		cfg.Detectors = suite.Default()
	}
	a := engine.New(cfg)
	if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: ss}); err != nil {
		t.Fatal(err)
	}
	a.Flush()
	return a, a.Report()
}

// consume gives a the spans ss as one batch.
func consume(t *testing.T, a *engine.Engine, ss ...spans.Span) {
	t.Helper()
	if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: ss}); err != nil {
		t.Fatal(err)
	}
}

// depStats is the report's figures for dependency dep; the test fails when it has none.
func depStats(t *testing.T, r analyzer.Report, dep string) analyzer.DependencyStats {
	t.Helper()
	for _, d := range r.Dependencies {
		if d.Dependency == dep {
			return d
		}
	}
	t.Fatalf("no dependency %s in %+v", dep, r.Dependencies)
	return analyzer.DependencyStats{}
}

// findingsOf lists a report's findings of one detector.
func findingsOf(r analyzer.Report, detector string) []analyzer.Finding {
	var out []analyzer.Finding
	for _, f := range r.Findings {
		if f.Detector == detector {
			out = append(out, f)
		}
	}
	return out
}

// hasNote reports whether one of the report's notes contains part.
func hasNote(r analyzer.Report, part string) bool {
	for _, n := range r.Notes {
		if strings.Contains(n, part) {
			return true
		}
	}
	return false
}
