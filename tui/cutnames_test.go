package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest"

	"github.com/stormwatch/stormwatch/analyzer"
)

// A cut keeps where names differ: at the start, in the middle, at the end.
func TestCutDistinct(t *testing.T) {
	for _, tc := range []struct {
		names []string
		w     int
	}{
		{[]string{"inventory-7f9c4d.prod.svc.cluster.local:8080", "inventory-8a2b1e.prod.svc.cluster.local:8080"}, 20},
		{[]string{"inventory.prod.svc.cluster.local:8080", "inventory.prod.svc.cluster.local:8081"}, 12},
		{[]string{"adapter.internal.example:8080", "adapter-2.internal.example:8080"}, 10},
		{[]string{"catalog.internal.example.com:8080", "reviews.internal.example.com:8080"}, 9},
		{[]string{"payments-gateway-eu-west-1-primary.example.com:443", "payments-gateway-eu-west-1-standby.example.com:443"}, 14},
	} {
		got := cutDistinct(tc.names, tc.w)
		seen := map[string]bool{}
		for i, g := range got {
			if n := len([]rune(g)); n > tc.w {
				t.Errorf("%q cut to %q: %d runes, over %d", tc.names[i], g, n, tc.w)
			}
			if seen[g] {
				t.Errorf("%v at %d cells: two read %q", tc.names, tc.w, g)
			}
			seen[g] = true
		}
		t.Logf("%d: %q", tc.w, got)
	}
	if got := cutDistinct([]string{"short:80"}, 20)[0]; got != "short:80" {
		t.Errorf("a name that fits was changed: %q", got)
	}
}

// At 80x24 with a baseline set, the dependency column is narrow; dependencies whose names differ
// only in a pod hash or a port still read differently, and rows keep the start of their names.
func TestDistinctNamesAt80ColumnsWithBaseline(t *testing.T) {
	snap := fakeSnapshot(0)
	var deps []analyzer.DependencyStats
	for _, n := range []string{
		"http://inventory-7f9c4d.prod.svc.cluster.local:8080", "http://inventory-8a2b1e.prod.svc.cluster.local:8080",
		"http://inventory-7f9c4d.prod.svc.cluster.local:9090", "http://reviews.prod.svc.cluster.local:8080",
	} {
		deps = append(deps, analyzer.DependencyStats{Dependency: n, PhysicalCalls: 9, LogicalOperations: 3, Amplification: 3,
			Outcomes: map[string]int{"503": 9}, Callers: []string{"frontend"}})
	}
	snap.Report.Dependencies = deps
	later := *snap
	later.AtUnixNano += int64(time.Minute)
	src := &switchSource{}
	src.set(snap)
	tm := teatest.NewTestModel(t, New(testOptions(src)), teatest.WithInitialTermSize(80, 24))
	waitFor(t, tm, "WORST")
	tm.Send(press("b"))
	waitFor(t, tm, "baseline marked")
	src.set(&later)
	view := finalView(t, tm)
	var names []string
	for _, l := range strings.Split(view, "\n") {
		if f := strings.Fields(strings.TrimLeft(l, ">▲! ")); len(f) > 0 && (strings.HasPrefix(f[0], "inv") || strings.HasPrefix(f[0], "rev") || strings.HasPrefix(f[0], "…")) {
			names = append(names, f[0])
		}
	}
	if len(names) != 4 {
		t.Fatalf("want 4 dependency rows, got %q:\n%s", names, view)
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Errorf("two rows read %q:\n%s", n, view)
		}
		seen[n] = true
	}
}

// A cross-trace finding (a retry budget over a window) has no time of its own and cites one
// example trace; the findings screen shows the window it judged and every trace it counted.
func TestWindowFindingShowsItsWindowAndTraces(t *testing.T) {
	snap := fakeSnapshot(0)
	ids := []string{"aaaa0000000000000000000000000001", "bbbb0000000000000000000000000002", "cccc0000000000000000000000000003"}
	snap.Report.Findings = []analyzer.Finding{{Detector: "retry-budget-exceeded", Severity: analyzer.SeverityCritical,
		TraceID: ids[0], Service: "client", Dependency: "http://origin:8080", Summary: "client sent 80 retries for 40 first attempts",
		Evidence: analyzer.Evidence{"ratio": analyzer.Float(2), "traces": analyzer.Int(3), "trace_ids": analyzer.Texts(ids),
			"window_start": analyzer.Text("2026-01-15T10:00:00Z"), "window_end": analyzer.Text("2026-01-15T10:01:00Z")}}}
	m := drive(t, New(testOptions(fixedSource(snap))), size(testW, testH), press("3"))
	v := m.View()
	for _, want := range []string{"retry-budget-exceeded", "10:01:00", "window 2026-01-15 10:00:00.000 - 10:01:00.000 UTC",
		"aaaa00000000… bbbb00000000… cccc00000000…"} {
		if !strings.Contains(v, want) {
			t.Errorf("findings screen lacks %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, "trace_ids=") {
		t.Errorf("the trace ids are in the evidence line too:\n%s", v)
	}
}
