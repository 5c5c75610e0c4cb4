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

// Refusal is when a breaker refused op: the start of its first refused attempt, or - when the
// reference client stopped the loop with stop_reason breaker_open after attempts that were sent
// (it records no span for the refused one) - the end of the last attempt. ok is false when no
// breaker refused it.
func Refusal(op *analyzer.Operation) (at int64, ok bool) {
	for i := range op.Attempts {
		if a := &op.Attempts[i]; BreakerRefused(op, a) {
			return a.StartUnixNano, true
		}
	}
	if op.StopReason == "breaker_open" && len(op.Attempts) > 0 {
		return op.Attempts[len(op.Attempts)-1].EndUnixNano, true
	}
	return 0, false
}

// Trips reports whether an attempt's outcome is one a breaker should count
// (docs/principles.md#breakers): 5xx, connect errors and timeouts. 429 (slow down) and other 4xx (a
// full answer) are not failures of the dependency.
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
