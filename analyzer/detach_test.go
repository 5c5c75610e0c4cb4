package analyzer_test

import (
	"context"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/spans/spanstest"
)

// TestHeldResultsDoNotPointIntoPackedSpans: an analysis reads its spans with strings aliasing the
// packed bytes, and detaches what it keeps. If any string of the report or of the operations
// held - a service name, a dependency, an evidence value of any detector - still pointed into a
// trace's packed bytes, it would keep them alive after the trace was dropped. Every fixture,
// through the whole suite and the built-in policy, traces arriving interleaved span by span.
func TestHeldResultsDoNotPointIntoPackedSpans(t *testing.T) {
	cfg := analyzer.Config{Settle: time.Second, WindowInterval: time.Nanosecond, Detectors: suite.Default()}
	policy.Configure(&cfg, nil, policy.Live)
	a := analyzer.New(cfg)
	var all []spans.Span
	for _, f := range spanstest.FixtureTraces(t, spans.DecodeOptions{}) {
		for _, ss := range f.Traces {
			all = append(all, ss...)
		}
	}
	// Interleaved: the batch is regrouped by trace before it is packed.
	for lo := 0; lo < len(all); lo += 500 {
		batch := interleave(all[lo:min(lo+500, len(all))])
		if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: batch}); err != nil {
			t.Fatal(err)
		}
	}
	a.Settle(time.Unix(0, 0).Add(1000 * time.Hour))
	held := analyzer.HeldBytes(a)
	if len(held) == 0 {
		t.Fatal("nothing held")
	}
	snap := a.Snapshot(time.Unix(0, 0).Add(1000 * time.Hour))
	if len(snap.Report.Findings) == 0 || len(snap.Operations) == 0 {
		t.Fatalf("%d findings, %d operations: the check below would check nothing", len(snap.Report.Findings), len(snap.Operations))
	}
	strs := 0
	w := walker{seen: map[uintptr]bool{}, visit: func(path, s string) {
		strs++
		if aliases(s, held) {
			t.Errorf("%s = %q points into a trace's packed spans", path, s)
		}
	}}
	w.walk("report", reflect.ValueOf(snap.Report))
	w.walk("operations", reflect.ValueOf(snap.Operations))
	t.Logf("%d strings checked against %d packed buffers", strs, len(held))
}

// interleave deals the spans out trace by trace, one span of each trace in turn.
func interleave(ss []spans.Span) []spans.Span {
	byTrace := map[spans.TraceID][]spans.Span{}
	var order []spans.TraceID
	for _, s := range ss {
		if _, ok := byTrace[s.TraceID]; !ok {
			order = append(order, s.TraceID)
		}
		byTrace[s.TraceID] = append(byTrace[s.TraceID], s)
	}
	out := make([]spans.Span, 0, len(ss))
	for len(out) < len(ss) {
		for _, id := range order {
			if q := byTrace[id]; len(q) > 0 {
				out = append(out, q[0])
				byTrace[id] = q[1:]
			}
		}
	}
	return out
}

func aliases(s string, bufs [][]byte) bool {
	if s == "" {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
	for _, b := range bufs {
		base := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		if p >= base && p < base+uintptr(len(b)) {
			return true
		}
	}
	return false
}

// walker visits every string reachable from a value, unexported fields included.
type walker struct {
	seen  map[uintptr]bool
	visit func(path, s string)
}

func (w *walker) walk(path string, v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		w.visit(path, v.String())
	case reflect.Pointer:
		if v.IsNil() || w.seen[v.Pointer()] {
			return
		}
		w.seen[v.Pointer()] = true
		w.walk(path, v.Elem())
	case reflect.Interface:
		if !v.IsNil() {
			w.walk(path, v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			w.walk(path+"."+v.Type().Field(i).Name, v.Field(i))
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			w.walk(path+"[]", v.Index(i))
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			w.walk(path+"{key}", it.Key())
			w.walk(path+"{}", it.Value())
		}
	}
}
