package diff

import (
	"cmp"
	"slices"

	"github.com/stormwatch/stormwatch/analyzer"
)

// Cost is one entry point or dependency's cost of retries before and after (docs/costs.md).
// Before or After is nil when it is absent from that side.
type Cost struct {
	// Kind is "entry" (Service and Name set) or "dependency" (Dependency set).
	Kind       string       `json:"kind"`
	Service    string       `json:"service,omitempty"`
	Name       string       `json:"name,omitempty"`
	Dependency string       `json:"dependency,omitempty"`
	Before     *CostFigures `json:"before"`
	After      *CostFigures `json:"after"`
}

// CostFigures are one side's costs: the report's, less what the comparison does not need.
type CostFigures struct {
	Requests            int                     `json:"requests"`
	RetryShare          float64                 `json:"retry_share"`
	AddedLatencyMs      analyzer.LatencySummary `json:"added_latency_ms"`
	ExtraCallsPerSecond float64                 `json:"extra_calls_per_second"`
	LateWorkSeconds     float64                 `json:"late_work_s"`
	Sampling            string                  `json:"sampling"`
}

type costKey struct{ kind, service, name, dep string }

// costs pairs the two sides' cost entries, the most added latency on either side first.
func costs(before, after *analyzer.Report) []Cost {
	byKey := map[costKey]*Cost{}
	var out []*Cost
	add := func(cs []analyzer.CostEntry, set func(*Cost, *CostFigures)) {
		for i := range cs {
			e := &cs[i]
			k := costKey{e.Kind, e.Service, e.Name, e.Dependency}
			c := byKey[k]
			if c == nil {
				c = &Cost{Kind: e.Kind, Service: e.Service, Name: e.Name, Dependency: e.Dependency}
				byKey[k] = c
				out = append(out, c)
			}
			set(c, &CostFigures{Requests: e.Requests, RetryShare: e.RetryShare, AddedLatencyMs: e.AddedLatencyMs,
				ExtraCallsPerSecond: e.ExtraCallsPerSecond, LateWorkSeconds: e.LateWorkSeconds, Sampling: e.Sampling})
		}
	}
	add(before.Costs, func(c *Cost, f *CostFigures) { c.Before = f })
	add(after.Costs, func(c *Cost, f *CostFigures) { c.After = f })
	total := func(c *Cost) float64 {
		v := 0.0
		if c.Before != nil {
			v = c.Before.AddedLatencyMs.Total
		}
		if c.After != nil {
			v = max(v, c.After.AddedLatencyMs.Total)
		}
		return v
	}
	slices.SortFunc(out, func(x, y *Cost) int {
		if c := cmp.Compare(kindRank(x.Kind), kindRank(y.Kind)); c != 0 {
			return c
		}
		if c := cmp.Compare(total(y), total(x)); c != 0 {
			return c
		}
		return cmp.Compare(x.Service+" "+x.Name+x.Dependency, y.Service+" "+y.Name+y.Dependency)
	})
	res := make([]Cost, len(out))
	for i, c := range out {
		res[i] = *c
	}
	return res
}

// kindRank puts entry points before dependencies.
func kindRank(kind string) int {
	if kind == analyzer.CostEntryPoint {
		return 0
	}
	return 1
}
