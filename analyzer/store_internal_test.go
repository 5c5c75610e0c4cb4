package analyzer

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/spans/spanstest"
)

// fixtureTraces is every fixture's traces, fixture after fixture, each in arrival order.
func fixtureTraces(t *testing.T) [][]spans.Span {
	t.Helper()
	var traces [][]spans.Span
	for _, f := range spanstest.FixtureTraces(t, spans.DecodeOptions{}) {
		traces = append(traces, f.Traces...)
	}
	return traces
}

// namingDetector reports one finding per trace naming its CLIENT spans, so that the views compared
// below carry findings and operations credited with them.
var namingDetector = &Detector{Name: "naming", Run: func(p *Pass) error {
	var ids []string
	for i := range p.Trace.Len() {
		if p.Trace.Spans[i].Kind == spans.KindClient {
			ids = append(ids, p.Trace.Spans[i].SpanID.String())
		}
	}
	if len(ids) > 0 {
		p.Report(Finding{Summary: "clients", SpanIDs: ids})
	}
	return nil
}}

// TestPackedViewIsTheAnalysisView: for every trace of every fixture, the view rebuilt from the
// packed spans and the held (stripped) analysis is the view of the analysis itself, field for
// field, unexported ones included.
func TestPackedViewIsTheAnalysisView(t *testing.T) {
	cfg := Config{Detectors: []*Detector{namingDetector}}
	a := New(cfg)
	seed, in := a.seed, a.intern
	for _, ss := range fixtureTraces(t) {
		id := ss[0].TraceID
		res := analyzeTrace(id, ss, 0, &cfg, seed, in)
		want := res.view()
		packed := pack(res.trace.Spans, nil)
		held, meta := hold(res)
		if held.trace != nil {
			t.Fatalf("trace %s: the held analysis keeps its trace", id)
		}
		got := a.viewPacked(id, held, meta, packed)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("trace %s: the view from the packed spans differs:\n got %+v\nwant %+v", id, got, want)
		}
	}
	// A truncated trace keeps its flag and note.
	ss := fixtureTraces(t)[0]
	res := analyzeTrace(ss[0].TraceID, ss, 3, &cfg, seed, in)
	want := res.view()
	packed := pack(res.trace.Spans, nil)
	held, meta := hold(res)
	if got := a.viewPacked(ss[0].TraceID, held, meta, packed); !want.Truncated || !reflect.DeepEqual(got, want) {
		t.Fatalf("truncated trace: got %+v\nwant %+v", got, want)
	}
}

// TestSettledTracesHoldOnlyPackedSpans: once settled, a trace holds no []Span and no index, only
// its packed spans, and the counts say so.
func TestSettledTracesHoldOnlyPackedSpans(t *testing.T) {
	a := New(Config{Detectors: []*Detector{namingDetector}, Settle: time.Second})
	total := 0
	for _, ss := range fixtureTraces(t) {
		total += len(ss)
		if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: ss}); err != nil {
			t.Fatal(err)
		}
	}
	a.Settle(time.Unix(0, 1).Add(1000 * time.Hour))
	held, bytes := 0, 0
	for _, ts := range a.traces {
		if ts.spans != nil || ts.res == nil || ts.res.trace != nil || ts.packed == nil {
			t.Fatalf("trace %s: spans %d, packed %d bytes, result %+v", ts.id, len(ts.spans), len(ts.packed), ts.res)
		}
		n, err := spans.PackedLen(ts.packed)
		if err != nil || n != ts.held || n != ts.resSpans {
			t.Fatalf("trace %s: %d spans packed (%v), %d held, %d analyzed", ts.id, n, err, ts.held, ts.resSpans)
		}
		held += n
		bytes += len(ts.packed)
	}
	st := a.Stats()
	if st.SpansHeld != held || st.PackedBytes != bytes || st.SpansHeld > total || st.SpansHeld < total*9/10 {
		t.Fatalf("stats %+v; %d spans packed in %d bytes, %d received", st, held, bytes, total)
	}
	if r := a.Report(); r.Input.Spans != held {
		t.Fatalf("input %+v, %d spans held", r.Input, held)
	}
}
