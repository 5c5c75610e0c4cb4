package whatif_test

import (
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/analyzer/whatif"
)

func predict(t *testing.T, fixture, changes string) map[string]whatif.Row {
	t.Helper()
	a := detectortest.Load(t, fixture, engine.Config{Detectors: suite.Default()})
	cs, err := policy.ParseChanges(changes)
	if err != nil {
		t.Fatal(err)
	}
	p := whatif.Predict(a.Snapshot(time.Unix(0, 0)).Operations(), cs)
	if p.Assumption == "" {
		t.Error("no assumption stated")
	}
	rows := map[string]whatif.Row{}
	for _, r := range p.Rows {
		rows[r.Dependency] = r
	}
	// Recorded must agree with the report's own accounting.
	for _, d := range a.Report().Dependencies {
		if rows[d.Dependency].Recorded != d.PhysicalCalls {
			t.Errorf("%s: recorded %d, report says %d", d.Dependency, rows[d.Dependency].Recorded, d.PhysicalCalls)
		}
	}
	return rows
}

// The 27-call trace (two requests of it): with retries owned by the adapter alone, each request
// makes 3 calls to the dependency, one to the adapter, one to the api.
func TestRetriesOwnedByOneLayer(t *testing.T) {
	for _, shape := range []string{"stock", "reference"} {
		rows := predict(t, "amplification-27-"+shape, "edge.maxAttempts=1,api.maxAttempts=1")
		want := map[string][2]int{"dep": {54, 6}, "adapter": {18, 2}, "api": {6, 2}}
		for dep, w := range want {
			if r := rows[dep]; r.Recorded != w[0] || r.Predicted != w[1] {
				t.Errorf("%s %s: recorded %d predicted %d, want %d -> %d", shape, dep, r.Recorded, r.Predicted, w[0], w[1])
			}
		}
	}
}

func TestNoChangeReplaysTheRecording(t *testing.T) {
	for _, f := range []string{"amplification-64-stock", "fanout-reference", "transient-retry-healthy-stock", "breaker-counts-attempts-reference"} {
		for dep, r := range predict(t, f, "nobody.maxAttempts=7") {
			if r.Recorded != r.Predicted {
				t.Errorf("%s %s: an unrelated change predicts %d for %d recorded", f, dep, r.Predicted, r.Recorded)
			}
		}
	}
}

// 4 x 4 x 4 = 64; with every layer at 2 attempts, 2 x 2 x 2 = 8.
func TestEveryLayerCapped(t *testing.T) {
	rows := predict(t, "amplification-64-reference", "*.maxAttempts=2")
	if r := rows["primary"]; r.Recorded != 64 || r.Predicted != 8 {
		t.Errorf("primary: %+v, want 64 -> 8", r)
	}
}

// More attempts than recorded repeat the last (failed) one: the adapter at 5 makes 3x3x5 = 45.
func TestRaisingTheCapRepeatsTheLastOutcome(t *testing.T) {
	rows := predict(t, "amplification-27-stock", "adapter.maxAttempts=5")
	if r := rows["dep"]; r.Predicted != 90 {
		t.Errorf("dep: %+v, want 2 x 45 = 90", r)
	}
	// A loop that ended on a success is not extended.
	rows = predict(t, "transient-retry-healthy-stock", "api.maxAttempts=9")
	if r := rows["adapter"]; r.Predicted != r.Recorded {
		t.Errorf("succeeded loops must not grow: %+v", r)
	}
}

// The 40 clients of docs/principles.md#retry-cost, with retry=3 against a 503 origin: a 0.1 budget
// allows 4 retries.
func TestBudget(t *testing.T) {
	rows := predict(t, "retry-budget-exceeded-stock", "client.retryBudget=0.1")
	if r := rows["origin"]; r.Recorded != 120 || r.Predicted != 44 {
		t.Errorf("origin: %+v, want 120 -> 44", r)
	}
}

// maxFanout 1: of the two copies each request's second attempt sent (to primary-b and primary-c,
// origins of one dependency, primary, with primary-a), one is left: 6 calls become 4.
func TestFanout(t *testing.T) {
	rows := predict(t, "fanout-stock", "edge.maxFanout=1")
	if r := rows["primary"]; r.Recorded != 6 || r.Predicted != 4 {
		t.Errorf("primary: %+v, want 6 -> 4", r)
	}
}

// A breaker judges whole operations: in the 27-call trace (two requests), each adapter operation
// fails after its 3 calls, so a breaker of 2 in the adapter lets two operations through (6 calls)
// and refuses the other sixteen; one of 1 lets one through. The layers above still call as
// recorded: their operations failed either way.
func TestBreaker(t *testing.T) {
	for _, c := range []struct {
		changes string
		dep     int
	}{
		{"adapter.breaker=2", 6},
		{"adapter.breaker=1", 3},
		{"adapter.breaker=100", 54},
	} {
		rows := predict(t, "amplification-27-reference", c.changes)
		if r := rows["dep"]; r.Predicted != c.dep {
			t.Errorf("%s: dep predicted %d, want %d", c.changes, r.Predicted, c.dep)
		}
		if r := rows["adapter"]; r.Predicted != 18 {
			t.Errorf("%s: adapter predicted %d, want the 18 recorded", c.changes, r.Predicted)
		}
	}
}
