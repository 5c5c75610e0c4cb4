package engine_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/analyzer/workload"
	"github.com/stormwatch/stormwatch/fixtures"
	"github.com/stormwatch/stormwatch/spans"
)

// halves splits each trace's spans in two, in file order: the first half of every trace, then
// the second.
func halves(ss []spans.Span) (first, second []spans.Span) {
	total := map[spans.TraceID]int{}
	for _, s := range ss {
		total[s.TraceID]++
	}
	seen := map[spans.TraceID]int{}
	for _, s := range ss {
		if seen[s.TraceID]++; seen[s.TraceID] <= (total[s.TraceID]+1)/2 {
			first = append(first, s)
		} else {
			second = append(second, s)
		}
	}
	return first, second
}

// TestHeldTracesTakeLateSpansAsBefore: every trace of every fixture is analyzed (and held packed)
// with half its spans, then the other half arrives and the trace is analyzed again. The report
// and every trace view must be the ones an analyzer gets from all the spans at once: the spans
// come back from the packed form as they went in.
func TestHeldTracesTakeLateSpansAsBefore(t *testing.T) {
	for _, c := range fixtures.Cases {
		t.Run(c.Name, func(t *testing.T) {
			first, second := halves(detectortest.Spans(t, c.Name))
			clk := &clock{t: time.Unix(0, t0)}
			late := engine.New(engine.Config{Detectors: suite.Default(), Settle: time.Second, Now: clk.Now})
			consume(t, late, first...)
			late.Settle(clk.Add(time.Hour))
			st := late.Stats()
			if st.PendingTraces != 0 || st.SpansHeld == 0 || st.PackedBytes == 0 {
				t.Fatalf("after the first half: %+v", st)
			}
			consume(t, late, second...)
			late.Settle(clk.Add(time.Hour))
			late.Flush()

			// The same clock: spans ahead of it by more than a day are noted (fixtures recorded
			// from real libraries are later than the test clock).
			whole := engine.New(engine.Config{Detectors: suite.Default(), Now: clk.Now})
			consume(t, whole, first...)
			consume(t, whole, second...)
			whole.Flush()

			if got, want := late.Report(), whole.Report(); !reflect.DeepEqual(got, want) {
				t.Errorf("report after late spans differs from the report of all spans at once:\n got %+v\nwant %+v", got, want)
			}
			if got, want := late.Stats().SpansHeld, whole.Stats().SpansHeld; got != want {
				t.Errorf("spans held: %d after late spans, %d at once", got, want)
			}
			snapL, snapW := late.Snapshot(clk.Now()), whole.Snapshot(clk.Now())
			ids := map[spans.TraceID]bool{}
			for _, s := range first {
				ids[s.TraceID] = true
			}
			for id := range ids {
				vl, okL := snapL.Trace(id)
				vw, okW := snapW.Trace(id)
				if !okL || !okW {
					t.Fatalf("trace %s: held %v after late spans, %v at once", id, okL, okW)
				}
				if len(vl.Spans) == 0 {
					t.Fatalf("trace %s: view without spans", id)
				}
				if !sameView(t, vl, vw) {
					t.Errorf("trace %s: view after late spans differs from the view of all spans at once", id)
				}
			}
		})
	}
}

// TestHeldTraceCapCountsPackedSpans: the per-trace cap counts the spans held packed, so late
// spans beyond it are dropped and the trace marked truncated, as when they were held unpacked.
func TestHeldTraceCapCountsPackedSpans(t *testing.T) {
	clk := &clock{t: time.Unix(0, t0)}
	a := engine.New(engine.Config{Settle: time.Second, Now: clk.Now, MaxTraceSpans: 8})
	ss := twoLayerTrace(1) // 11 spans
	consume(t, a, ss[:6]...)
	a.Settle(clk.Add(2 * time.Second))
	if st := a.Stats(); st.SpansHeld != 6 || st.PackedBytes == 0 || st.TruncatedTraces != 0 {
		t.Fatalf("after 6 spans: %+v", st)
	}
	consume(t, a, ss[6:]...)
	a.Settle(clk.Add(2 * time.Second))
	st, r := a.Stats(), a.Report()
	if st.SpansHeld != 8 || st.TruncatedTraces != 1 || r.Input.Spans != 8 || !hasNote(r, "truncated (3 spans dropped)") {
		t.Fatalf("after 5 late spans with a cap of 8: stats %+v input %+v notes %q", st, r.Input, r.Notes)
	}
	v, ok := a.Snapshot(clk.Now()).Trace(tid(1))
	if !ok || len(v.Spans) != 8 || !v.Truncated {
		t.Fatalf("view: ok %v, %d spans, truncated %v", ok, len(v.Spans), v.Truncated)
	}
}

// TestCapCountsSpansAfterAnalysis: a trace at the per-trace cap and analyzed is not analyzed
// again for spans it cannot take, but every one of them is counted - in the stats and in the
// report's note - rather than the count of the trace's last analysis.
func TestCapCountsSpansAfterAnalysis(t *testing.T) {
	clk := &clock{t: time.Unix(0, t0)}
	a := engine.New(engine.Config{Settle: time.Second, Now: clk.Now, MaxTraceSpans: 8})
	first := make([]spans.Span, 9)
	for i := range first {
		first[i] = sp(1, i+1, 0, spans.KindInternal, "svc", 0, 1)
	}
	consume(t, a, first...) // one over the cap
	a.Settle(clk.Add(2 * time.Second))
	if r := a.Report(); !hasNote(r, "truncated (1 spans dropped)") {
		t.Fatalf("after 9 spans with a cap of 8: notes %q", r.Notes)
	}
	for b := range 10 {
		late := make([]spans.Span, 1000)
		for i := range late {
			late[i] = sp(1, 100+b*1000+i, 0, spans.KindInternal, "svc", 0, 1)
		}
		consume(t, a, late...)
	}
	a.Settle(clk.Add(2 * time.Second))
	st, r := a.Stats(), a.Report()
	if st.TruncatedSpans != 10001 || st.TruncatedTraces != 1 || r.Input.Spans != 8 ||
		!hasNote(r, "1 traces hit the per-trace cap of 8 spans and were truncated (10001 spans dropped)") {
		t.Fatalf("stats %+v input %+v notes %q; want 10001 spans dropped from 1 trace, 8 analyzed", st, r.Input, r.Notes)
	}
}

// TestEvictionCountsPackedSpans: the span bound counts packed spans as before, and eviction
// gives their bytes back (what is left: one trace analyzed, one pending, packed alike).
func TestEvictionCountsPackedSpans(t *testing.T) {
	clk := &clock{t: time.Unix(0, t0)}
	a := engine.New(engine.Config{MaxSpans: 25, Settle: time.Second, Now: clk.Now, Detectors: suite.Default()})
	consume(t, a, twoLayerTrace(1)...)
	consume(t, a, twoLayerTrace(2)...)
	a.Settle(clk.Add(2 * time.Second))
	st := a.Stats()
	if st.SpansHeld != 22 || st.PackedBytes == 0 {
		t.Fatalf("two traces settled: %+v", st)
	}
	perTrace := st.PackedBytes / 2
	consume(t, a, twoLayerTrace(3)...) // 33 > 25: the oldest goes
	st = a.Stats()
	if st.SpansHeld != 22 || st.EvictedTraces != 1 || st.EvictedSpans != 11 || st.TracesHeld != 2 {
		t.Fatalf("after the bound: %+v", st)
	}
	if st.PackedBytes < 2*perTrace-perTrace/4 || st.PackedBytes > 2*perTrace+perTrace/4 {
		t.Fatalf("packed bytes %d after evicting one of three packed traces (%d each)", st.PackedBytes, perTrace)
	}
	if _, ok := a.Snapshot(clk.Now()).Trace(tid(1)); ok {
		t.Error("the evicted trace is still looked up")
	}
	if v, ok := a.Snapshot(clk.Now()).Trace(tid(2)); !ok || len(v.Spans) != 11 {
		t.Errorf("the packed trace left: ok %v", ok)
	}
	a.Settle(clk.Add(2 * time.Second))
	if r := a.Report(); r.Input.Spans != 33 || r.Input.Traces != 3 {
		t.Errorf("input %+v", r.Input)
	}
}

// TestReleaseSpansHoldsNothingPacked: offline, nothing is kept for lookups, packed or not.
func TestReleaseSpansHoldsNothingPacked(t *testing.T) {
	a := engine.New(engine.Config{ReleaseSpans: true, Detectors: suite.Default()})
	consume(t, a, twoLayerTrace(1)...)
	a.Flush()
	if st := a.Stats(); st.SpansHeld != 0 || st.PackedBytes != 0 {
		t.Fatalf("released: %+v", st)
	}
	if r := a.Report(); r.Input.Spans != 11 {
		t.Fatalf("input %+v", r.Input)
	}
}

// sameView compares two trace views by their exported content, operations in order (the order
// follows the data, not the analyzer's hash seed: see determinism_test.go).
func sameView(t *testing.T, a, b *engine.TraceView) bool {
	t.Helper()
	enc := func(v *engine.TraceView) (string, []string) {
		c := *v
		c.Operations = nil
		j, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var ops []string
		for _, op := range v.Operations {
			o, err := json.Marshal(op)
			if err != nil {
				t.Fatal(err)
			}
			ops = append(ops, string(o))
		}
		return string(j), ops
	}
	ja, oa := enc(a)
	jb, ob := enc(b)
	if ja != jb || !slices.Equal(oa, ob) {
		t.Logf("views differ:\n%s\n%q\n%s\n%q", ja, oa, jb, ob)
		return false
	}
	return true
}

// TestHeldMemoryStaysPacked: once settled, the analyzer holds well under the 730 bytes a span cost
// it unpacked (374 measured with the synthetic workload; see BenchmarkHeldMemory). A change that
// keeps the analyzed spans or the trace's index reachable from the held state (a result allocated
// together with its trace, say) doubles it.
func TestHeldMemoryStaysPacked(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap")
	}
	const n = 50_000
	runtime.GC()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	a := engine.New(engine.Config{Detectors: suite.Default(), Settle: time.Second})
	w := workload.NewWorkload(t0)
	for done := 0; done < n; {
		batch := &spans.Batch{}
		done += w.Fill(batch, 512)
		ownAttrs(batch)
		consume(t, a, batch.Spans...)
	}
	a.Settle(time.Unix(0, t0).Add(time.Hour))
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	st := a.Stats()
	per := float64(int64(ms1.HeapAlloc)-int64(ms0.HeapAlloc)) / float64(st.SpansHeld)
	if st.PendingTraces != 0 || per > 550 {
		t.Fatalf("%.0f heap bytes per held span (%+v), want <= 550", per, st)
	}
	t.Logf("%.0f heap bytes per held span", per)
	runtime.KeepAlive(a)
}

// TestTraceCapWithInterleavedBatches: the per-trace cap counts the same whether a trace's spans
// come one per batch, in one run, or interleaved with another trace's in one batch (the batch is
// regrouped by trace before it is packed): the same spans kept, the same spans dropped, the same
// report.
func TestTraceCapWithInterleavedBatches(t *testing.T) {
	one, two := twoLayerTrace(1), twoLayerTrace(2)
	var interleaved []spans.Span
	for i := range one {
		interleaved = append(interleaved, one[i], two[i])
	}
	var want string
	var wantStats engine.StoreStats
	for _, shape := range []struct {
		name    string
		batches [][]spans.Span
	}{
		{"one span a batch", func() (bs [][]spans.Span) {
			for _, s := range interleaved {
				bs = append(bs, []spans.Span{s})
			}
			return bs
		}()},
		{"interleaved in one batch", [][]spans.Span{interleaved}},
		{"interleaved in two batches", [][]spans.Span{interleaved[:7], interleaved[7:]}},
	} {
		a := engine.New(engine.Config{MaxTraceSpans: 8, Detectors: suite.Default()})
		for _, b := range shape.batches {
			consume(t, a, append([]spans.Span{}, b...)...)
		}
		a.Flush()
		st, r := a.Stats(), a.Report()
		if st.TruncatedTraces != 2 || st.SpansHeld != 16 || r.Input.Spans != 16 || !hasNote(r, "truncated (6 spans dropped)") {
			t.Fatalf("%s: stats %+v, input %+v, notes %q; want both traces cut to 8 spans", shape.name, st, r.Input, r.Notes)
		}
		got := fmt.Sprintf("%+v", r)
		if want == "" {
			want, wantStats = got, st
			continue
		}
		if got != want || st.SpansHeld != wantStats.SpansHeld {
			t.Errorf("%s: report\n%s\nwant (one span a batch)\n%s", shape.name, got, want)
		}
	}
}
