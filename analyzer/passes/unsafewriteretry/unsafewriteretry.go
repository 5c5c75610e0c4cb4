package unsafewriteretry

import (
	"fmt"
	"strings"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/passes/internal/audit"
	"github.com/stormwatch/stormwatch/internal/words"
	"github.com/stormwatch/stormwatch/spans"
)

// Detector is the unsafe-write-retry detector.
var Detector = &analyzer.Detector{
	Name:     "unsafe-write-retry",
	Title:    "Write repeated without an idempotency key",
	Doc:      "a POST or PATCH (or a class the policy marks idempotent: false) attempted more than once without an idempotency key (resilience.idempotency_key or a captured Idempotency-Key header); evidence: method, attempts, key_present",
	Severity: analyzer.SeverityCritical,
	Run:      run,
}

// sent says whether an attempt sent the write again: not a resend after a redirect or 401, nor a
// fallback to another operation.
func sent(a *analyzer.Attempt) bool {
	return a.Kind != analyzer.AttemptKindResend && a.Kind != analyzer.KindFallback
}

func run(pass *analyzer.Pass) error {
	t := pass.Trace
	if t == nil {
		return nil
	}
	classes := audit.ClassesIn(audit.Policy(pass.RunSettings), pass.Trace)
	for _, op := range pass.Operations {
		sends := 0
		for i := range op.Attempts {
			if sent(&op.Attempts[i]) {
				sends++
			}
		}
		if sends < 2 {
			continue
		}
		first := audit.Span(t, op.Attempts[0].SpanID)
		if first == nil {
			continue
		}
		method := audit.Method(first)
		cls := classes.Of(op)
		declared := audit.FromFile(cls.Idempotent)
		switch {
		case cls.Idempotent.Set && cls.Idempotent.Value:
			continue // the policy says repeating it is safe
		case declared && !cls.Idempotent.Value:
			// A write by policy, whatever the method.
		case method != "POST" && method != "PATCH":
			continue
		}
		if hasKey(t, op) {
			continue
		}
		shown := method
		if shown == "" {
			shown = "write"
		}
		ev := analyzer.Evidence{"method": analyzer.Text(shown), "attempts": analyzer.Int(sends), "key_present": analyzer.Bool(false)}
		// A name inferred from the calls already starts with the method ("POST /charges").
		what := shown + " " + op.Name
		if strings.HasPrefix(op.Name, shown+" ") {
			what = op.Name
		}
		cite := audit.Cite(ev, "idempotent", cls.Idempotent, "false")
		pass.Report(analyzer.Finding{
			Severity:   pass.Detector.Severity,
			SpanIDs:    audit.AttemptIDs(op, sent),
			Service:    op.Owner,
			Dependency: op.Dependency,
			Summary: fmt.Sprintf("%s sent %s %s without an idempotency key: a lost response after the server acted becomes a duplicate%s",
				op.Owner, what, words.Plural(sends, "time", "times"), cite),
			Action:   "send an Idempotency-Key that the server deduplicates, the same on every attempt, or make this write a single attempt",
			Evidence: ev,
		})
	}
	return nil
}

// hasKey looks for a key on the operation's own span and on every call it made.
func hasKey(t *analyzer.Trace, op *analyzer.Operation) bool {
	if s := audit.Span(t, op.SpanID); s != nil && s.Str(spans.AttrIdempotencyKey) != "" {
		return true
	}
	for i := range op.Attempts {
		for _, id := range op.Attempts[i].Calls {
			if s := audit.Span(t, id); s != nil && audit.IdempotencyKey(s) != "" {
				return true
			}
		}
	}
	return false
}
