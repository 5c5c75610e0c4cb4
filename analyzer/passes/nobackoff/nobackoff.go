package nobackoff

import (
	"fmt"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/passes/internal/audit"
	"github.com/stormwatch/stormwatch/internal/words"
)

// Detector is the no-backoff detector.
var Detector = &analyzer.Detector{
	Name:     name,
	Title:    "Retries with no pause",
	Doc:      "two or more retries of one operation with (near) zero pause (at or under minPause, default 1 ms); evidence: retries, immediate_retries, pauses_ms, threshold_ms",
	Severity: analyzer.SeverityWarning,
	Settings: &Settings{MinPause: time.Millisecond},
	Run:      run,
}

const name = "no-backoff"

// Settings are no-backoff's own (analyzer.Detector.Settings).
type Settings struct {
	// MinPause is the pause at or under which a retry counts as immediate. 1 ms: a timer's
	// resolution, well under any deliberate backoff.
	MinPause time.Duration `policy:"minPause" doc:"a retry whose pause is at or under it came back immediately" min:"0s"`
}

func run(pass *analyzer.Pass) error {
	minPause := int64(analyzer.SettingsOf[Settings](pass).MinPause)
	p := audit.Policy(pass.RunSettings)
	for _, op := range pass.Operations {
		cls := audit.Class(p, pass.Trace, op)
		if audit.NoRetries(cls) {
			continue // the policy allows no retry here: unbounded-retries says so, not how to pace one
		}
		immediate := 0
		for i := range op.Attempts {
			if a := &op.Attempts[i]; audit.IsRetry(a) && a.BackoffNanos >= 0 && a.BackoffNanos <= minPause {
				immediate++
			}
		}
		if immediate < 2 {
			continue
		}
		var pauses []float64
		var ids []string
		for i := range op.Attempts {
			a := &op.Attempts[i]
			if !audit.IsRetry(a) || a.BackoffNanos < 0 {
				continue // a pause not measured is no evidence either way
			}
			pauses = append(pauses, audit.Ms(a.BackoffNanos))
			if a.BackoffNanos <= minPause {
				ids = append(ids, a.SpanID.String())
			}
		}
		pass.Report(analyzer.Finding{
			Severity:   pass.Detector.Severity,
			SpanIDs:    ids,
			Service:    op.Owner,
			Dependency: op.Dependency,
			Summary: fmt.Sprintf("%s retried %s %s with no pause (%d of %s within %.1f ms of the failure)",
				op.Owner, op.Name, words.Plural(immediate, "time", "times"), immediate, words.Plural(len(pauses), "retry", "retries"), audit.Ms(minPause)),
			Action: "wait between attempts: " + audit.BackoffAdvice(cls),
			Evidence: analyzer.Evidence{
				"retries":           analyzer.Int(len(pauses)),
				"immediate_retries": analyzer.Int(immediate),
				"pauses_ms":         analyzer.Floats(pauses),
				"threshold_ms":      analyzer.Float(audit.Ms(minPause)),
			},
		})
	}
	return nil
}
