package breakerwrongkey

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/passes/internal/audit"
	"github.com/stormwatch/stormwatch/internal/words"
)

// Detector is the breaker-wrong-key detector.
var Detector = &analyzer.Detector{
	Name:     "breaker-wrong-key",
	Title:    "Breaker refused a healthy origin",
	Doc:      "a breaker refused calls to an origin that had no failures in the window while another origin behind the same client failed (breaker keyed on the client, not the origin); evidence: origin, refused_calls, answers, failed_origins, failed_origins_not_listed",
	Scope:    analyzer.ScopeWindow,
	Severity: analyzer.SeverityCritical,
	Run:      run,
}

// maxFailedOrigins bounds the failed origins a finding lists: the earliest to fail, those that
// can have opened the breaker, and a count of the rest (failed_origins_not_listed). A caller
// whose breaker refused n healthy origins after n others failed would otherwise make n findings
// of n origins each: a report the square of the window.
const maxFailedOrigins = 16

type originKey struct{ caller, origin string }

type originStats struct {
	refused, failures int
	firstRefusal      int64
	firstFailure      int64
	answers           map[string]int
	example           *analyzer.Operation
	refusedIDs        []string
	dep               string // the origin's dependency, the finding's Dependency
}

func run(pass *analyzer.Pass) error {
	w := audit.Windowed(pass)
	// Only a caller whose breaker refused something can be reported, and what it is compared
	// with is its own other origins: find those callers first, so that a window without refusals
	// - the usual one - costs one look at each operation and no allocation, and only their
	// operations are counted.
	var refusing map[string]bool
	for _, op := range w.Ops {
		if _, ok := audit.Refusal(op); ok {
			if refusing == nil {
				refusing = map[string]bool{}
			}
			refusing[op.Caller] = true
		}
	}
	if len(refusing) == 0 {
		return nil
	}
	byOrigin := map[originKey]*originStats{}
	for _, op := range w.Ops {
		if !refusing[op.Caller] {
			continue
		}
		if at, ok := audit.Refusal(op); ok && !refusedAttempt(op) {
			// Refused after attempts that were sent (reference client): the refusal has no span
			// of its own; count it at the operation.
			k := originKey{op.Caller, audit.Origin(op, &op.Attempts[0])}
			s := byOrigin[k]
			if s == nil {
				s = &originStats{answers: map[string]int{}, dep: op.Dependency}
				byOrigin[k] = s
			}
			if s.refused == 0 || at < s.firstRefusal {
				s.firstRefusal = at
			}
			s.refused++
			if s.example == nil {
				s.example = op
			}
		}
		for i := range op.Attempts {
			a := &op.Attempts[i]
			k := originKey{op.Caller, audit.Origin(op, a)}
			s := byOrigin[k]
			if s == nil {
				s = &originStats{answers: map[string]int{}, dep: op.Dependency}
				byOrigin[k] = s
			}
			switch {
			case audit.BreakerRefused(op, a):
				if s.refused == 0 || a.StartUnixNano < s.firstRefusal {
					s.firstRefusal = a.StartUnixNano
				}
				s.refused++
				if s.example == nil {
					s.example = op
				}
				if len(s.refusedIDs) < 5 {
					s.refusedIDs = append(s.refusedIDs, a.SpanID.String())
				}
			case audit.Trips(a):
				if s.failures == 0 || a.StartUnixNano < s.firstFailure {
					s.firstFailure = a.StartUnixNano
				}
				s.failures++
				s.answers[audit.StatusKey(a)]++
			case a.Outcome != analyzer.OutcomeRefused:
				s.answers[audit.StatusKey(a)]++
			}
		}
	}
	keys := slices.SortedFunc(maps.Keys(byOrigin), func(a, b originKey) int {
		return cmp.Or(cmp.Compare(a.caller, b.caller), cmp.Compare(a.origin, b.origin))
	})
	skew := pass.RunSettings.Skew()
	// A refused origin is compared with the origins that failed behind its own caller (the keys
	// are sorted by caller: one run each), earliest failure first and up to its refusal: it costs
	// the failed origins its finding names, not every origin of every caller in the window.
	type failedOrigin struct {
		origin string
		s      *originStats
	}
	var failing []failedOrigin
	for lo, hi := 0, 0; lo < len(keys); lo = hi {
		hi = lo + 1
		for hi < len(keys) && keys[hi].caller == keys[lo].caller {
			hi++
		}
		failing = failing[:0]
		for _, k := range keys[lo:hi] {
			if o := byOrigin[k]; o.failures > 0 {
				failing = append(failing, failedOrigin{k.origin, o})
			}
		}
		slices.SortStableFunc(failing, func(a, b failedOrigin) int { return cmp.Compare(a.s.firstFailure, b.s.firstFailure) })
		for _, k := range keys[lo:hi] {
			s := byOrigin[k]
			if s.refused == 0 || s.failures > 0 {
				continue
			}
			// A failed origin is another origin than k: k has no failures. failing is sorted by
			// first failure, so those before the refusal are a prefix of it.
			before := sort.Search(len(failing), func(i int) bool {
				return failing[i].s.firstFailure > s.firstRefusal+skew
			})
			if before == 0 {
				continue
			}
			failed := make(map[string]int, min(before, maxFailedOrigins))
			for _, f := range failing[:min(before, maxFailedOrigins)] {
				failed[f.origin] = f.s.failures
			}
			names := slices.Sorted(maps.Keys(failed))
			ev := analyzer.Evidence{
				"origin":         analyzer.Text(k.origin),
				"refused_calls":  analyzer.Int(s.refused),
				"answers":        analyzer.Counts(s.answers),
				"failed_origins": analyzer.Counts(failed),
			}
			if unlisted := before - len(failed); unlisted > 0 {
				ev["failed_origins_not_listed"] = analyzer.Int(unlisted)
				names = append(names, words.Count(unlisted, "more origin"))
			}
			w.Evidence(ev)
			pass.Report(analyzer.Finding{
				Severity:   pass.Detector.Severity,
				TraceID:    s.example.TraceID.String(),
				SpanIDs:    s.refusedIDs,
				Service:    k.caller,
				Dependency: s.dep,
				Summary: fmt.Sprintf("%s's breaker refused %s to %s, which had not failed (%s), because %s failed: the breaker is keyed wider than the origin",
					k.caller, words.Count(s.refused, "call"), k.origin, answersText(s.answers), strings.Join(names, ", ")),
				Action:   "key the circuit breaker per origin (scheme://host:port), and keep its state for the life of the application, not the client object",
				Evidence: ev,
			})
		}
	}
	return nil
}

// refusedAttempt reports whether a breaker refused one of op's attempts (rather than stopping
// the loop after attempts that were sent).
func refusedAttempt(op *analyzer.Operation) bool {
	for i := range op.Attempts {
		if audit.BreakerRefused(op, &op.Attempts[i]) {
			return true
		}
	}
	return false
}

func answersText(m map[string]int) string {
	if len(m) == 0 {
		return "no answers"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s x%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
