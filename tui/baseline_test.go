package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
)

// afterFix is fakeSnapshot(0) two minutes on, after a fix: the storm's dependency got one more
// logical operation for 3 calls (3.00x since), reviews ten more at 1.00x, stock is new.
func afterFix() *engine.Snapshot {
	s := fakeSnapshot(0)
	s.AtUnixNano += int64(2 * time.Minute)
	add := map[string][2]int{"http://dep:8080": {3, 1}, "http://adapter:8080": {3, 1}, "http://api:8080": {3, 1}, "http://reviews:8080": {10, 10}}
	deps := append([]analyzer.DependencyStats(nil), s.Report.Dependencies...)
	for i := range deps {
		d := &deps[i]
		if a, ok := add[d.Dependency]; ok {
			d.PhysicalCalls += a[0]
			d.LogicalOperations += a[1]
			d.Amplification = float64(d.PhysicalCalls) / float64(d.LogicalOperations)
		}
	}
	deps = append(deps, analyzer.DependencyStats{Dependency: "http://stock:8080", PhysicalCalls: 4, LogicalOperations: 2,
		Amplification: 2, Outcomes: map[string]int{"200": 4}, Callers: []string{"batch"}})
	s.Report.Dependencies = deps
	return s
}

// b marks the baseline; as traffic arrives the dependencies screen shows, per dependency, the
// calls and logical operations since and the amplification then -> since with an arrow, and its
// headline says since when and what moved most. B clears it and the trend comes back.
func TestBaselineShowsChangeSince(t *testing.T) {
	src := &switchSource{}
	src.set(fakeSnapshot(0))
	tm := startTUI(t, New(testOptions(src)), "WORST")

	tm.Send(press("b"))
	// Marked on this snapshot: every dependency is there, none has moved yet.
	waitFor(t, tm, "no traffic to a dependency seen then")
	src.set(afterFix())
	waitFor(t, tm, "since the baseline 2m0s ago, http://dep:8080 went 27.00x -> 3.00x")

	tm.Send(press("B"))
	waitFor(t, tm, "baseline cleared")
	tm.Send(press("b"))
	waitFor(t, tm, "baseline marked")
	view := finalView(t, tm)
	// Marked again on the after-fix snapshot: nothing has moved since.
	if !strings.Contains(view, "since the baseline 0s ago: no traffic to a dependency seen then") {
		t.Errorf("a fresh baseline shows change:\n%s", view)
	}
}

func TestBaselineGolden(t *testing.T) {
	src := &switchSource{}
	src.set(fakeSnapshot(0))
	tm := startTUI(t, New(testOptions(src)), "WORST")
	tm.Send(press("b"))
	waitFor(t, tm, "baseline marked")
	src.set(afterFix())
	waitFor(t, tm, "http://dep:8080 went 27.00x -> 3.00x")
	view := finalView(t, tm)
	for _, want := range []string{
		"since the baseline 2m0s ago, http://dep:8080 went 27.00x -> 3.00x (3 calls for 1 intent since)",
		"+CALLS +INTENTS SINCE b",
		"↓ 27.00→3.00x", "↓ 9.00→3.00x", "= 3.00→3.00x", "= 1.00→1.00x", "new 2.00x", "no traffic since",
	} {
		if !strings.Contains(view, want) {
			t.Errorf("baseline view lacks %q:\n%s", want, view)
		}
	}
	if strings.Contains(view, "TREND") {
		t.Errorf("the trend is shown beside the baseline:\n%s", view)
	}
	requireGolden(t, view)
}

// Without b, the screen is as it was: B alone does nothing.
func TestClearBaselineWithoutOneIsQuiet(t *testing.T) {
	tm := startTUI(t, New(testOptions(fixedSource(fakeSnapshot(0)))), "WORST")
	tm.Send(press("B"))
	view := finalView(t, tm)
	if strings.Contains(view, "baseline") || !strings.Contains(view, "TREND") {
		t.Errorf("B without a baseline changed the screen:\n%s", view)
	}
}

// At 80 columns the since-baseline columns take the error share's room, so the dependency stays
// readable, and the headline keeps its figures.
func TestBaselineAt80Columns(t *testing.T) {
	src := &switchSource{}
	src.set(fakeSnapshot(0))
	tm := teatest.NewTestModel(t, New(testOptions(src)), teatest.WithInitialTermSize(80, 24))
	waitFor(t, tm, "WORST")
	tm.Send(press("b"))
	waitFor(t, tm, "baseline marked")
	src.set(afterFix())
	waitFor(t, tm, "went 27.00x -> 3.00x")
	view := finalView(t, tm)
	for _, want := range []string{
		"since the baseline 2m0s ago, http://dep:8080 went 27.00x -> 3.00x",
		"dep:8080", "adapter:8080", "↓ 27.00→3.00x", "+CALLS +INTENTS SINCE b",
	} {
		if !strings.Contains(view, want) {
			t.Errorf("80 columns: lacks %q:\n%s", want, view)
		}
	}
	for i, l := range strings.Split(view, "\n") {
		if w := lipgloss.Width(l); w > 80 {
			t.Errorf("line %d is %d cells wide: %q", i, w, l)
		}
	}
}
