package engine

import (
	"cmp"
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"slices"
	"unsafe"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/cost"
	"github.com/stormwatch/stormwatch/analyzer/internal/build"
	"github.com/stormwatch/stormwatch/spans"
)

// One trace's analysis (analyzeTrace): its index (trace.go), its operations (infer.go), its
// accounting (account.go), what retries cost (analyzer/cost), then the trace's detectors, whose
// findings are copied, sorted and stamped. It runs in a job (settle.go) outside the Engine's lock,
// on a pooled scratch (scratch.go): what it returns is detached from the spans it read (store.go).

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

// keptOps is how many of the result's operations can be read back: nOps, or none when it keeps
// none (a released trace that is to be forgotten, see release), which still counts them in nOps
// for the report.
func (r *traceResult) keptOps() int {
	if r.ops == nil && r.packedOps == nil {
		return 0
	}
	return r.nOps
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
	// Operations held as values keep their names: made one by one, not in chunks they would keep.
	sc.derived.made.held = opsKept
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
	earliest := int64(-1) // the trace's earliest start, found at the first finding that needs it
	for i := range r.findings {
		t.creditFinding(&r.findings[i], &earliest)
	}
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
	traceHex string // the trace id of the trace's findings, in its first finding's copy
	hex      [2 * len(spans.TraceID{})]byte
}

// report is Pass.Report: it keeps a copy of f.
func (rp *reporter) report(f analyzer.Finding) {
	first := f.TraceID == "" && rp.traceHex == ""
	if first {
		// Most traces have no finding: the id is written out at the first one, into the
		// buffer its copy takes anyway, and the trace's other findings share it.
		hex.Encode(rp.hex[:], rp.id[:])
		f.TraceID = unsafe.String(&rp.hex[0], len(rp.hex))
	}
	f = f.Clone() // the pass's memory is the next trace's: see Pass.Report
	if first {
		rp.traceHex = f.TraceID
	}
	if f.Detector == "" {
		f.Detector = rp.pass.Detector.Name
	}
	if f.TraceID == "" {
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

// creditFinding credits a finding to the operations whose spans it names (each once: a span's own
// operation, else the one it works for) and, unless it has a time already, sets when it happened:
// the earliest start of the spans it names, or of the trace when it names none the trace holds.
// Each span id is decoded and looked up once for both. earliest is the trace's earliest start,
// -1 until the first finding that names none of its spans has it found: one scan a trace.
func (t *trace) creditFinding(f *analyzer.Finding, earliest *int64) {
	// Most findings name a few operations: a scan of those credited, no allocation. One that
	// names the calls of as many operations as a wide trace has (a loop's retries, a fallback's
	// calls) is credited through a map past 16, so that it costs its span ids, not their square.
	var seenOps [16]*analyzer.Operation
	seen := seenOps[:0]
	var seenMap map[*analyzer.Operation]struct{}
	var at int64
	for _, hexID := range f.SpanIDs {
		var id spans.SpanID
		if len(hexID) != 16 || !decodeHex(id[:], hexID) {
			continue
		}
		i, ok := t.Lookup(id)
		if !ok {
			continue
		}
		if s := t.Spans[i].StartUnixNano; at == 0 || s < at {
			at = s
		}
		op := t.Operation(i)
		if op == nil {
			op = t.Enclosing(i)
		}
		if op == nil {
			continue
		}
		if seenMap != nil {
			if _, ok := seenMap[op]; ok {
				continue
			}
			seenMap[op] = struct{}{}
		} else if slices.Contains(seen, op) {
			continue
		} else if len(seen) < len(seenOps) {
			seen = append(seen, op)
		} else {
			seenMap = make(map[*analyzer.Operation]struct{}, 2*len(seenOps))
			for _, o := range seen {
				seenMap[o] = struct{}{}
			}
			seenMap[op] = struct{}{}
		}
		op.Findings++
	}
	if f.TimeUnixNano != 0 || len(t.Spans) == 0 {
		return
	}
	if at == 0 {
		if *earliest < 0 { // once per trace, however many findings name none of its spans
			*earliest = 0
			for i := range t.Spans {
				if s := t.Spans[i].StartUnixNano; s > 0 && (*earliest == 0 || s < *earliest) {
					*earliest = s
				}
			}
		}
		at = *earliest
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

// decodeHex decodes s, 2*len(dst) hex digits of either case, into dst, and reports whether every
// byte of s was one. It runs for every span id of every finding (creditFinding): a table read per
// digit, where a comparison per range of digits was a few branches each.
func decodeHex(dst []byte, s string) bool {
	var bad byte
	for i := range dst {
		hi, lo := hexDigit[s[2*i]], hexDigit[s[2*i+1]]
		bad |= hi | lo
		dst[i] = hi<<4 | lo
	}
	return bad&0xf0 == 0
}

// hexDigit is each byte's value as a hex digit, 0xff for a byte that is none.
var hexDigit = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i := range 10 {
		t['0'+i] = byte(i)
	}
	for i := range 6 {
		t['a'+i], t['A'+i] = byte(10+i), byte(10+i)
	}
	return t
}()

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
		Notes:      t.issues.notes(),
	}
	for k, i := range t.Index().Order {
		v.Spans[k] = t.Spans[i]
		v.Depth[k] = int(t.depth[i])
	}
	// The first chain with a retrying layer, alone measured: every chain's layers (LeafChains) is
	// the square of a deep trace's depth.
	if c, ok := analyzer.FirstRetryingChain(r.ops); ok {
		v.Layers = c.RetryingLayers()
		v.LeafDependency = c.Dependency
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
