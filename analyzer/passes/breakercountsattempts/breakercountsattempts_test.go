package breakercountsattempts_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/passes/breakercountsattempts"
	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
)

func TestTestdata(t *testing.T) { detectortest.Run(t, breakercountsattempts.Detector, "testdata") }

// The logical-call experiment of docs/principles.md#breakers replayed: ten calls to a service that
// fails twice, then answers. Counting attempts, the breaker opened on the fifth failed attempt with
// 2 calls done (both ok after retries) and refused the other 8. Counting calls: 30 attempts, 10 ok,
// nothing to report.
func TestAttemptCountingBreakerTable(t *testing.T) {
	for _, shape := range []string{"stock", "reference"} {
		got := detectortest.Of(detectortest.Analyze(t, "breaker-counts-attempts-"+shape, "", ""), "breaker-counts-attempts")
		if len(got) != 1 {
			t.Fatalf("%s: %d findings, want 1", shape, len(got))
		}
		ev := got[0].Evidence
		want := map[string]int{"failed_attempts_before_open": 5, "succeeded_after_retry": 2,
			"failed_logical_calls": 0, "logical_calls_before_open": 2, "refused_calls": 8}
		for k, v := range want {
			if !ev[k].Equal(analyzer.Int(v)) {
				t.Errorf("%s: %s = %v, want %d", shape, k, ev[k], v)
			}
		}
		rep := detectortest.Analyze(t, "breaker-counts-attempts-healthy-"+shape, "", "")
		if got := detectortest.Of(rep, "breaker-counts-attempts"); len(got) != 0 {
			t.Errorf("%s: logical-call breaker reported %v", shape, got)
		}
		if rep.Input.Operations < 10 {
			t.Errorf("%s: %d operations, want the 10 calls", shape, rep.Input.Operations)
		}
		calls := 0
		for _, d := range rep.Dependencies {
			if d.Dependency == "inventory" {
				calls = d.PhysicalCalls
			}
		}
		if calls != 30 {
			t.Errorf("%s: inventory saw %d attempts, want 30", shape, calls)
		}
	}
}
