package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// packedOps packs each result's operations through one packer (reused, as a scratch's is) and
// returns the frames.
func packedOps(t testing.TB, results [][]*analyzer.Operation) [][]byte {
	t.Helper()
	var p opsPacker
	var frames [][]byte
	for _, ops := range results {
		frames = append(frames, p.pack(ops))
	}
	return frames
}

// fixtureOps is the operations of every fixture trace, each trace analyzed alone.
func fixtureOps(t testing.TB) [][]*analyzer.Operation {
	a := New(Config{Detectors: []*analyzer.Detector{namingDetector}})
	var out [][]*analyzer.Operation
	for _, ss := range fixtureTraces(t) {
		if ops := analyzeAlone(a, ss, 0).ops; len(ops) > 0 {
			out = append(out, ops)
		}
	}
	return out
}

// TestPackedOperationsRoundTrip: operations read back from their packed form are the ones
// packed, field for field (unexported ones, nil and empty lists, and parents included), for every
// fixture trace, one frame at a time and as several frames one after another.
func TestPackedOperationsRoundTrip(t *testing.T) {
	results := fixtureOps(t)
	frames := packedOps(t, results)
	var all []*analyzer.Operation
	var joined []byte
	for i, ops := range results {
		got, err := unpackOps(nil, frames[i])
		if err != nil {
			t.Fatalf("trace %s: %v", ops[0].TraceID, err)
		}
		if !reflect.DeepEqual(got, ops) {
			t.Fatalf("trace %s: read back\n%s\nwant\n%s", ops[0].TraceID, dumpOps(got), dumpOps(ops))
		}
		all = append(all, ops...)
		joined = append(joined, frames[i]...)
	}
	got, err := unpackOps(nil, joined)
	if err != nil || !reflect.DeepEqual(got, all) {
		t.Fatalf("%d frames one after another: %d operations read back (%v), want %d", len(frames), len(got), err, len(all))
	}
	// As the windowed detectors read them: every trace's frame into one arena reserved for all.
	var ar opsArena
	ar.reserve(frames...)
	got = got[:0]
	for _, f := range frames {
		if got, err = ar.unpack(got, f); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(got, all) {
		t.Fatalf("through one arena: %d operations read back differ from the %d packed", len(got), len(all))
	}
	for i, op := range got {
		if i >= len(ar.slab) || op != &ar.slab[i] {
			t.Fatalf("operation %d of %d was not read into the arena's one array (%d used)", i, len(got), len(ar.slab))
		}
	}
}

// TestPackedOperationsEdgeCases: what inference rarely makes but the form must keep - a parent
// listed after its child, nil beside empty lists, strings longer than a one-byte length, more
// distinct strings than the packer's cache holds, equal strings that do not share their bytes,
// negative and extreme times.
func TestPackedOperationsEdgeCases(t *testing.T) {
	long := strings.Repeat("x", 300)
	ops := make([]*analyzer.Operation, 0, 100)
	parent := &analyzer.Operation{ID: "parent", Caller: "api"}
	setIntentKey(parent, 1<<64-1)
	setChildCount(parent, 1)
	child := &analyzer.Operation{ID: "child", Parent: parent, Caller: strings.Clone("api"), Attempts: []analyzer.Attempt{},
		StartUnixNano: -5, EndUnixNano: 1<<63 - 1, DeadlineUnixNano: -1 << 63, Findings: 3, Inferred: true, SampleProbability: 0.1}
	ops = append(ops, child, parent)
	ops = append(ops, &analyzer.Operation{ID: long, Name: long, Attempts: []analyzer.Attempt{
		{Number: 1, Kind: analyzer.KindInitial, Calls: nil, Origins: nil},
		{Number: 2, Kind: analyzer.KindRetry, Calls: []spans.SpanID{}, Origins: []string{}, BackoffNanos: -7},
		{Number: 3, Kind: analyzer.KindHedge, Calls: []spans.SpanID{{1}, {2}}, Origins: []string{"http://a:1", "http://b:2"},
			Outcome: "ok", Status: "200", StartUnixNano: 10, EndUnixNano: 5},
	}})
	setRecordedNumber(&ops[2].Attempts[0], -1)
	for i := range 97 {
		ops = append(ops, &analyzer.Operation{ID: "op-" + strings.Repeat("y", i), Dependency: "dep-" + strings.Repeat("z", i%7)})
	}
	frames := packedOps(t, [][]*analyzer.Operation{ops, ops[2:3]})
	for i, want := range [][]*analyzer.Operation{ops, ops[2:3]} {
		got, err := unpackOps(nil, frames[i])
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("frame %d: read back\n%s\nwant\n%s", i, dumpOps(got), dumpOps(want))
		}
	}
	// Empty lists alone in their frame (no attempt, call or origin anywhere to carve them from)
	// come back empty, not nil.
	for _, ops := range [][]*analyzer.Operation{
		{{ID: "no attempts", Attempts: []analyzer.Attempt{}}},
		{{ID: "no calls", Attempts: []analyzer.Attempt{{Number: 1, Calls: []spans.SpanID{}, Origins: []string{}}}}},
	} {
		got, err := unpackOps(nil, packedOps(t, [][]*analyzer.Operation{ops})[0])
		if err != nil || !reflect.DeepEqual(got, ops) {
			t.Fatalf("%s: read back %v\n%s\nwant\n%s", ops[0].ID, err, dumpOps(got), dumpOps(ops))
		}
	}
	// Parents that make a cycle (only a bug makes them) are refused, not followed forever.
	self := &analyzer.Operation{ID: "self"}
	self.Parent = self
	a, b := &analyzer.Operation{ID: "a"}, &analyzer.Operation{ID: "b"}
	a.Parent, b.Parent = b, a
	for _, ops := range [][]*analyzer.Operation{{self}, {a, b}} {
		if got, err := unpackOps(nil, packedOps(t, [][]*analyzer.Operation{ops})[0]); !errors.Is(err, errOpsCorrupt) || len(got) != 0 {
			t.Fatalf("%s: parents in a cycle read back as %d operations, err %v", ops[0].ID, len(got), err)
		}
	}
	// The child alone: its parent is outside what is packed, which only a bug makes.
	defer func() {
		if recover() == nil {
			t.Fatal("packing an operation without its parent did not fail")
		}
	}()
	var p opsPacker
	p.pack([]*analyzer.Operation{child})
}

// TestUnpackOpsRejectsCorruptInput: cut or damaged frames give errOpsCorrupt, never a panic,
// and the operations of the frames before the damage are kept.
func TestUnpackOpsRejectsCorruptInput(t *testing.T) {
	results := fixtureOps(t)
	frames := packedOps(t, results)
	good, bad := frames[0], frames[1]
	for n := 1; n < len(bad); n++ {
		got, err := unpackOps(nil, append(append([]byte(nil), good...), bad[:n]...))
		if !errors.Is(err, errOpsCorrupt) {
			t.Fatalf("a frame cut to %d of %d bytes: err %v", n, len(bad), err)
		}
		if !reflect.DeepEqual(got, results[0]) {
			t.Fatalf("a frame cut to %d bytes: %d operations read back, want exactly the %d of the frame before it", n, len(got), len(results[0]))
		}
	}
	for i := range bad {
		for _, v := range []byte{0, 0x7f, 0x80, 0xff} {
			b := append([]byte(nil), bad...)
			b[i] = v
			// May read as other operations; must not panic, and what reads back is whole.
			if got, err := unpackOps(nil, b); err == nil {
				for _, op := range got {
					for steps, p := 0, op.Parent; p != nil; p, steps = p.Parent, steps+1 {
						if steps > len(got) {
							t.Fatalf("byte %d set to %#x: parents read back in a cycle", i, v)
						}
					}
				}
			} else if len(got) != 0 {
				t.Fatalf("byte %d set to %#x: %v, and %d operations of the damaged frame handed out", i, v, err, len(got))
			}
		}
	}
}

// FuzzUnpackOps: any bytes read back without a panic, and operations that read back pack and
// read back again the same.
func FuzzUnpackOps(f *testing.F) {
	f.Add([]byte{})
	for _, frame := range packedOps(f, fixtureOps(f)) {
		f.Add(frame)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ops, err := unpackOps(nil, b)
		if err != nil {
			return
		}
		var p opsPacker
		again, err := unpackOps(nil, p.pack(ops))
		if err != nil || !reflect.DeepEqual(again, ops) {
			t.Fatalf("read back, packed and read back again: %v\n%s\nwant\n%s", err, dumpOps(again), dumpOps(ops))
		}
	})
}

// TestHeldOperationsArePacked: a live analyzer holds every analyzed trace's operations packed
// only (nothing for the garbage collector to mark), whoever reads them: a summary (what /metrics
// and the status line read) does not read them; a snapshot lists them and reads them back for its
// reader without keeping them, and the traces analyzed after it are held packed too.
func TestHeldOperationsArePacked(t *testing.T) {
	traces := fixtureTraces(t)
	a := New(Config{Detectors: []*analyzer.Detector{namingDetector}, Settle: time.Hour})
	for _, ss := range traces[2:] {
		if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: ss}); err != nil {
			t.Fatal(err)
		}
	}
	a.Flush()
	unpacked := func() int {
		n := 0
		for key, ts := range a.traces {
			if ts.id != key {
				continue // a delivery's trace, filed with its publisher's
			}
			if ts.res == nil {
				t.Fatalf("trace %s not analyzed", ts.id)
			}
			if ts.res.nOps > 0 && len(ts.res.packedOps) == 0 {
				t.Fatalf("trace %s: %d operations and nothing packed", ts.id, ts.res.nOps)
			}
			if ts.res.ops != nil {
				n++
			}
		}
		return n
	}
	if n := unpacked(); n != 0 {
		t.Fatalf("%d traces hold their operations unpacked after analysis", n)
	}
	sum := a.Summary(time.Now())
	if sum.Operations() != nil || sum.HeldOperations != 0 || sum.Report.Input.Operations == 0 {
		t.Fatalf("a summary (%d operations in its report) lists %d", sum.Report.Input.Operations, len(sum.Operations()))
	}
	snap := a.Snapshot(time.Now())
	ops := snap.Operations()
	if len(ops) != snap.Report.Input.Operations || snap.HeldOperations != len(ops) {
		t.Fatalf("the snapshot lists %d operations (says %d), its report counts %d", len(ops), snap.HeldOperations, snap.Report.Input.Operations)
	}
	if n := unpacked(); n != 0 {
		t.Fatalf("after a snapshot was read %d traces hold their operations unpacked", n)
	}
	// A new trace: held packed, and listed by the next snapshot after the others, which are
	// listed as before.
	if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: traces[0]}); err != nil {
		t.Fatal(err)
	}
	a.Flush()
	if r := a.traces[traces[0][0].TraceID].res; r.nOps == 0 || r.ops != nil || r.packedOps == nil {
		t.Fatalf("a trace analyzed after a snapshot: %d operations, %d as values, %d bytes packed", r.nOps, len(r.ops), len(r.packedOps))
	}
	next := a.Snapshot(time.Now())
	again := next.Operations()
	if len(again) != next.Report.Input.Operations || len(again) <= len(ops) || next.SameOperations(snap) {
		t.Fatalf("after a new trace the snapshot lists %d operations (report %d, before %d)",
			len(again), next.Report.Input.Operations, len(ops))
	}
	if !reflect.DeepEqual(again[:len(ops)], ops) || again[len(ops)].TraceID != traces[0][0].TraceID {
		t.Fatal("the next snapshot does not list the same operations, then the new trace's")
	}
	// What a snapshot lists is what the analysis made: the same operations as a view of each trace.
	at := 0
	for _, id := range next.HeldTraceIDs() {
		v, ok := a.lookup(id)
		if !ok || !reflect.DeepEqual(v.Operations, again[at:at+len(v.Operations)]) {
			t.Fatalf("trace %s: the view's operations differ from the snapshot's", id)
		}
		at += len(v.Operations)
	}
	if n := unpacked(); n != 0 {
		t.Fatalf("after snapshots and views %d traces hold their operations unpacked", n)
	}
}

// dumpOps prints operations for a failure message, a line each, parents by id.
func dumpOps(ops []*analyzer.Operation) string {
	var b strings.Builder
	for _, op := range ops {
		o := *op
		parent := ""
		if o.Parent != nil {
			parent = o.Parent.ID
		}
		o.Parent = nil
		fmt.Fprintf(&b, "%+v parent=%q\n", o, parent)
	}
	return b.String()
}

// TestReusedScratchMatchesFresh: an analysis reuses a pooled scratch (indexes, calls, spans read
// back) from trace to trace. Analyzed through one scratch - every fixture trace, largest first,
// then again smallest first, so each trace follows a larger and a smaller one - a trace gets the
// operations it gets from a fresh scratch, field for field, and they pack and read back the
// same before the next trace reuses the scratch: nothing of an earlier trace is left in them.
// Once packed, their memory goes to the scratch's spare as a live analyzer's does (Engine.run),
// so each trace is made in the last one's operations when they are large enough.
func TestReusedScratchMatchesFresh(t *testing.T) {
	a := New(Config{Detectors: []*analyzer.Detector{namingDetector}})
	traces := fixtureTraces(t)
	slices.SortFunc(traces, func(x, y []spans.Span) int { return len(y) - len(x) })
	order := append(slices.Clone(traces), traces...)
	slices.Reverse(order[len(traces):])
	var p opsPacker
	var carved []*analyzer.Operation // where each trace's first operation was made
	shared := a.intern.getScratch()
	for _, ss := range order {
		fresh := analyzeAlone(a, ss, 0).ops // a scratch of its own
		shared.reset()
		reused := analyzeTrace(ss[0].TraceID, slices.Clone(ss), 0, &a.cfg, a.seed, a.intern, shared, nil, false).ops
		if !reflect.DeepEqual(reused, fresh) {
			t.Fatalf("trace %s (%d spans): through a reused scratch\n%s\nfresh\n%s", ss[0].TraceID, len(ss), dumpOps(reused), dumpOps(fresh))
		}
		// And held as it is held: packed before the next trace reuses the buffers.
		if got, err := unpackOps(nil, p.pack(reused)); err != nil || !reflect.DeepEqual(got, fresh) {
			t.Fatalf("trace %s: packed from reused buffers and read back: %v", ss[0].TraceID, err)
		}
		if cap(shared.bufs.slab) > 0 { // made by make (not a trace whose calls were all refused)
			carved = append(carved, &shared.bufs.slab[:1][0])
		}
		shared.spare.give(&shared.bufs, reused)
	}
	// The spare was taken: some trace's operations were made where an earlier one's had been.
	again := 0
	for i := range carved {
		if slices.Contains(carved[:i], carved[i]) {
			again++
		}
	}
	if again == 0 {
		t.Error("no trace's operations were made in an earlier one's memory: the spare is never used")
	}
}

// windowWalker is a windowed detector that reads every field of every operation it is given, as
// the windowed detectors of the suite do.
var windowWalker = &analyzer.Detector{Name: "window-walker", Scope: analyzer.ScopeWindow, Run: func(p *analyzer.Pass) error {
	n := 0
	for _, op := range p.Operations {
		n += len(op.ID) + len(op.Caller) + len(op.Dependency)
		for _, at := range op.Attempts {
			n += len(at.Outcome) + len(at.Calls) + len(at.Origins)
		}
		if op.Parent != nil && op.Parent.TraceID != op.TraceID {
			return fmt.Errorf("operation %s's parent is in trace %s", op.ID, op.Parent.TraceID)
		}
	}
	if n == 0 && len(p.Operations) > 0 {
		return errors.New("operations without ids, callers or dependencies")
	}
	return nil
}}

// TestPackedOperationsUnderConcurrentReaders: while traces are analyzed again and the windowed
// detectors run (reading the window's packed frames back), snapshots read the packed ones back
// and keep them with their results, summaries do not, and trace views read one trace's back -
// all at once. Run with -race (go test -race ./analyzer/): a result's operations are unpacked lazily, and
// every reader must see them whole.
func TestPackedOperationsUnderConcurrentReaders(t *testing.T) {
	traces := fixtureTraces(t)
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	// The windowed detectors too: each Settle runs them over the window, fed meanwhile.
	a := New(Config{Settle: time.Second, WindowInterval: time.Nanosecond, Now: clock,
		Detectors: []*analyzer.Detector{namingDetector, windowWalker}})
	ids := make([]spans.TraceID, 0, len(traces))
	for _, ss := range traces {
		ids = append(ids, ss[0].TraceID)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	reader := func(read func(i int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
					read(i)
				}
			}
		}()
	}
	snapshots := func(int) {
		s := a.Snapshot(clock())
		if len(s.Operations()) != s.Report.Input.Operations {
			t.Errorf("a snapshot lists %d operations, its report counts %d", len(s.Operations()), s.Report.Input.Operations)
		}
		for _, op := range s.Operations() {
			if op.TraceID == (spans.TraceID{}) || op.Parent != nil && op.Parent.TraceID != op.TraceID {
				t.Errorf("a snapshot's operation is not whole: %+v", *op)
			}
		}
	}
	reader(func(int) { _ = a.Summary(clock()) })
	reader(func(i int) {
		id := ids[i%len(ids)]
		if v, ok := a.lookup(id); ok {
			if v.TraceID != id {
				// A delivery's trace is analyzed with its publisher's (joinDeliveries).
				a.mu.Lock()
				st := a.traces[id]
				filed := st != nil && st.id == v.TraceID && slices.Contains(st.joined, id)
				a.mu.Unlock()
				if !filed {
					t.Errorf("looking up trace %s gave the view of trace %s", id, v.TraceID)
				}
			}
			for _, op := range v.Operations {
				if op.TraceID != v.TraceID {
					t.Errorf("the view of trace %s holds an operation of trace %s", v.TraceID, op.TraceID)
				}
			}
		}
	})
	for round := range 3 {
		for _, ss := range traces {
			// Round 0 files every trace; later rounds bring a duplicate, so each is analyzed again.
			batch := ss
			if round > 0 {
				batch = ss[:1]
			}
			if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: batch}); err != nil {
				t.Fatal(err)
			}
		}
		mu.Lock()
		now = now.Add(2 * time.Second)
		mu.Unlock()
		a.Settle(clock())
		if round == 0 {
			// Snapshots only from now on: round 0's operations are held packed, read back by the
			// snapshots while later rounds analyze their traces again and the windowed runs read
			// them too.
			reader(snapshots)
		}
	}
	close(done)
	wg.Wait()
	s := a.Snapshot(clock())
	if s.Report.Input.Traces != len(traces) || len(s.Operations()) != s.Report.Input.Operations {
		t.Fatalf("at the end: %d traces (want %d), %d operations listed, %d counted", s.Report.Input.Traces, len(traces), len(s.Operations()), s.Report.Input.Operations)
	}
	for _, n := range s.Report.Notes {
		if strings.Contains(n, "window-walker") || strings.Contains(n, "operations of trace") {
			t.Errorf("the report says: %s", n)
		}
	}
}

// TestLateFragmentsJoinPackedAndValues: a released trace's late spans are analyzed on their own
// and their operations joined to the trace's, whatever form they are held in: packed (a live
// analyzer) or as values (an offline one). The snapshot lists every operation the report counts.
func TestLateFragmentsJoinPackedAndValues(t *testing.T) {
	for _, offline := range []bool{false, true} {
		cfg := Config{Detectors: []*analyzer.Detector{namingDetector}, Settle: time.Second, ReleaseSpans: true}
		if offline {
			cfg.WindowInterval = -1
		}
		a := New(cfg)
		now := time.Unix(1_800_000_000, 0)
		traces := fixtureTraces(t)
		for _, ss := range traces {
			if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: ss}); err != nil {
				t.Fatal(err)
			}
		}
		a.Settle(now.Add(time.Hour))
		// Each trace's first CLIENT span again: a fragment with an operation of its own.
		for _, ss := range traces {
			if i := slices.IndexFunc(ss, func(s spans.Span) bool { return s.Kind == spans.KindClient }); i >= 0 {
				if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: ss[i : i+1]}); err != nil {
					t.Fatal(err)
				}
			}
		}
		a.Settle(now.Add(2 * time.Hour))
		asValues := 0
		for key, ts := range a.traces {
			if ts.id != key {
				continue // a delivery's trace, filed with its publisher's
			}
			if ts.res.ops != nil {
				asValues++
			}
		}
		if offline != (asValues > 0) {
			t.Fatalf("offline %v: %d traces hold their operations as values", offline, asValues)
		}
		s := a.Snapshot(now.Add(3 * time.Hour))
		if len(s.Operations()) != s.Report.Input.Operations {
			t.Fatalf("offline %v: %d operations listed, %d counted", offline, len(s.Operations()), s.Report.Input.Operations)
		}
		if st := a.Report(); !slices.ContainsFunc(st.Notes, func(n string) bool { return strings.Contains(n, "analyzed and released") }) {
			t.Fatalf("offline %v: no late fragments noted: %q", offline, st.Notes)
		}
	}
}

// TestCorruptHeldOperationsAreReported: held operations that do not read back (only a bug makes
// them) are said in the report of the next snapshot after a reader found them, not hidden until
// something else changes, and the other traces' operations are all listed.
func TestCorruptHeldOperationsAreReported(t *testing.T) {
	a := New(Config{Detectors: []*analyzer.Detector{namingDetector}})
	for _, ss := range fixtureTraces(t) {
		if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: ss}); err != nil {
			t.Fatal(err)
		}
	}
	a.Flush()
	var bad *traceState
	for key, ts := range a.traces {
		if ts.id != key {
			continue // a delivery's trace, filed with its publisher's
		}
		if ts.res.nOps > 0 && (bad == nil || ts.id.String() < bad.id.String()) {
			bad = ts
		}
	}
	damaged := *bad.res
	damaged.packedOps = damaged.packedOps[:len(damaged.packedOps)-1]
	bad.res = &damaged
	a.version++
	s := a.Snapshot(time.Now())
	if n := len(s.Operations()); n != s.Report.Input.Operations-bad.res.nOps {
		t.Fatalf("%d operations listed, want the %d of the undamaged traces", n, s.Report.Input.Operations-bad.res.nOps)
	}
	want := "analyzer: operations of trace " + bad.id.String()
	found := false
	for _, n := range a.Snapshot(time.Now()).Report.Notes {
		found = found || strings.Contains(n, want)
	}
	if !found {
		t.Fatalf("the snapshot after the damaged operations were read does not report them; notes: %q", s.Report.Notes)
	}
}
