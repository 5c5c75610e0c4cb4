package audit

import (
	"strings"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/spans"
)

func TestRetryAfterForms(t *testing.T) {
	end := time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name  string
		attrs []spans.Attr
		want  time.Duration
		ok    bool
	}{
		{"resilience ms", []spans.Attr{spans.IntAttr(spans.AttrRetryAfter, 1500)}, 1500 * time.Millisecond, true},
		{"resilience ms as string", []spans.Attr{spans.StringAttr(spans.AttrRetryAfter, "250")}, 250 * time.Millisecond, true},
		{"header seconds", []spans.Attr{spans.StringAttr(spans.AttrResHeaderRetryAfter, "2")}, 2 * time.Second, true},
		{"header as captured array", []spans.Attr{{Key: spans.AttrResHeaderRetryAfter, Str: `["3"]`, Type: spans.ValueOther}}, 3 * time.Second, true},
		{"header HTTP-date", []spans.Attr{spans.StringAttr(spans.AttrResHeaderRetryAfter, end.Add(5*time.Second).Format(time.RFC1123))}, 5 * time.Second, true},
		{"header date in the past", []spans.Attr{spans.StringAttr(spans.AttrResHeaderRetryAfter, end.Add(-5*time.Second).Format(time.RFC1123))}, 0, true},
		{"garbage header", []spans.Attr{spans.StringAttr(spans.AttrResHeaderRetryAfter, "soon")}, 0, false},
		{"negative seconds", []spans.Attr{spans.StringAttr(spans.AttrResHeaderRetryAfter, "-1")}, 0, false},
		{"none", nil, 0, false},
		{"both, the header first", []spans.Attr{spans.StringAttr(spans.AttrResHeaderRetryAfter, "2"), spans.IntAttr(spans.AttrRetryAfter, 1500)}, 1500 * time.Millisecond, true},
		{"negative resilience ms, then the header", []spans.Attr{spans.IntAttr(spans.AttrRetryAfter, -1), spans.StringAttr(spans.AttrResHeaderRetryAfter, "3")}, 3 * time.Second, true},
		{"the first of repeated names", []spans.Attr{spans.StringAttr(spans.AttrResHeaderRetryAfter, "4"), spans.StringAttr(spans.AttrResHeaderRetryAfter, "9")}, 4 * time.Second, true},
	}
	for _, c := range cases {
		s := &spans.Span{EndUnixNano: end.UnixNano(), Attrs: c.attrs}
		got, ok := RetryAfter(s)
		if ok != c.ok || time.Duration(got) != c.want {
			t.Errorf("%s: RetryAfter = %v, %v; want %v, %v", c.name, time.Duration(got), ok, c.want, c.ok)
		}
	}
}

// Live, the windowed detectors see only the operations that ended within the window before the
// latest; offline, everything.
func TestWindowed(t *testing.T) {
	at := func(sec int) *analyzer.Operation {
		ns := int64(sec) * int64(time.Second)
		return &analyzer.Operation{StartUnixNano: ns, EndUnixNano: ns + int64(time.Millisecond)}
	}
	ops := []*analyzer.Operation{at(0), at(100), at(170), at(180)}
	offline := analyzer.RunSettings{}
	w := Windowed(&analyzer.Pass{Operations: ops, RunSettings: offline})
	if start, end := w.Bounds(); len(w.Ops) != 4 || start != 0 || end != 180*int64(time.Second)+int64(time.Millisecond) {
		t.Errorf("offline: %d ops from %d to %d, want all 4 from 0 to 180.001 s", len(w.Ops), start, end)
	}
	var detectors []*analyzer.Detector
	var settings analyzer.RunSettings
	policy.Configure(&detectors, &settings, nil, policy.Live) // default window: one minute
	w = Windowed(&analyzer.Pass{Operations: ops, RunSettings: settings})
	if start, end := w.Bounds(); len(w.Ops) != 2 || start != 170*int64(time.Second) || end != 180*int64(time.Second)+int64(time.Millisecond) {
		t.Errorf("live: %d ops from %v to %v, want the 2 of the last minute", len(w.Ops), time.Duration(start), time.Duration(end))
	}
	// Dropped operations anywhere in the list leave the others in their order; a window that
	// drops none is the list itself.
	mixed := []*analyzer.Operation{ops[2], ops[1], ops[3], ops[0]}
	if w := Windowed(&analyzer.Pass{Operations: mixed, RunSettings: settings}); len(w.Ops) != 2 || w.Ops[0] != ops[2] || w.Ops[1] != ops[3] {
		t.Errorf("live, unordered: kept %v, want the operations at 170 s and 180 s in that order", w.Ops)
	}
	recent := ops[2:]
	if w := Windowed(&analyzer.Pass{Operations: recent, RunSettings: settings}); len(w.Ops) != 2 || &w.Ops[0] != &recent[0] {
		t.Errorf("live, nothing dropped: %d ops, copied: %v", len(w.Ops), &w.Ops[0] != &recent[0])
	}
	if start, end := (&Window{}).Bounds(); start != 0 || end != 0 {
		t.Errorf("no operations: bounds %d, %d, want 0, 0", start, end)
	}
}

func TestHashKeyHidesTheKey(t *testing.T) {
	h := HashKey("order-7f3a")
	if h == "order-7f3a" || len(h) != len("sha256:")+12 || h != HashKey("order-7f3a") || h == HashKey("order-7f3b") {
		t.Errorf("HashKey = %q", h)
	}
}

// A Set (TraceSet) counts distinct ids the same in its slice and after it moved them to a map,
// whatever the order and the repeats, and says which adds were new and what it holds: the
// detectors that report once per dependency or read an operation once rely on it.
func TestTraceSetCountsDistinct(t *testing.T) {
	id := func(n int) spans.TraceID { return spans.TraceID{byte(n), byte(n >> 8), 7} }
	for _, n := range []int{0, 1, smallSet - 1, smallSet, smallSet + 1, 100} {
		var s TraceSet
		want := map[spans.TraceID]bool{}
		for i := range 3 * n {
			// Repeats right after, and of ids long added.
			x := id((i * 7) % max(n, 1))
			if n == 0 {
				break
			}
			if s.Has(x) != want[x] {
				t.Fatalf("n=%d: Has(%v) = %v before adding it again, want %v", n, x, s.Has(x), want[x])
			}
			if added := s.Add(x); added == want[x] {
				t.Fatalf("n=%d: Add(%v) = %v, though it was in the set: %v", n, x, added, want[x])
			}
			if s.Add(x) || !s.Has(x) {
				t.Fatalf("n=%d: %v added again as new, or not held", n, x)
			}
			if s.Has(id(n + 1)) {
				t.Fatalf("n=%d: holds an id never added", n)
			}
			want[x] = true
			if s.Len() != len(want) {
				t.Fatalf("n=%d after %d adds: Len = %d, want %d", n, i+1, s.Len(), len(want))
			}
		}
		if s.Len() != len(want) || len(want) != n {
			t.Errorf("n=%d: Len = %d, distinct added %d", n, s.Len(), len(want))
		}
	}
}

// Method and IdempotencyKey read two attribute names in one scan; they must answer what reading
// each name with Span.Str does, whatever the order, repeats, empty values and types.
func TestOneScanReadersMatchStr(t *testing.T) {
	method := func(s *spans.Span) string {
		m := s.Str(spans.AttrHTTPMethod)
		if m == "" {
			m = s.Str(spans.AttrLegacyHTTPMethod)
		}
		return strings.ToUpper(m)
	}
	key := func(s *spans.Span) string {
		if k := s.Str(spans.AttrIdempotencyKey); k != "" {
			return k
		}
		return s.Str(spans.AttrReqHeaderIdempotencyKey)
	}
	pool := []spans.Attr{
		spans.StringAttr(spans.AttrHTTPMethod, "post"), spans.StringAttr(spans.AttrHTTPMethod, ""),
		spans.StringAttr(spans.AttrLegacyHTTPMethod, "PATCH"), spans.IntAttr(spans.AttrLegacyHTTPMethod, 7),
		spans.StringAttr(spans.AttrIdempotencyKey, "k1"), spans.StringAttr(spans.AttrIdempotencyKey, ""),
		spans.StringAttr(spans.AttrReqHeaderIdempotencyKey, "k2"), spans.IntAttr(spans.AttrIdempotencyKey, 42),
		spans.StringAttr(spans.AttrURLFull, "http://x/"),
	}
	// Every ordered choice of up to three attributes from the pool.
	var attrs []spans.Attr
	var walk func(depth int)
	walk = func(depth int) {
		s := &spans.Span{Attrs: attrs}
		if got, want := Method(s), method(s); got != want {
			t.Errorf("Method(%v) = %q, want %q", attrs, got, want)
		}
		if got, want := IdempotencyKey(s), key(s); got != want {
			t.Errorf("IdempotencyKey(%v) = %q, want %q", attrs, got, want)
		}
		if depth == 3 {
			return
		}
		for _, a := range pool {
			attrs = append(attrs, a)
			walk(depth + 1)
			attrs = attrs[:len(attrs)-1]
		}
	}
	walk(0)
}

// A count of the whole traffic is scaled to a sampled window's share, never below 1, and only
// when every operation's spans said how it was sampled.
func TestSampledCount(t *testing.T) {
	op := func(p float64) *analyzer.Operation { return &analyzer.Operation{SampleProbability: p} }
	for _, c := range []struct {
		ops  []*analyzer.Operation
		n    int
		want int
	}{
		{[]*analyzer.Operation{op(0.1), op(0.1)}, 10, 1},
		{[]*analyzer.Operation{op(0.1), op(0.25)}, 10, 3},
		{[]*analyzer.Operation{op(0.1), op(0)}, 10, 10},
		{[]*analyzer.Operation{op(0.01)}, 8, 1},
		{[]*analyzer.Operation{op(0.1)}, 0, 0},
		{nil, 10, 10},
	} {
		if got := SampledCount(c.ops, c.n); got != c.want {
			t.Errorf("SampledCount(%v ops, %d) = %d, want %d", len(c.ops), c.n, got, c.want)
		}
	}
}
