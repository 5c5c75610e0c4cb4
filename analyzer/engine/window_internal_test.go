package engine

import (
	"context"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// vals is ops as an analysis held as values gives them to the window.
func vals(ops ...*analyzer.Operation) winOps { return opsForWindow(ops, true, nil, nil) }

// packed is ops as a live analysis gives them: packed.
func packed(ops ...*analyzer.Operation) winOps {
	var p opsPacker
	return opsForWindow(ops, false, nil, &p)
}

// read is what a run over w would judge, span as the policy's window.
func read(t *testing.T, w *window, span int64) []string {
	t.Helper()
	ops, errs := readWindow(w.take(span))
	if errs != nil {
		t.Fatal(errs)
	}
	var out []string
	for _, o := range ops {
		out = append(out, o.Name)
	}
	return out
}

func TestWindowOrderReplaceAddExpire(t *testing.T) {
	for _, form := range []struct {
		name string
		of   func(...*analyzer.Operation) winOps
	}{{"values", vals}, {"packed", packed}} {
		t.Run(form.name, func(t *testing.T) {
			op := func(name string, end int64) *analyzer.Operation {
				return &analyzer.Operation{Name: name, StartUnixNano: end - 1, EndUnixNano: end}
			}
			a, b, c := &traceState{id: spans.TraceID{1}}, &traceState{id: spans.TraceID{2}}, &traceState{id: spans.TraceID{3}}
			w := newWindow(-1, false)
			observe := func(ts *traceState, o winOps, add bool) {
				if _, err := w.observe(ts, o, add); err != nil {
					t.Fatal(err)
				}
			}
			observe(a, form.of(op("a1", 10), op("a2", 20)), false)
			observe(b, form.of(op("b1", 30)), false)
			observe(c, form.of(), false) // nothing to hold
			// Analyzed again: the trace's operations are replaced, and it moves to the back.
			observe(a, form.of(op("a3", 40)), false)
			// A late fragment adds to them, and moves it to the back too; one held as values
			// (a snapshot came between) joins packed ones as values.
			observe(b, form.of(op("b2", 50)), true)
			observe(b, vals(op("b3", 35)), true)
			if got, want := read(t, w, 0), []string{"a3", "b1", "b2", "b3"}; !slices.Equal(got, want) {
				t.Fatalf("window = %v, want %v", got, want)
			}
			// Measured back from the latest end (50): 25 keeps what ended at 25 or later.
			if got, want := read(t, w, 25), []string{"a3", "b1", "b2", "b3"}; !slices.Equal(got, want) {
				t.Fatalf("window of 25 = %v, want %v", got, want)
			}
			// 18: b1 (30) is out, its trace stays for b2 and b3; a3 (40) stays.
			if got, want := read(t, w, 18), []string{"a3", "b2", "b3"}; !slices.Equal(got, want) {
				t.Fatalf("window of 18 = %v, want %v", got, want)
			}
			// 5: a's trace leaves.
			if got, want := read(t, w, 5), []string{"b2"}; !slices.Equal(got, want) {
				t.Fatalf("window of 5 = %v, want %v", got, want)
			}
			if w.nops != 3 || w.traces() != 1 || a.win != 0 {
				t.Errorf("nops %d, traces %d, a's entry %d; want 3 (b's), 1, none", w.nops, w.traces(), a.win-1)
			}
			// An empty re-analysis takes the trace's operations out.
			observe(b, form.of(), false)
			if got := read(t, w, 0); len(got) != 0 || w.nops != 0 {
				t.Errorf("window = %v (nops %d), want nothing", got, w.nops)
			}
		})
	}
}

// A trace whose state is dropped (evicted, forgotten) while its operations are in the window
// keeps them there, and the operations of the state made for its spans that come later join
// them, at the back: found by the trace's id, through compactions of the window.
func TestWindowJoinsADroppedTracesLaterSpans(t *testing.T) {
	op := func(name string) *analyzer.Operation { return &analyzer.Operation{Name: name, EndUnixNano: 1} }
	w := newWindow(-1, false)
	first := &traceState{id: spans.TraceID{1}}
	observe := func(ts *traceState, o winOps, add bool) {
		t.Helper()
		if _, err := w.observe(ts, o, add); err != nil {
			t.Fatal(err)
		}
	}
	observe(first, vals(op("a1")), true)
	w.orphan(first)
	// Enough other traces analyzed again and again that the window compacts its slots.
	others := []*traceState{{id: spans.TraceID{2}}, {id: spans.TraceID{3}}}
	for range 100 {
		for _, o := range others {
			observe(o, vals(op("x")), false)
		}
	}
	later := &traceState{id: spans.TraceID{1}}
	observe(later, vals(op("a2")), true)
	if got, want := read(t, w, 0), []string{"x", "x", "a1", "a2"}; !slices.Equal(got, want) {
		t.Fatalf("window = %v, want %v", got, want)
	}
	if w.traces() != 3 || len(w.orphans) != 0 || first.win != 0 {
		t.Errorf("%d traces, %d orphaned entries, the dropped state's entry %d; want 3, 0, none", w.traces(), len(w.orphans), first.win-1)
	}
	// A dropped trace's entry that leaves the window takes its id along.
	w.orphan(later)
	observe(others[0], vals(op("y")), false)
	if got := read(t, w, 0); !slices.Equal(got, []string{"x", "a1", "a2", "y"}) || len(w.orphans) != 1 {
		t.Fatalf("window = %v with %d orphaned entries", got, len(w.orphans))
	}
	observe(&traceState{id: spans.TraceID{1}}, vals(), false)
	if got := read(t, w, 0); !slices.Equal(got, []string{"x", "y"}) || len(w.orphans) != 0 {
		t.Errorf("window = %v with %d orphaned entries, want [x y] and none", got, len(w.orphans))
	}
}

func TestWindowBoundDropsEarliest(t *testing.T) {
	w := newWindow(3, false)
	for i := range 10 {
		o := vals(&analyzer.Operation{EndUnixNano: int64(i)}, &analyzer.Operation{EndUnixNano: int64(i)})
		if _, err := w.observe(&traceState{id: spans.TraceID{byte(i + 1)}}, o, false); err != nil {
			t.Fatal(err)
		}
		if w.nops > 3 {
			t.Fatalf("after %d traces: %d operations held, bound 3", i+1, w.nops)
		}
	}
	ops, _ := readWindow(w.take(0))
	if len(ops) != 2 || ops[0].EndUnixNano != 9 || w.dropped != 18 {
		t.Errorf("held %d (first ending %d), dropped %d; want the last trace's 2, 18 dropped", len(ops), ops[0].EndUnixNano, w.dropped)
	}
	if len(w.entries)-w.head > 2*w.traces()+64 {
		t.Errorf("%d slots for %d traces: dead ones are not compacted", len(w.entries)-w.head, w.traces())
	}
}

// Offline the bound cuts the window instead: observe hands back what it held, whole traces in
// window order, before the trace that would go over it; nothing is dropped, and a late fragment
// of a trace already judged is judged in the chunk it came in.
func TestWindowTumblesOffline(t *testing.T) {
	w := newWindow(5, true)
	var judged [][]string
	states := map[byte]*traceState{}
	observe := func(id byte, add bool, names ...string) {
		t.Helper()
		var ops []*analyzer.Operation
		for _, n := range names {
			ops = append(ops, &analyzer.Operation{Name: n})
		}
		if states[id] == nil {
			states[id] = &traceState{id: spans.TraceID{id}}
		}
		chunk, err := w.observe(states[id], vals(ops...), add)
		if err != nil {
			t.Fatal(err)
		}
		if chunk != nil {
			got, errs := readWindow(chunk, math.MinInt64)
			if errs != nil {
				t.Fatal(errs)
			}
			var c []string
			for _, o := range got {
				c = append(c, o.Name)
			}
			judged = append(judged, c)
		}
		if w.nops > 5 && w.traces() > 1 {
			t.Fatalf("%d operations held, bound 5", w.nops)
		}
	}
	observe(1, false, "a1", "a2")
	observe(2, false, "b1", "b2")
	observe(1, true, "a3")                                // 5: at the bound, not over it
	observe(3, false, "c1", "c2")                         // over: a and b are judged
	observe(1, true, "a4")                                // a late fragment of a judged trace
	observe(4, false, "d1", "d2", "d3", "d4", "d5", "d6") // over on its own: c and a4 judged
	observe(5, false, "e1")
	last, _ := readWindow(w.take(0))
	var rest []string
	for _, o := range last {
		rest = append(rest, o.Name)
	}
	judged = append(judged, rest)
	want := [][]string{{"b1", "b2", "a1", "a2", "a3"}, {"c1", "c2", "a4"}, {"d1", "d2", "d3", "d4", "d5", "d6"}, {"e1"}}
	if !slices.EqualFunc(judged, want, slices.Equal) {
		t.Errorf("judged %v, want %v", judged, want)
	}
	if w.dropped != 0 || w.chunks != 3 {
		t.Errorf("dropped %d, cut %d times; want 0 and 3", w.dropped, w.chunks)
	}
}

func TestWindowBoundDefault(t *testing.T) {
	for _, c := range []struct{ maxSpans, maxOps, want int }{
		{0, 0, DefaultMaxSpans / windowOpsPerSpan},
		{1_000_000, 0, 250_000},
		{-1, 0, -1},
		{-1, 1000, 1000},
		{1_000_000, -1, -1},
	} {
		cfg := Config{MaxSpans: c.maxSpans, MaxWindowOps: c.maxOps}
		if got := cfg.maxWindowOps(); got != c.want {
			t.Errorf("MaxSpans %d, MaxWindowOps %d: bound %d, want %d", c.maxSpans, c.maxOps, got, c.want)
		}
	}
}

// An offline analysis that forgets its released traces (`stormwatch analyze`) keeps the window's
// operations as packed frames only: the window is most of what it holds, and as values the
// garbage collector marked every one of them on every cycle. An offline analysis that keeps its
// traces keeps them as values, as its traces do.
func TestOfflineWindowHoldsPackedFramesWhenForgetting(t *testing.T) {
	for _, c := range []struct {
		name   string
		forget time.Duration
		packed bool
	}{{"forgetting", time.Hour, true}, {"keeping", 0, false}} {
		t.Run(c.name, func(t *testing.T) {
			a := New(Config{Detectors: []*analyzer.Detector{namingDetector, windowWalker}, Settle: time.Second,
				ReleaseSpans: true, ForgetAfter: c.forget, WindowInterval: -1, MaxWindowOps: -1})
			var end int64
			for _, ss := range fixtureTraces(t) {
				for i := range ss {
					end = max(end, ss[i].EndUnixNano)
				}
				if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: ss}); err != nil {
					t.Fatal(err)
				}
			}
			a.Settle(time.Unix(0, end).Add(time.Minute)) // every trace analyzed and released
			entries, values := 0, 0
			for _, e := range a.win.entries[a.win.head:] {
				if e.dead {
					continue
				}
				entries++
				if e.ops != nil || e.packed == nil {
					values++
				}
			}
			if entries == 0 {
				t.Fatal("nothing in the window to look at")
			}
			if want := map[bool]int{true: 0, false: entries}[c.packed]; values != want {
				t.Errorf("%d of the window's %d traces hold their operations as values, want %d", values, entries, want)
			}
			a.Flush()
			if len(a.detErrs) > 0 {
				t.Errorf("the windowed detectors read what the window held with errors: %v", a.detErrs)
			}
		})
	}
}

// readWindow reads a window of more operations than one arena takes, packed traces among traces
// held as values, back as the operations that were put in, in order, parents linked.
func TestReadWindowAcrossArenas(t *testing.T) {
	results := fixtureOps(t)
	frames := packedOps(t, results)
	var refs []winRef
	var want []*analyzer.Operation
	for round := 0; len(want) < 3*arenaOps; round++ {
		for i, ops := range results {
			r := winRef{id: spans.TraceID{byte(round), byte(i)}, winOps: winOps{n: len(ops), packed: frames[i]}}
			if (round+i)%3 == 0 {
				r.winOps = winOps{n: len(ops), ops: ops}
			}
			refs = append(refs, r)
			want = append(want, ops...)
		}
	}
	got, errs := readWindow(refs, math.MinInt64)
	if errs != nil {
		t.Fatal(errs)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read back %d operations, differing from the %d put in", len(got), len(want))
	}
}
