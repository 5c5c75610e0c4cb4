package diff

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
)

// The costs are paired by entry point and dependency, before -> after; one seen on a side only
// has nothing on the other; the most added latency on either side comes first.
func TestCostsBeforeAfter(t *testing.T) {
	entry := func(total float64) analyzer.CostEntry {
		return analyzer.CostEntry{Kind: analyzer.CostEntryPoint, Service: "edge", Name: "GET /a", Requests: 2,
			AddedLatencyMs: analyzer.LatencySummary{P50: total / 2, P99: total / 2, Total: total}}
	}
	dep := func(name string, total, extra float64) analyzer.CostEntry {
		return analyzer.CostEntry{Kind: analyzer.CostDependency, Dependency: name, Requests: 2, ExtraCallsPerSecond: extra,
			AddedLatencyMs: analyzer.LatencySummary{Total: total}}
	}
	before := &analyzer.Report{Costs: []analyzer.CostEntry{entry(804), dep("http://api:8080", 580, 2.8), dep("http://old:80", 10, 1)}}
	after := &analyzer.Report{Costs: []analyzer.CostEntry{entry(70), dep("http://api:8080", 0, 0), dep("http://new:80", 70, 1)}}
	r := Compare(Input{Before: before, After: after}, Options{})
	if len(r.Costs) != 4 {
		t.Fatalf("costs = %+v, want 4 rows", r.Costs)
	}
	e := r.Costs[0]
	if e.Kind != analyzer.CostEntryPoint || e.Before.AddedLatencyMs.Total != 804 || e.After.AddedLatencyMs.Total != 70 {
		t.Errorf("entry point = %+v, want 804 -> 70", e)
	}
	if d := r.Costs[1]; d.Dependency != "http://api:8080" || d.Before.ExtraCallsPerSecond != 2.8 || d.After.ExtraCallsPerSecond != 0 {
		t.Errorf("first dependency = %+v, want api 2.8 -> 0 extra calls/s", d)
	}
	if d := r.Costs[2]; d.Dependency != "http://new:80" || d.Before != nil || d.After == nil {
		t.Errorf("second dependency = %+v, want new, after only", d)
	}
	if d := r.Costs[3]; d.Dependency != "http://old:80" || d.Before == nil || d.After != nil {
		t.Errorf("third dependency = %+v, want old, before only", d)
	}
	if r.Worse {
		t.Errorf("costs alone do not make a regression: %v", r.Regressions)
	}
}
