package suite_test

import (
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/internal/build"
	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/analyzer/workload"
	"github.com/stormwatch/stormwatch/fixtures"
	"github.com/stormwatch/stormwatch/internal/cputime"
)

// captured is what the detectors of one corpus are given: every trace's pass (ScopeTrace) and
// the one pass over all operations that Flush makes (ScopeWindow).
type captured struct {
	traces []analyzer.Pass
	window analyzer.Pass
}

// capture analyzes a corpus with two detectors that only keep their passes. The engine reuses a
// pass's trace (its spans read back, its index, its calls) for the next trace, so each trace pass
// keeps a copy of them; the analyzer runs offline, which holds every trace's operations as values
// of their own and never reuses them. The passes can then be replayed to the real detectors as
// often as a benchmark likes.
func capture(b *testing.B, feed func(*engine.Engine)) *captured {
	c := &captured{}
	keepTrace := &analyzer.Detector{Name: "keep-trace", Title: "t", Doc: "keeps every trace pass", Run: func(p *analyzer.Pass) error {
		kept := *p
		kept.Trace = cloneTrace(p.Trace)
		c.traces = append(c.traces, kept)
		return nil
	}}
	keepWindow := &analyzer.Detector{Name: "keep-window", Title: "t", Doc: "keeps the window pass", Scope: analyzer.ScopeWindow, Run: func(p *analyzer.Pass) error {
		c.window = *p
		return nil
	}}
	a := engine.New(engine.Config{Detectors: []*analyzer.Detector{keepTrace, keepWindow}, MaxSpans: -1, WindowInterval: -1})
	feed(a)
	if len(c.traces) == 0 || len(c.window.Operations) == 0 {
		b.Fatalf("captured %d traces and %d operations: nothing to measure", len(c.traces), len(c.window.Operations))
	}
	return c
}

// cloneTrace is a copy of t that owns its spans' arrays and its index.
func cloneTrace(t *analyzer.Trace) *analyzer.Trace {
	c := *t
	c.Spans = slices.Clone(t.Spans)
	for i := range c.Spans {
		c.Spans[i].Attrs = slices.Clone(c.Spans[i].Attrs)
	}
	ix := build.TraceIndexOf.(func(*analyzer.Trace) *build.TraceIndex[*analyzer.Operation])(&c)
	for _, s := range []*[]int32{&ix.IDs, &ix.Parent, &ix.ChildOff, &ix.Child, &ix.Roots, &ix.Order, &ix.Pos, &ix.Size, &ix.Call, &ix.Enclosing} {
		*s = slices.Clone(*s)
	}
	ix.Calls = slices.Clone(ix.Calls)
	ix.Ops = slices.Clone(ix.Ops)
	return &c
}

// BenchmarkDetectorRun measures each detector alone, per analyzed trace: its Run replayed over
// passes captured once (no assembly, inference or accounting in the timed loop, so a detector's
// cost is not the small difference of two large, noisy figures as in BenchmarkDetectors).
//
// corpus=workload is 4,000 spans of the synthetic multi-layer traffic (analyzer/workload:
// healthy calls, transient retries and retry storms); corpus=amplification-27-reference is the
// request of the otelcol connector's benchmark; corpus=fixtures is every fixture file, the
// shapes each detector exists for (hedges, fallbacks, keys, deadlines, breakers). Per-trace
// detectors report per trace; windowed ones run once over all the corpus's operations and report
// per operation (ns/operation, allocs/operation).
func BenchmarkDetectorRun(b *testing.B) {
	corpora := []struct {
		name string
		feed func(b *testing.B, a *engine.Engine)
	}{
		{"workload", func(b *testing.B, a *engine.Engine) {
			// Small enough to stay in the cache, as a trace does in the analyzer, where its
			// detectors run one after another right after its inference.
			const n = 4_000
			w := workload.NewWorkload(1_767_225_600_000_000_000)
			if err := w.Feed(a, n, nil); err != nil {
				b.Fatal(err)
			}
			a.Flush()
		}},
		// The request the otelcol connector benchmark sends (docs/performance.md, Connector): two
		// traces of 92 spans from the reference client, every resilience.* attribute set.
		{"amplification-27-reference", func(b *testing.B, a *engine.Engine) {
			detectortest.Feed(b, a, "amplification-27-reference")
		}},
		{"fixtures", func(b *testing.B, a *engine.Engine) {
			detectortest.Feed(b, a, fixtures.Names()...)
		}},
	}
	for _, corpus := range corpora {
		var c *captured
		for _, d := range suite.Default() {
			b.Run(fmt.Sprintf("corpus=%s/detector=%s", corpus.name, d.Name), func(b *testing.B) {
				if c == nil {
					c = capture(b, func(a *engine.Engine) { corpus.feed(b, a) })
				}
				passes := c.traces
				unit := "trace"
				if d.Scope == analyzer.ScopeWindow {
					passes, unit = []analyzer.Pass{c.window}, "operation"
				}
				findings := 0
				report := func(analyzer.Finding) { findings++ }
				per := float64(len(passes))
				if d.Scope == analyzer.ScopeWindow {
					per = float64(len(c.window.Operations))
				}
				var ms0, ms1 runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&ms0)
				// One Pass reused for every run: a Pass per run would escape (Run is called through a
				// func value) and be counted against the detector.
				p := new(analyzer.Pass)
				cpu0 := int64(cputime.Process())
				b.ResetTimer()
				for range b.N {
					for i := range passes {
						*p = passes[i]
						p.Detector, p.Report = d, report
						if err := d.Run(p); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.StopTimer()
				cpu := int64(cputime.Process()) - cpu0
				runtime.ReadMemStats(&ms1)
				total := float64(b.N) * per
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/total, "ns/"+unit)
				// The process's CPU time: on a machine shared with other builds the wall clock
				// includes the time this process waited for a core.
				b.ReportMetric(float64(cpu)/total, "cpu-ns/"+unit)
				b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/total, "B/"+unit)
				b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/total, "allocs/"+unit)
				b.ReportMetric(float64(findings)/float64(b.N), "findings")
			})
		}
	}
}
