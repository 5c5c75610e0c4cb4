package engine

import (
	"slices"
	"strings"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// Accounting: what one analysis contributes to the report's per-dependency counts (acctRow:
// physical calls, logical operations, outcomes, per origin and caller) and to the last attempts
// per dependency, made with the analysis, outside the Engine's lock, so that publishing it
// (report.go) is a few map updates.

// intentAt is one logical operation toward one dependency, for counting each once.
type intentAt struct {
	dep    string
	intent uint64
}

// acctRow is one trace's count of physical calls and logical operations toward one dependency,
// from one caller, with one outcome.
type acctRow struct {
	// dep is the dependency's name (see dependencyName), origin the address the calls went to:
	// detail, one dependency has as many as it has replicas and ports.
	dep, origin, service, caller, status string
	physical, logical                    int32
}

// accountRows counts, per dependency, origin, caller and outcome, the physical calls, the logical operations
// (distinct intents, so copies made by the retries of layers above count once) and the outcomes,
// once per analysis, and notes the trace's split-trace issues. Few intents and rows per trace in
// the common case: slices, each becoming a map past 16 entries, so that ten thousand distinct
// operations under one caller stay linear.
func (t *trace) accountRows(ops []*analyzer.Operation, sc *scratch) []acctRow {
	seenList := sc.seen[:0]
	var seenMap map[intentAt]struct{}
	seen := func(ia intentAt) bool {
		if seenMap != nil {
			if _, ok := seenMap[ia]; ok {
				return true
			}
			seenMap[ia] = struct{}{}
			return false
		}
		if slices.Contains(seenList, ia) {
			return true
		}
		seenList = append(seenList, ia)
		if len(seenList) > 16 {
			seenMap = make(map[intentAt]struct{}, 64)
			for _, x := range seenList {
				seenMap[x] = struct{}{}
			}
		}
		return false
	}
	type rowKey struct{ dep, origin, caller, status, service string }
	rows := sc.rows[:0]
	var idx map[rowKey]int
	for k, op := range ops {
		opCalls := sc.callsOf(k)
		joined := t.continuesOtherTrace(op, opCalls)
		for _, ck := range opCalls {
			c := &t.calls[ck]
			if c.below {
				continue // counted from the callee's SERVER spans under it
			}
			logical := !joined && !seen(intentAt{c.dep, op.IntentKey()})
			caller, status := op.Caller, statusKey(c.outcome, c.status)
			k := -1
			if idx != nil {
				if v, ok := idx[rowKey{c.dep, c.origin, caller, status, c.service}]; ok {
					k = v
				}
			} else {
				for i := range rows {
					if r := &rows[i]; r.dep == c.dep && r.origin == c.origin && r.caller == caller && r.status == status && r.service == c.service {
						k = i
						break
					}
				}
			}
			if k < 0 {
				k = len(rows)
				rows = append(rows, acctRow{dep: c.dep, origin: c.origin, caller: caller, status: status, service: c.service})
				if idx != nil {
					idx[rowKey{c.dep, c.origin, caller, status, c.service}] = k
				} else if len(rows) > 16 {
					idx = make(map[rowKey]int, 64)
					for i, r := range rows {
						idx[rowKey{r.dep, r.origin, r.caller, r.status, r.service}] = i
					}
				}
			}
			r := &rows[k]
			r.physical++
			if logical {
				r.logical++
			}
		}
	}
	clear(seenList)
	sc.seen = seenList[:0]
	// The rows are the scratch's: hold copies them out with the result, in its allocation when
	// there is one row (most traces), and the scratch's reset clears them so that it keeps no
	// trace's strings.
	sc.rows = rows
	return rows
}

// continuesOtherTrace reports whether operation op, whose calls are opCalls, continues an
// operation of another trace (its calls then count as physical calls, not as a new logical
// operation), and notes the trace's split-trace issues: such a continuation, or a failed
// operation that starts at a CLIENT span with no parent and nothing joining it to another trace.
func (t *trace) continuesOtherTrace(op *analyzer.Operation, opCalls []int32) bool {
	joined := false
	if op.Parent == nil && len(opCalls) > 0 {
		first := &t.Spans[t.calls[opCalls[0]].idx]
		if first.Kind == spans.KindClient && (first.ParentID.IsZero() || t.Index().Parent[t.calls[opCalls[0]].idx] < 0) {
			// A client with no parent span: its other attempts, if any, are in other traces.
			for _, l := range first.Links {
				if l.TraceID != t.ID {
					joined = true
				}
			}
			// The reference client numbers its attempts: a trace that starts at attempt 2
			// of an operation id continues that operation, wherever attempt 1 is.
			if first.Str(spans.AttrOpID) != "" && op.Attempts[0].RecordedNumber() > 1 {
				joined = true
			}
			if joined {
				t.issues.splitLinked++
			} else if first.Str(spans.AttrOpID) == "" && op.Attempts[len(op.Attempts)-1].Outcome != analyzer.OutcomeOK {
				t.issues.clientRoots++
			}
		}
	}
	return joined
}

// depLastAttempt is one trace's LastAttempt to one dependency, made with the analysis (outside
// the analyzer's lock) and merged into the analyzer's as it is published. dep may alias the
// trace's spans.
type depLastAttempt struct {
	dep string
	LastAttempt
}

// appendLastAttempts appends, per dependency of ops, the start of the latest attempt and of the
// latest refused one. The refused operations that never made a call (refusedOperations) count:
// they are most of what an open breaker leaves. A trace calls few dependencies: a slice, becoming
// a map past 16 of them, so that a trace calling thousands stays linear.
func appendLastAttempts(dst []depLastAttempt, ops []*analyzer.Operation) []depLastAttempt {
	from := len(dst)
	var idx map[string]int
	for _, op := range ops {
		if op.Dependency == "" {
			continue
		}
		k := -1
		if idx != nil {
			if v, ok := idx[op.Dependency]; ok {
				k = v
			}
		} else {
			for i := from; i < len(dst); i++ {
				if dst[i].dep == op.Dependency {
					k = i
					break
				}
			}
		}
		for i := range op.Attempts {
			at := &op.Attempts[i]
			l := LastAttempt{StartUnixNano: at.StartUnixNano}
			if at.Outcome == analyzer.OutcomeRefused {
				l.RefusedStartUnixNano, l.Refused = at.StartUnixNano, true
			}
			if k < 0 {
				k = len(dst)
				dst = append(dst, depLastAttempt{dep: op.Dependency, LastAttempt: l})
				if idx != nil {
					idx[op.Dependency] = k
				} else if len(dst)-from > 16 {
					idx = make(map[string]int, 64)
					for j := from; j < len(dst); j++ {
						idx[dst[j].dep] = j
					}
				}
				continue
			}
			dst[k].merge(l)
		}
	}
	return dst
}

// addLastAttempts merges ls into m. The values are pointers so that an update never stores the
// key again: a key is a copy, made when the dependency is first seen, where ls's may alias spans
// that are not kept.
func addLastAttempts(m map[string]*LastAttempt, ls []depLastAttempt) {
	for i := range ls {
		l := &ls[i]
		if cur := m[l.dep]; cur != nil {
			cur.merge(l.LastAttempt)
			continue
		}
		v := l.LastAttempt
		m[strings.Clone(l.dep)] = &v
	}
}

// copyLastAttempts is m as Snapshot.LastAttempts: values of their own, which the analyzer does
// not change afterwards.
func copyLastAttempts(m map[string]*LastAttempt) map[string]LastAttempt {
	out := make(map[string]LastAttempt, len(m))
	for k, v := range m {
		out[k] = *v
	}
	return out
}
