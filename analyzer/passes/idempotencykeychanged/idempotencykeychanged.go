package idempotencykeychanged

import (
	"fmt"
	"slices"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/passes/internal/audit"
	"github.com/stormwatch/stormwatch/internal/words"
	"github.com/stormwatch/stormwatch/spans"
)

// Detector is the idempotency-key-changed detector.
var Detector = &analyzer.Detector{
	Name:     "idempotency-key-changed",
	Title:    "Attempts of one write carry different idempotency keys",
	Doc:      "attempts of one logical operation carry different idempotency keys (or some none); evidence: keys (hashed), distinct_keys, attempts",
	Severity: analyzer.SeverityCritical,
	Run:      run,
	// Whether a trace carries one at all is asked of every trace: the engine indexes them.
	CarriedAttrs: carried,
}

// carried are the attributes whose presence in a trace decides whether its attempts' spans are
// looked up at all.
var carried = []string{spans.AttrIdempotencyKey, spans.AttrReqHeaderIdempotencyKey}

// differ is the cheap first look: do two calls of op carry different keys (one may have none)?
// Most operations have no key at all and cost one attribute scan per call.
func differ(t *analyzer.Trace, op *analyzer.Operation) bool {
	first, seen, keyed := "", false, false
	for i := range op.Attempts {
		if op.Attempts[i].Kind == analyzer.KindFallback {
			continue
		}
		for _, id := range op.Attempts[i].Calls {
			s := audit.Span(t, id)
			if s == nil {
				continue
			}
			k := audit.IdempotencyKey(s)
			keyed = keyed || k != ""
			if !seen {
				first, seen = k, true
			} else if k != first && keyed {
				return true
			}
		}
	}
	return false
}

func run(pass *analyzer.Pass) error {
	t := pass.Trace
	// No operation with two attempts, or no key anywhere in the trace: no attempts can differ,
	// and no span needs looking up. The attempts are the cheaper look, the attributes the surer.
	if t == nil || !slices.ContainsFunc(pass.Operations, func(op *analyzer.Operation) bool { return len(op.Attempts) > 1 }) ||
		!audit.Carries(t, carried...) {
		return nil
	}
	for _, op := range pass.Operations {
		if len(op.Attempts) < 2 || !differ(t, op) {
			continue
		}
		var keys []string
		var ids []string
		distinct := map[string]bool{}
		anyKey := false
		for i := range op.Attempts {
			a := &op.Attempts[i]
			if a.Kind == analyzer.KindFallback {
				continue // a fallback is another write on purpose
			}
			for _, id := range a.Calls {
				s := audit.Span(t, id)
				if s == nil {
					continue
				}
				k := audit.IdempotencyKey(s)
				shown := ""
				if k != "" {
					anyKey = true
					shown = audit.HashKey(k)
				}
				keys = append(keys, shown)
				ids = append(ids, id.String())
				distinct[shown] = true
			}
		}
		if !anyKey || len(distinct) < 2 {
			continue
		}
		pass.Report(analyzer.Finding{
			Severity:   pass.Detector.Severity,
			SpanIDs:    ids,
			Service:    op.Owner,
			Dependency: op.Dependency,
			Summary: fmt.Sprintf("%s sent %s of %s with %d different idempotency keys: the server cannot tell they are one write",
				op.Owner, words.Count(len(keys), "attempt"), op.Name, len(distinct)),
			Action:   "make the idempotency key once per logical operation, before the first attempt, and send the same key on every retry",
			Evidence: analyzer.Evidence{"keys": analyzer.Texts(keys), "distinct_keys": analyzer.Int(len(distinct)), "attempts": analyzer.Int(len(keys))},
		})
	}
	return nil
}
