package retryafterignored

import (
	"fmt"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/passes/internal/audit"
	"github.com/stormwatch/stormwatch/spans"
)

// Detector is the retry-after-ignored detector.
var Detector = &analyzer.Detector{
	Name:     "retry-after-ignored",
	Title:    "Retried before the server's Retry-After",
	Doc:      "the next attempt started before the Retry-After the server gave (resilience.retry_after_ms or a captured Retry-After header); evidence: retry_after_ms, waited_ms, status",
	Severity: analyzer.SeverityWarning,
	Run:      run,
	// Whether a trace carries one at all is asked of every trace: the engine indexes them.
	CarriedAttrs: carried,
}

// carried are the attributes whose presence in a trace decides whether its attempts' spans are
// looked up at all.
var carried = []string{spans.AttrRetryAfter, spans.AttrResHeaderRetryAfter}

func run(pass *analyzer.Pass) error {
	t := pass.Trace
	if t == nil {
		return nil
	}
	// No retry, or no Retry-After anywhere in the trace: no hint to ignore, and no span to look
	// up. The retries are the cheaper look (most traces have none), the attributes the surer.
	if !retried(pass.Operations) || !audit.Carries(t, carried...) {
		return nil
	}
	skew := pass.RunSettings.Skew()
	classes := audit.ClassesIn(audit.Policy(pass.RunSettings), pass.Trace)
	for _, op := range pass.Operations {
		if audit.NoRetries(classes.Of(op)) {
			continue // no retry is allowed here at all: when to make one is beside the point
		}
		for i := 0; i+1 < len(op.Attempts); i++ {
			a, next := &op.Attempts[i], &op.Attempts[i+1]
			if !audit.IsRetry(next) {
				continue
			}
			hint, ok := hintOf(t, a)
			if !ok {
				// The reference client may record the hint it obeyed on the attempt it delayed.
				if s := audit.Span(t, next.SpanID); s != nil {
					if _, has := s.Attr(spans.AttrRetryAfter); has {
						hint, ok = audit.RetryAfter(s)
					}
				}
			}
			if !ok || hint <= 0 {
				continue
			}
			waited := next.StartUnixNano - a.EndUnixNano
			tol := max(skew, hint/50)
			if waited+tol >= hint {
				continue
			}
			status := a.Status
			if status == "" {
				status = a.Outcome
			}
			pass.Report(analyzer.Finding{
				Severity:   pass.Detector.Severity,
				SpanIDs:    audit.IDs(a.SpanID, next.SpanID),
				Service:    op.Owner,
				Dependency: op.Dependency,
				Summary: fmt.Sprintf("%s retried %s after %.0f ms although the server answered %s with Retry-After %.0f ms",
					op.Owner, op.Name, audit.Ms(waited), status, audit.Ms(hint)),
				Action: "wait at least the Retry-After the server sent (the backoff may be longer, never shorter), or give up when it does not fit the deadline",
				Evidence: analyzer.Evidence{
					"retry_after_ms": analyzer.Float(audit.Ms(hint)),
					"waited_ms":      analyzer.Float(audit.Ms(max(waited, 0))),
					"status":         analyzer.Text(status),
				},
			})
			break // one finding per operation
		}
	}
	return nil
}

// retried reports whether an attempt of some operation after its first is a retry: only those
// are judged.
func retried(ops []*analyzer.Operation) bool {
	for _, op := range ops {
		for i := 1; i < len(op.Attempts); i++ {
			if audit.IsRetry(&op.Attempts[i]) {
				return true
			}
		}
	}
	return false
}

// hintOf is the Retry-After on the response to attempt a: on any of its calls.
func hintOf(t *analyzer.Trace, a *analyzer.Attempt) (int64, bool) {
	for _, id := range a.Calls {
		if s := audit.Span(t, id); s != nil {
			if h, ok := audit.RetryAfter(s); ok {
				return h, true
			}
		}
	}
	return 0, false
}
