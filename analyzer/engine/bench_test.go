package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/passes/postdeadline"
	"github.com/stormwatch/stormwatch/analyzer/passes/retryamplification"
	"github.com/stormwatch/stormwatch/analyzer/passes/unboundedfanout"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/analyzer/workload"
	"github.com/stormwatch/stormwatch/internal/cputime"
	"github.com/stormwatch/stormwatch/spans"
)

// BenchmarkAnalyze measures offline analysis (ingestion, assembly, inference, accounting, the
// default suite, the report) of realistic multi-layer traces, per span, at three sizes: the cost
// per span must stay flat from 10k to 1M (no quadratic step). Generating the spans is inside the
// timed loop (it is a copy of ~11 small structs per trace, cheap next to the analysis) so a
// million spans are never held twice.
//
// detectors=core runs the three detectors of the analyzer core; detectors=all the whole suite
// (what `stormwatch analyze` runs).
//
// urls=unique gives every url.full a query string of its own ("?request_id=N"), as real traffic
// carries request ids: caches keyed by whole URLs never hit there, and every URL is a fresh
// string to copy. Rewriting the URLs is inside the timed loop too (one attribute slice and one
// string per HTTP client span, the same for every build being compared).
func BenchmarkAnalyze(b *testing.B) {
	core := []*analyzer.Detector{retryamplification.Detector, unboundedfanout.Detector, postdeadline.Detector}
	for _, set := range []struct {
		name string
		ds   []*analyzer.Detector
	}{{"core", core}, {"all", suite.Default()}} {
		for _, n := range []int{10_000, 100_000, 1_000_000} {
			benchAnalyze(b, set.name, set.ds, n, false)
		}
	}
	for _, n := range []int{10_000, 100_000} {
		benchAnalyze(b, "all", suite.Default(), n, true)
	}
}

func benchAnalyze(b *testing.B, name string, detectors []*analyzer.Detector, n int, uniqueURLs bool) {
	{
		bname := fmt.Sprintf("detectors=%s/spans=%d", name, n)
		if uniqueURLs {
			bname = fmt.Sprintf("detectors=%s/urls=unique/spans=%d", name, n)
		}
		b.Run(bname, func(b *testing.B) {
			m := startSpanMeter(b)
			for range b.N {
				// As `stormwatch analyze` configures it: offline (windowed detectors at Flush).
				a := engine.New(engine.Config{Detectors: detectors, MaxSpans: -1, WindowInterval: -1})
				w := workload.NewWorkload(t0)
				var edit func(*spans.Batch)
				if uniqueURLs {
					reqID := 0
					edit = func(batch *spans.Batch) { uniqueURLsIn(batch, &reqID) }
				}
				if err := w.Feed(a, n, edit); err != nil {
					b.Fatal(err)
				}
				a.Flush()
				if r := a.Report(); r.Input.Spans < n {
					b.Fatalf("analyzed %d spans, want %d", r.Input.Spans, n)
				}
			}
			m.stop(b)
			m.report(b, n)
		})
	}
}

// uniqueURLsIn gives each span's url.full a query string of its own. The workload shares
// attribute slices between traces, so a span with a URL gets a copy of its slice first.
func uniqueURLsIn(b *spans.Batch, next *int) {
	for i := range b.Spans {
		s := &b.Spans[i]
		for k, a := range s.Attrs {
			if a.Key != spans.AttrURLFull {
				continue
			}
			*next++
			as := append([]spans.Attr(nil), s.Attrs...)
			as[k].Str = a.Str + "?request_id=" + strconv.Itoa(*next)
			s.Attrs = as
			break
		}
	}
}

// BenchmarkSnapshot is the TUI's cost: a snapshot taken after every change (the worst case; an
// unchanged analyzer shares the previous one) with about 100k operations held, and the reading
// back of every operation that the operations screen does once per snapshot that changed them.
func BenchmarkSnapshot(b *testing.B) {
	a := engine.New(engine.Config{Detectors: suite.Default(), MaxSpans: -1})
	w := workload.NewWorkload(t0)
	for done := 0; done < 300_000; {
		batch := &spans.Batch{}
		done += w.Fill(batch, 512)
		a.ConsumeBatch(context.Background(), batch)
	}
	a.Flush()
	now := time.Unix(0, t0)
	if s := a.Snapshot(now); len(s.Operations()) < 100_000 {
		b.Fatalf("only %d operations held", len(s.Operations()))
	}
	b.Run("changed", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			batch := &spans.Batch{}
			w.Fill(batch, 1)
			a.ConsumeBatch(context.Background(), batch) // a change: the next snapshot is rebuilt
			now = now.Add(time.Millisecond)
			_ = a.Snapshot(now)
		}
	})
	b.Run("unchanged", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			now = now.Add(time.Millisecond)
			_ = a.Snapshot(now)
		}
	})
	b.Run("operations", func(b *testing.B) {
		s := a.Snapshot(now)
		b.ReportAllocs()
		for range b.N {
			_ = s.Operations()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(s.HeldOperations), "ns/operation")
	})
}

// BenchmarkWindowRun is one run of the windowed detectors over a window of 300k spans' operations
// (the default suite, the built-in policy, a window that keeps every operation): what a live
// analyzer pays every WindowInterval when its window holds that much traffic. held=packed is a
// live analyzer, whose window keeps packed frames and reads them back for each run; held=values
// is an offline one (WindowInterval -1), whose window shares the held values. Per span in the
// window: CPU time, and the memory a run allocates. BenchmarkWindowTick shows the run does not
// depend on the store.
func BenchmarkWindowRun(b *testing.B) {
	for _, c := range []struct {
		name   string
		window time.Duration
	}{{"held=packed", time.Hour}, {"held=values", -1}} {
		b.Run(c.name, func(b *testing.B) {
			cfg := engine.Config{Detectors: suite.Default(), MaxSpans: -1, WindowInterval: c.window}
			policy.Configure(&cfg.Detectors, &cfg.Settings, nil, policy.Live)
			a := engine.New(cfg)
			w := workload.NewWorkload(t0)
			n := 0
			for n < 300_000 {
				batch := &spans.Batch{}
				n += w.Fill(batch, 512)
				if err := a.ConsumeBatch(context.Background(), batch); err != nil {
					b.Fatal(err)
				}
			}
			a.Flush() // analyzes everything; each Flush after it is a windowed run alone
			b.ReportAllocs()
			cpu0 := cputime.Process()
			b.ResetTimer()
			for range b.N {
				a.Flush()
			}
			b.StopTimer()
			b.ReportMetric(float64((cputime.Process()-cpu0).Nanoseconds())/float64(b.N*n), "cpu-ns/held-span")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/held-span")
		})
	}
}

// spanMeter measures a benchmark per span: wall and CPU time, bytes and allocations.
type spanMeter struct {
	ms0, ms1   runtime.MemStats
	cpu0, cpu1 time.Duration
}

// startSpanMeter collects garbage, takes the starting figures and resets the timer.
func startSpanMeter(b *testing.B) *spanMeter {
	m := &spanMeter{}
	runtime.GC()
	runtime.ReadMemStats(&m.ms0)
	m.cpu0 = cputime.Process()
	b.ResetTimer()
	return m
}

// stop stops the timer and takes the closing figures (before any check the benchmark makes).
func (m *spanMeter) stop(b *testing.B) {
	b.StopTimer()
	m.cpu1 = cputime.Process()
	runtime.ReadMemStats(&m.ms1)
}

// report reports the figures per span, spansPerOp spans an op.
func (m *spanMeter) report(b *testing.B, spansPerOp int) {
	m.reportSpans(b, float64(b.N)*float64(spansPerOp))
}

// reportSpans reports the figures per span, total spans in all.
func (m *spanMeter) reportSpans(b *testing.B, total float64) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/total, "ns/span")
	b.ReportMetric(float64(m.ms1.TotalAlloc-m.ms0.TotalAlloc)/total, "B/span")
	b.ReportMetric(float64(m.ms1.Mallocs-m.ms0.Mallocs)/total, "allocs/span")
	// CPU time of the process (all threads, the collector's included) per span: on a shared
	// machine wall time says more about the neighbours than about the code.
	b.ReportMetric(float64((m.cpu1-m.cpu0).Nanoseconds())/total, "cpu-ns/span")
}
