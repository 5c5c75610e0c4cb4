package hedgenotcancelled

import (
	"fmt"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/passes/internal/audit"
	"github.com/stormwatch/stormwatch/spans"
)

// Detector is the hedge-not-cancelled detector.
var Detector = &analyzer.Detector{
	Name:     "hedge-not-cancelled",
	Title:    "Losing hedges ran to completion",
	Doc:      "hedged copies of one attempt kept running after the winner answered instead of being cancelled; evidence: copies, winner, losers_completed, wasted_ms",
	Severity: analyzer.SeverityWarning,
	Run:      run,
}

func run(pass *analyzer.Pass) error {
	t := pass.Trace
	if t == nil {
		return nil
	}
	tol := pass.RunSettings.Skew()
	for _, op := range pass.Operations {
		if !mayRace(op) {
			continue
		}
		eachRace(op, func(race []spans.SpanID) { judge(pass, t, op, race, tol) })
	}
	return nil
}

// mayRace is the cheap first look: an explicit hedge, or an attempt with several calls to one
// origin.
func mayRace(op *analyzer.Operation) bool {
	for i := range op.Attempts {
		a := &op.Attempts[i]
		if a.Kind == analyzer.KindHedge || len(a.Calls) > 1 && len(a.Origins) == 1 {
			return true
		}
	}
	return false
}

// eachRace calls judge with each set of calls of op that ran as copies of one another. A set is
// lent for the call: most operations that may race have one attempt of several calls to one
// origin, and that attempt's own calls are the set, with nothing copied (this runs for every such
// operation of every trace).
func eachRace(op *analyzer.Operation, judge func(race []spans.SpanID)) {
	var cur []spans.SpanID
	var curEnd int64
	explicit := false
	flush := func() {
		if len(cur) > 1 && explicit {
			judge(cur)
		}
		cur, explicit = cur[:0], false
	}
	started := false
	for i := range op.Attempts {
		a := &op.Attempts[i]
		if a.Kind == analyzer.KindHedge && started && a.StartUnixNano < curEnd {
			cur = append(cur, a.Calls...)
			curEnd = max(curEnd, a.EndUnixNano)
			explicit = true
			continue
		}
		flush()
		started = false
		// Stock shape: overlapping calls of one attempt to a single origin are copies.
		if len(a.Calls) > 1 && len(a.Origins) == 1 {
			judge(a.Calls)
			continue
		}
		cur, curEnd, started = append(cur[:0], a.Calls...), a.EndUnixNano, len(a.Calls) > 0
	}
	flush()
}

func judge(pass *analyzer.Pass, t *analyzer.Trace, op *analyzer.Operation, race []spans.SpanID, tol int64) {
	winner, winEnd := -1, int64(0)
	var idxBuf [8]int // races are a few copies: no allocation for them
	idx := idxBuf[:0]
	for _, id := range race {
		i, ok := t.Lookup(id)
		if !ok {
			continue
		}
		idx = append(idx, i)
		if o, _ := t.Outcome(i); o == analyzer.OutcomeOK && (winner < 0 || t.End(i) < winEnd) {
			winner, winEnd = i, t.End(i)
		}
	}
	if winner < 0 {
		return // nobody won: there was nothing to cancel for
	}
	var losers []string
	var wasted int64
	for _, i := range idx {
		if i == winner {
			continue
		}
		o, _ := t.Outcome(i)
		if o == analyzer.OutcomeCancelled || t.End(i) <= winEnd+tol {
			continue
		}
		losers = append(losers, t.Spans[i].SpanID.String())
		wasted += t.End(i) - winEnd
	}
	if len(losers) == 0 {
		return
	}
	pass.Report(analyzer.Finding{
		Severity:   pass.Detector.Severity,
		SpanIDs:    append([]string{t.Spans[winner].SpanID.String()}, losers...),
		Service:    op.Owner,
		Dependency: op.Dependency,
		Summary: fmt.Sprintf("%s hedged %s with %d copies; %d kept running %.0f ms after the winner answered",
			op.Owner, op.Name, len(idx), len(losers), audit.Ms(wasted)),
		Action: "cancel the losing copies as soon as one answers (cancel their contexts), and hedge only idempotent reads",
		Evidence: analyzer.Evidence{
			"copies":           analyzer.Int(len(idx)),
			"winner":           analyzer.Text(t.Spans[winner].SpanID.String()),
			"losers_completed": analyzer.Int(len(losers)),
			"wasted_ms":        analyzer.Float(audit.Ms(wasted)),
		},
	})
}
