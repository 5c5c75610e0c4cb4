package tui

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/spans"
)

// BenchmarkView times one frame of each screen with 1,000 and 100,000 operations held and a
// 10,000-span trace open. The goal (docs/performance.md, "Dashboard"): under 16 ms per frame at
// 100,000 operations and within 1.5x of the 1,000 figure, because only visible rows are rendered.
func BenchmarkView(b *testing.B) {
	big := bigTrace(10_000)
	for _, nops := range []int{1_000, 100_000} {
		snap := fakeSnapshot(nops - 61) // the storm and the healthy traffic make 61
		inner := snap.TraceLookup
		snap.TraceLookup = func(id spans.TraceID) (*engine.TraceView, bool) {
			if id == big.TraceID {
				return big, true
			}
			return inner(id)
		}
		t := &testing.T{}
		m := drive(t, New(testOptions(fixedSource(snap))), size(120, 40), openTraceMsg{trace: big.TraceID})
		// The cursor mid-trace, so the window is not the trivial first page.
		for i := 0; i < 150; i++ {
			m = step(t, m, press("pgdown"), 0)
		}
		screens := []struct {
			name string
			keys []string
		}{
			{"dependencies", []string{"1"}},
			{"operations", []string{"2"}},
			{"findings", []string{"3"}},
			{"trace", []string{"4"}},
			{"span", []string{"4", "enter"}},
		}
		for _, sc := range screens {
			sm := m
			for _, k := range sc.keys {
				sm = step(t, sm, press(k), 0)
			}
			b.Run(fmt.Sprintf("%s/ops=%d", sc.name, nops), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					_ = sm.View()
				}
			})
		}
	}
}

// BenchmarkSnapshotApply is the once-per-snapshot work: the sort and filter of every list.
func BenchmarkSnapshotApply(b *testing.B) {
	for _, nops := range []int{1_000, 100_000} {
		snaps := [2]*engine.Snapshot{fakeSnapshot(nops - 61), fakeSnapshot(nops - 61)}
		for _, sc := range []string{"1", "2"} {
			m := drive(&testing.T{}, New(testOptions(fixedSource(snaps[0]))), size(120, 40), press(sc))
			b.Run(fmt.Sprintf("screen=%s/ops=%d", screenNames[m.screen], nops), func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					i++
					m.apply(snaps[i%2])
				}
			})
		}
	}
}

// BenchmarkDepsSnapshotRefused is the Dependencies screen's work per new snapshot once calls were
// refused, when its breaker column has something to say: an analyzer holding 100,000 operations
// packed, as a live one does, a tenth of them refused by a breaker.
func BenchmarkDepsSnapshotRefused(b *testing.B) {
	const traces = 100_000
	a := engine.New(engine.Config{Settle: time.Millisecond, MaxSpans: 4 * traces})
	res := &spans.Resource{ServiceName: "web"}
	for i := 0; i < traces; i += 1000 {
		batch := &spans.Batch{}
		for k := i; k < i+1000; k++ {
			tid := spans.TraceID{0xbe, byte(k >> 16), byte(k >> 8), byte(k), 1}
			start := base + int64(k)*int64(time.Millisecond)
			url := fmt.Sprintf("http://dep%d:8080/x", k%5)
			attrs := []spans.Attr{spans.StringAttr(spans.AttrHTTPMethod, "GET"), spans.StringAttr(spans.AttrURLFull, url)}
			if k%10 == 0 {
				attrs = append(attrs, spans.StringAttr(spans.AttrOutcome, analyzer.OutcomeRefused))
			} else {
				attrs = append(attrs, spans.IntAttr(spans.AttrHTTPStatus, 200))
			}
			batch.Spans = append(batch.Spans,
				spans.Span{TraceID: tid, SpanID: spans.SpanID{1}, Kind: spans.KindServer, Name: "GET /", Resource: res,
					StartUnixNano: start, EndUnixNano: start + 10e6},
				spans.Span{TraceID: tid, SpanID: spans.SpanID{2}, ParentID: spans.SpanID{1}, Kind: spans.KindClient, Name: "GET",
					Resource: res, StartUnixNano: start + 1e6, EndUnixNano: start + 5e6, Attrs: attrs})
		}
		if err := a.ConsumeBatch(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
	a.Flush()
	snap := a.Snapshot(time.Unix(0, base))
	if snap.HeldOperations != traces {
		b.Fatalf("%d operations held, want %d", snap.HeldOperations, traces)
	}
	m := drive(&testing.T{}, New(testOptions(fixedSource(snap))), size(120, 40))
	if !m.deps.anyBreaker {
		b.Fatal("no breaker state to show: the benchmark measures nothing")
	}
	b.Run(fmt.Sprintf("ops=%d", traces), func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.deps.SetSnapshot(snap)
		}
	})
}
