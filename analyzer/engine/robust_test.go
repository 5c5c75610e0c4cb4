package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/spans"
)

func TestOrphanSpansAreAnalyzedAndNoted(t *testing.T) {
	// The api's SERVER span (3) never arrived; its calls still form an operation.
	_, r := run(t, engine.Config{},
		sp(1, 1, 0, spans.KindServer, "edge", 0, 100),
		sp(1, 4, 3, spans.KindClient, "api", 10, 20, get("http://dep:80/x", 503)...),
		sp(1, 5, 3, spans.KindClient, "api", 30, 40, get("http://dep:80/x", 200)...),
	)
	if !hasNote(r, "2 orphan spans") {
		t.Errorf("notes = %q, want the orphans noted", r.Notes)
	}
	if r.Input.Operations != 1 || len(r.Dependencies) != 1 || r.Dependencies[0].PhysicalCalls != 2 {
		t.Errorf("input %+v deps %+v: want one operation of two calls", r.Input, r.Dependencies)
	}
}

// A trace's view says what was wrong with its spans, as the report does for all of them: the
// notes are the trace's own counts, whether its operations are held as values (offline) or packed
// (live).
func TestTraceViewNotesItsOrphans(t *testing.T) {
	ss := []spans.Span{
		sp(1, 1, 0, spans.KindServer, "edge", 0, 100),
		sp(1, 4, 3, spans.KindClient, "api", 10, 20, get("http://dep:80/x", 503)...),
		sp(1, 5, 3, spans.KindClient, "api", 30, 40, get("http://dep:80/x", 200)...),
	}
	for _, live := range []bool{false, true} {
		var a *engine.Engine
		if live {
			a = engine.New(engine.Config{Settle: time.Second, Detectors: suite.Default()})
			consume(t, a, ss...)
			a.Settle(testNow.Add(time.Hour))
		} else {
			a, _ = run(t, engine.Config{}, ss...)
		}
		v, ok := a.Snapshot(testNow.Add(time.Hour)).Trace(tid(1))
		if !ok {
			t.Fatalf("live %v: no view of the trace", live)
		}
		if len(v.Notes) != 1 || !strings.HasPrefix(v.Notes[0], "2 orphan spans") {
			t.Errorf("live %v: notes %q, want the 2 orphans noted", live, v.Notes)
		}
	}
}

// A trace's view and the report say the same thing about the same issue in the same words: one
// trace's notes, with its counts, are the report's notes of a report that holds that trace alone
// (but for the per-trace span cap, whose report note counts traces).
func TestTraceViewNotesAreTheReportsWords(t *testing.T) {
	ss := []spans.Span{
		sp(1, 1, 0, spans.KindServer, "edge", 0, 100),
		sp(1, 1, 0, spans.KindServer, "edge", 0, 100),                                // a duplicate
		sp(1, 4, 3, spans.KindClient, "api", 10, 20, get("http://dep:80/x", 503)...), // an orphan
		sp(1, 6, 6, spans.KindInternal, "api", 50, 60),                               // its own parent
		sp(1, 7, 0, spans.KindClient, "web", 70, 80, get("http://dep:80/y", 503)...), // a failed client root
	}
	a, r := run(t, engine.Config{}, ss...)
	v, ok := a.Snapshot(testNow.Add(time.Hour)).Trace(tid(1))
	if !ok {
		t.Fatal("no view of the trace")
	}
	if len(v.Notes) < 4 {
		t.Fatalf("the view notes %q: want the duplicate, the orphan, the self-parent and the client root", v.Notes)
	}
	if !slices.Equal(v.Notes, r.Notes) {
		t.Errorf("the trace's view says\n%q\nthe report of that trace alone says\n%q", v.Notes, r.Notes)
	}
}

func TestSelfParentAndCyclesAreBroken(t *testing.T) {
	_, r := run(t, engine.Config{},
		sp(1, 1, 1, spans.KindServer, "self", 0, 10), // its own parent
		sp(2, 1, 2, spans.KindServer, "a", 0, 10),    // 1 -> 2 -> 3 -> 1
		sp(2, 2, 3, spans.KindInternal, "a", 1, 9),
		sp(2, 3, 1, spans.KindClient, "a", 2, 8, get("http://b:80/", 200)...),
		sp(2, 4, 3, spans.KindServer, "b", 3, 7),
	)
	if !hasNote(r, "named themselves as their parent") || !hasNote(r, "1 parent cycles broken") {
		t.Errorf("notes = %q", r.Notes)
	}
	if r.Input.Spans != 5 || r.Input.Traces != 2 {
		t.Errorf("input = %+v", r.Input)
	}
}

func TestDuplicateSpansAreDroppedOnce(t *testing.T) {
	s := sp(1, 1, 0, spans.KindClient, "job", 0, 10, get("http://dep:80/", 200)...)
	a, r := run(t, engine.Config{}, s, s, s)
	if got := a.Stats().DuplicateSpans; got != 2 {
		t.Errorf("DuplicateSpans = %d, want 2", got)
	}
	if r.Input.Spans != 1 || r.Dependencies[0].PhysicalCalls != 1 || !hasNote(r, "2 duplicate spans") {
		t.Errorf("report = %+v", r)
	}
	if st := a.Stats(); st.SpansHeld != 1 {
		t.Errorf("SpansHeld = %d, want 1 after dropping duplicates", st.SpansHeld)
	}
}

func TestBadTimesDoNotBreakAnalysis(t *testing.T) {
	_, r := run(t, engine.Config{},
		sp(1, 1, 0, spans.KindServer, "edge", 50, 10),                                // ends before it starts
		sp(1, 2, 1, spans.KindClient, "edge", 20, 20, get("http://dep:80/", 503)...), // zero length
		sp(1, 3, 1, spans.KindClient, "edge", 30, 25, get("http://dep:80/", 503)...), // negative
		sp(1, 4, 1, spans.KindClient, "edge", 0, 0, get("http://dep:80/", 200)...),
	)
	if !hasNote(r, "2 spans end before they start") {
		t.Errorf("notes = %q", r.Notes)
	}
	if r.Dependencies[0].PhysicalCalls != 3 {
		t.Errorf("deps = %+v", r.Dependencies)
	}
}

func TestTenThousandSiblings(t *testing.T) {
	const n = 10_000
	ss := []spans.Span{sp(1, 1, 0, spans.KindServer, "edge", 0, 100_000)}
	// One destination, sequential failures: one operation with 10,000 attempts.
	for i := range n {
		ss = append(ss, sp(1, 10+i, 1, spans.KindClient, "edge", int64(i)*3, int64(i)*3+2, get("http://dep:80/x", 503)...))
	}
	// And 10,000 different paths at once (parallel, different targets: not fan-out, not retries).
	for i := range n {
		ss = append(ss, sp(1, 20_000+i, 1, spans.KindClient, "edge", 5, 50, get(fmt.Sprintf("http://other:80/%d", i), 200)...))
	}
	a, r := run(t, engine.Config{}, ss...)
	if r.Input.Operations != 1+n {
		t.Fatalf("operations = %d, want %d", r.Input.Operations, 1+n)
	}
	snap := a.Snapshot(testNow)
	var maxTries int
	for _, op := range snap.Operations() {
		maxTries = max(maxTries, op.Tries())
	}
	if maxTries != n {
		t.Errorf("most tries = %d, want %d", maxTries, n)
	}
	for _, f := range r.Findings {
		if f.Detector == "unbounded-fanout" {
			t.Errorf("parallel calls to different paths reported as fan-out: %s", f.Summary)
		}
	}
}

func TestEmptyInputs(t *testing.T) {
	a := engine.New(engine.Config{})
	for _, b := range []*spans.Batch{nil, {}, {Rejected: 2, RejectReason: "invalid trace or span id"}} {
		if err := a.ConsumeBatch(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	a.Flush()
	r := a.Report()
	if r.Input.Spans != 0 || len(r.Findings) != 0 || r.Findings == nil || r.Dependencies == nil {
		t.Errorf("report = %+v, want empty (non-nil) lists", r)
	}
	if !hasNote(r, "2 spans rejected") {
		t.Errorf("notes = %q", r.Notes)
	}
	if s := a.Snapshot(testNow); len(s.Operations()) != 0 {
		t.Errorf("snapshot of nothing has operations")
	}
}

func TestCanceledContextIsRefused(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a := engine.New(engine.Config{})
	if err := a.ConsumeBatch(ctx, &spans.Batch{}); err == nil {
		t.Error("ConsumeBatch with a canceled context succeeded")
	}
}

func TestDetectorPanicBecomesANote(t *testing.T) {
	boom := &analyzer.Detector{Name: "boom", Title: "t", Doc: "panics on purpose for the test",
		Run: func(*analyzer.Pass) error { panic("kaboom") }}
	_, r := run(t, engine.Config{Detectors: []*analyzer.Detector{boom}},
		sp(1, 1, 0, spans.KindServer, "edge", 0, 10))
	if !hasNote(r, "detector boom panicked: kaboom") {
		t.Errorf("notes = %q", r.Notes)
	}
}

// A finding is stamped with when it happened: the earliest start of the spans it names, or of
// its trace when it names none there (a span id of another trace, or none at all) - the trace's
// earliest start found once, however many such findings a detector makes.
func TestFindingsAreStampedWithTheirSpansOrTheirTrace(t *testing.T) {
	reporter := &analyzer.Detector{Name: "stamps", Title: "t", Doc: "reports findings with and without spans", Scope: analyzer.ScopeTrace,
		Run: func(p *analyzer.Pass) error {
			p.Report(analyzer.Finding{Summary: "named", SpanIDs: []string{sid(3).String()}})
			for range 3 {
				p.Report(analyzer.Finding{Summary: "unnamed"})
			}
			p.Report(analyzer.Finding{Summary: "elsewhere", SpanIDs: []string{sid(99).String()}})
			return nil
		}}
	_, r := run(t, engine.Config{Detectors: []*analyzer.Detector{reporter}},
		sp(1, 2, 1, spans.KindInternal, "api", 5, 50), // an orphan, started before the root
		sp(1, 1, 0, spans.KindServer, "api", 10, 100),
		sp(1, 3, 1, spans.KindClient, "api", 20, 30, get("http://dep:80/x", 200)...),
	)
	if len(r.Findings) != 5 {
		t.Fatalf("%d findings, want 5", len(r.Findings))
	}
	for _, f := range r.Findings {
		want := t0 + 5*msec
		if f.Summary == "named" {
			want = t0 + 20*msec
		}
		if f.TimeUnixNano != want {
			t.Errorf("%q stamped %d, want %d", f.Summary, f.TimeUnixNano-t0, want-t0)
		}
	}
}
