package engine_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/analyzer/workload"
	"github.com/stormwatch/stormwatch/spans"
)

// Offline, released traces are forgotten once the recording has moved Settle + ForgetAfter past
// them, so what is held follows the traffic of that span of time rather than the whole input;
// the report is the one they would have made held to the end, but for the note that says so.
func TestForgetReleasedTraces(t *testing.T) {
	clone := workloadBatches(150_000) // about 14 s of recorded traffic
	run := func(forget time.Duration) (analyzer.Report, int) {
		cfg := engine.Config{Detectors: suite.Default(), Settle: time.Second, ReleaseSpans: true, ForgetAfter: forget,
			WindowInterval: -1, MaxFindings: -1}
		a := engine.New(cfg)
		held := 0
		var now int64
		for _, b := range clone() {
			for i := range b.Spans {
				now = max(now, b.Spans[i].EndUnixNano)
			}
			a.Settle(time.Unix(0, now))
			if err := a.ConsumeBatch(context.Background(), b); err != nil {
				t.Fatal(err)
			}
			held = max(held, a.Stats().TracesHeld)
		}
		a.Flush()
		return a.Report(), held
	}
	kept, keptHeld := run(0)
	forgot, forgotHeld := run(time.Second)
	if forgotHeld*3 > keptHeld {
		t.Errorf("at most %d traces held when forgetting, %d when not: forgetting keeps them", forgotHeld, keptHeld)
	}
	if kept.Input != forgot.Input || !slices.Equal(findingLines(t, kept.Findings), findingLines(t, forgot.Findings)) {
		t.Errorf("forgetting changed the report: input %+v and %+v, findings %d and %d",
			kept.Input, forgot.Input, len(kept.Findings), len(forgot.Findings))
	}
	i := slices.IndexFunc(forgot.Notes, func(n string) bool { return strings.Contains(n, "analyzed traces were forgotten") })
	if i < 0 || !strings.Contains(forgot.Notes[i], "2s past their last span") {
		t.Errorf("no note of the traces forgotten: %q", forgot.Notes)
	}
	if slices.ContainsFunc(kept.Notes, func(n string) bool { return strings.Contains(n, "forgotten") }) {
		t.Errorf("a note of forgotten traces without ForgetAfter: %q", kept.Notes)
	}
}

// A span that comes for a trace after it was forgotten is analyzed as a trace of its own, and
// before that as a late fragment of its trace.
func TestSpanOfForgottenTrace(t *testing.T) {
	for _, c := range []struct {
		name   string
		forget time.Duration
		traces int
		late   bool
	}{{"remembered", 0, 0, true}, {"forgotten", time.Second, 1, false}} {
		t.Run(c.name, func(t *testing.T) {
			a, b := releasing(c.forget, 1)
			late := b.Spans[len(b.Spans)-1]
			first := &spans.Batch{Spans: slices.Clone(b.Spans[:len(b.Spans)-1])}
			if err := a.ConsumeBatch(context.Background(), first); err != nil {
				t.Fatal(err)
			}
			// Ten seconds on: the trace is analyzed, released and, with ForgetAfter, forgotten.
			a.Settle(time.Unix(0, late.EndUnixNano).Add(10 * time.Second))
			if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: []spans.Span{late}}); err != nil {
				t.Fatal(err)
			}
			a.Flush()
			rep := a.Report()
			if rep.Input.Spans != len(b.Spans) || rep.Input.Traces != 1+c.traces {
				t.Errorf("input %+v, want %d spans in %d traces", rep.Input, len(b.Spans), 1+c.traces)
			}
			noted := slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, "after they had been analyzed and released") })
			if noted != c.late {
				t.Errorf("late fragment noted: %v, want %v: %q", noted, c.late, rep.Notes)
			}
		})
	}
}

// releasing is an analyzer that settles traces after a second and releases them, forgetting them
// forget after that (never when 0), and a batch of n workload traces for it.
func releasing(forget time.Duration, n int) (*engine.Engine, *spans.Batch) {
	a := engine.New(engine.Config{Detectors: suite.Default(), Settle: time.Second, ReleaseSpans: true,
		ForgetAfter: forget, WindowInterval: -1})
	b := &spans.Batch{}
	workload.NewWorkload(t0).Fill(b, n)
	return a, b
}

// findingLines renders findings for comparing two reports.
func findingLines(t *testing.T, fs []analyzer.Finding) []string {
	t.Helper()
	var ds []*analyzer.Detector
	for _, f := range fs {
		ds = append(ds, &analyzer.Detector{Name: f.Detector, Scope: analyzer.ScopeWindow})
	}
	return windowFindings(t, ds, fs)
}

// A released trace that is to be forgotten keeps no operations: the window holds them until it
// has judged them, and nothing of the report reads them after. Remembered to the end
// (ForgetAfter 0, which keeps them) or for longer than the recording lasts (an hour, which does
// not), the reports are the same, with late fragments of released traces and a window judged in
// chunks among them.
func TestForgettingKeepsNoOperationsAndChangesNoAnswer(t *testing.T) {
	clone := workloadBatches(60_000) // about 5.5 s of recorded traffic
	run := func(forget time.Duration) analyzer.Report {
		a := engine.New(engine.Config{Detectors: suite.Default(), Settle: time.Second, ReleaseSpans: true,
			ForgetAfter: forget, WindowInterval: -1, MaxWindowOps: 2_000, MaxFindings: -1})
		feed := func(ss []spans.Span, now int64) {
			a.Settle(time.Unix(0, now))
			if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: ss}); err != nil {
				t.Fatal(err)
			}
		}
		var now int64
		var held []spans.Span // the last span of every eighth batch, sent 3 s of recording later
		for i, b := range clone() {
			for k := range b.Spans {
				now = max(now, b.Spans[k].EndUnixNano)
			}
			if i%8 == 0 {
				held = append(held, b.Spans[len(b.Spans)-1])
				b.Spans = b.Spans[:len(b.Spans)-1]
			}
			var due []spans.Span
			held = slices.DeleteFunc(held, func(s spans.Span) bool {
				if s.EndUnixNano+int64(3*time.Second) <= now {
					due = append(due, s)
					return true
				}
				return false
			})
			if len(due) > 0 {
				feed(due, now)
			}
			feed(b.Spans, now)
		}
		feed(held, now)
		a.Flush()
		return a.Report()
	}
	kept, dropped := run(0), run(time.Hour)
	if !slices.ContainsFunc(dropped.Notes, func(n string) bool { return strings.Contains(n, "after they had been analyzed and released") }) ||
		!slices.ContainsFunc(dropped.Notes, func(n string) bool { return strings.Contains(n, "chunks of at most 2000 operations") }) {
		t.Fatalf("no late fragments or no chunks to exercise: %q", dropped.Notes)
	}
	if !reflect.DeepEqual(kept, dropped) {
		t.Errorf("the report changed when released traces keep no operations:\n%+v\n%q\n---\n%+v\n%q",
			kept.Input, kept.Notes, dropped.Input, dropped.Notes)
	}
}

// A snapshot counts the operations it lists: a released trace that is to be forgotten keeps
// none (the TUI shows "operations N" and pages the list by that count), while the report still
// counts them as analyzed.
func TestSnapshotCountsOperationsHeld(t *testing.T) {
	for _, c := range []struct {
		name   string
		forget time.Duration
		held   bool
	}{{"remembered", 0, true}, {"to be forgotten", time.Hour, false}} {
		t.Run(c.name, func(t *testing.T) {
			a, b := releasing(c.forget, 3)
			var end int64
			for i := range b.Spans {
				end = max(end, b.Spans[i].EndUnixNano)
			}
			a.Settle(time.Unix(0, end))
			if err := a.ConsumeBatch(context.Background(), b); err != nil {
				t.Fatal(err)
			}
			// Analyzed and released, not yet forgotten.
			a.Settle(time.Unix(0, end).Add(10 * time.Second))
			s := a.Snapshot(time.Unix(0, end).Add(10 * time.Second))
			ops := s.Operations()
			if s.Report.Input.Operations == 0 || s.Stats.TracesHeld == 0 {
				t.Fatalf("nothing analyzed and held: %+v, %d traces held", s.Report.Input, s.Stats.TracesHeld)
			}
			if s.HeldOperations != len(ops) || (len(ops) > 0) != c.held {
				t.Errorf("the snapshot says %d operations and lists %d (the report counts %d)", s.HeldOperations, len(ops), s.Report.Input.Operations)
			}
			if ids := s.HeldTraceIDs(); (len(ids) > 0) != c.held {
				t.Errorf("the snapshot lists %d traces with operations, and %d operations", len(ids), len(ops))
			}
		})
	}
}
