package analyzer_test

import (
	"slices"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
)

// A finding is counted when a report first shows it, not again for each report that still does,
// nor when a re-analysis changes its numbers or a cross-trace finding cites another example
// trace; two findings about one place are two; one that leaves the report and comes back counts
// again.
func TestFindingCounterCountsEachFindingOnce(t *testing.T) {
	window := &analyzer.Detector{Name: "retry-budget-exceeded", Scope: analyzer.ScopeWindow}
	perTrace := &analyzer.Detector{Name: "retry-amplification"}
	amp := func(trace string) analyzer.Finding {
		return analyzer.Finding{Detector: "retry-amplification", Severity: analyzer.SeverityCritical, TraceID: trace,
			Service: "edge", Dependency: "http://dep:8080", Summary: "27 calls"}
	}
	budget := analyzer.Finding{Detector: "retry-budget-exceeded", Severity: analyzer.SeverityWarning, TraceID: "t1",
		Service: "adapter", Dependency: "http://dep:8080"}
	report := []analyzer.Finding{amp("t1"), amp("t1"), amp("t2"), budget}

	c := analyzer.NewFindingCounter([]*analyzer.Detector{window, perTrace})
	total := func() map[string]int64 {
		out := map[string]int64{}
		for _, ft := range c.Totals() {
			out[ft.Detector+"/"+ft.Severity.String()] = ft.Count
		}
		return out
	}
	check := func(step string, amplification, budget int64) {
		t.Helper()
		got := total()
		if got["retry-amplification/critical"] != amplification || got["retry-budget-exceeded/warning"] != budget || len(got) != 2 {
			t.Errorf("%s: totals %v, want retry-amplification/critical %d and retry-budget-exceeded/warning %d", step, got, amplification, budget)
		}
	}

	keys := c.Count(report)
	check("first report", 3, 1)
	want := []analyzer.FindingKey{
		{Detector: "retry-amplification", Trace: "t1", Service: "edge", Dependency: "http://dep:8080"},
		{Detector: "retry-amplification", Trace: "t1", Service: "edge", Dependency: "http://dep:8080", Nth: 1},
		{Detector: "retry-amplification", Trace: "t2", Service: "edge", Dependency: "http://dep:8080"},
		{Detector: "retry-budget-exceeded", Service: "adapter", Dependency: "http://dep:8080"},
	}
	if !slices.Equal(keys, want) {
		t.Errorf("keys %+v, want %+v", keys, want)
	}
	c.Count(report)
	check("the same report again", 3, 1)

	again := slices.Clone(report)
	again[0].Summary = "28 calls"                // a late span changed the numbers, not the finding
	again[0].Severity = analyzer.SeverityWarning // nor its severity: counted as first seen
	again[3].TraceID = "t9"                      // the window's finding cites another example
	again = append(again, amp("t3"))
	c.Count(again)
	check("one new finding", 4, 1)

	c.Count(nil)
	c.Count(report)
	check("findings that left the report and came back", 7, 2)
}

func TestFindingTotalsSorted(t *testing.T) {
	c := analyzer.NewFindingCounter(nil)
	c.Count([]analyzer.Finding{
		{Detector: "b", Severity: analyzer.SeverityInfo, TraceID: "1"},
		{Detector: "a", Severity: analyzer.SeverityWarning, TraceID: "1"},
		{Detector: "a", Severity: analyzer.SeverityCritical, TraceID: "2"},
		{Detector: "a", Severity: analyzer.SeverityCritical, TraceID: "3"},
	})
	want := []analyzer.FindingTotal{
		{Detector: "a", Severity: analyzer.SeverityCritical, Count: 2},
		{Detector: "a", Severity: analyzer.SeverityWarning, Count: 1},
		{Detector: "b", Severity: analyzer.SeverityInfo, Count: 1},
	}
	if got := c.Totals(); !slices.Equal(got, want) {
		t.Errorf("totals %+v, want %+v", got, want)
	}
}
