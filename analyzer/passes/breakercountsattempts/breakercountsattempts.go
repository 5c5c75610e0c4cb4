package breakercountsattempts

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/passes/internal/audit"
	"github.com/stormwatch/stormwatch/internal/words"
	"github.com/stormwatch/stormwatch/spans"
)

// Detector is the breaker-counts-attempts detector.
var Detector = &analyzer.Detector{
	Name:     "breaker-counts-attempts",
	Title:    "Breaker opened on retried successes",
	Doc:      "a breaker opened while the logical calls toward that origin were succeeding after retries (it counts attempts, not calls); evidence: opened_at, failed_attempts_before_open, succeeded_after_retry, failed_logical_calls, refused_calls",
	Scope:    analyzer.ScopeWindow,
	Severity: analyzer.SeverityWarning,
	Run:      run,
}

type key struct{ caller, origin string }

func run(pass *analyzer.Pass) error {
	w := audit.Windowed(pass)
	// Only a (caller, dependency) whose breaker refused something can be reported: find those
	// first, so that a window without refusals - the usual one - costs one look at each operation
	// and no allocation, and only their operations are gathered.
	var refusing map[key]bool
	for _, op := range w.Ops {
		if _, ok := audit.Refusal(op); ok {
			if refusing == nil {
				refusing = map[key]bool{}
			}
			refusing[key{op.Caller, op.Dependency}] = true
		}
	}
	if len(refusing) == 0 {
		return nil
	}
	byKey := map[key][]*analyzer.Operation{}
	for _, op := range w.Ops {
		if len(op.Attempts) == 0 {
			continue
		}
		k := key{op.Caller, op.Dependency}
		if !refusing[k] {
			continue
		}
		byKey[k] = append(byKey[k], op)
	}
	keys := slices.SortedFunc(maps.Keys(byKey), func(a, b key) int {
		return cmp.Or(cmp.Compare(a.caller, b.caller), cmp.Compare(a.origin, b.origin))
	})
	skew := pass.RunSettings.Skew()
	for _, k := range keys {
		ops := byKey[k]
		// The opening: the first refusal.
		opened := int64(0)
		var openOp *analyzer.Operation
		refusedCalls := 0
		// The failed attempts' ids, rendered only if the layer is reported.
		var idBuf [10]spans.SpanID
		ids := idBuf[:0]
		for _, op := range ops {
			at, refused := audit.Refusal(op)
			if !refused {
				continue
			}
			refusedCalls++
			if openOp == nil || at < opened {
				opened, openOp = at, op
			}
		}
		if openOp == nil {
			continue
		}
		attempts, failedAttempts := 0, 0
		logical, okAfterRetry, failedLogical := 0, 0, 0
		for _, op := range ops {
			_, hadRefusal := audit.Refusal(op)
			hadFailure := false
			for i := range op.Attempts {
				a := &op.Attempts[i]
				if audit.BreakerRefused(op, a) || a.StartUnixNano >= opened {
					continue
				}
				attempts++
				if audit.Trips(a) {
					failedAttempts++
					hadFailure = true
					if len(ids) < 10 {
						ids = append(ids, a.SpanID)
					}
				}
			}
			if hadRefusal || op.EndUnixNano > opened+skew {
				continue // not a completed logical call when the breaker opened
			}
			logical++
			last := &op.Attempts[len(op.Attempts)-1]
			switch {
			case last.Outcome == analyzer.OutcomeOK && hadFailure:
				okAfterRetry++
			case last.Outcome != analyzer.OutcomeOK:
				failedLogical++
			}
		}
		if okAfterRetry <= failedLogical || failedAttempts <= failedLogical {
			continue
		}
		ev := analyzer.Evidence{
			"opened_at":                   analyzer.Text(time.Unix(0, opened).UTC().Format(time.RFC3339Nano)),
			"attempts_before_open":        analyzer.Int(attempts),
			"failed_attempts_before_open": analyzer.Int(failedAttempts),
			"logical_calls_before_open":   analyzer.Int(logical),
			"succeeded_after_retry":       analyzer.Int(okAfterRetry),
			"failed_logical_calls":        analyzer.Int(failedLogical),
			"refused_calls":               analyzer.Int(refusedCalls),
		}
		w.Evidence(ev)
		pass.Report(analyzer.Finding{
			Severity:   pass.Detector.Severity,
			TraceID:    openOp.TraceID.String(),
			SpanIDs:    audit.HexIDs(ids),
			Service:    k.caller,
			Dependency: k.origin,
			Summary: fmt.Sprintf("%s's breaker for %s opened after %s although %d of %s before it had succeeded after retries (%d failed); it then refused %s",
				k.caller, k.origin, words.Count(failedAttempts, "failed attempt"), okAfterRetry, words.Count(logical, "logical call"), failedLogical, words.Count(refusedCalls, "call")),
			Action:   "feed the breaker one signal per logical call (the final outcome after retries), not one per attempt",
			Evidence: ev,
		})
	}
	return nil
}
