package engine_test

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/analyzer/workload"
	"github.com/stormwatch/stormwatch/spans"
)

// BenchmarkHeldMemory is what a live analyzer (collect, live, the connector) holds per span once
// its traces are analyzed and wait, held for the trace view and for late spans, until --max-spans
// pushes them out: the heap in use after a GC, less the heap before the analyzer was made, over
// the spans held. scan-B/span is the part of that heap the garbage collector must scan for
// pointers (runtime/metrics /gc/scan/heap:bytes), the marking it repeats every cycle; gc-ns/span
// times one forced collection with all of it held (noisy on a shared machine; scan-B is not).
//
// The spans arrive as the decoders deliver them: each batch's attributes in one array of the
// batch's own (the workload shares attribute slices between traces, which no decoder does).
// state=pending measures the same spans before their traces settle: what the live analyzer holds
// for the settle period of everything it receives.
func BenchmarkHeldMemory(b *testing.B) {
	for _, settled := range []bool{true, false} {
		state := "/state=analyzed"
		if !settled {
			state = "/state=pending"
		}
		b.Run("workload=synthetic"+state, func(b *testing.B) {
			w := workload.NewWorkload(t0)
			benchHeld(b, settled, func(batch *spans.Batch, n int) int {
				added := w.Fill(batch, n)
				ownAttrs(batch)
				return added
			})
		})
		b.Run("workload=payload"+state, func(b *testing.B) {
			benchHeld(b, settled, payloadFill())
		})
		b.Run("workload=amplification"+state, func(b *testing.B) {
			benchHeld(b, settled, amplificationFill(b))
		})
	}
}

// amplificationFill fills batches with copies of the amplification-27-reference fixture (the
// connector benchmark's request: three retrying layers, 92 spans a trace, a third as many
// operations as calls), each copy with trace ids of its own.
func amplificationFill(b *testing.B) func(batch *spans.Batch, n int) int {
	src := detectortest.Spans(b, "amplification-27-reference")
	var seq uint64
	ids := map[spans.TraceID]spans.TraceID{}
	return func(batch *spans.Batch, n int) int {
		added := 0
		for added < n {
			clear(ids)
			batch.Spans = appendRenumbered(batch.Spans, src, ids, &seq)
			added += len(src)
		}
		ownAttrs(batch)
		return added
	}
}

// payloadFill fills batches with the end-to-end payload's traces, one after another.
func payloadFill() func(batch *spans.Batch, n int) int {
	next := 0
	return func(batch *spans.Batch, n int) int {
		added := 0
		for added < n {
			tr := workload.PayloadTrace(next, t0)
			batch.Spans = append(batch.Spans, tr...)
			added += len(tr)
			next++
		}
		ownAttrs(batch)
		return added
	}
}

// BenchmarkHeldMemoryAtBound is what a live analyzer holds per span with its store full at
// --max-spans 100,000 and 1,000,000: that many spans of the end-to-end payload filed and analyzed
// into an analyzer bounded there, the whole heap it holds (the fixed costs - findings, the
// windowed detectors' window, caches - included) per span held. The engine alone: a collect
// process holds its queue, its snapshot cache and the runtime besides (tools/soak.sh measures the
// process).
func BenchmarkHeldMemoryAtBound(b *testing.B) {
	for _, bound := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("max-spans=%d", bound), func(b *testing.B) {
			benchHeldN(b, true, payloadFill(), bound, bound)
		})
	}
}

func benchHeld(b *testing.B, settled bool, fill func(b *spans.Batch, n int) int) {
	benchHeldN(b, settled, fill, 100_000, 1_000_000)
}

// benchHeldN files n spans into an analyzer bounded at maxSpans and reports what it holds per span.
func benchHeldN(b *testing.B, settled bool, fill func(b *spans.Batch, n int) int, n, maxSpans int) {
	var heldB, objs, scanB, gcNs, packedB float64
	scan := []metrics.Sample{{Name: "/gc/scan/heap:bytes"}}
	for range b.N {
		b.StopTimer()
		runtime.GC()
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		metrics.Read(scan)
		scan0 := scan[0].Value.Uint64()
		b.StartTimer()
		a := engine.New(engine.Config{Detectors: suite.Default(), MaxSpans: maxSpans, Settle: time.Second})
		for done := 0; done < n; {
			batch := &spans.Batch{Spans: make([]spans.Span, 0, 600)}
			done += fill(batch, min(512, n-done))
			if err := a.ConsumeBatch(context.Background(), batch); err != nil {
				b.Fatal(err)
			}
		}
		if settled {
			a.Settle(time.Unix(0, t0).Add(time.Hour))
		}
		b.StopTimer()
		st := a.Stats()
		if settled && st.PendingTraces != 0 || !settled && st.PendingTraces == 0 || st.SpansHeld < n*9/10 {
			b.Fatalf("settled %v: %+v", settled, st)
		}
		runtime.GC()
		start := time.Now()
		runtime.GC()
		gc := time.Since(start)
		runtime.ReadMemStats(&ms1)
		metrics.Read(scan)
		scanB = float64(int64(scan[0].Value.Uint64())-int64(scan0)) / float64(st.SpansHeld)
		heldB = float64(int64(ms1.HeapAlloc)-int64(ms0.HeapAlloc)) / float64(st.SpansHeld)
		objs = float64(int64(ms1.HeapObjects)-int64(ms0.HeapObjects)) / float64(st.SpansHeld)
		gcNs = float64(gc.Nanoseconds()) / float64(st.SpansHeld)
		// By name, so that the benchmark also builds at commits before StoreStats had it.
		if f := reflect.ValueOf(st).FieldByName("PackedBytes"); f.IsValid() {
			packedB = float64(f.Int()) / float64(st.SpansHeld)
		}
		runtime.KeepAlive(a)
		b.StartTimer()
	}
	b.ReportMetric(heldB, "held-B/span")
	b.ReportMetric(objs, "heap-objects/span")
	b.ReportMetric(scanB, "scan-B/span")
	b.ReportMetric(gcNs, "gc-ns/span")
	b.ReportMetric(packedB, "packed-B/span")
}

// ownAttrs gives the batch's spans attribute slices of their own, carved from one array per
// batch, as the decoders do.
func ownAttrs(b *spans.Batch) {
	total := 0
	for i := range b.Spans {
		total += len(b.Spans[i].Attrs)
	}
	slab := make([]spans.Attr, 0, total)
	for i := range b.Spans {
		s := &b.Spans[i]
		at := len(slab)
		slab = append(slab, s.Attrs...)
		s.Attrs = slab[at:len(slab):len(slab)]
	}
}

// BenchmarkLongPendingMemory is what an analyzer holds while a few traces stay pending for
// minutes among short ones: 50 traces that get a span every second from their start, one a
// second (a consumer, a long job: never quiet for --settle), beside 100 of the end-to-end payload's traces a second, each in two
// deliveries a second apart, for 150 seconds of traffic settled every second. heap-MiB is the heap
// in use after a GC at the end, less the heap before the analyzer was made: whatever a long trace
// keeps alive past the short traces filed beside it shows there. config=analyze is `stormwatch
// analyze`'s configuration (spans released once analyzed, the trace forgotten a --settle of 30 s
// later); config=live-bound a live analyzer at --max-spans 35,000, its store full.
func BenchmarkLongPendingMemory(b *testing.B) {
	for _, c := range []struct {
		name string
		cfg  engine.Config
	}{
		{"analyze", engine.Config{Settle: 30 * time.Second, ReleaseSpans: true, ForgetAfter: 30 * time.Second,
			WindowInterval: -1, MaxFindings: -1}},
		{"live-bound", engine.Config{MaxSpans: 35_000}},
	} {
		b.Run("config="+c.name, func(b *testing.B) {
			const steps, perStep = 150, 100
			const long = perStep / 2
			var heapB float64
			var st engine.StoreStats
			for range b.N {
				b.StopTimer()
				runtime.GC()
				var ms0, ms1 runtime.MemStats
				runtime.ReadMemStats(&ms0)
				b.StartTimer()
				cfg := c.cfg
				cfg.Detectors = suite.Default()
				a := engine.New(cfg)
				tmpl := workload.PayloadTrace(0, t0)[1]
				var rest []spans.Span // the second halves of the last step's short traces
				for step := range steps {
					batch := &spans.Batch{Spans: append(make([]spans.Span, 0, perStep*10+long), rest...)}
					rest = rest[:0]
					for i := range perStep {
						tr := workload.PayloadTrace(step*perStep+i, t0)
						batch.Spans = append(batch.Spans, tr[:len(tr)/2]...)
						rest = append(rest, tr[len(tr)/2:]...)
						if i%2 != 0 {
							continue
						}
						// A long trace's span between every two short traces: the exporters
						// interleave them.
						// Long trace k starts at second k.
						k := i / 2
						if step < k {
							continue
						}
						s := tmpl
						s.TraceID = spans.TraceID{byte(k), 15: 9}
						s.SpanID = spans.SpanID{0x77, byte(k), byte(step), byte(step >> 8), 1}
						s.ParentID = spans.SpanID{0x77, byte(k), 0, 0, 1}
						if step == k {
							s.ParentID = spans.SpanID{}
						}
						s.StartUnixNano = t0 + int64(step)*int64(time.Second)
						s.EndUnixNano = s.StartUnixNano + int64(time.Millisecond)
						batch.Spans = append(batch.Spans, s)
					}
					ownAttrs(batch)
					if err := a.ConsumeBatch(context.Background(), batch); err != nil {
						b.Fatal(err)
					}
					a.Settle(time.Unix(0, t0).Add(time.Duration(step) * time.Second))
				}
				b.StopTimer()
				st = a.Stats()
				runtime.GC()
				runtime.ReadMemStats(&ms1)
				heapB = float64(int64(ms1.HeapAlloc) - int64(ms0.HeapAlloc))
				runtime.KeepAlive(a)
				b.StartTimer()
			}
			if st.PendingTraces < long {
				b.Fatalf("the long traces settled: %+v", st)
			}
			b.ReportMetric(heapB/(1<<20), "heap-MiB")
			b.ReportMetric(float64(st.SpansHeld), "spans-held")
		})
	}
}
