package workload

import (
	"bufio"
	"bytes"
	"math"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormwatch/stormwatch/spans"
)

// TestRealisticTrafficIsWhatPdataWrites holds RealisticTraffic to its word: every line reads back
// through pdata's JSON unmarshaler and marshals again to the same bytes (what the Collector's file
// exporter would have written), one resource and at most a few more than 512 spans a line; the
// spans package's decoder reads every span too; 8-12 spans a trace, trace ids unique, a request
// every millisecond, about 815 bytes a span, the mix of retries its doc gives, and the same bytes
// on every run.
func TestRealisticTrafficIsWhatPdataWrites(t *testing.T) {
	const n = 30_000
	var out bytes.Buffer
	g := NewRealisticTraffic(&out)
	if err := g.WriteSpans(n); err != nil {
		t.Fatal(err)
	}
	if g.Spans() < n || g.Spans() > n+12 {
		t.Fatalf("asked for %d spans, wrote %d", n, g.Spans())
	}
	if g.Bytes() != int64(out.Len()) {
		t.Fatalf("counted %d bytes, wrote %d", g.Bytes(), out.Len())
	}
	perSpan := float64(out.Len()) / float64(g.Spans())
	t.Logf("%d spans, %d traces, %d lines, %.0f bytes a span", g.Spans(), g.Traces(), bytes.Count(out.Bytes(), []byte{'\n'}), perSpan)
	if perSpan < 750 || perSpan > 880 {
		t.Errorf("%.0f bytes a span, want about 815", perSpan)
	}

	type traceShape struct {
		spans        int
		reference    bool  // the payment provider called through the reference client
		payCalls     int   // CLIENT spans to the payment provider
		invCalls     int   // CLIENT spans to inventory
		failed       bool  // the root span failed
		rootStart    int64 // 0 until the root is seen
		payAllFailed bool  // the reference client's operation span failed: every attempt did
	}
	traces := map[[16]byte]*traceShape{}
	var total int
	sc := bufio.NewScanner(bytes.NewReader(out.Bytes()))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(line)
		if err != nil {
			t.Fatal(err)
		}
		again, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, line) {
			i := 0
			for i < min(len(again), len(line)) && again[i] == line[i] {
				i++
			}
			t.Fatalf("pdata writes the line otherwise, from byte %d:\n ours: %.300s\npdata: %.300s", i, line[i:], again[i:])
		}
		if td.ResourceSpans().Len() != 1 {
			t.Fatalf("a line holds %d resources, want one (an SDK's export)", td.ResourceSpans().Len())
		}
		if td.SpanCount() > 512+8 {
			t.Fatalf("a line of %d spans, want at most a few more than 512", td.SpanCount())
		}
		b, err := spans.DecodeJSON(line, spans.DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Spans) != td.SpanCount() || b.Rejected != 0 {
			t.Fatalf("spans.DecodeJSON read %d spans (%d rejected) of %d", len(b.Spans), b.Rejected, td.SpanCount())
		}
		total += td.SpanCount()
		ss := td.ResourceSpans().At(0).ScopeSpans()
		for i := range ss.Len() {
			scope := ss.At(i).Scope().Name()
			sp := ss.At(i).Spans()
			for j := range sp.Len() {
				s := sp.At(j)
				tr := traces[s.TraceID()]
				if tr == nil {
					tr = &traceShape{}
					traces[s.TraceID()] = tr
				}
				tr.spans++
				failed := s.Status().Code() == ptrace.StatusCodeError
				if scope == "github.com/stormwatch/stormwatch/reference" {
					tr.reference = true
					if s.Kind() == ptrace.SpanKindInternal && failed {
						tr.payAllFailed = true
					}
				}
				if s.Kind() == ptrace.SpanKindClient {
					addr, _ := s.Attributes().Get("server.address")
					switch addr.Str() {
					case pspDNS:
						tr.payCalls++
					case invDNS:
						tr.invCalls++
					}
				}
				if s.ParentSpanID().IsEmpty() {
					tr.rootStart = int64(s.StartTimestamp())
					tr.failed = failed
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if int64(total) != g.Spans() {
		t.Fatalf("pdata read %d spans, the generator counted %d", total, g.Spans())
	}
	if uint64(len(traces)) != g.Traces() {
		t.Fatalf("%d distinct trace ids for %d traces", len(traces), g.Traces())
	}

	hist := map[int]int{}
	starts := map[int64]bool{}
	var reference, payRetried, allFailed, invRetried int
	for _, tr := range traces {
		hist[tr.spans]++
		if tr.spans < 8 || tr.spans > 12 {
			t.Fatalf("a trace of %d spans, want 8-12", tr.spans)
		}
		if tr.rootStart == 0 || tr.payCalls < 1 || tr.payCalls > 3 || tr.invCalls < 1 || tr.invCalls > 3 {
			t.Fatalf("a trace with root start %d, %d payment calls, %d inventory calls", tr.rootStart, tr.payCalls, tr.invCalls)
		}
		starts[tr.rootStart] = true
		if tr.reference {
			reference++
		} else if tr.payCalls != 1 {
			t.Fatalf("plain otelhttp called the payment provider %d times, want once", tr.payCalls)
		}
		if tr.payCalls > 1 {
			payRetried++
		}
		if tr.payAllFailed != tr.failed {
			t.Fatalf("a trace whose root failed: %v, whose payment failed every attempt: %v; want both or neither", tr.failed, tr.payAllFailed)
		}
		if tr.failed {
			allFailed++
		}
		if tr.invCalls > 1 {
			invRetried++
		}
	}
	t.Logf("traces by spans: %v", hist)
	// A request every millisecond from 2026-01-15 10:00 UTC.
	const t0 = 1768471200_000_000_000
	for k := range int64(g.Traces()) {
		if !starts[t0+k*1_000_000] {
			t.Fatalf("no trace starts %d ms after the first", k)
		}
	}
	// The doc's shares per 100 traces; the hash that picks a trace's shape keeps each within a
	// point or two of it over a few thousand traces.
	per100 := func(k int) float64 { return 100 * float64(k) / float64(len(traces)) }
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"through the reference client", per100(reference), 37},
		{"retrying the payment provider", per100(payRetried), 12},
		{"failing every payment attempt", per100(allFailed), 1},
		{"retrying inventory", per100(invRetried), 13},
	} {
		t.Logf("%s: %.1f traces in 100", c.what, c.got)
		if math.Abs(c.got-c.want) > 2 || c.got == 0 {
			t.Errorf("%s: %.1f traces in 100, want about %.0f", c.what, c.got, c.want)
		}
	}

	var again bytes.Buffer
	if err := NewRealisticTraffic(&again).WriteSpans(n); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), out.Bytes()) {
		t.Fatal("a second run wrote other bytes")
	}
}
