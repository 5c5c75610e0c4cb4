package metrics

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormwatch/stormwatch/analyzer"
)

// manyDeps is a report with n dependencies of three outcomes each and n findings.
func manyDeps(n int) analyzer.Report {
	r := analyzer.Report{Version: analyzer.ReportVersion}
	for i := range n {
		dep := fmt.Sprintf("http://dep-%d:8080", i)
		r.Dependencies = append(r.Dependencies, analyzer.DependencyStats{Dependency: dep, Service: fmt.Sprintf("dep-%d", i),
			PhysicalCalls: 300, LogicalOperations: 100, Amplification: 3, Outcomes: map[string]int{"200": 100, "503": 150, "timeout": 50}})
		r.Findings = append(r.Findings, analyzer.Finding{Detector: "retry-amplification", Severity: analyzer.SeverityCritical,
			TraceID: fmt.Sprintf("%032x", i), Service: "edge", Dependency: dep})
	}
	return r
}

// BenchmarkScrape is one /metrics scrape of the analysis series (Gather through a registry):
// cached is a scrape within the cache interval (what a scrape storm costs), rebuilt is one after
// a new snapshot (counting findings and building every series again).
func BenchmarkScrape(b *testing.B) {
	for _, n := range []int{10, 1000} {
		for _, mode := range []string{"cached", "rebuilt"} {
			b.Run(fmt.Sprintf("deps=%d/%s", n, mode), func(b *testing.B) {
				src := &fakeSource{rep: manyDeps(n)}
				maxAge := DefaultMaxAge * 3600
				if mode == "rebuilt" {
					maxAge = -1
				}
				reg := prometheus.NewRegistry()
				reg.MustRegister(NewCollector(NewCache(src, maxAge, nil), nil))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := reg.Gather(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
