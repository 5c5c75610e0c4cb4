package suite_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/analyzer/workload"
	"github.com/stormwatch/stormwatch/internal/cputime"
)

// BenchmarkDetectors measures each detector's cost per span: the whole offline analysis of 100k
// spans of realistic multi-layer traces with that one detector on, beside detector=none (no
// detector: assembly, inference, accounting). A detector's own cost is its line minus none's.
// Per-trace detectors run as each trace is analyzed; windowed ones (scope=window) once over all
// operations at the end, as `stormwatch analyze` runs them.
func BenchmarkDetectors(b *testing.B) {
	const n = 100_000
	bench := func(name string, ds []*analyzer.Detector) {
		b.Run(name, func(b *testing.B) {
			var ms0, ms1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms0)
			cpu0 := int64(cputime.Process())
			b.ResetTimer()
			for range b.N {
				a := engine.New(engine.Config{Detectors: ds, MaxSpans: -1})
				w := workload.NewWorkload(1_767_225_600_000_000_000)
				if err := w.Feed(a, n, nil); err != nil {
					b.Fatal(err)
				}
				a.Flush()
				_ = a.Report()
			}
			b.StopTimer()
			cpu := int64(cputime.Process()) - cpu0
			runtime.ReadMemStats(&ms1)
			total := float64(b.N) * n
			// CPU time (user+system of the process) tells the cost apart from a busy machine's
			// wall clock.
			b.ReportMetric(float64(cpu)/total, "cpu-ns/span")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/total, "ns/span")
			b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/total, "B/span")
			b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/total, "allocs/span")
		})
	}
	bench("detector=none", nil)
	for _, d := range suite.Default() {
		scope := "trace"
		if d.Scope == analyzer.ScopeWindow {
			scope = "window"
		}
		bench(fmt.Sprintf("scope=%s/detector=%s", scope, d.Name), []*analyzer.Detector{d})
	}
	bench("detector=all", suite.Default())
}
