package metrics

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormwatch/stormwatch/analyzer"
)

// The costs reach /metrics: a histogram of added latency per entry point (its buckets from the
// report's, its sum the total), and counters of added latency, extra calls and late work per
// dependency with the dependency's service as the other series have it.
func TestCostSeries(t *testing.T) {
	rep := storm()
	rep.Costs = []analyzer.CostEntry{
		{Kind: analyzer.CostEntryPoint, Service: "edge", Name: "GET /items/{id}", Requests: 3,
			AddedLatencyMs:      analyzer.LatencySummary{P50: 402, P99: 402, Total: 804},
			AddedLatencyBuckets: []uint64{1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3}},
		{Kind: analyzer.CostDependency, Dependency: "http://dep:8080", Requests: 3,
			AddedLatencyMs: analyzer.LatencySummary{Total: 48}, ExtraCalls: 52, LateWorkSeconds: 0.25},
	}
	c := NewCollector(NewCache(&fakeSource{rep: rep}, -1, nil), []*analyzer.Detector{window, perTr})
	got := gather(t, c)
	dep := `{stormwatch_dependency="http://dep:8080",stormwatch_dependency_service="dep"}`
	for k, v := range map[string]float64{
		NameDepAddedLatency + dep: 0.048,
		NameDepExtraCalls + dep:   52,
		NameDepLateWork + dep:     0.25,
	} {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() != NameEntryAddedLatency {
			continue
		}
		found = true
		h := mf.GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != 3 || h.GetSampleSum() != 0.804 {
			t.Errorf("histogram count %d sum %v, want 3 and 0.804", h.GetSampleCount(), h.GetSampleSum())
		}
		var at250, at500 uint64
		for _, b := range h.GetBucket() {
			switch fmt.Sprint(b.GetUpperBound()) {
			case "0.25":
				at250 = b.GetCumulativeCount()
			case "0.5":
				at500 = b.GetCumulativeCount()
			}
		}
		if at250 != 1 || at500 != 3 {
			t.Errorf("buckets le=0.25: %d, le=0.5: %d; want 1 and 3", at250, at500)
		}
		labels := mf.GetMetric()[0].GetLabel()
		if len(labels) != 2 || labels[0].GetValue() != "GET /items/{id}" || labels[1].GetValue() != "edge" {
			t.Errorf("labels = %v", labels)
		}
	}
	if !found {
		t.Errorf("no %s series", NameEntryAddedLatency)
	}
}
