package engine

import (
	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// Refused operations: the ones a breaker or a retry budget stopped before they made any call, which
// the reference client records as spans of their own. No CLIENT span shows them, yet the breaker
// detectors need them.

// refusedOperations adds the logical operations that never made a physical call: the reference
// client records a call refused by its breaker or retry budget as its operation span alone
// (resilience.outcome=refused, resilience.stop_reason=breaker_open or budget) with no CLIENT span
// under it (and, refused before it began, possibly no resilience.operation.id). The cross-trace breaker detectors need these refusals; the accounting is unchanged
// (no call, no dependency count). Each gets one attempt with no calls, outcome refused.
func (t *trace) refusedOperations(ops []*analyzer.Operation) []*analyzer.Operation {
	var have map[spans.SpanID]bool
	for i := range t.Spans {
		s := &t.Spans[i]
		if s.Kind == spans.KindClient || s.Kind == spans.KindServer {
			continue
		}
		stop := s.Str(spans.AttrStopReason)
		if s.Str(spans.AttrOutcome) != analyzer.OutcomeRefused && stop != "breaker_open" && stop != "budget" {
			continue
		}
		if have == nil {
			have = make(map[spans.SpanID]bool, len(ops))
			for _, op := range ops {
				have[op.SpanID] = true
			}
		}
		if have[s.SpanID] {
			continue // it did make calls: an ordinary operation
		}
		parent := t.Enclosing(i)
		dep, origin := t.refusedDependency(s)
		op := &analyzer.Operation{
			TraceID:       t.ID,
			SpanID:        s.SpanID,
			ID:            s.Str(spans.AttrOpID),
			Name:          s.Str(spans.AttrOpName),
			Caller:        s.Service(),
			Owner:         s.Str(spans.AttrOwner),
			Dependency:    dep,
			Parent:        parent,
			Terminal:      s.Str(spans.AttrTerminal),
			StopReason:    stop,
			StartUnixNano: s.StartUnixNano,
			EndUnixNano:   max(s.StartUnixNano, s.EndUnixNano),
		}
		if op.Owner == "" {
			op.Owner = op.Caller
		}
		if op.Name == "" {
			op.Name = s.Name
		}
		if op.Terminal == "" {
			op.Terminal = "fail-fast"
		}
		if d := intAttr(s, spans.AttrDeadline); d > 0 {
			op.DeadlineUnixNano = d
		}
		if parent != nil {
			setChildCount(parent, parent.ChildCount()+1)
		}
		op.Attempts = []analyzer.Attempt{{Number: 1, Kind: analyzer.KindInitial, SpanID: s.SpanID, StartUnixNano: op.StartUnixNano,
			EndUnixNano: op.EndUnixNano, Outcome: analyzer.OutcomeRefused}}
		if origin != "" {
			op.Attempts[0].Origins = []string{origin} // where the call would have gone
		}
		setRecordedNumber(&op.Attempts[0], -1)
		ops = append(ops, op)
	}
	return ops
}

// refusedDependency names the dependency of a refused operation span s the way its calls would
// have been named (see dependencyName): as a call to the same origin in the trace was, else by
// what the span itself says. origin is the address the call would have gone to.
func (t *trace) refusedDependency(s *spans.Span) (dep, origin string) {
	k := knownOf(s)
	origin = k.origin()
	if origin == "" {
		return "", ""
	}
	for i := range t.calls {
		if t.calls[i].origin == origin {
			return t.calls[i].dep, origin
		}
	}
	return dependencyName(k.calleeName(), k.str(wkRPCService), origin), origin
}
