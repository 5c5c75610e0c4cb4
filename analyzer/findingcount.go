package analyzer

import (
	"cmp"
	"slices"
)

// FindingKey identifies a finding across re-analyses of its trace: a late span changes the span
// list and the numbers, not what the finding is about. A cross-trace (ScopeWindow) finding has no
// Trace in its key: it is about a window of traffic, and the trace it cites is only an example,
// which the next run may replace. Nth tells apart findings of one detector about the same trace,
// service and dependency (reports sort their findings, so the order is stable).
type FindingKey struct {
	Detector, Trace, Service, Dependency string
	Nth                                  int
}

// FindingTotal is how many findings of one detector and severity a [FindingCounter] has seen.
type FindingTotal struct {
	Detector string
	Severity Severity
	Count    int64
}

// FindingCounter counts findings the first time a report shows them, for drivers that export a
// running count of findings from successive reports of one analyzer (the live /metrics and the
// OpenTelemetry Collector connector), so that every exporter counts the same findings. A finding is
// counted under the severity it first had. One that leaves the report (past MaxFindings) and
// comes back is counted again: remembering every key ever seen would grow without bound, while
// the previous report's keys are bounded by the report's own bound.
//
// It is not safe for concurrent use; its callers serialize reports anyway.
type FindingCounter struct {
	window map[string]bool
	seen   map[FindingKey]bool
	totals map[FindingTotal]int64 // keyed with Count 0
	// byDep counts the same findings split by the service and dependency they are about, for
	// series an alert can route by dependency and caller.
	byDep map[DependencyFindingTotal]int64 // keyed with Count 0
}

// DependencyFindingTotal is how many findings of one detector and severity a [FindingCounter]
// has seen about one service and dependency (a finding's Service and Dependency).
type DependencyFindingTotal struct {
	Detector            string
	Severity            Severity
	Service, Dependency string
	Count               int64
}

// NewFindingCounter counts the findings of the given suite (it needs to know which detectors are
// cross-trace).
func NewFindingCounter(detectors []*Detector) *FindingCounter {
	c := &FindingCounter{window: map[string]bool{}, seen: map[FindingKey]bool{}, totals: map[FindingTotal]int64{},
		byDep: map[DependencyFindingTotal]int64{}}
	for _, d := range detectors {
		if d != nil && d.Scope == ScopeWindow {
			c.window[d.Name] = true
		}
	}
	return c
}

// Count reads the findings of a report, counts those the previous report did not have, and
// returns each finding's key, in the findings' order, for callers that follow findings further
// (the connector sends each one as a log record once).
func (c *FindingCounter) Count(findings []Finding) []FindingKey {
	keys := make([]FindingKey, len(findings))
	cur := make(map[FindingKey]bool, len(findings))
	for i := range findings {
		f := &findings[i]
		k := FindingKey{Detector: f.Detector, Trace: f.TraceID, Service: f.Service, Dependency: f.Dependency}
		if c.window[f.Detector] {
			k.Trace = ""
		}
		for cur[k] {
			k.Nth++
		}
		cur[k] = true
		keys[i] = k
		if !c.seen[k] {
			c.totals[FindingTotal{Detector: f.Detector, Severity: f.Severity}]++
			c.byDep[DependencyFindingTotal{Detector: f.Detector, Severity: f.Severity, Service: f.Service, Dependency: f.Dependency}]++
		}
	}
	c.seen = cur
	return keys
}

// Totals are the findings counted so far by detector and severity, sorted by detector, then
// severity name.
func (c *FindingCounter) Totals() []FindingTotal {
	out := make([]FindingTotal, 0, len(c.totals))
	for k, n := range c.totals {
		k.Count = n
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b FindingTotal) int {
		return cmp.Or(cmp.Compare(a.Detector, b.Detector), cmp.Compare(a.Severity.String(), b.Severity.String()))
	})
	return out
}

// DependencyTotals are the findings counted so far by detector, severity, service and dependency,
// sorted by detector, dependency, service, then severity name. Their counts sum to Totals'.
func (c *FindingCounter) DependencyTotals() []DependencyFindingTotal {
	out := make([]DependencyFindingTotal, 0, len(c.byDep))
	for k, n := range c.byDep {
		k.Count = n
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b DependencyFindingTotal) int {
		return cmp.Or(cmp.Compare(a.Detector, b.Detector), cmp.Compare(a.Dependency, b.Dependency),
			cmp.Compare(a.Service, b.Service), cmp.Compare(a.Severity.String(), b.Severity.String()))
	})
	return out
}

// IsWindow reports whether the named detector is cross-trace (its findings are about a window of
// traffic, not one trace).
func (c *FindingCounter) IsWindow(detector string) bool { return c.window[detector] }
