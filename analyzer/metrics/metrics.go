package metrics

import (
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
)

// Label names: the connector's attributes (stormwatch.dependency, ...) with the dots the
// Prometheus exporter turns into underscores.
const (
	LabelDependency        = "stormwatch_dependency"
	LabelDependencyService = "stormwatch_dependency_service"
	LabelOutcome           = "stormwatch_attempt_outcome"
	LabelCaller            = "stormwatch_caller"
	LabelDetector          = "stormwatch_finding_detector"
	LabelSeverity          = "stormwatch_finding_severity"
)

// Metric names: the connector's metric names as its Prometheus exporter renders them (dots to
// underscores, _total on counters, _ratio on the unit-1 gauge). docs/collector.md has the table.
const (
	NamePhysicalCalls  = "stormwatch_dependency_physical_calls_total"
	NameLogicalOps     = "stormwatch_dependency_logical_operations_total"
	NameAmplification  = "stormwatch_dependency_amplification_ratio"
	NameAttempts       = "stormwatch_dependency_attempts_total"
	NameCallerPhysical = "stormwatch_caller_physical_calls_total"
	NameCallerLogical  = "stormwatch_caller_logical_operations_total"
	NameCallerAmp      = "stormwatch_caller_amplification_ratio"
	NameFindings       = "stormwatch_findings_total"
	NameSpansAnalyzed  = "stormwatch_analyzed_spans_total"
	NameTracesAnalyzed = "stormwatch_analyzed_traces_total"
	NameOperations     = "stormwatch_analyzed_operations_total"
	NamePendingTraces  = "stormwatch_pending_traces"
	NameTruncSpans     = "stormwatch_truncated_spans_total"
	NameTruncTraces    = "stormwatch_truncated_traces_total"
	NameWindowRun      = "stormwatch_window_run_seconds"
	NameWindowInterval = "stormwatch_window_interval_seconds"
	// NameDependencyFindings and NameWindowFindings split the findings by the dependency and the
	// calling service they are about, for alerts that route by them (docs/alerts.md).
	NameDependencyFindings = "stormwatch_dependency_findings_total"
	NameWindowFindings     = "stormwatch_window_findings"
)

// Collector is a prometheus.Collector over the latest snapshot of a [Cache]. Held and evicted
// spans are not among its series: the collector package already exports them (the same names)
// from the analyzer's held stats.
type Collector struct {
	cache *Cache

	phys, logi, amp, att, cphys, clogi, camp, fnd, spans, traces, ops, pending   *prometheus.Desc
	truncSpans, truncTraces, windowRun, windowInterval, depFindings, winFindings *prometheus.Desc
	cost                                                                         costDescs

	mu sync.Mutex
	// counted is the snapshot the findings were last counted from, and out the series built from
	// it: a scrape that finds the same snapshot resends them.
	counted *engine.Snapshot
	out     []prometheus.Metric
	// findings counts the findings first seen since the collector started, as the connector
	// counts them.
	findings *analyzer.FindingCounter
}

// NewCollector builds the collector; detectors is the analyzer's suite (for which are cross-trace).
func NewCollector(cache *Cache, detectors []*analyzer.Detector) *Collector {
	dep := []string{LabelDependency, LabelDependencyService}
	caller := append(slices.Clone(dep), LabelCaller)
	findingLabels := append(slices.Clone(caller), LabelDetector, LabelSeverity)
	return &Collector{
		cache:    cache,
		findings: analyzer.NewFindingCounter(detectors),
		cost:     newCostDescs(),
		phys: prometheus.NewDesc(NamePhysicalCalls,
			"Physical calls (CLIENT spans) that reached the dependency, in the traces analyzed.", dep, nil),
		logi: prometheus.NewDesc(NameLogicalOps,
			"Logical operations the top layer asked of the dependency; physical_calls / logical_operations is the amplification.", dep, nil),
		amp: prometheus.NewDesc(NameAmplification,
			"Physical calls per logical operation toward the dependency, over everything analyzed since start.", dep, nil),
		att: prometheus.NewDesc(NameAttempts,
			"Physical calls to the dependency by outcome: the HTTP status, the gRPC code, or a class (ok, timeout, connect error, refused).",
			append(slices.Clone(dep), LabelOutcome), nil),
		// Per (caller, dependency) in series of their own, as in the connector: a caller label on
		// the dependency series would change what they mean, and a sum over both would count twice.
		cphys: prometheus.NewDesc(NameCallerPhysical,
			"Physical calls (CLIENT spans) the calling service made to the dependency; summed over callers, the dependency's physical_calls.", caller, nil),
		clogi: prometheus.NewDesc(NameCallerLogical,
			"Logical operations the calling service asked of the dependency (copies made by layers above counted once); summed over callers, the dependency's logical_operations.", caller, nil),
		camp: prometheus.NewDesc(NameCallerAmp,
			"Physical calls per logical operation from the calling service to the dependency.", caller, nil),
		fnd: prometheus.NewDesc(NameFindings,
			"Distinct findings reported, by detector and severity.", []string{LabelDetector, LabelSeverity}, nil),
		spans:   prometheus.NewDesc(NameSpansAnalyzed, "Spans in the traces analyzed (duplicates dropped).", nil, nil),
		traces:  prometheus.NewDesc(NameTracesAnalyzed, "Traces analyzed at least once.", nil, nil),
		ops:     prometheus.NewDesc(NameOperations, "Logical operations found in the traces analyzed.", nil, nil),
		pending: prometheus.NewDesc(NamePendingTraces, "Traces waiting for their settle period.", nil, nil),
		truncSpans: prometheus.NewDesc(NameTruncSpans,
			"Spans accepted but not analyzed: their trace was over the per-trace span cap.", nil, nil),
		truncTraces: prometheus.NewDesc(NameTruncTraces, "Traces that hit the per-trace span cap.", nil, nil),
		windowRun: prometheus.NewDesc(NameWindowRun,
			"How long the cross-trace detectors' last run over their window took (0 before the first).", nil, nil),
		windowInterval: prometheus.NewDesc(NameWindowInterval,
			"The least time from the cross-trace detectors' last run to their next: the window interval, longer after a long run.", nil, nil),
		depFindings: prometheus.NewDesc(NameDependencyFindings,
			"Distinct findings reported, by detector, severity, dependency and the calling service they are about (for post-deadline-work, the service that worked after its caller gave up); summed, stormwatch_findings_total.",
			findingLabels, nil),
		winFindings: prometheus.NewDesc(NameWindowFindings,
			"Findings of the cross-trace detectors (retry budget, synchronized retries, breakers) in their latest window, by detector, severity, dependency and caller: 0 again once the window no longer shows them.",
			findingLabels, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.phys, c.logi, c.amp, c.att, c.cphys, c.clogi, c.camp, c.fnd, c.spans, c.traces, c.ops, c.pending, c.truncSpans, c.truncTraces, c.windowRun, c.windowInterval, c.depFindings, c.winFindings} {
		ch <- d
	}
	for _, d := range c.cost.all() {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the series of the cache's latest snapshot, built once
// per snapshot.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	snap := c.cache.Latest()
	c.mu.Lock()
	if snap != c.counted {
		c.out = c.build(snap)
		c.counted = snap
	}
	out := c.out
	c.mu.Unlock()
	for _, m := range out {
		ch <- m
	}
}

// build counts the findings new in snap and renders every series. Called with c.mu held.
func (c *Collector) build(snap *engine.Snapshot) []prometheus.Metric {
	if snap == nil {
		return nil
	}
	rep := &snap.Report
	c.findings.Count(rep.Findings)
	totals := c.findings.Totals()

	out := make([]prometheus.Metric, 0, 7*len(rep.Dependencies)+len(totals)+6)
	for i := range rep.Dependencies {
		d := &rep.Dependencies[i]
		out = append(out,
			prometheus.MustNewConstMetric(c.phys, prometheus.CounterValue, float64(d.PhysicalCalls), d.Dependency, d.Service),
			prometheus.MustNewConstMetric(c.logi, prometheus.CounterValue, float64(d.LogicalOperations), d.Dependency, d.Service),
			prometheus.MustNewConstMetric(c.amp, prometheus.GaugeValue, d.Amplification, d.Dependency, d.Service))
		for o, n := range d.Outcomes {
			out = append(out, prometheus.MustNewConstMetric(c.att, prometheus.CounterValue, float64(n), d.Dependency, d.Service, o))
		}
		for j := range d.ByCaller {
			cs := &d.ByCaller[j]
			out = append(out,
				prometheus.MustNewConstMetric(c.cphys, prometheus.CounterValue, float64(cs.PhysicalCalls), d.Dependency, d.Service, cs.Caller),
				prometheus.MustNewConstMetric(c.clogi, prometheus.CounterValue, float64(cs.LogicalOperations), d.Dependency, d.Service, cs.Caller),
				prometheus.MustNewConstMetric(c.camp, prometheus.GaugeValue, cs.Amplification, d.Dependency, d.Service, cs.Caller))
		}
	}
	out = append(out, c.cost.metrics(rep)...)
	for _, ft := range totals {
		out = append(out, prometheus.MustNewConstMetric(c.fnd, prometheus.CounterValue, float64(ft.Count), ft.Detector, ft.Severity.String()))
	}
	// A finding names its dependency; the service label is the one the dependency series carry.
	service := make(map[string]string, len(rep.Dependencies))
	for i := range rep.Dependencies {
		service[rep.Dependencies[i].Dependency] = rep.Dependencies[i].Service
	}
	for _, ft := range c.findings.DependencyTotals() {
		out = append(out, prometheus.MustNewConstMetric(c.depFindings, prometheus.CounterValue, float64(ft.Count),
			ft.Dependency, service[ft.Dependency], ft.Service, ft.Detector, ft.Severity.String()))
	}
	// The cross-trace findings in force now: a gauge, because such a finding is counted once
	// however long its window keeps showing it, and an alert must stay up as long as it does. A
	// series the window no longer shows goes away, which Prometheus reads as stale.
	type winKey struct{ dep, caller, det, sev string }
	open := map[winKey]int{}
	var order []winKey
	for i := range rep.Findings {
		f := &rep.Findings[i]
		if !c.findings.IsWindow(f.Detector) {
			continue
		}
		k := winKey{f.Dependency, f.Service, f.Detector, f.Severity.String()}
		if open[k] == 0 {
			order = append(order, k)
		}
		open[k]++
	}
	for _, k := range order {
		out = append(out, prometheus.MustNewConstMetric(c.winFindings, prometheus.GaugeValue, float64(open[k]),
			k.dep, service[k.dep], k.caller, k.det, k.sev))
	}
	out = append(out,
		prometheus.MustNewConstMetric(c.spans, prometheus.CounterValue, float64(rep.Input.Spans)),
		prometheus.MustNewConstMetric(c.traces, prometheus.CounterValue, float64(rep.Input.Traces)),
		prometheus.MustNewConstMetric(c.ops, prometheus.CounterValue, float64(rep.Input.Operations)),
		prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(snap.Stats.PendingTraces)),
		prometheus.MustNewConstMetric(c.truncSpans, prometheus.CounterValue, float64(snap.Stats.TruncatedSpans)),
		prometheus.MustNewConstMetric(c.truncTraces, prometheus.CounterValue, float64(snap.Stats.TruncatedTraces)))
	if st := &snap.Stats; st.WindowEvery > 0 {
		// A live analyzer's pacing of its windowed runs: why cross-trace findings come later
		// under load (docs/analyzer.md, "The window").
		out = append(out,
			prometheus.MustNewConstMetric(c.windowRun, prometheus.GaugeValue, st.WindowRun.Seconds()),
			prometheus.MustNewConstMetric(c.windowInterval, prometheus.GaugeValue, st.WindowEvery.Seconds()))
	}
	return out
}
