package engine

import (
	"slices"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

func TestWindowOrderReplaceAddExpire(t *testing.T) {
	op := func(name string, end int64) *analyzer.Operation {
		return &analyzer.Operation{Name: name, EndUnixNano: end}
	}
	names := func(ops []*analyzer.Operation) []string {
		var out []string
		for _, o := range ops {
			out = append(out, o.Name)
		}
		return out
	}
	a, b, c := spans.TraceID{1}, spans.TraceID{2}, spans.TraceID{3}
	w := newWindow(-1)
	w.observe(a, []*analyzer.Operation{op("a1", 10), op("a2", 20)}, false)
	w.observe(b, []*analyzer.Operation{op("b1", 30)}, false)
	w.observe(c, nil, false) // nothing to hold
	// Analyzed again: the trace's operations are replaced, and it moves to the back.
	w.observe(a, []*analyzer.Operation{op("a3", 40)}, false)
	// A late fragment adds to them, and moves it to the back too.
	w.observe(b, []*analyzer.Operation{op("b2", 50)}, true)
	if got, want := names(w.operations(0)), []string{"a3", "b1", "b2"}; !slices.Equal(got, want) {
		t.Fatalf("window = %v, want %v", got, want)
	}
	held := w.operations(0)
	// Measured back from the latest end (50): 25 keeps what ended at 25 or later.
	if got, want := names(w.operations(25)), []string{"a3", "b1", "b2"}; !slices.Equal(got, want) {
		t.Fatalf("window of 25 = %v, want %v", got, want)
	}
	if got, want := names(w.operations(15)), []string{"a3", "b2"}; !slices.Equal(got, want) {
		t.Fatalf("window of 15 = %v, want %v", got, want)
	}
	if names(held)[1] != "b1" {
		t.Error("expiry changed a list handed out before it")
	}
	if w.nops != 2 || len(w.byTrace) != 2 {
		t.Errorf("nops %d, traces %d; want 2, 2", w.nops, len(w.byTrace))
	}
	// An empty re-analysis takes the trace's operations out.
	w.observe(a, nil, false)
	if got := names(w.operations(0)); !slices.Equal(got, []string{"b2"}) || w.nops != 1 {
		t.Errorf("window = %v (nops %d), want [b2]", got, w.nops)
	}
}

func TestWindowBoundDropsEarliest(t *testing.T) {
	w := newWindow(3)
	for i := range 10 {
		w.observe(spans.TraceID{byte(i + 1)}, []*analyzer.Operation{{EndUnixNano: int64(i)}, {EndUnixNano: int64(i)}}, false)
		if w.nops > 3 {
			t.Fatalf("after %d traces: %d operations held, bound 3", i+1, w.nops)
		}
	}
	ops := w.operations(0)
	if len(ops) != 2 || ops[0].EndUnixNano != 9 || w.dropped != 18 {
		t.Errorf("held %d (first ending %d), dropped %d; want the last trace's 2, 18 dropped", len(ops), ops[0].EndUnixNano, w.dropped)
	}
	if len(w.entries)-w.head > 2*len(w.byTrace)+64 {
		t.Errorf("%d slots for %d traces: dead ones are not compacted", len(w.entries)-w.head, len(w.byTrace))
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
