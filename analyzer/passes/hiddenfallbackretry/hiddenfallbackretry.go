package hiddenfallbackretry

import (
	"cmp"
	"container/heap"
	"fmt"
	"slices"
	"strings"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/passes/internal/audit"
	"github.com/stormwatch/stormwatch/internal/words"
	"github.com/stormwatch/stormwatch/spans"
)

// Detector is the hidden-fallback-retry detector.
var Detector = &analyzer.Detector{
	Name:     "hidden-fallback-retry",
	Title:    "Fallback that retries or calls the failed dependency",
	Doc:      "a fallback branch (resilience.attempt.kind=fallback, or a call to another dependency after the primary's attempts failed) that itself retries or calls the failed dependency again; evidence: primary, fallback, fallback_attempts, calls_to_failed, via, calls_not_listed",
	Severity: analyzer.SeverityWarning,
	Run:      run,
}

func run(pass *analyzer.Pass) error {
	t := pass.Trace
	if t == nil {
		return nil
	}
	skew := pass.RunSettings.Skew()
	// The calls to a failed dependency under each fallback call, found without walking under
	// each: nested fallbacks would walk the levels below each one.
	var under audit.CallsUnder
	// Fallback attempts inside one operation.
	for _, op := range pass.Operations {
		fi := fallbackAt(op)
		if fi <= 0 {
			continue
		}
		check(pass, t, &under, op, op.Attempts[:fi], op.Attempts[fi:], op.Dependency, true)
	}
	// Nothing more to look for when no operation of the trace failed.
	if !slices.ContainsFunc(pass.Operations, failed) {
		return nil
	}
	branches(pass, t, &under)
	// Fallback operations: siblings under one caller, in start order.
	type sib struct {
		anchor int
		op     *analyzer.Operation
	}
	// On the stack for the usual handful of operations.
	var buf [32]sib
	sibs := buf[:0]
	for _, op := range pass.Operations {
		if a := anchor(t, op); a >= 0 {
			sibs = append(sibs, sib{a, op})
		}
	}
	slices.SortStableFunc(sibs, func(a, b sib) int {
		if c := cmp.Compare(a.anchor, b.anchor); c != 0 {
			return c
		}
		return cmp.Compare(a.op.StartUnixNano, b.op.StartUnixNano)
	})
	// The failed earlier siblings under the current anchor, by end: as f's start only grows
	// within an anchor, those that had ended by it only grow too, so the latest of them is kept
	// as they come, not searched for again for each f.
	// It is made at the first failed sibling: a heap handed to container/heap lives on the heap,
	// and most traces have no failed sibling.
	var ended *endHeap
	latest := -1
	for k := 1; k < len(sibs); k++ {
		f := sibs[k]
		if sibs[k-1].anchor != f.anchor {
			latest = -1
			if ended != nil {
				*ended = (*ended)[:0]
			}
		}
		if p := sibs[k-1]; p.anchor == f.anchor && failed(p.op) {
			if ended == nil {
				ended = &endHeap{}
			}
			heap.Push(ended, endAt{p.op.EndUnixNano, k - 1})
		}
		for ended != nil && len(*ended) > 0 && (*ended)[0].end <= f.op.StartUnixNano+skew {
			latest = max(latest, heap.Pop(ended).(endAt).k)
		}
		if sibs[k-1].anchor != f.anchor || len(f.op.Attempts) == 0 {
			continue
		}
		explicit := f.op.Attempts[0].Kind == analyzer.KindFallback
		// The primary: the latest earlier sibling that had failed when f started; in the stock
		// shape only the operation right before counts.
		var primary *analyzer.Operation
		if explicit {
			if latest >= 0 {
				primary = sibs[latest].op
			}
		} else if p := sibs[k-1].op; p.EndUnixNano <= f.op.StartUnixNano+skew && failed(p) {
			primary = p
		}
		if primary == nil || primary.Dependency == f.op.Dependency && !explicit {
			continue
		}
		check(pass, t, &under, f.op, primary.Attempts, f.op.Attempts, primary.Dependency, explicit || strings.HasPrefix(primary.Terminal, "fallback"))
	}
	return nil
}

// maxListed is how many calls a fallback branch's finding lists: a branch nested in another's is
// under it, so n nested branches would list n calls each, the square of the trace in the report.
// The evidence counts the calls past it (calls_not_listed).
const maxListed = 64

// branches handles the reference client's fallback branch: an INTERNAL span marked
// resilience.attempt.kind=fallback under the primary operation's span, everything the fallback did
// beneath it. What is under a branch is read from under's index of the trace, not walked: each
// branch of n nested ones would walk all the levels below it.
func branches(pass *analyzer.Pass, t *analyzer.Trace, under *audit.CallsUnder) {
	var bySpan map[spans.SpanID]*analyzer.Operation
	var most []int32 // the most tries of an operation with a call under each span, made once
	for i := range t.Spans {
		s := &t.Spans[i]
		if s.Kind == spans.KindClient || s.Str(spans.AttrAttemptKind) != string(analyzer.KindFallback) {
			continue
		}
		if bySpan == nil {
			bySpan = make(map[spans.SpanID]*analyzer.Operation, len(pass.Operations))
			for _, op := range pass.Operations {
				bySpan[op.SpanID] = op
			}
		}
		p := t.Parent(i)
		if p < 0 {
			continue
		}
		primary := bySpan[t.Spans[p].SpanID]
		if primary == nil || !failed(primary) {
			continue
		}
		if most == nil {
			most = mostTries(t, under)
		}
		again, tries := len(under.Of(t, i, primary.Dependency)), int(most[i])
		if again == 0 && tries < 2 {
			continue
		}
		calls := under.All(t, i)
		listed := calls[:min(len(calls), maxListed)]
		ids := make([]spans.SpanID, len(listed))
		for k, j := range listed {
			ids[k] = t.Spans[j].SpanID
		}
		name, ok := strings.CutPrefix(s.Str(spans.AttrTerminal), "fallback:")
		if !ok || name == "" {
			name = s.Name
		}
		report(pass, primary, audit.HexIDs(ids), len(calls)-len(listed), primary.Dependency, name, tries, again, "", tries > 1)
	}
}

// mostTries is, for each span of t, the most tries of an operation with a call under it (the span
// not included), 0 for none: each span's from its children's, in one pass from the leaves up.
func mostTries(t *analyzer.Trace, under *audit.CallsUnder) []int32 {
	most := make([]int32, t.Len())
	var counter analyzer.TryCounter
	order := under.Preorder(t)
	for k := len(order) - 1; k >= 0; k-- {
		j := int(order[k])
		p := t.Parent(j)
		if p < 0 {
			continue
		}
		v := most[j]
		if t.Spans[j].Kind == spans.KindClient {
			if op := t.Operation(j); op != nil {
				v = max(v, int32(counter.Tries(op)))
			}
		}
		most[p] = max(most[p], v)
	}
	return most
}

// fallbackAt is the index of op's first fallback attempt, -1 when none.
func fallbackAt(op *analyzer.Operation) int {
	for i := range op.Attempts {
		if op.Attempts[i].Kind == analyzer.KindFallback {
			return i
		}
	}
	return -1
}

func failed(op *analyzer.Operation) bool {
	return len(op.Attempts) > 0 && op.Attempts[len(op.Attempts)-1].Outcome != analyzer.OutcomeOK
}

// anchor is the span under which op's caller decided: the caller span itself, or - when the
// reference client made an INTERNAL span for the operation - that span's parent.
func anchor(t *analyzer.Trace, op *analyzer.Operation) int {
	i, ok := t.Lookup(op.SpanID)
	if !ok {
		return -1
	}
	s := &t.Spans[i]
	if s.Kind == spans.KindServer {
		return i
	}
	if id, name := audit.Strs(s, spans.AttrOpID, spans.AttrOpName); id != "" || name != "" {
		if p := t.Parent(i); p >= 0 {
			return p
		}
	}
	return i
}

// check reports the fallback attempts fb of op when they retried (only when known to be a
// fallback) or reached the primary's dependency again.
func check(pass *analyzer.Pass, t *analyzer.Trace, under *audit.CallsUnder, op *analyzer.Operation, primary, fb []analyzer.Attempt, failedDep string, known bool) {
	if len(primary) == 0 || primary[len(primary)-1].Outcome == analyzer.OutcomeOK {
		return
	}
	tries := 0
	var ids []string
	again := 0
	via := ""
	for i := range fb {
		a := &fb[i]
		if a.Kind != analyzer.AttemptKindResend && a.Kind != analyzer.KindHedge {
			tries++
		}
		for _, id := range a.Calls {
			ids = append(ids, id.String())
			ci, ok := t.Lookup(id)
			if !ok {
				continue
			}
			if t.Dependency(ci) == failedDep {
				again++
				continue
			}
			for _, j := range under.Of(t, ci, failedDep) {
				again++
				ids = append(ids, t.Spans[j].SpanID.String())
				if via == "" {
					via = t.Spans[j].Service()
				}
			}
		}
	}
	retried := known && tries > 1
	if !retried && again == 0 {
		return
	}
	report(pass, op, ids, 0, failedDep, op.Dependency, tries, again, via, retried)
}

// report makes the finding: op is the operation the fallback belongs to (or is); ids are the
// calls it lists, and unlisted how many more there were.
func report(pass *analyzer.Pass, op *analyzer.Operation, ids []string, unlisted int, failedDep, fallback string, tries, again int, via string, retried bool) {
	what := []string{}
	if retried {
		what = append(what, "retried "+words.Plural(tries, "time", "times"))
	}
	if again > 0 {
		s := fmt.Sprintf("called the failed %s again %s", failedDep, words.Plural(again, "time", "times"))
		if via != "" {
			s += " through " + via
		}
		what = append(what, s)
	}
	ev := analyzer.Evidence{
		"primary":           analyzer.Text(failedDep),
		"fallback":          analyzer.Text(fallback),
		"fallback_attempts": analyzer.Int(tries),
		"calls_to_failed":   analyzer.Int(again),
	}
	if via != "" {
		ev["via"] = analyzer.Text(via)
	}
	if unlisted > 0 {
		ev["calls_not_listed"] = analyzer.Int(unlisted)
	}
	pass.Report(analyzer.Finding{
		Severity:   pass.Detector.Severity,
		SpanIDs:    ids,
		Service:    op.Owner,
		Dependency: failedDep,
		Summary: fmt.Sprintf("%s's fallback %s after %s failed %s: the degraded path hides more load",
			op.Owner, fallback, failedDep, strings.Join(what, " and ")),
		Action:   "make the fallback a single cheap attempt that never reaches the failed dependency, or count its calls in the same retry budget",
		Evidence: ev,
	})
}

// endAt is a failed sibling's end and its index among the siblings; endHeap keeps the earliest
// end first.
type endAt struct {
	end int64
	k   int
}

type endHeap []endAt

func (h endHeap) Len() int           { return len(h) }
func (h endHeap) Less(i, j int) bool { return h[i].end < h[j].end }
func (h endHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *endHeap) Push(x any)        { *h = append(*h, x.(endAt)) }
func (h *endHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
