package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormwatch/stormwatch/analyzer"
)

// Labels and names of the cost series (docs/costs.md): entry points are named by the service and
// span name of the requests' root spans.
const (
	LabelEntryService = "stormwatch_entry_service"
	LabelEntryName    = "stormwatch_entry_name"

	NameEntryAddedLatency = "stormwatch_entry_added_latency_seconds"
	NameDepAddedLatency   = "stormwatch_dependency_added_latency_seconds_total"
	NameDepExtraCalls     = "stormwatch_dependency_extra_calls_total"
	NameDepLateWork       = "stormwatch_dependency_late_work_seconds_total"
)

// costDescs are the cost series' descriptions.
type costDescs struct {
	entryAdded, depAdded, depExtra, depLate *prometheus.Desc
}

func newCostDescs() costDescs {
	dep := []string{LabelDependency, LabelDependencyService}
	return costDescs{
		entryAdded: prometheus.NewDesc(NameEntryAddedLatency,
			"Latency retries added to each request of the entry point: the time its critical path spent in failed attempts that were retried and in pauses between attempts.",
			[]string{LabelEntryService, LabelEntryName}, nil),
		depAdded: prometheus.NewDesc(NameDepAddedLatency,
			"Latency that retries toward the dependency added to requests, summed over the requests analyzed.", dep, nil),
		depExtra: prometheus.NewDesc(NameDepExtraCalls,
			"Calls to the dependency made by retries and hedges, or inside copies that retries of layers above made, as recorded.", dep, nil),
		depLate: prometheus.NewDesc(NameDepLateWork,
			"Span-seconds the dependency worked after its callers had given up (their CLIENT span ended), as recorded.", dep, nil),
	}
}

func (d *costDescs) all() []*prometheus.Desc {
	return []*prometheus.Desc{d.entryAdded, d.depAdded, d.depExtra, d.depLate}
}

// metrics are the cost series of rep.
func (d *costDescs) metrics(rep *analyzer.Report) []prometheus.Metric {
	service := map[string]string{}
	for i := range rep.Dependencies {
		service[rep.Dependencies[i].Dependency] = rep.Dependencies[i].Service
	}
	var out []prometheus.Metric
	entries := 0
	for i := range rep.Costs {
		e := &rep.Costs[i]
		switch e.Kind {
		case analyzer.CostEntryPoint:
			if entries++; entries > analyzer.MaxEntrySeries {
				continue
			}
			buckets := make(map[float64]uint64, len(e.AddedLatencyBuckets))
			for j, n := range e.AddedLatencyBuckets {
				buckets[analyzer.AddedLatencyBoundsMs[j]/1000] = n
			}
			out = append(out, prometheus.MustNewConstHistogram(d.entryAdded, uint64(e.Requests), e.AddedLatencyMs.Total/1000,
				buckets, e.Service, e.Name))
		case analyzer.CostDependency:
			svc := service[e.Dependency]
			out = append(out,
				prometheus.MustNewConstMetric(d.depAdded, prometheus.CounterValue, e.AddedLatencyMs.Total/1000, e.Dependency, svc),
				prometheus.MustNewConstMetric(d.depExtra, prometheus.CounterValue, float64(e.ExtraCalls), e.Dependency, svc),
				prometheus.MustNewConstMetric(d.depLate, prometheus.CounterValue, e.LateWorkSeconds, e.Dependency, svc))
		}
	}
	return out
}
