package audit

import "github.com/stormwatch/stormwatch/analyzer"

// BreakerRefused reports whether attempt a of op was refused by a circuit breaker, not sent. The
// analyzer's outcome "refused" covers breakers and retry budgets alike; the operation's stop
// reason (reference client) tells them apart. Without one (stock instrumentation, where an error
// naming an open circuit or an exhausted budget both read as refused) the refusal is taken as a
// breaker's: budgets refuse only retries, which a healthy origin does not get, so the mistake can
// only blur the counts of breaker-counts-attempts, never invent a wrongly keyed breaker.
func BreakerRefused(op *analyzer.Operation, a *analyzer.Attempt) bool {
	return a.Outcome == analyzer.OutcomeRefused && op.StopReason != "budget"
}

// Trips reports whether an attempt's outcome is one a breaker should count (seed 003): 5xx,
// connect errors and timeouts. 429 (slow down) and other 4xx (a full answer) are not failures of
// the dependency.
func Trips(a *analyzer.Attempt) bool {
	switch a.Outcome {
	case analyzer.OutcomeTimeout:
		return true
	case analyzer.OutcomeRetryable:
		return a.Status != "429" && a.Status != "408" && a.Status != "425" && a.Status != "RESOURCE_EXHAUSTED"
	}
	return false
}

// Origin is where an attempt went: its first origin, or the operation's dependency.
func Origin(op *analyzer.Operation, a *analyzer.Attempt) string {
	if len(a.Origins) > 0 {
		return a.Origins[0]
	}
	return op.Dependency
}

// StatusKey names an attempt's outcome for evidence tables: the status, else the class.
func StatusKey(a *analyzer.Attempt) string {
	if a.Outcome == analyzer.OutcomeRefused {
		return "refused"
	}
	if a.Status != "" {
		return a.Status
	}
	return a.Outcome
}
