package unboundedretries

import (
	"fmt"
	"strconv"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/passes/internal/audit"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/internal/words"
	"github.com/stormwatch/stormwatch/spans"
)

// Detector is the unbounded-retries detector.
var Detector = &analyzer.Detector{
	Name:     "unbounded-retries",
	Title:    "Retry loop without a bound",
	Doc:      "more tries than the cap (default 5, policy maxAttempts), or a failed loop with no resilience.stop_reason where the reference attributes are present; evidence: attempts, limit, stop_reason",
	Severity: analyzer.SeverityWarning,
	Run:      run,
}

func run(pass *analyzer.Pass) error {
	classes := audit.ClassesIn(audit.Policy(pass.RunSettings), pass.Trace)
	for _, op := range pass.Operations {
		tries := 0
		for i := range op.Attempts {
			if counts(&op.Attempts[i]) {
				tries++
			}
		}
		if tries < 2 {
			continue // one try is bounded by definition
		}
		cls := classes.Of(op)
		limit := cls.MaxAttempts.Value
		if tries > limit {
			ids := audit.AttemptIDs(op, counts)
			ev := analyzer.Evidence{"attempts": analyzer.Int(tries), "limit": analyzer.Int(limit)}
			cite := audit.Cite(ev, "maxAttempts", cls.MaxAttempts, strconv.Itoa(limit))
			pass.Report(analyzer.Finding{
				Severity:   pass.Detector.Severity,
				SpanIDs:    ids,
				Service:    op.Owner,
				Dependency: op.Dependency,
				Summary:    fmt.Sprintf("%s tried %s %s, over the cap of %d%s", op.Owner, op.Name, words.Plural(tries, "time", "times"), limit, cite),
				Action:     capAdvice(op.Owner, cls),
				Evidence:   ev,
			})
			continue
		}
		last := &op.Attempts[len(op.Attempts)-1]
		if op.Inferred || last.Outcome == analyzer.OutcomeOK || hasStopReason(pass.Trace, op) {
			continue
		}
		pass.Report(analyzer.Finding{
			Severity:   analyzer.SeverityInfo,
			SpanIDs:    audit.AttemptIDs(op, counts),
			Service:    op.Owner,
			Dependency: op.Dependency,
			Summary:    fmt.Sprintf("%s gave up %s after %s without a stop reason: nothing in the trace says what bounded the loop", op.Owner, op.Name, words.Plural(tries, "try", "tries")),
			Action:     "record resilience.stop_reason (max_attempts, deadline, budget, breaker_open, permanent...) on the operation so every stop is explained",
			Evidence:   analyzer.Evidence{"attempts": analyzer.Int(tries), "stop_reason": analyzer.Text("")},
		})
	}
	return nil
}

// counts says whether an attempt is a try of the loop: not a resend, a hedge or a fallback.
func counts(a *analyzer.Attempt) bool {
	return a.Kind != analyzer.AttemptKindResend && a.Kind != analyzer.KindHedge && a.Kind != analyzer.KindFallback
}

// hasStopReason looks at the operation and at its spans: the analyzer fills StopReason from the
// operation's span, and the reference client may put it on the last attempt instead.
func hasStopReason(t *analyzer.Trace, op *analyzer.Operation) bool {
	if op.StopReason != "" {
		return true
	}
	if t == nil {
		return false
	}
	if s := audit.Span(t, op.SpanID); s != nil && s.Str(spans.AttrStopReason) != "" {
		return true
	}
	for i := range op.Attempts {
		for _, id := range op.Attempts[i].Calls {
			if s := audit.Span(t, id); s != nil && s.Str(spans.AttrStopReason) != "" {
				return true
			}
		}
	}
	return false
}

// capAdvice asks for the cap the policy in force sets, never for more: with maxAttempts 1 the
// loop goes; a cap from a file is quoted; the built-in one reads as the upper end of 3-5.
func capAdvice(owner string, c *policy.Class) string {
	limit := c.MaxAttempts.Value
	at := "the built-in limit"
	if audit.FromFile(c.MaxAttempts) {
		at = "policy maxAttempts at " + c.MaxAttempts.Pos.FileLine()
	}
	switch {
	case limit == 1:
		return fmt.Sprintf("remove %s's retry loop: one attempt is allowed here (%s), so return the failure and let the caller decide", owner, at)
	case audit.FromFile(c.MaxAttempts):
		return fmt.Sprintf("cap the attempts at %d (%s) and let the operation's deadline end the loop sooner", limit, at)
	}
	return fmt.Sprintf("cap the attempts at %d or fewer (%s; 3 suits most synchronous calls) and let the operation's deadline end the loop sooner", limit, at)
}
