package spans_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/workload"
	"github.com/stormwatch/stormwatch/spans"
)

// Release calls the producer's hook once however often the owner calls it, and is harmless on a
// batch without one (a trace file's, the connector's).
func TestBatchReleaseCallsTheHookOnce(t *testing.T) {
	calls := 0
	b := &spans.Batch{Spans: make([]spans.Span, 2)}
	b.SetRelease(func() { calls++ })
	b.Release()
	b.Release()
	if calls != 1 {
		t.Errorf("hook called %d times, want 1", calls)
	}
	if len(b.Spans) != 2 {
		t.Errorf("Release changed the batch: %d spans", len(b.Spans))
	}
	(&spans.Batch{}).Release()
}

// ByTrace keeps each trace's spans together and the traces in the order they first appear.
func TestByTrace(t *testing.T) {
	a, b := spans.TraceID{1}, spans.TraceID{2}
	in := []spans.Span{{TraceID: b, Name: "b1"}, {TraceID: a, Name: "a1"}, {TraceID: b, Name: "b2"}}
	out := spans.ByTrace(in)
	if len(out) != 2 || len(out[0].Spans) != 2 || out[0].Spans[1].Name != "b2" || out[1].Spans[0].Name != "a1" {
		t.Fatalf("ByTrace = %+v", out)
	}
}

// BenchmarkByTrace is a whole-document reader's grouping (Jaeger, Zipkin): the spans of 100
// traces of the analyzer benchmarks' workload, dealt out interleaved as a Zipkin array may hold
// them.
func BenchmarkByTrace(b *testing.B) {
	w := workload.NewWorkload(1_700_000_000_000_000_000)
	var traces [][]spans.Span
	for range 100 {
		batch := &spans.Batch{}
		n := w.Fill(batch, 1)
		traces = append(traces, batch.Spans[:n])
	}
	var all []spans.Span
	for i, added := 0, true; added; i++ {
		added = false
		for _, t := range traces {
			if i < len(t) {
				all, added = append(all, t[i]), true
			}
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if out := spans.ByTrace(all); len(out) != len(traces) {
			b.Fatalf("%d traces, want %d", len(out), len(traces))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(all)), "ns/span")
}
