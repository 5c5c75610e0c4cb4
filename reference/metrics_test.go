package reference

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func TestMetrics(t *testing.T) {
	h := newHarness(t, statuses(503))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tr := h.transport(Config{Budget: BudgetConfig{Reserve: 1}, Breaker: BreakerConfig{Threshold: 2}}, WithMeterProvider(mp))
	for i := 0; i < 3; i++ {
		get(t, tr, context.Background())
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	sums := map[string]int64{}
	gauges := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					sums[m.Name] += p.Value
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					gauges[m.Name] = p.Value
				}
			}
		}
	}
	// Call 1: 2 attempts (the reserve's retry), then refused by the budget. Call 2: 1 attempt,
	// refused again; the breaker opens (2 failed calls). Call 3: refused by the breaker.
	want := map[string]int64{
		"resilience.client.operations":          3,
		"resilience.client.attempts":            3,
		"resilience.client.retries":             1,
		"resilience.client.budget.refusals":     2,
		"resilience.client.breaker.refusals":    1,
		"resilience.client.breaker.transitions": 1,
	}
	for k, v := range want {
		if sums[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, sums[k], v, sums)
		}
	}
	if gauges["resilience.client.breaker.state"] != int64(StateOpen) {
		t.Errorf("breaker state gauge %v", gauges)
	}
}
