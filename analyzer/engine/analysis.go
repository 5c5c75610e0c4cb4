package engine

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/cost"
	"github.com/stormwatch/stormwatch/analyzer/internal/build"
	"github.com/stormwatch/stormwatch/spans"
)

// traceResult is one analysis of one trace: immutable once held, but for ops (below);
// re-analysis makes a new one.
type traceResult struct {
	trace *trace
	// ops are the analysis's operations, nOps of them. A held result keeps them as values (an
	// offline analyzer: detached and compacted) or packed in packedOps (a live one: see hold and
	// Config.holdsOperationsPacked), and is immutable: whoever reads packed operations back
	// (a snapshot's reader, a trace view, the window) keeps them for itself.
	ops       []*analyzer.Operation
	packedOps []byte
	nOps      int
	findings  []analyzer.Finding
	errs      []string // detectors that failed
	// acct is the trace's accounting, made once with the analysis (outside the analyzer's lock)
	// and added to or taken from the totals as the trace is published or re-analyzed.
	acct []acctRow
	// costs are what retries cost each request of the trace (analyzer/cost), made with the
	// analysis and added to or taken from the book like acct.
	costs []cost.Request
	// released: the spans and the index were dropped after analysis (Config.ReleaseSpans).
	released bool
}

// analyzeTrace is the whole per-trace pipeline: index, operations, accounting, detectors. The
// trace it returns with the result uses sc's buffers. When src is not nil, ss's strings alias src
// and the result is detached from it (see detachOps and detachRest); its operations too when opsKept says they will
// be held as values (see hold), and they are then compacted.
func analyzeTrace(id spans.TraceID, ss []spans.Span, truncated int, cfg *Config, seed maphash.Seed, in *interner, sc *scratch, src *sources, opsKept bool) *traceResult {
	// The result and its trace are the scratch's: a result is held as a copy of its own (see
	// hold), without the trace.
	r, t := &sc.trace.r, &sc.trace.t
	*r, *t = traceResult{}, trace{}
	r.trace = t
	sc.carry = cfg.carried
	buildTrace(t, id, ss, truncated, sc)
	r.ops = t.inferOperations(seed, cfg.Settings.Skew(), in, sc)
	var keepOps []*analyzer.Operation // what is held as values, detached from the spans below
	if opsKept {
		t.Index().Ops = sc.bufs.compact(t.Index().Ops)
		r.ops, keepOps = t.Index().Ops, t.Index().Ops
	}
	r.acct = t.accountRows(r.ops, sc)
	detachOps(keepOps, r.acct, src, in)
	t.publishCalls(sc)
	// The pass and its Report are the scratch's, made once and reused trace after trace: made
	// per trace, they were three allocations a trace (the pass, the closure and what it shares).
	// What retries cost each request, measured before the detectors so that they read it
	// (Trace.AddedLatency) instead of walking the critical path again.
	r.costs = sc.costs.Measure(&t.Trace, r.ops, cfg.Settings.Skew())
	t.Index().RootAdded = sc.rootAdded(&t.Trace, r.costs)
	rp := &sc.reporter
	rp.r, rp.id = r, id
	if sc.report == nil {
		sc.report = rp.report
	}
	for _, d := range cfg.Detectors {
		if d.Scope != analyzer.ScopeTrace {
			continue
		}
		// Each detector gets its Pass afresh: what one sets in its own (its Trace, Operations or
		// RunSettings; an append to Operations copies) the detectors after it do not see.
		rp.pass = analyzer.Pass{Detector: d, Trace: &t.Trace, Operations: slices.Clip(r.ops), RunSettings: cfg.Settings, Report: sc.report}
		if err := runDetector(d, &rp.pass); err != nil {
			r.errs = append(r.errs, err.Error())
		}
	}
	*rp = reporter{} // nothing of this trace stays reachable from the pooled scratch
	t.Index().RootAdded = nil
	if len(r.costs) > 0 && r.costs[0].Probability > 0 {
		// After the detectors of the trace: the windowed ones read it.
		for _, op := range r.ops {
			op.SampleProbability = r.costs[0].Probability
		}
	}
	detachCosts(r.costs, src, in)
	sortFindings(r.findings)
	for i := range r.findings {
		t.countFinding(&r.findings[i])
		t.stampFinding(&r.findings[i])
	}
	t.makeNotes()
	detachRest(r, src)
	// The scratch's: they go back to the pool with the scratch.
	t.calls, t.Index().Calls = nil, nil
	return r
}

// reporter is one trace's detector pass and what its Report needs: one Report for all the
// detectors of the trace, which names whichever detector is running.
type reporter struct {
	pass     analyzer.Pass
	r        *traceResult
	id       spans.TraceID
	traceHex string
}

// report is Pass.Report: it keeps a copy of f.
func (rp *reporter) report(f analyzer.Finding) {
	f = f.Clone() // the pass's memory is the next trace's: see Pass.Report
	if f.Detector == "" {
		f.Detector = rp.pass.Detector.Name
	}
	if f.TraceID == "" {
		// Made once per trace, for its first finding: most traces have none.
		if rp.traceHex == "" {
			rp.traceHex = rp.id.String()
		}
		f.TraceID = rp.traceHex
	}
	rp.r.findings = append(rp.r.findings, f)
}

// publishCalls gives the detectors what the Trace answers about each call (TraceIndex.Calls):
// the operation, origin, dependency, outcome and status inference found, copied out of its own facts about
// the calls, most of which are inference's business alone.
func (t *trace) publishCalls(sc *scratch) {
	facts := slices.Grow(sc.facts[:0], len(t.calls))[:len(t.calls)]
	for k := range t.calls {
		c := &t.calls[k]
		facts[k] = build.CallFacts{Op: c.op, Origin: c.origin, Dependency: c.dep, Outcome: c.outcome, Status: c.status, GiveUp: c.giveUp}
	}
	sc.facts = facts
	t.Index().Calls = facts
}

// runDetector runs one detector and turns a panic into an error: a bug in one detector must not
// take the collector down with it.
func runDetector(d *analyzer.Detector, pass *analyzer.Pass) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("detector %s panicked: %v", d.Name, p)
		}
	}()
	if err := d.Run(pass); err != nil {
		return fmt.Errorf("detector %s: %w", d.Name, err)
	}
	return nil
}

// countFinding credits a finding to the operations whose spans it names.
func (t *trace) countFinding(f *analyzer.Finding) {
	var seen []*analyzer.Operation
	for _, hexID := range f.SpanIDs {
		var id spans.SpanID
		if len(hexID) != 16 || decodeHex(id[:], hexID) != nil {
			continue
		}
		i, ok := t.Lookup(id)
		if !ok {
			continue
		}
		op := t.Operation(i)
		if op == nil {
			op = t.Enclosing(i)
		}
		if op != nil && !slices.Contains(seen, op) {
			seen = append(seen, op)
			op.Findings++
		}
	}
}

// stampFinding sets when f happened: the earliest start of the spans it names, or of the trace
// when it names none the trace holds.
func (t *trace) stampFinding(f *analyzer.Finding) {
	if f.TimeUnixNano != 0 || len(t.Spans) == 0 {
		return
	}
	var at int64
	for _, hexID := range f.SpanIDs {
		var id spans.SpanID
		if len(hexID) != 16 || decodeHex(id[:], hexID) != nil {
			continue
		}
		if i, ok := t.Lookup(id); ok {
			if s := t.Spans[i].StartUnixNano; at == 0 || s < at {
				at = s
			}
		}
	}
	if at == 0 {
		for i := range t.Spans {
			if s := t.Spans[i].StartUnixNano; s > 0 && (at == 0 || s < at) {
				at = s
			}
		}
	}
	f.TimeUnixNano = at
}

func sortFindings(fs []analyzer.Finding) {
	slices.SortStableFunc(fs, func(a, b analyzer.Finding) int {
		if c := cmp.Compare(b.Severity, a.Severity); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Detector, b.Detector); c != 0 {
			return c
		}
		if c := cmp.Compare(a.TraceID, b.TraceID); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Dependency, b.Dependency); c != 0 {
			return c
		}
		return cmp.Compare(a.Summary, b.Summary)
	})
}

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
		joined := false
		opCalls := sc.callsOf(k)
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
	// The rows are held as long as the trace: a copy of exactly their number (most traces have
	// one or two), made from the scratch's, which is cleared so that it keeps no trace's strings.
	var out []acctRow
	if len(rows) > 0 {
		out = append(out, rows...)
	}
	clear(rows)
	sc.rows = rows[:0]
	return out
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

func decodeHex(dst []byte, s string) error {
	for i := range dst {
		hi, ok1 := unhex(s[2*i])
		lo, ok2 := unhex(s[2*i+1])
		if !ok1 || !ok2 {
			return fmt.Errorf("bad hex %q", s)
		}
		dst[i] = hi<<4 | lo
	}
	return nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// view builds the TUI's view of an analyzed trace. Called on demand (TraceLookup), not per trace.
func (r *traceResult) view() *TraceView {
	t := r.trace
	if t == nil {
		return &TraceView{Operations: r.ops, Findings: r.findings,
			Notes: []string{"spans released after analysis (offline mode): operations and findings only"}}
	}
	v := &TraceView{
		TraceID:    t.ID,
		Spans:      make([]spans.Span, len(t.Index().Order)),
		Depth:      make([]int, len(t.Index().Order)),
		Operations: r.ops,
		Findings:   r.findings,
		Truncated:  t.Truncated,
		Notes:      t.Notes(),
	}
	for k, i := range t.Index().Order {
		v.Spans[k] = t.Spans[i]
		v.Depth[k] = int(t.depth[i])
	}
	for _, c := range analyzer.LeafChains(r.ops) {
		if l := c.RetryingLayers(); len(l) > 0 {
			v.Layers = l
			v.LeafDependency = c.Dependency
			break
		}
	}
	for _, root := range t.Roots() {
		if t.Spans[root].ParentID != (spans.SpanID{}) {
			continue // an orphan is no request
		}
		for _, s := range cost.CriticalPath(&t.Trace, r.ops, int(root)) {
			s.Span = t.Index().Pos[s.Span] // in display order, as Spans
			v.Path = append(v.Path, s)
		}
	}
	return v
}

// detachCosts gives the costs' names memory of their own where they alias src (see detachOps):
// interned, since entry points and dependencies are few and repeat trace after trace.
func detachCosts(cs []cost.Request, src *sources, in *interner) {
	if src == nil || len(cs) == 0 {
		return
	}
	in.lockStr()
	defer in.unlockStr()
	str := func(s *string) {
		if src.owns(*s) {
			*s = in.strLocked(*s)
		}
	}
	for i := range cs {
		c := &cs[i]
		str(&c.Service)
		str(&c.Name)
		for j := range c.Deps {
			str(&c.Deps[j].Dependency)
		}
	}
}
