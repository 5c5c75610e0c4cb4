package engine_test

import (
	"maps"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/spans"
)

func analyzeFixture(t *testing.T, name string) analyzer.Report {
	t.Helper()
	return detectortest.Analyze(t, name, "", "")
}

func wantCallers(t *testing.T, d analyzer.DependencyStats, want ...analyzer.CallerStats) {
	t.Helper()
	if len(d.ByCaller) != len(want) {
		t.Fatalf("%s by caller = %+v, want %+v", d.Dependency, d.ByCaller, want)
	}
	for i, w := range want {
		g := d.ByCaller[i]
		if g.Caller != w.Caller || g.PhysicalCalls != w.PhysicalCalls || g.LogicalOperations != w.LogicalOperations ||
			g.Amplification != w.Amplification || !maps.Equal(g.Outcomes, w.Outcomes) {
			t.Errorf("%s caller %d = %+v, want %+v", d.Dependency, i, g, w)
		}
	}
	// The split adds up to the dependency's own figures.
	var p, l int
	for _, c := range d.ByCaller {
		p += c.PhysicalCalls
		l += c.LogicalOperations
	}
	if p != d.PhysicalCalls || l != d.LogicalOperations {
		t.Errorf("%s: callers sum to %d calls / %d operations, the dependency says %d / %d", d.Dependency, p, l, d.PhysicalCalls, d.LogicalOperations)
	}
}

// Three layers of three (docs/principles.md#one-budget-one-owner): two requests, each reaching dep
// 27 times through adapter's retry loop.
func TestByCallerOn27CallFixture(t *testing.T) {
	for _, name := range []string{"amplification-27-stock", "amplification-27-reference"} {
		t.Run(name, func(t *testing.T) {
			r := analyzeFixture(t, name)
			wantCallers(t, depStats(t, r, "dep"),
				analyzer.CallerStats{Caller: "adapter", PhysicalCalls: 54, LogicalOperations: 2, Amplification: 27, Outcomes: map[string]int{"503": 54}})
			wantCallers(t, depStats(t, r, "adapter"),
				analyzer.CallerStats{Caller: "api", PhysicalCalls: 18, LogicalOperations: 2, Amplification: 9, Outcomes: map[string]int{"503": 18}})
		})
	}
}

// Two services call one dependency: web retries three times against 503s, worker calls once and
// succeeds. The dependency's 4 calls for 2 operations (2x) are 3x from web and 1x from worker.
func TestByCallerSplitsTwoCallersOfOneDependency(t *testing.T) {
	ss := []spans.Span{
		sp(1, 1, 0, spans.KindServer, "web", 0, 1000),
		sp(1, 2, 1, spans.KindClient, "web", 10, 100, get("http://dep:80/a", 503)...),
		sp(1, 3, 1, spans.KindClient, "web", 200, 300, get("http://dep:80/a", 503)...),
		sp(1, 4, 1, spans.KindClient, "web", 400, 500, get("http://dep:80/a", 200)...),
		sp(2, 1, 0, spans.KindServer, "worker", 0, 1000),
		sp(2, 2, 1, spans.KindClient, "worker", 10, 100, get("http://dep:80/b", 200)...),
	}
	for i := range ss {
		if ss[i].Kind == spans.KindClient {
			ss = append(ss, sp(ss[i].TraceID[1], 100+i, 0, spans.KindServer, "dep", 0, 0))
			last := &ss[len(ss)-1]
			last.ParentID = ss[i].SpanID
			last.StartUnixNano, last.EndUnixNano = ss[i].StartUnixNano+msec, ss[i].EndUnixNano-msec
		}
	}
	_, r := run(t, engine.Config{}, ss...)
	d := depStats(t, r, "dep")
	if d.PhysicalCalls != 4 || d.LogicalOperations != 2 || d.Amplification != 2 {
		t.Fatalf("dependency figures %+v", d)
	}
	wantCallers(t, d,
		analyzer.CallerStats{Caller: "web", PhysicalCalls: 3, LogicalOperations: 1, Amplification: 3, Outcomes: map[string]int{"503": 2, "200": 1}},
		analyzer.CallerStats{Caller: "worker", PhysicalCalls: 1, LogicalOperations: 1, Amplification: 1, Outcomes: map[string]int{"200": 1}})
	if len(d.Callers) != 2 || d.Callers[0] != "web" || d.Callers[1] != "worker" {
		t.Errorf("callers = %v", d.Callers)
	}
}

// Re-analysis after a late span swaps the per-caller contribution, never adds it twice.
func TestByCallerSurvivesReanalysis(t *testing.T) {
	ss := twoLayerTrace(1)
	a := engine.New(engine.Config{Settle: 1, Now: nil})
	consume(t, a, ss[:len(ss)-1]...)
	a.Flush()
	consume(t, a, ss[len(ss)-1])
	a.Flush()
	d := depStats(t, a.Report(), "dep")
	wantCallers(t, d, analyzer.CallerStats{Caller: "api", PhysicalCalls: 6, LogicalOperations: 1, Amplification: 6, Outcomes: map[string]int{"503": 6}})
}
