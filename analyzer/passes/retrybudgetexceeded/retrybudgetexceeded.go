package retrybudgetexceeded

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/passes/internal/audit"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/internal/words"
	"github.com/stormwatch/stormwatch/spans"
)

const name = "retry-budget-exceeded"

// Detector is the retry-budget-exceeded detector.
var Detector = &analyzer.Detector{
	Name:     name,
	Title:    "Retries over the retry budget",
	Doc:      "retries / first attempts per (caller, dependency) over the window above the budget ratio (default 0.1, policy retryBudget); evidence: first_attempts, retries, ratio, budget, window_start, window_end, window_ms",
	Scope:    analyzer.ScopeWindow,
	Severity: analyzer.SeverityWarning,
	Settings: &Settings{MinSamples: 10, Reserve: 10},
	Run:      run,
}

// Settings are retry-budget-exceeded's own (analyzer.Detector.Settings).
type Settings struct {
	// MinSamples is the fewest first attempts, from as many traces, a group needs before its
	// ratio is judged: a ratio over a handful of requests says little.
	MinSamples int `policy:"minSamples" doc:"first attempts (from as many traces) a group needs before its ratio is judged" min:"1"`
	// Reserve is the retries a window may always spend beyond the ratio: budgets are token buckets
	// with a floor (the reference client's reserve is 10), so that a single flaky call still gets
	// its retry at low traffic. The budget experiment's run (docs/principles.md#retry-cost) - 10
	// retries for 40 requests - is within it.
	Reserve int `policy:"reserve" doc:"retries a window may always spend beyond the ratio, as token-bucket budgets do" min:"0"`
}

type group struct {
	caller, dep    string
	first, retries int
	ops            int
	class          *policy.Class
	worst          *analyzer.Operation
	worstRetries   int
	// judged: enough first attempts and over the budget, so its distinct traces are counted.
	judged bool
	traces []spans.TraceID
}

func run(pass *analyzer.Pass) error {
	p := audit.Policy(pass.RunSettings)
	set := analyzer.SettingsOf[Settings](pass)
	w := audit.Windowed(pass)
	// Counts of the whole traffic: a sampled window holds its share of them.
	minSamples, reserve := audit.SampledCount(w.Ops, set.MinSamples), audit.SampledCount(w.Ops, set.Reserve)
	// Groups are (caller, dependency, class). They are found through the dependency alone - one
	// string hashed per operation, a few groups compared - and each operation's group is noted,
	// so that the distinct traces of a group need counting only when it is over its budget (a
	// set of every group's traces cost a map insert per operation). A dependency of more than 16
	// groups (as many callers as a wide trace has services) has its groups found by their whole
	// key in byKey instead, so that it costs no scan of them all.
	var groups []*group
	byDep := map[string][]int32{}
	type groupKey struct{ dep, caller, class string }
	var byKey map[groupKey]int32
	of := make([]int32, len(w.Ops))
	for oi, op := range w.Ops {
		cls := audit.Class(p, op)
		gi := int32(-1)
		inDep := byDep[op.Dependency]
		if len(inDep) > 16 {
			if i, ok := byKey[groupKey{op.Dependency, op.Caller, cls.Name}]; ok {
				gi = i
			}
		} else {
			for _, i := range inDep {
				if g := groups[i]; g.caller == op.Caller && g.class.Name == cls.Name {
					gi = i
					break
				}
			}
		}
		if gi < 0 {
			gi = int32(len(groups))
			groups = append(groups, &group{caller: op.Caller, dep: op.Dependency, class: cls})
			inDep = append(inDep, gi)
			byDep[op.Dependency] = inDep
			switch {
			case len(inDep) > 17:
				byKey[groupKey{op.Dependency, op.Caller, cls.Name}] = gi
			case len(inDep) == 17:
				if byKey == nil {
					byKey = map[groupKey]int32{}
				}
				for _, i := range inDep {
					byKey[groupKey{op.Dependency, groups[i].caller, groups[i].class.Name}] = i
				}
			}
		}
		of[oi] = gi
		g := groups[gi]
		g.ops++
		retries := 0
		for i := range op.Attempts {
			a := &op.Attempts[i]
			if a.Outcome == analyzer.OutcomeRefused {
				continue // refused locally: nothing reached the dependency
			}
			if i == 0 {
				g.first++
			} else if audit.IsRetry(a) {
				retries++
			}
		}
		g.retries += retries
		if retries > g.worstRetries {
			g.worst, g.worstRetries = op, retries
		}
	}
	// A ratio over a handful of requests says little: judge only groups with minSamples first
	// attempts from as many different traces (independent requests).
	judged := 0
	for _, g := range groups {
		if g.first >= minSamples && float64(g.retries) > g.class.RetryBudget.Value*float64(g.first)+float64(reserve) {
			g.judged = true
			judged++
		}
	}
	if judged == 0 {
		return nil
	}
	for oi, op := range w.Ops {
		if g := groups[of[oi]]; g.judged {
			if g.traces == nil {
				g.traces = make([]spans.TraceID, 0, g.ops)
			}
			if n := len(g.traces); n == 0 || g.traces[n-1] != op.TraceID {
				g.traces = append(g.traces, op.TraceID)
			}
		}
	}
	slices.SortFunc(groups, func(a, b *group) int {
		return cmp.Or(cmp.Compare(a.caller, b.caller), cmp.Compare(a.dep, b.dep), cmp.Compare(a.class.Name, b.class.Name))
	})
	for _, g := range groups {
		if !g.judged {
			continue
		}
		budget := g.class.RetryBudget.Value
		ratio := float64(g.retries) / float64(g.first)
		traces := distinct(g.traces)
		if traces < minSamples {
			continue
		}
		sev := pass.Detector.Severity
		if ratio >= 1 && sev < analyzer.SeverityCritical {
			sev = analyzer.SeverityCritical
		}
		ev := analyzer.Evidence{
			"first_attempts": analyzer.Int(g.first),
			"retries":        analyzer.Int(g.retries),
			"ratio":          analyzer.Float(round3(ratio)),
			"budget":         analyzer.Float(budget),
			"reserve":        analyzer.Int(reserve),
			"operations":     analyzer.Int(g.ops),
			"traces":         analyzer.Int(traces),
		}
		w.Evidence(ev)
		ids := g.traces[:traces] // distinct put them first
		if g.worst != nil {
			// The example the finding cites leads the list.
			if i := slices.Index(ids, g.worst.TraceID); i > 0 {
				ids[0], ids[i] = ids[i], ids[0]
			}
		}
		audit.TraceIDs(ev, ids)
		start, end := w.Bounds()
		cite := audit.Cite(ev, "retryBudget", g.class.RetryBudget, strconv.FormatFloat(budget, 'g', -1, 64))
		f := analyzer.Finding{
			Severity:   sev,
			Service:    g.caller,
			Dependency: g.dep,
			Summary: fmt.Sprintf("%s sent %s for %s to %s (ratio %.2f, budget %.2f) over %.1f s%s",
				g.caller, words.Plural(g.retries, "retry", "retries"), words.Count(g.first, "first attempt"), g.dep, ratio, budget, audit.Ms(end-start)/1000, cite),
			Action:   budgetAdvice(g.class, budget),
			Evidence: ev,
		}
		if g.worst != nil {
			f.TraceID = g.worst.TraceID.String()
			for i := range g.worst.Attempts {
				if a := &g.worst.Attempts[i]; audit.IsRetry(a) && len(f.SpanIDs) < 5 {
					f.SpanIDs = append(f.SpanIDs, a.SpanID.String())
				}
			}
		}
		pass.Report(f)
	}
	return nil
}

// distinct counts the distinct trace ids in ids, which it sorts. Only groups over their budget
// need it, where a set of every trace of every group cost a map insert per operation.
func distinct(ids []spans.TraceID) int {
	// Any order puts equal ids together: two integer comparisons instead of a byte comparison.
	slices.SortFunc(ids, func(a, b spans.TraceID) int {
		return cmp.Or(cmp.Compare(binary.LittleEndian.Uint64(a[:8]), binary.LittleEndian.Uint64(b[:8])),
			cmp.Compare(binary.LittleEndian.Uint64(a[8:]), binary.LittleEndian.Uint64(b[8:])))
	})
	return len(slices.Compact(ids))
}

func round3(f float64) float64 {
	return float64(int64(f*1000+0.5)) / 1000
}

// budgetAdvice asks for the budget the policy in force sets; where it allows no retry at all
// (maxAttempts 1), for no retries rather than a budget of them.
func budgetAdvice(c *policy.Class, budget float64) string {
	if audit.NoRetries(c) {
		return "remove these retries: the policy allows one attempt here (maxAttempts 1), so return the failure and let the caller decide"
	}
	at := ""
	if audit.FromFile(c.RetryBudget) {
		at = " (policy retryBudget at " + c.RetryBudget.Pos.FileLine() + ")"
	}
	return fmt.Sprintf("put a retry budget in the client: retries at most %g x requests%s, shared by all calls to the dependency, so mass failures stop multiplying load", budget, at)
}
