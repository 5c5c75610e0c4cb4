package engine_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/spans"
)

// blocker is a trace detector that announces each run and then waits to be let go: a stand-in for
// a slow analysis, to show what ingestion does meanwhile.
type blocker struct {
	started chan spans.TraceID
	release chan struct{}
}

func newBlocker() *blocker {
	return &blocker{started: make(chan spans.TraceID, 16), release: make(chan struct{})}
}

func (b *blocker) detector() *analyzer.Detector {
	return &analyzer.Detector{Name: "blocker", Title: "blocks", Doc: "waits on a channel inside the analysis",
		Run: func(p *analyzer.Pass) error {
			b.started <- p.Trace.ID
			<-b.release
			return nil
		}}
}

// within fails the test when fn has not returned after a generous bound: fn waiting for the
// blocked analysis would never return, so the bound only turns a deadlock into a failure.
func within(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s waited for the analysis in flight", what)
	}
}

func TestSettleDoesNotBlockIngestion(t *testing.T) {
	clk := &clock{t: time.Unix(0, t0)}
	b := newBlocker()
	a := engine.New(engine.Config{Settle: time.Second, Now: clk.Now, WindowInterval: -1,
		Detectors: []*analyzer.Detector{b.detector()}})
	one, two := twoLayerTrace(1), twoLayerTrace(2)
	late := one[len(one)-1]
	consume(t, a, one[:len(one)-1]...)
	settled := make(chan struct{})
	go func() { defer close(settled); a.Settle(clk.Add(2 * time.Second)) }()
	if got := <-b.started; got != tid(1) {
		t.Fatalf("analysis started on %v, want trace 1", got)
	}
	// Trace 1 is being analyzed: a new trace, the late span of trace 1 and a duplicate of an
	// analyzed span go in without waiting; snapshots, reports and stats are served meanwhile.
	within(t, "ConsumeBatch", func() { consume(t, a, append(append([]spans.Span{}, two...), late, one[0])...) })
	within(t, "Snapshot", func() {
		if s := a.Snapshot(clk.Now()); s.Report.Input.Traces != 0 {
			t.Errorf("a trace in flight was published before its analysis ended: %+v", s.Report.Input)
		}
	})
	within(t, "Report", func() { a.Report() })
	within(t, "Stats", func() {
		if st := a.Stats(); st.SpansHeld != len(one)+len(two)+1 {
			t.Errorf("held %d spans during the analysis, want %d (taken, late, duplicate and new all counted)", st.SpansHeld, len(one)+len(two)+1)
		}
	})
	close(b.release)
	<-settled

	// The late span put trace 1 back in pending: it is analyzed again once quiet, and counted once.
	r := a.Report()
	if r.Input.Traces != 1 || r.Input.Spans != len(one)-1 {
		t.Fatalf("after the first pass: input %+v, want 1 trace of %d spans", r.Input, len(one)-1)
	}
	if st := a.Stats(); st.PendingTraces != 2 {
		t.Fatalf("pending after the pass: %d, want 2 (trace 1 with its late span, trace 2)", st.PendingTraces)
	}
	a.Settle(clk.Add(2 * time.Second))
	r = a.Report()
	if r.Input.Traces != 2 || r.Input.Spans != len(one)+len(two) {
		t.Fatalf("after re-analysis: input %+v, want 2 traces of %d spans (late span kept, duplicate dropped once)", r.Input, len(one)+len(two))
	}
	if st := a.Stats(); st.SpansHeld != len(one)+len(two) || st.PendingTraces != 0 {
		t.Fatalf("stats after re-analysis: %+v", st)
	}
	var dep *analyzer.DependencyStats
	for i := range r.Dependencies {
		if r.Dependencies[i].Dependency == "dep" {
			dep = &r.Dependencies[i]
		}
	}
	if dep == nil || dep.PhysicalCalls != 12 || dep.LogicalOperations != 2 {
		t.Fatalf("dep counted wrong after re-analysis (want 12 calls for 2 operations): %+v", dep)
	}
}

func TestLateSpansDuringAnalysisWithReleasedSpans(t *testing.T) {
	clk := &clock{t: time.Unix(0, t0)}
	b := newBlocker()
	a := engine.New(engine.Config{Settle: time.Second, Now: clk.Now, WindowInterval: -1, ReleaseSpans: true,
		Detectors: []*analyzer.Detector{b.detector()}})
	one := twoLayerTrace(1)
	consume(t, a, one[:len(one)-1]...)
	settled := make(chan struct{})
	go func() { defer close(settled); a.Settle(clk.Add(2 * time.Second)) }()
	<-b.started
	within(t, "ConsumeBatch", func() { consume(t, a, one[len(one)-1]) })
	b.release <- struct{}{}
	<-settled
	// The analyzed spans were released; the late one is still held, waiting to be analyzed.
	if st := a.Stats(); st.SpansHeld != 1 || st.PendingTraces != 1 {
		t.Fatalf("after the pass: %+v, want the late span held and pending", st)
	}
	go func() { <-b.started; b.release <- struct{}{} }()
	a.Flush()
	r := a.Report()
	if r.Input.Traces != 1 || r.Input.Spans != len(one) {
		t.Fatalf("input %+v, want 1 trace of %d spans", r.Input, len(one))
	}
	if !hasNote(r, "received spans after they had been analyzed and released") {
		t.Fatalf("the late fragment is not noted: %q", r.Notes)
	}
	if st := a.Stats(); st.SpansHeld != 0 {
		t.Fatalf("spans still held: %+v", st)
	}
}

// ConsumeBatch files a trace's spans however the batch orders them: contiguous runs (kept in the
// batch's own storage), traces interleaved, or one span per batch give the same report.
func TestBatchShapesGiveTheSameReport(t *testing.T) {
	one, two := twoLayerTrace(1), twoLayerTrace(2)
	var interleaved []spans.Span
	for i := range one {
		interleaved = append(interleaved, one[i], two[i])
	}
	shapes := map[string][][]spans.Span{
		"runs":        {append(append([]spans.Span{}, one...), two...)},
		"interleaved": {interleaved},
		"split":       {one[:3], append(append([]spans.Span{}, two...), one[3:]...)},
	}
	for _, s := range one {
		shapes["single"] = append(shapes["single"], []spans.Span{s})
	}
	for _, s := range two {
		shapes["single"] = append(shapes["single"], []spans.Span{s})
	}
	var want string
	for _, name := range []string{"single", "runs", "interleaved", "split"} {
		a := engine.New(engine.Config{})
		for _, b := range shapes[name] {
			consume(t, a, append([]spans.Span{}, b...)...)
		}
		a.Flush()
		got := fmt.Sprintf("%+v", a.Report())
		if st := a.Stats(); st.SpansHeld != len(one)+len(two) {
			t.Errorf("%s: %d spans held, want %d", name, st.SpansHeld, len(one)+len(two))
		}
		if want == "" {
			want = got
		} else if got != want {
			t.Errorf("%s batches: report\n%s\nwant (one span per batch)\n%s", name, got, want)
		}
	}
}

// The span bound passes over a trace whose analysis is in flight: the other traces are evicted
// (analyzed as they are, under the lock), the one in flight is published whole afterwards.
func TestEvictionPassesOverTraceInFlight(t *testing.T) {
	clk := &clock{t: time.Unix(0, t0)}
	started, release := make(chan struct{}), make(chan struct{})
	slow := &analyzer.Detector{Name: "slow-on-one", Title: "blocks on trace 1", Doc: "waits on a channel while analyzing trace 1",
		Run: func(p *analyzer.Pass) error {
			if p.Trace.ID == tid(1) {
				close(started)
				<-release
			}
			return nil
		}}
	one := twoLayerTrace(1)
	a := engine.New(engine.Config{Settle: time.Second, Now: clk.Now, WindowInterval: -1, MaxSpans: len(one) + 2,
		Detectors: []*analyzer.Detector{slow}})
	consume(t, a, one...)
	settled := make(chan struct{})
	go func() { defer close(settled); a.Settle(clk.Add(2 * time.Second)) }()
	<-started
	// Each new trace pushes the store over its bound: traces 2 and 3 are evicted in turn, and
	// trace 1, the oldest, is passed over.
	within(t, "ConsumeBatch over the bound", func() {
		consume(t, a, twoLayerTrace(2)...)
		consume(t, a, twoLayerTrace(3)...)
	})
	st := a.Stats()
	if st.EvictedTraces != 2 || st.EvictedSpans != 2*len(one) || st.TracesHeld != 1 || st.SpansHeld != len(one) {
		t.Fatalf("while trace 1 is in flight: %+v, want traces 2 and 3 evicted and trace 1 held", st)
	}
	close(release)
	<-settled
	a.Flush()
	r := a.Report()
	if r.Input.Traces != 3 || r.Input.Spans != 3*len(one) {
		t.Fatalf("input %+v, want 3 traces of %d spans, each counted once", r.Input, len(one))
	}
	d := depStats(t, r, "dep")
	if d.PhysicalCalls != 18 || d.LogicalOperations != 3 {
		t.Fatalf("dep %+v, want 18 calls for 3 operations", d)
	}
}
