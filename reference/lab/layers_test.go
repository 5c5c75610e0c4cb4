package lab

import (
	"context"
	"strings"
	"testing"
)

func runLayers(t *testing.T, c LayersConfig) Row {
	t.Helper()
	res, err := Run(context.Background(), "layers", Options{Layers: &c})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 || len(res.Lines) != 1 {
		t.Fatalf("%+v: want one variant, got %d rows", c, len(res.Rows))
	}
	return res.Rows[0]
}

// Any per-layer attempts: the dependency sees their product per request (the 64 of
// docs/principles.md#intents-and-attempts with 4,4,4), for every request.
func TestLayersAnyAttempts(t *testing.T) {
	for _, c := range []struct {
		attempts []int
		requests int
		want     int
	}{
		{[]int{4, 4, 4}, 1, 64},
		{[]int{3, 3, 3}, 1, 27},
		{[]int{3, 1, 1}, 2, 6},
		{[]int{2, 2, 2, 2, 2}, 1, 32},
		{[]int{5}, 3, 15},
	} {
		r := runLayers(t, LayersConfig{Attempts: c.attempts, Requests: c.requests})
		if r.OriginSaw != c.want || r.Calls != c.requests || r.Amplification != float64(c.want)/float64(c.requests) {
			t.Errorf("%v x %d requests: dependency saw %d for %d (%.2fx), want %d", c.attempts, c.requests, r.OriginSaw, r.Calls, r.Amplification, c.want)
		}
	}
}

// A budget in every layer and a breaker in every layer cut the storm, and the row says by how
// many refusals. The figures are exact on the fake clock.
func TestLayersBudgetAndBreaker(t *testing.T) {
	b := runLayers(t, LayersConfig{Attempts: []int{3, 3, 3}, Requests: 40, Budget: 0.1})
	if b.OriginSaw != 84 || b.Refusals.Budget != 146 || b.Variant != "attempts 3 x 3 x 3, 40 requests, budget 0.1" {
		t.Errorf("budget: %+v", b)
	}
	k := runLayers(t, LayersConfig{Attempts: []int{3, 3, 3}, Requests: 40, Breaker: 5})
	if k.OriginSaw != 15 || k.Refusals.Breaker != 55 || k.Variant != "attempts 3 x 3 x 3, 40 requests, breaker 5" {
		t.Errorf("breaker: %+v", k)
	}
}

func TestLayersConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  LayersConfig
		want string
	}{
		{LayersConfig{}, "attempts: want at least one layer"},
		{LayersConfig{Attempts: []int{3, 0}}, "attempts: layer 2 (api) has 0; want 1 to 10"},
		{LayersConfig{Attempts: []int{1, 1, 1, 1, 1, 1, 11}}, "attempts: layer 7 (layer-7) has 11"},
		{LayersConfig{Attempts: make([]int, 9)}, "attempts: at most 8 layers, got 9"},
		{LayersConfig{Attempts: []int{3}, Requests: -1}, "requests: want 1 to 1000, got -1"},
		{LayersConfig{Attempts: []int{10, 10, 10, 10, 10}, Requests: 3}, "more than the lab sends"},
		{LayersConfig{Attempts: []int{3}, Budget: 2}, "budget: want a ratio between 0 and 1, got 2"},
		{LayersConfig{Attempts: []int{3}, Breaker: -1}, "breaker: want a threshold of at least 1, got -1"},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
		// Run refuses it the same way, before starting anything.
		if _, err := Run(context.Background(), "layers", Options{Layers: &c.cfg}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Run %+v: %v", c.cfg, err)
		}
	}
}
