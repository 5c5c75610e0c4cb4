package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/analyzer/workload"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/spans/spanstest"
)

// fixtureTraces is every fixture's traces, fixture after fixture, each in arrival order.
func fixtureTraces(t testing.TB) [][]spans.Span {
	t.Helper()
	var traces [][]spans.Span
	for _, f := range spanstest.FixtureTraces(t, spans.DecodeOptions{}) {
		traces = append(traces, f.Traces...)
	}
	return traces
}

// namingDetector reports one finding per trace naming its CLIENT spans, so that the views compared
// below carry findings and operations credited with them.
var namingDetector = &analyzer.Detector{Name: "naming", Run: func(p *analyzer.Pass) error {
	var ids []string
	for i := range p.Trace.Len() {
		if p.Trace.Spans[i].Kind == spans.KindClient {
			ids = append(ids, p.Trace.Spans[i].SpanID.String())
		}
	}
	if len(ids) > 0 {
		p.Report(analyzer.Finding{Summary: "clients", SpanIDs: ids})
	}
	return nil
}}

// analyzeAlone analyzes one trace's spans (a copy: buildTrace sorts them in place) with a scratch
// of its own, as the analyzer's passes do but without packing them first.
func analyzeAlone(a *Engine, ss []spans.Span, truncated int) *traceResult {
	sc := a.intern.getScratch() // not given back: the result's trace uses it
	return analyzeTrace(ss[0].TraceID, slices.Clone(ss), truncated, &a.cfg, a.seed, a.intern, sc, nil, !a.cfg.holdsOperationsPacked())
}

// blocks packs spans as held blocks, n spans a block, as batches of n would bring them.
func blocks(ss []spans.Span, n int) []byte {
	var out, buf []byte
	for len(ss) > 0 {
		k := min(n, len(ss))
		out = appendBlock(out, ss[:k], &buf)
		ss = ss[k:]
	}
	return out
}

// pendingOf is a trace's pending blocks in one buffer (a copy).
func pendingOf(ts *traceState) []byte {
	return bytes.Join(append([][]byte{ts.pending}, ts.later()...), nil)
}

// blocksLen counts the spans held in a trace's blocks.
func blocksLen(t *testing.T, b []byte) int {
	t.Helper()
	total := 0
	if err := eachBlock(b, func(block []byte) error {
		n, err := spans.PackedLen(block)
		total += n
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return total
}

// TestPackedViewIsTheAnalysisView: for every trace of every fixture, the view rebuilt from the
// packed spans and the held (stripped) analysis is the view of the analysis itself, field for
// field, unexported ones included - whether the spans were packed in one block or several, and
// whether the operations are held packed (live) or as values (offline).
func TestPackedViewIsTheAnalysisView(t *testing.T) {
	for _, window := range []time.Duration{0, -1} {
		a := New(Config{Detectors: []*analyzer.Detector{namingDetector}, WindowInterval: window})
		packOps := a.cfg.holdsOperationsPacked()
		for _, ss := range fixtureTraces(t) {
			id := ss[0].TraceID
			res := analyzeAlone(a, ss, 0)
			want := res.view()
			held, meta := hold(res, &opsPacker{}, packOps)
			if held.trace != nil {
				t.Fatalf("trace %s: the held analysis keeps its trace", id)
			}
			if (held.ops == nil) != (packOps && held.nOps > 0) {
				t.Fatalf("trace %s, operations packed %v: held %d operations as values, %d bytes packed", id, packOps, len(held.ops), len(held.packedOps))
			}
			for _, n := range []int{len(ss), 3} {
				if got := a.viewHeld(id, *held, meta, blocks(ss, n)); !reflect.DeepEqual(got, want) {
					t.Fatalf("trace %s, %d spans a block, operations packed %v: the view from the packed spans differs:\n got %+v\nwant %+v", id, n, packOps, got, want)
				}
			}
		}
		// A truncated trace keeps its flag and note.
		ss := fixtureTraces(t)[0]
		res := analyzeAlone(a, ss, 3)
		want := res.view()
		held, meta := hold(res, &opsPacker{}, packOps)
		if got := a.viewHeld(ss[0].TraceID, *held, meta, blocks(ss, len(ss))); !want.Truncated || !reflect.DeepEqual(got, want) {
			t.Fatalf("truncated trace: got %+v\nwant %+v", got, want)
		}
	}
}

// TestSettledTracesHoldOnlyPackedSpans: once settled, a trace holds no pending spans and no
// index, only its packed spans, and the counts say so.
func TestSettledTracesHoldOnlyPackedSpans(t *testing.T) {
	a := New(Config{Detectors: []*analyzer.Detector{namingDetector}, Settle: time.Second})
	total := 0
	for _, ss := range fixtureTraces(t) {
		total += len(ss)
		if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: ss}); err != nil {
			t.Fatal(err)
		}
	}
	a.Settle(time.Unix(0, 1).Add(1000 * time.Hour))
	held, bytes := 0, 0
	for key, ts := range a.traces {
		if ts.id != key {
			continue // a delivery's trace, filed with its publisher's
		}
		if ts.pending != nil || ts.more != nil || ts.npending != 0 || ts.res == nil || ts.res.trace != nil || ts.packed == nil {
			t.Fatalf("trace %s: %d pending, packed %d bytes, result %+v", ts.id, ts.npending, len(ts.packed), ts.res)
		}
		if n := blocksLen(t, ts.packed); n != ts.held || n != ts.resSpans {
			t.Fatalf("trace %s: %d spans packed, %d held, %d analyzed", ts.id, n, ts.held, ts.resSpans)
		}
		held += ts.held
		bytes += len(ts.packed)
	}
	st := a.Stats()
	if st.SpansHeld != held || st.PackedBytes != bytes || st.SpansHeld > total || st.SpansHeld < total*9/10 {
		t.Fatalf("stats %+v; %d spans packed in %d bytes, %d received", st, held, bytes, total)
	}
	if r := a.Report(); r.Input.Spans != held {
		t.Fatalf("input %+v, %d spans held", r.Input, held)
	}
}

// TestPendingSpansArePacked: spans waiting for their trace to settle are held packed too, and
// counted in PackedBytes; an analysis takes them out and the counts follow.
func TestPendingSpansArePacked(t *testing.T) {
	a := New(Config{Detectors: []*analyzer.Detector{namingDetector}, Settle: time.Hour})
	total := 0
	for _, ss := range fixtureTraces(t) {
		total += len(ss)
		if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: ss}); err != nil {
			t.Fatal(err)
		}
	}
	pending, bytes := 0, 0
	for key, ts := range a.traces {
		if ts.id != key {
			continue // a delivery's trace, filed with its publisher's
		}
		if ts.packed != nil || ts.res != nil {
			t.Fatalf("trace %s analyzed before it settled", ts.id)
		}
		if n := blocksLen(t, pendingOf(ts)); n != ts.npending {
			t.Fatalf("trace %s: %d spans in its pending blocks, %d counted", ts.id, n, ts.npending)
		}
		pending += ts.npending
		bytes += ts.pendingBytes()
	}
	if st := a.Stats(); st.SpansHeld != total || pending != total || st.PackedBytes != bytes {
		t.Fatalf("stats %+v: %d pending spans in %d bytes, %d received", st, pending, bytes, total)
	}
	a.Flush()
	bytes = 0
	for key, ts := range a.traces {
		if ts.id != key {
			continue // a delivery's trace, filed with its publisher's
		}
		bytes += len(ts.packed) + ts.pendingBytes()
	}
	if st := a.Stats(); st.PackedBytes != bytes || st.PendingTraces != 0 {
		t.Fatalf("after Flush: stats %+v, %d bytes held", st, bytes)
	}
}

// TestTraceFromManyBatchesIsHeldAsOneBlock: a trace whose spans arrive one batch at a time is held
// pending as a block per batch, the first four batches' each in the buffer it was copied into as
// it arrived (earlier batches' are not copied again), later ones appended to the fourth's - at
// most four buffers, whatever the number of batches - and as one block once analyzed, smaller
// than those blocks together (they repeat their strings and headers); a trace that came in one
// batch keeps its block as is.
func TestTraceFromManyBatchesIsHeldAsOneBlock(t *testing.T) {
	var many []spans.Span
	for _, ss := range fixtureTraces(t) {
		if len(ss) >= 10 {
			many = ss
			break
		}
	}
	if many == nil {
		t.Fatal("no fixture trace of 10 spans or more")
	}
	a := New(Config{Detectors: []*analyzer.Detector{namingDetector}, Settle: time.Second})
	made := 0
	a.packed = func(b []byte) { made += len(b) }
	for i := range many {
		if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: many[i : i+1]}); err != nil {
			t.Fatal(err)
		}
	}
	ts := a.traces[many[0].TraceID]
	blocks := func(b []byte) int {
		n := 0
		if err := eachBlock(b, func([]byte) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := blocks(pendingOf(ts)); n != len(many) {
		t.Fatalf("%d pending blocks for %d batches", n, len(many))
	}
	pendingBytes := ts.pendingBytes()
	if made != pendingBytes {
		t.Fatalf("%d bytes of buffers made for %d pending bytes", made, pendingBytes)
	}
	later := ts.later()
	if len(later) != 3 {
		t.Fatalf("%d buffers after the first for %d batches, want 3", len(later), len(many))
	}
	for i, b := range append([][]byte{ts.pending}, later[:2]...) {
		if !oneBlock(b) || cap(b) != len(b) {
			t.Fatalf("buffer %d: %d bytes in %d, not one block exactly sized: copied again", i, len(b), cap(b))
		}
	}
	if n := blocks(later[2]); n != len(many)-3 {
		t.Fatalf("the last buffer holds %d blocks, want the %d batches after the third", n, len(many)-3)
	}
	a.Settle(time.Unix(0, 1).Add(1000 * time.Hour))
	if n := blocks(ts.packed); n != 1 || blocksLen(t, ts.packed) != ts.held || len(ts.packed) >= pendingBytes {
		t.Fatalf("analyzed: %d blocks, %d bytes (pending: %d bytes), %d spans held", n, len(ts.packed), pendingBytes, ts.held)
	}
	if st := a.Stats(); st.PackedBytes != len(ts.packed) {
		t.Fatalf("stats %+v, %d bytes held", st, len(ts.packed))
	}

	// In one batch: the block it came in is the block held.
	b := New(Config{Detectors: []*analyzer.Detector{namingDetector}, Settle: time.Second})
	if err := b.ConsumeBatch(context.Background(), &spans.Batch{Spans: many}); err != nil {
		t.Fatal(err)
	}
	one := b.traces[many[0].TraceID]
	pending := one.pending
	b.Settle(time.Unix(0, 1).Add(1000 * time.Hour))
	if len(one.packed) == 0 || &one.packed[0] != &pending[0] {
		t.Fatal("a trace that came in one batch was packed again")
	}
}

// TestHeldAccountingIsItsOwn: a trace's accounting is made in the scratch, and the held result
// takes a copy of its own (in the result's own allocation for up to maxHeldRows rows): the next trace analyzed in the
// same scratch leaves it as it was, and the scratch once given back keeps none of its strings.
func TestHeldAccountingIsItsOwn(t *testing.T) {
	a := New(Config{Detectors: []*analyzer.Detector{namingDetector}})
	sc := a.intern.getScratch()
	type heldRows struct {
		res  *traceResult
		want []acctRow
	}
	var held []heldRows
	oneRow := 0
	for _, ss := range fixtureTraces(t) {
		src := sources{nil, blocks(ss, len(ss))}
		read, err := sc.unpack(src)
		if err != nil {
			t.Fatal(err)
		}
		res := analyzeTrace(ss[0].TraceID, read, 0, &a.cfg, a.seed, a.intern, sc, &src, false)
		var want []acctRow // nil for none, as held
		if len(res.acct) > 0 {
			want = slices.Clone(res.acct)
		}
		h, _ := hold(res, &sc.ops, true)
		if !reflect.DeepEqual(h.acct, want) || len(h.acct) != cap(h.acct) {
			t.Fatalf("trace %s: held accounting %+v (capacity %d), want %+v", ss[0].TraceID, h.acct, cap(h.acct), want)
		}
		// Operations held as values: the result and its rows are all hold makes.
		wantAllocs := 1.0
		if len(want) > maxHeldRows {
			wantAllocs = 2
		}
		if n := testing.AllocsPerRun(1, func() { hold(res, &sc.ops, false) }); n != wantAllocs {
			t.Fatalf("trace %s: %v allocations to hold a result with %d accounting rows, want %v", ss[0].TraceID, n, len(want), wantAllocs)
		}
		if len(want) == 1 {
			oneRow++
		}
		held = append(held, heldRows{h, want})
		sc.reset()
		for _, r := range sc.rows[:cap(sc.rows)] {
			if r != (acctRow{}) {
				t.Fatalf("trace %s: the scratch given back keeps an accounting row %+v", ss[0].TraceID, r)
			}
		}
	}
	for _, h := range held {
		if !reflect.DeepEqual(h.res.acct, h.want) {
			t.Fatalf("a held accounting changed once other traces were analyzed: %+v, want %+v", h.res.acct, h.want)
		}
	}
	if oneRow == 0 || oneRow == len(held) {
		t.Fatalf("%d of %d traces with one row of accounting: both kinds are not checked", oneRow, len(held))
	}
}

// TestDerivedCachesHoldNoSpanStrings: the origin/target caches outlive the traces they were filled
// from - the shared one for the analyzer's life, each scratch's small one from trace to trace -
// so neither may hold a string that points into a trace's packed spans.
func TestDerivedCachesHoldNoSpanStrings(t *testing.T) {
	a := New(Config{})
	sc := a.intern.getScratch()
	var made [][]byte
	within := func(s string) bool {
		for _, b := range made {
			if (&sources{b}).owns(s) {
				return true
			}
		}
		return false
	}
	entries := 0
	for _, ss := range fixtureTraces(t) {
		block := blocks(ss, len(ss))
		made = append(made, block)
		src := sources{nil, block}
		read, err := sc.unpack(src)
		if err != nil {
			t.Fatal(err)
		}
		analyzeTrace(ss[0].TraceID, read, 0, &a.cfg, a.seed, a.intern, sc, &src, false)
		sc.reset()
		for _, e := range sc.derived.entries {
			if e.ok {
				entries++
				for _, s := range []string{e.k.a, e.k.b, e.k.c, e.v, e.host} {
					if within(s) {
						t.Fatalf("the scratch's cache holds %q from a trace's packed spans", s)
					}
				}
			}
		}
	}
	for k, e := range a.intern.derived {
		for _, s := range []string{k.a, k.b, k.c, e.k.a, e.k.b, e.k.c, e.v, e.host} {
			if within(s) {
				t.Fatalf("the shared cache holds %q from a trace's packed spans", s)
			}
		}
	}
	if entries == 0 || len(a.intern.derived) == 0 {
		t.Fatalf("%d entries in the scratch's cache, %d in the shared one: nothing was checked", entries, len(a.intern.derived))
	}
}

// TestOperationsAreCompacted: a trace whose calls are mostly retries of few operations holds its
// operations in a slab of their own size, not one sized for its calls, and the move keeps every
// operation's parent pointing at the moved parent (the same operations, field for field).
func TestOperationsAreCompacted(t *testing.T) {
	a := New(Config{WindowInterval: -1}) // offline: operations are held as values
	compacted := 0
	for _, ss := range fixtureTraces(t) {
		sc := a.intern.getScratch()
		res := analyzeTrace(ss[0].TraceID, slices.Clone(ss), 0, &a.cfg, a.seed, a.intern, sc, nil, true)
		slab := sc.bufs.slab
		calls := 0
		for i := range ss {
			if ss[i].Kind == spans.KindClient {
				calls++
			}
		}
		if calls <= 8 || len(res.ops) == 0 || 4*len(res.ops) > 3*calls {
			continue
		}
		compacted++
		if cap(slab) != len(res.ops) {
			t.Fatalf("trace %s: %d operations held in a slab of %d (%d calls)", ss[0].TraceID, len(res.ops), cap(slab), calls)
		}
		inSlab := func(op *analyzer.Operation) bool {
			for i := range slab {
				if &slab[i] == op {
					return true
				}
			}
			return false
		}
		for _, op := range res.ops {
			if !inSlab(op) || op.Parent != nil && !inSlab(op.Parent) {
				t.Fatalf("trace %s: operation %s or its parent is outside the compacted slab", ss[0].TraceID, op.ID)
			}
			if op.Parent != nil && op.Parent.IsLeaf() {
				t.Fatalf("trace %s: operation %s's parent has no children", ss[0].TraceID, op.ID)
			}
		}
	}
	if compacted == 0 {
		t.Fatal("no fixture trace has mostly retried calls: the test checks nothing")
	}
}

// TestCompactMovesOperationsWhole: compact copies every operation field for field into a slab of
// their number, and points each parent at the moved parent; a slab mostly full, small, or with an
// operation outside it is left as it is.
func TestCompactMovesOperationsWhole(t *testing.T) {
	mk := func(n, used int) (*opBufs, []*analyzer.Operation) {
		b := &opBufs{slab: make([]analyzer.Operation, 0, n)}
		var ops []*analyzer.Operation
		for i := range used {
			b.slab = b.slab[:i+1]
			op := &b.slab[i]
			*op = analyzer.Operation{ID: fmt.Sprintf("op-%d", i), Caller: "svc", StartUnixNano: int64(i)}
			setIntentKey(op, uint64(i))
			if i > 0 {
				op.Parent = &b.slab[(i-1)/2]
				setChildCount(op.Parent, op.Parent.ChildCount()+1)
			}
			ops = append(ops, op)
		}
		return b, ops
	}
	b, ops := mk(30, 7)
	want := make([]analyzer.Operation, len(ops))
	for i, op := range ops {
		want[i] = *op
	}
	out := b.compact(ops)
	if cap(b.slab) != 7 || len(out) != 7 {
		t.Fatalf("slab of %d, %d operations; want 7 and 7", cap(b.slab), len(out))
	}
	for i, op := range out {
		if op != &b.slab[i] {
			t.Fatalf("operation %d is not in the new slab", i)
		}
		got, w := *op, want[i]
		if i > 0 {
			if op.Parent != &b.slab[(i-1)/2] {
				t.Fatalf("operation %d's parent was not moved along", i)
			}
			got.Parent, w.Parent = nil, nil
		}
		if !reflect.DeepEqual(got, w) {
			t.Fatalf("operation %d: %+v, want %+v", i, got, w)
		}
	}
	for _, c := range []struct {
		name     string
		n, used  int
		outsider bool
	}{{"mostly full", 10, 8, false}, {"small", 8, 2, false}, {"one outside", 30, 7, true}} {
		b, ops := mk(c.n, c.used)
		if c.outsider {
			ops[3] = &analyzer.Operation{ID: "elsewhere"}
		}
		slab := b.slab
		if out := b.compact(ops); &out[0] != &ops[0] || cap(b.slab) != cap(slab) {
			t.Errorf("%s: compacted", c.name)
		}
	}
}

// TestCorruptHeldBlocksAreReported: held bytes whose framing or block does not read (only a bug
// gets there) give the spans of the blocks before the bad one and an error wrapping
// ErrPackCorrupt, never a panic or a silent loss.
func TestCorruptHeldBlocksAreReported(t *testing.T) {
	ss := fixtureTraces(t)[0]
	if len(ss) < 6 {
		t.Fatalf("the first fixture trace has %d spans: too few for several blocks", len(ss))
	}
	good := blocks(ss, 3) // three spans a block
	frame := func(body ...byte) []byte {
		return append(binary.LittleEndian.AppendUint32(slices.Clone(good), uint32(len(body))), body...)
	}
	bad := map[string][]byte{
		"the last block cut short":     good[:len(good)-1],
		"a few bytes after the blocks": append(slices.Clone(good), 1, 0),
		"a block longer than the rest": append(binary.LittleEndian.AppendUint32(slices.Clone(good), 1000), 1, 2, 3),
		"a block of junk":              frame(9, 9, 9, 9, 9),
	}
	sc := &scratch{}
	for name, b := range bad {
		read, err := sc.unpack(sources{b})
		if !errors.Is(err, spans.ErrPackCorrupt) {
			t.Errorf("%s: err = %v, want ErrPackCorrupt", name, err)
		}
		if len(read) < len(ss)-3 {
			t.Errorf("%s: %d spans read, want those of every block before the bad one (%d or more)", name, len(read), len(ss)-3)
		}
	}
	if read, err := sc.unpack(sources{good}); err != nil || len(read) != len(ss) {
		t.Fatalf("the good blocks: %d spans, %v", len(read), err)
	}
}

// A trace still pending --settle after its first spans were filed (a consumer, a long job) lets go
// of the slab they were carved from: its buffers are copied out when its next spans arrive, and
// those get buffers of their own, so the slab goes once the traces filed beside it have. Traces
// whose spans are held after analysis carve nothing.
func TestLongPendingTraceLetsGoOfTheSlab(t *testing.T) {
	clock := time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC)
	short, long := workload.PayloadTrace(1, clock.UnixNano()), workload.PayloadTrace(2, clock.UnixNano())
	inSlab := func(b, slab []byte) bool {
		p, base := uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(unsafe.Pointer(unsafe.SliceData(slab)))
		return len(b) > 0 && p >= base && p < base+uintptr(cap(slab))
	}
	for _, release := range []bool{true, false} {
		a := New(Config{Settle: 5 * time.Second, ReleaseSpans: release, Now: func() time.Time { return clock }})
		file := func(ss ...spans.Span) {
			if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: slices.Clone(ss)}); err != nil {
				t.Fatal(err)
			}
		}
		file(append(slices.Clone(short[:5]), long[:2]...)...)
		slab := a.slab[:0:cap(a.slab)]
		s, l := a.traces[short[0].TraceID], a.traces[long[0].TraceID]
		if !release {
			if inSlab(s.pending, slab) || inSlab(l.pending, slab) || s.carved|l.carved != 0 {
				t.Fatal("spans held after analysis were carved from the slab")
			}
			continue
		}
		if !inSlab(s.pending, slab) || !inSlab(l.pending, slab) {
			t.Fatal("the first deliveries were not carved from the slab: the check below would check nothing")
		}
		clock = clock.Add(time.Second)
		file(long[2:4]...) // within --settle: carved too
		if len(l.later()) != 1 || !inSlab(l.later()[0], slab) {
			t.Fatalf("a young trace's second delivery was not carved (%d buffers)", len(l.later()))
		}
		clock = clock.Add(5 * time.Second)
		file(long[4:6]...)
		for i, b := range append([][]byte{l.pending}, l.later()...) {
			if inSlab(b, slab) {
				t.Errorf("buffer %d of a trace pending past --settle is still in the slab", i)
			}
		}
		if l.npending != 6 || blocksLen(t, pendingOf(l)) != 6 {
			t.Errorf("%d spans pending, %d in the blocks, want 6", l.npending, blocksLen(t, pendingOf(l)))
		}
		if !inSlab(s.pending, slab) {
			t.Error("the short trace's spans moved: only the long-pending trace's are copied")
		}
	}
}

// Where spans are released once analyzed, a slab none of whose buffers is held any more is
// carved again, not left to the garbage collector: a long run carves from a handful of slabs,
// every buffer is let go of once its trace is analyzed, and none is carved again while a trace
// still holds some of it (each pending trace's first delivery reads as it was filed, step after
// step, while the slabs around it are carved again).
func TestSlabsAreCarvedAgainOnceLetGo(t *testing.T) {
	clock := time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC)
	a := New(Config{Settle: time.Second, ReleaseSpans: true, Now: func() time.Time { return clock }})
	file := func(ss []spans.Span) {
		t.Helper()
		if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: slices.Clone(ss)}); err != nil {
			t.Fatal(err)
		}
	}
	filed := map[*traceState][]byte{} // each trace's first delivery as filed
	slabs := map[*byte]bool{}         // the slabs carved from
	const steps, perStep = 200, 10
	for step := range steps {
		// Ten traces a step, each in two deliveries, analyzed a second or so later.
		var head, tail []spans.Span
		for k := range perStep {
			tr := workload.PayloadTrace(step*perStep+k, clock.UnixNano())
			head, tail = append(head, tr[:5]...), append(tail, tr[5:]...)
		}
		file(head)
		for k := range perStep {
			ts := a.traces[head[k*5].TraceID]
			if ts.carved&1 == 0 {
				t.Fatalf("step %d: a young trace's first delivery was not carved", step)
			}
			filed[ts] = slices.Clone(ts.pending)
		}
		file(tail)
		slabs[unsafe.SliceData(a.slab)] = true
		if step%4 == 0 {
			clock = clock.Add(time.Second / 2)
		}
		a.Settle(clock)
		for ts, b := range filed {
			if ts.carved&1 == 0 {
				delete(filed, ts) // analyzed: let go of
			} else if !bytes.Equal(ts.pending, b) {
				t.Fatalf("step %d: a pending trace's carved bytes changed under it", step)
			}
		}
	}
	if len(slabs) > maxSpareSlabs {
		t.Errorf("%d slabs carved from for %d deliveries: the ones let go were not carved again", len(slabs), 2*steps*perStep)
	}
	a.Flush()
	for i, r := range a.slabRecs {
		if r.refs != 0 {
			t.Errorf("slab %d: %d buffers still counted once every trace is analyzed", i, r.refs)
		}
	}
	if rep := a.Report(); rep.Input.Traces != steps*perStep {
		t.Errorf("analyzed %d traces, want %d", rep.Input.Traces, steps*perStep)
	}
}

// TestNothingKeptReadsARecycledSlab holds the rule that makes carving a slab again safe: once a
// trace's analysis is published, nothing the analyzer keeps - operations, findings, the window,
// the report - reads the packed bytes its spans were read from (see detachOps). Every slab is
// filled with garbage as it is recycled; the report of storm traffic, every detector on and
// analyze's configuration, must come out the same as without.
func TestNothingKeptReadsARecycledSlab(t *testing.T) {
	run := func(poison bool) (report []byte, recycled int) {
		t.Helper()
		if poison {
			slabRecycled = func(slab []byte) {
				recycled++
				for i := range slab {
					slab[i] = 0xa5
				}
			}
			defer func() { slabRecycled = nil }()
		}
		clock := time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC)
		a := New(Config{Detectors: suite.Default(), Settle: time.Second, ReleaseSpans: true, ForgetAfter: time.Second,
			WindowInterval: -1, MaxWindowOps: 2000, MaxFindings: -1, Now: func() time.Time { return clock }})
		w := workload.NewWorkload(clock.UnixNano())
		for range 120 {
			var b spans.Batch
			w.Fill(&b, 300)
			// Each trace in two deliveries, as exporters send a trace's spans as they end.
			var head, tail []spans.Span
			for i, s := range b.Spans {
				if i%2 == 0 {
					head = append(head, s)
				} else {
					tail = append(tail, s)
				}
			}
			for _, part := range [][]spans.Span{head, tail} {
				if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: part}); err != nil {
					t.Fatal(err)
				}
			}
			clock = clock.Add(300 * time.Millisecond)
			a.Settle(clock)
		}
		a.Flush()
		rep := a.Report()
		if rep.Input.Traces == 0 || len(rep.Findings) == 0 {
			t.Fatalf("the traffic made %d traces and %d findings: nothing to check", rep.Input.Traces, len(rep.Findings))
		}
		out, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		return out, recycled
	}
	clean, _ := run(false)
	poisoned, recycled := run(true)
	if recycled < 10 {
		t.Fatalf("%d slabs recycled: the traffic does not exercise carving again", recycled)
	}
	if !bytes.Equal(clean, poisoned) {
		i := 0
		for i < len(clean) && i < len(poisoned) && clean[i] == poisoned[i] {
			i++
		}
		t.Errorf("the report read recycled slabs (%d of them poisoned): first difference at byte %d:\n clean:    %.200s\n poisoned: %.200s",
			recycled, i, clean[max(0, i-40):], poisoned[max(0, i-40):])
	}
}
