package engine_test

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/spans/spanstest"
)

// TestHeldResultsDoNotPointIntoPackedSpans: an analysis reads its spans with strings aliasing the
// packed bytes, and detaches what it keeps. If any string of the report or of the operations
// held - a service name, a dependency, an evidence value of any detector - still pointed into
// packed bytes, it would keep them alive after the trace was dropped or packed again. Every
// fixture, through the whole suite, the built-in policy and a detector with evidence of unusual
// types, in several ways: whole batches, interleaved batches of a few spans (traces in many
// blocks, packed again once analyzed), late duplicates that make every trace be analyzed again,
// and offline with spans released. Every buffer of packed spans the analyzer made is checked.
func TestHeldResultsDoNotPointIntoPackedSpans(t *testing.T) {
	var all []spans.Span
	for _, f := range spanstest.FixtureTraces(t, spans.DecodeOptions{}) {
		for _, ss := range f.Traces {
			all = append(all, ss...)
		}
	}
	later := time.Unix(0, 0).Add(1000 * time.Hour)
	for _, sc := range []struct {
		name    string
		release bool
		batch   int
		late    bool
		offline bool // operations held as values, not packed
		// A snapshot before the spans (or between the first analyses and the late spans): a
		// live analyzer then holds the operations it makes as values.
		snapFirst, snapBetween bool
	}{
		{name: "whole batches", batch: 500},
		{name: "interleaved, 7 spans a batch", batch: 7},
		{name: "late duplicates", batch: 500, late: true},
		{name: "released", batch: 7, release: true},
		{name: "offline, interleaved", batch: 7, offline: true},
		{name: "offline, late duplicates", batch: 500, late: true, offline: true},
		{name: "offline, released", batch: 7, release: true, offline: true},
		{name: "snapshot first", batch: 7, late: true, snapFirst: true},
		{name: "released, late, snapshot between", batch: 7, release: true, late: true, snapBetween: true},
	} {
		t.Run(sc.name, func(t *testing.T) {
			window := time.Nanosecond
			if sc.offline {
				window = -1
			}
			cfg := engine.Config{Settle: time.Second, WindowInterval: window, ReleaseSpans: sc.release,
				Detectors: append(suite.Default(), oddEvidence)}
			policy.Configure(&cfg.Detectors, &cfg.Settings, nil, policy.Live)
			a := engine.New(cfg)
			var mu sync.Mutex
			var made [][]byte
			engine.OnPack(a, func(b []byte) { mu.Lock(); made = append(made, b); mu.Unlock() })
			feed := func(ss []spans.Span) {
				for lo := 0; lo < len(ss); lo += sc.batch {
					batch := interleave(ss[lo:min(lo+sc.batch, len(ss))])
					if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: batch}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if sc.snapFirst {
				a.Snapshot(later)
			}
			feed(all)
			a.Settle(later)
			if sc.snapBetween {
				a.Snapshot(later)
			}
			if sc.late {
				// The first span of every trace again: each trace is analyzed again, drops the
				// duplicate and is packed anew.
				var dups []spans.Span
				seen := map[spans.TraceID]bool{}
				for _, s := range all {
					if !seen[s.TraceID] {
						seen[s.TraceID] = true
						dups = append(dups, s)
					}
				}
				feed(dups)
				a.Settle(later.Add(time.Hour))
			}
			snap := a.Snapshot(later.Add(2 * time.Hour))
			if len(snap.Operations()) != snap.Report.Input.Operations {
				t.Fatalf("the snapshot lists %d operations, the report counts %d", len(snap.Operations()), snap.Report.Input.Operations)
			}
			if len(snap.Report.Findings) == 0 || len(snap.Operations()) == 0 || len(made) == 0 {
				t.Fatalf("%d findings, %d operations, %d packed buffers: the check below would check nothing",
					len(snap.Report.Findings), len(snap.Operations()), len(made))
			}
			strs := 0
			w := walker{seen: map[uintptr]bool{}, visit: func(path, s string) {
				strs++
				if aliases(s, made) {
					t.Errorf("%s = %q points into packed spans", path, s)
				}
			}}
			w.walk("report", reflect.ValueOf(snap.Report))
			w.walk("operations", reflect.ValueOf(snap.Operations()))
			win := engine.WindowOperations(a)
			if len(win) == 0 {
				t.Fatal("the window holds nothing: the check below would check nothing")
			}
			w.walk("window", reflect.ValueOf(win))
			t.Logf("%d strings checked against %d packed buffers", strs, len(made))
			checkOddEvidence(t, snap.Report.Findings)
		})
	}
}

// oddEvidence reports, for each trace's first CLIENT span, evidence taken straight from the
// pass's memory: the span's name (aliasing the packed bytes) as a text and as a record's key, and
// the Origins of the first attempt of the trace's operations - a slice the next trace's
// operations are made in - each with a copy made at Report time to compare with later.
var oddEvidence = &analyzer.Detector{Name: "odd-evidence", Severity: analyzer.SeverityInfo,
	Run: func(p *analyzer.Pass) error {
		t := p.Trace
		first := -1
		for i := range t.Len() {
			if t.Spans[i].Kind == spans.KindClient {
				first = i
				break
			}
		}
		if first < 0 {
			return nil
		}
		var origins []string
		for _, op := range p.Operations {
			if len(op.Attempts) > 0 && len(op.Attempts[0].Origins) > 0 {
				origins = op.Attempts[0].Origins
				break
			}
		}
		s := &t.Spans[first]
		p.Report(analyzer.Finding{Summary: "odd", SpanIDs: []string{s.SpanID.String()}, Evidence: analyzer.Evidence{
			"name":         analyzer.Text(s.Name),
			"by_name":      analyzer.Record(analyzer.Evidence{s.Name: analyzer.Int(len(t.Children(first)))}),
			"origins":      analyzer.Texts(origins),
			"want_name":    analyzer.Text(strings.Clone(s.Name)),
			"want_origins": analyzer.Texts(cloneTexts(origins)),
		}})
		return nil
	}}

func cloneTexts(s []string) []string {
	if s == nil {
		return nil
	}
	out := make([]string, len(s))
	for i := range s {
		out[i] = strings.Clone(s[i])
	}
	return out
}

// checkOddEvidence: what oddEvidence reported still holds what it held when reported.
func checkOddEvidence(t *testing.T, fs []analyzer.Finding) {
	t.Helper()
	n, withOrigins := 0, 0
	for _, f := range fs {
		if f.Detector != oddEvidence.Name {
			continue
		}
		n++
		if !f.Evidence["name"].Equal(f.Evidence["want_name"]) {
			t.Fatalf("name %v changed to %v after later analyses", f.Evidence["want_name"], f.Evidence["name"])
		}
		name, _ := f.Evidence["name"].Text()
		if r, _ := f.Evidence["by_name"].Record(); len(r) != 1 || r[name].Kind() != analyzer.KindInt {
			t.Fatalf("record keyed by the name %q changed to %v", name, r)
		}
		got, want := f.Evidence["origins"], f.Evidence["want_origins"]
		if o, _ := want.Texts(); len(o) > 0 {
			withOrigins++
		}
		if !got.Equal(want) {
			t.Fatalf("origins %v changed to %v after later analyses", want, got)
		}
	}
	if n == 0 || withOrigins == 0 {
		t.Fatalf("%d odd-evidence findings, %d with origins", n, withOrigins)
	}
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
