package suite

import (
	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/passes/postdeadline"
	"github.com/stormwatch/stormwatch/analyzer/passes/retryamplification"
	"github.com/stormwatch/stormwatch/analyzer/passes/unboundedfanout"
)

// Default returns the detectors stormwatch runs, in report order. A fresh slice each call, so a
// caller may filter it.
//
// Listed in DESIGN.md but not here yet (issue 4 adds them, each in analyzer/passes/<name>):
// deadline-not-propagated, hidden-fallback-retry, retry-non-retryable, unsafe-write-retry,
// idempotency-key-changed, retry-after-ignored, no-backoff, unbounded-retries,
// hedge-not-cancelled (per trace); retry-budget-exceeded, synchronized-retries,
// breaker-wrong-key, breaker-counts-attempts (windowed).
func Default() []*analyzer.Detector {
	return []*analyzer.Detector{
		retryamplification.Detector,
		unboundedfanout.Detector,
		postdeadline.Detector,
	}
}

// ByName finds a detector of the default suite.
func ByName(name string) (*analyzer.Detector, bool) {
	for _, d := range Default() {
		if d.Name == name {
			return d, true
		}
	}
	return nil, false
}
