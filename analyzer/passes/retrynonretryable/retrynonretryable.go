package retrynonretryable

import (
	"fmt"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/passes/internal/audit"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/spans"
)

// Detector is the retry-non-retryable detector.
var Detector = &analyzer.Detector{
	Name:     "retry-non-retryable",
	Title:    "Retried an outcome that cannot change",
	Doc:      "a retry after a permanent outcome (HTTP 400/401/403/404/409/422, gRPC INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED, UNAUTHENTICATED, FAILED_PRECONDITION) or one outside the policy's retryable list; evidence: status, retries_after, attempts",
	Severity: analyzer.SeverityWarning,
	Run:      run,
}

// permanent reports the outcomes never to retry (docs/principles.md#backoff-and-classification).
func permanent(status string) bool {
	switch status {
	case "400", "401", "403", "404", "409", "422",
		"INVALID_ARGUMENT", "NOT_FOUND", "PERMISSION_DENIED", "UNAUTHENTICATED", "FAILED_PRECONDITION":
		return true
	}
	return false
}

func run(pass *analyzer.Pass) error {
	classes := audit.ClassesIn(audit.Policy(pass.RunSettings), pass.Trace)
	for _, op := range pass.Operations {
		// The class is looked up at the first failed attempt that was followed by another: most
		// operations have none.
		var cls *policy.Class
		byPolicy := false
		for i := 0; i+1 < len(op.Attempts); i++ {
			a := &op.Attempts[i]
			if a.Outcome == analyzer.OutcomeOK || a.Outcome == analyzer.OutcomeRefused || a.Outcome == analyzer.OutcomeCancelled {
				continue
			}
			if cls == nil {
				cls = classes.Of(op)
				byPolicy = audit.FromFile(cls.Retryable)
			}
			var bad bool
			if byPolicy {
				bad = !cls.Retryable.Value.Contains(a.Status, a.Outcome)
			} else {
				bad = permanent(a.Status) || (a.Status == "" && a.Outcome == analyzer.OutcomePermanent)
			}
			if !bad {
				continue
			}
			// The attempt and the retries after it, rendered only if there is one.
			var idBuf [16]spans.SpanID
			ids := append(idBuf[:0], a.SpanID)
			for j := i + 1; j < len(op.Attempts); j++ {
				if audit.IsRetry(&op.Attempts[j]) {
					ids = append(ids, op.Attempts[j].SpanID)
				}
			}
			retries := len(ids) - 1
			if retries == 0 {
				continue
			}
			status := a.Status
			if status == "" {
				status = a.Outcome
			}
			ev := analyzer.Evidence{"status": analyzer.Text(status), "retries_after": analyzer.Int(retries), "attempts": analyzer.Int(op.Tries())}
			cite := audit.Cite(ev, "retryable", cls.Retryable, fmt.Sprint(cls.Retryable.Value.Tokens()))
			pass.Report(analyzer.Finding{
				Severity:   pass.Detector.Severity,
				SpanIDs:    audit.HexIDs(ids),
				Service:    op.Owner,
				Dependency: op.Dependency,
				Summary: fmt.Sprintf("%s retried %s after %s: %d more attempts that could not succeed%s",
					op.Owner, op.Name, status, retries, cite),
				Action:   "stop on permanent outcomes (400, 401, 403, 404, 409, 422 and their gRPC codes): fix the request or return the error; retry only timeouts, connect errors, 429 and 502-504",
				Evidence: ev,
			})
			break // one finding per operation: the first permanent outcome retried
		}
	}
	return nil
}
