package deadlinenotpropagated

import (
	"fmt"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/passes/internal/audit"
	"github.com/stormwatch/stormwatch/spans"
)

// Detector is the deadline-not-propagated detector.
var Detector = &analyzer.Detector{
	Name:     "deadline-not-propagated",
	Title:    "Deadline not passed down",
	Doc:      "an attempt whose own timeout exceeds the operation's remaining budget, or a downstream operation whose deadline is later than its caller's, or none; evidence: kind, deadline_ms, caller_deadline_ms, overrun_ms",
	Severity: analyzer.SeverityWarning,
	Run:      run,
	// Whether a trace carries one at all is asked of every trace: the engine indexes them.
	CarriedAttrs: carried,
}

// carried are the attributes whose presence in a trace decides whether its attempts' spans are
// looked up at all.
var carried = []string{spans.AttrDeadlineRemaining}

func run(pass *analyzer.Pass) error {
	skew := pass.RunSettings.Skew()
	// An attempt can only outlive a budget it had: its operation's deadline, or the remaining
	// budget recorded on its span. Without the attribute anywhere in the trace (stock
	// instrumentation) only operations with a deadline need their attempts' spans looked up.
	remaining := audit.Carries(pass.Trace, carried...)
	for _, op := range pass.Operations {
		if (remaining || op.DeadlineUnixNano > 0) && reportAttempt(pass, op, skew) {
			continue
		}
		parent := op.Parent
		if parent == nil || parent.DeadlineUnixNano == 0 {
			continue
		}
		switch {
		case op.DeadlineUnixNano > parent.DeadlineUnixNano+skew:
			over := op.DeadlineUnixNano - parent.DeadlineUnixNano
			pass.Report(analyzer.Finding{
				Severity:   pass.Detector.Severity,
				SpanIDs:    audit.IDs(op.SpanID, parent.SpanID),
				Service:    op.Caller,
				Dependency: op.Dependency,
				Summary: fmt.Sprintf("%s gave %s a deadline %.0f ms later than its caller %s's: work below it can outlive the request",
					op.Caller, op.Name, audit.Ms(over), parent.Caller),
				Action: "derive each downstream deadline from the caller's remaining budget (propagate resilience.deadline / Request-Deadline) instead of starting a new timeout",
				Evidence: analyzer.Evidence{
					"kind":               analyzer.Text("later-than-caller"),
					"deadline_ms":        analyzer.Float(audit.Ms(op.DeadlineUnixNano - op.StartUnixNano)),
					"caller_deadline_ms": analyzer.Float(audit.Ms(parent.DeadlineUnixNano - op.StartUnixNano)),
					"overrun_ms":         analyzer.Float(audit.Ms(over)),
				},
			})
		case op.DeadlineUnixNano == 0 && !op.Inferred:
			pass.Report(analyzer.Finding{
				Severity:   pass.Detector.Severity,
				SpanIDs:    audit.IDs(op.SpanID, parent.SpanID),
				Service:    op.Caller,
				Dependency: op.Dependency,
				Summary: fmt.Sprintf("%s called %s with no deadline although its caller %s had %.0f ms left: the deadline stopped at %s",
					op.Caller, op.Name, parent.Caller, audit.Ms(max(parent.DeadlineUnixNano-op.StartUnixNano, 0)), op.Caller),
				Action: "read the incoming deadline (Request-Deadline header or baggage) and bound every downstream operation by it",
				Evidence: analyzer.Evidence{
					"kind":               analyzer.Text("not-propagated"),
					"caller_deadline_ms": analyzer.Float(audit.Ms(parent.DeadlineUnixNano - op.StartUnixNano)),
				},
			})
		}
	}
	return nil
}

// reportAttempt reports the first attempt of op that outlived its budget.
func reportAttempt(pass *analyzer.Pass, op *analyzer.Operation, skew int64) bool {
	for i := range op.Attempts {
		a := &op.Attempts[i]
		budgetEnd := int64(0)
		if op.DeadlineUnixNano > 0 {
			budgetEnd = op.DeadlineUnixNano
		}
		if s := audit.Span(pass.Trace, a.SpanID); s != nil {
			if rem, ok := s.Int(spans.AttrDeadlineRemaining); ok && rem >= 0 {
				if e := a.StartUnixNano + rem*1e6; budgetEnd == 0 || e < budgetEnd {
					budgetEnd = e
				}
			}
		}
		// An attempt started after the deadline is post-deadline-work's finding; this one is about
		// an attempt that began in time and was allowed to run past it.
		if budgetEnd == 0 || a.EndUnixNano <= budgetEnd+skew || a.StartUnixNano >= budgetEnd {
			continue
		}
		over := a.EndUnixNano - budgetEnd
		pass.Report(analyzer.Finding{
			Severity:   pass.Detector.Severity,
			SpanIDs:    audit.IDs(a.SpanID),
			Service:    op.Owner,
			Dependency: op.Dependency,
			Summary: fmt.Sprintf("attempt %d of %s's %s ran %.0f ms past the operation's deadline: its own timeout was longer than the budget left",
				a.Number, op.Owner, op.Name, audit.Ms(over)),
			Action: "give each attempt min(its timeout, the deadline's remaining budget), and do not start an attempt the budget cannot hold",
			Evidence: analyzer.Evidence{
				"kind":        analyzer.Text("attempt-outlived-deadline"),
				"deadline_ms": analyzer.Float(audit.Ms(budgetEnd - op.StartUnixNano)),
				"overrun_ms":  analyzer.Float(audit.Ms(over)),
			},
		})
		return true
	}
	return false
}
