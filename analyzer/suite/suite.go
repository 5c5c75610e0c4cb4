package suite

import (
	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/passes/breakercountsattempts"
	"github.com/stormwatch/stormwatch/analyzer/passes/breakerwrongkey"
	"github.com/stormwatch/stormwatch/analyzer/passes/deadlinenotpropagated"
	"github.com/stormwatch/stormwatch/analyzer/passes/hedgenotcancelled"
	"github.com/stormwatch/stormwatch/analyzer/passes/hiddenfallbackretry"
	"github.com/stormwatch/stormwatch/analyzer/passes/idempotencykeychanged"
	"github.com/stormwatch/stormwatch/analyzer/passes/nobackoff"
	"github.com/stormwatch/stormwatch/analyzer/passes/policyviolation"
	"github.com/stormwatch/stormwatch/analyzer/passes/postdeadline"
	"github.com/stormwatch/stormwatch/analyzer/passes/retryafterignored"
	"github.com/stormwatch/stormwatch/analyzer/passes/retryamplification"
	"github.com/stormwatch/stormwatch/analyzer/passes/retrybudgetexceeded"
	"github.com/stormwatch/stormwatch/analyzer/passes/retrynonretryable"
	"github.com/stormwatch/stormwatch/analyzer/passes/synchronizedretries"
	"github.com/stormwatch/stormwatch/analyzer/passes/unboundedfanout"
	"github.com/stormwatch/stormwatch/analyzer/passes/unboundedretries"
	"github.com/stormwatch/stormwatch/analyzer/passes/unsafewriteretry"
)

// Default returns the detectors stormwatch runs, in report order. A fresh slice each call, so a
// caller may filter it. Every detector of docs/detectors.md is listed; none is left out.
func Default() []*analyzer.Detector {
	return []*analyzer.Detector{
		retryamplification.Detector,
		unboundedfanout.Detector,
		postdeadline.Detector,
		// The rest of the rules of docs/principles.md, per trace...
		deadlinenotpropagated.Detector,
		hiddenfallbackretry.Detector,
		retrynonretryable.Detector,
		unsafewriteretry.Detector,
		idempotencykeychanged.Detector,
		retryafterignored.Detector,
		nobackoff.Detector,
		unboundedretries.Detector,
		hedgenotcancelled.Detector,
		// ...the rules of a policy file that no other detector owns (silent without one)...
		policyviolation.Detector,
		// ...and across traces (ScopeWindow: the whole input offline, a sliding window live).
		retrybudgetexceeded.Detector,
		synchronizedretries.Detector,
		breakerwrongkey.Detector,
		breakercountsattempts.Detector,
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
