package engine_test

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/spans"
)

// clock is an injected Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

// twoLayerTrace: edge retries api twice, api retries dep three times per call: 6 leaf calls.
func twoLayerTrace(trace byte) []spans.Span {
	ss := []spans.Span{sp(trace, 1, 0, spans.KindServer, "edge", 0, 1000)}
	id := 10
	for e := range 2 {
		c := id
		ss = append(ss, sp(trace, c, 1, spans.KindClient, "edge", int64(e)*400, int64(e)*400+300, get("http://api:80/x", 503)...))
		ss = append(ss, sp(trace, c+1, c, spans.KindServer, "api", int64(e)*400+1, int64(e)*400+299))
		for k := range 3 {
			ss = append(ss, sp(trace, c+2+k, c+1, spans.KindClient, "api", int64(e)*400+2+int64(k)*90,
				int64(e)*400+80+int64(k)*90, get("http://dep:80/y", 503)...))
		}
		id += 10
	}
	return ss
}

func TestLiveSettleWaitsForTheQuietPeriod(t *testing.T) {
	clk := &clock{t: time.Unix(0, t0)}
	a := engine.New(engine.Config{Settle: 2 * time.Second, Now: clk.Now, Detectors: nil})
	ss := twoLayerTrace(1)
	consume(t, a, ss[:5]...)
	a.Settle(clk.Add(time.Second))
	if st := a.Stats(); st.PendingTraces != 1 || a.Report().Input.Traces != 0 {
		t.Fatalf("analyzed before the settle period: %+v", st)
	}
	consume(t, a, ss[5:]...) // more spans: the quiet period starts again
	a.Settle(clk.Add(1500 * time.Millisecond))
	if a.Report().Input.Traces != 0 {
		t.Fatal("analyzed 1.5 s after the last span with a 2 s settle")
	}
	a.Settle(clk.Add(time.Second))
	r := a.Report()
	if r.Input.Traces != 1 || r.Input.Spans != len(ss) || a.Stats().PendingTraces != 0 {
		t.Fatalf("after settle: input %+v stats %+v", r.Input, a.Stats())
	}
}

func TestLiveLateSpansReanalyzeWithoutDoubleCounting(t *testing.T) {
	clk := &clock{t: time.Unix(0, t0)}
	a := engine.New(engine.Config{Settle: time.Second, Now: clk.Now})
	ss := twoLayerTrace(1)
	consume(t, a, ss[:len(ss)-1]...)
	a.Settle(clk.Add(2 * time.Second))
	before := a.Report()
	snap := a.Snapshot(clk.Now())
	consume(t, a, ss[len(ss)-1]) // a late leaf call
	a.Settle(clk.Add(2 * time.Second))
	after := a.Report()
	if after.Input.Traces != 1 || after.Input.Spans != before.Input.Spans+1 {
		t.Errorf("input before %+v after %+v", before.Input, after.Input)
	}
	dep := func(r analyzer.Report) analyzer.DependencyStats {
		for _, d := range r.Dependencies {
			if d.Dependency == "dep" {
				return d
			}
		}
		return analyzer.DependencyStats{}
	}
	if b, a := dep(before), dep(after); b.PhysicalCalls != 5 || a.PhysicalCalls != 6 || a.LogicalOperations != 1 || a.Amplification != 6 {
		t.Errorf("dep before %+v after %+v", b, a)
	}
	// The older snapshot did not change under the re-analysis.
	if n := len(snap.Report.Findings); n != len(before.Findings) {
		t.Errorf("old snapshot changed")
	}
}

func TestMaxSpansEvictsOldestTracesButKeepsTheirCounts(t *testing.T) {
	clk := &clock{t: time.Unix(0, t0)}
	a := engine.New(engine.Config{MaxSpans: 20, Now: clk.Now, Detectors: suite.Default()})
	for n := byte(1); n <= 3; n++ {
		consume(t, a, twoLayerTrace(n)...) // 11 spans each
		clk.Add(time.Millisecond)
	}
	st := a.Stats()
	if st.SpansHeld > 20 || st.EvictedTraces != 2 || st.EvictedSpans != 22 || st.TracesHeld != 1 {
		t.Fatalf("stats = %+v", st)
	}
	a.Flush()
	r := a.Report()
	if r.Input.Traces != 3 || len(r.Findings) != 3 || !hasNote(r, "evicted by the span bound") {
		t.Errorf("report input %+v findings %d notes %q", r.Input, len(r.Findings), r.Notes)
	}
	if _, ok := a.Snapshot(clk.Now()).Trace(tid(1)); ok {
		t.Error("an evicted trace is still looked up")
	}
	if _, ok := a.Snapshot(clk.Now()).Trace(tid(3)); !ok {
		t.Error("the held trace is not looked up")
	}
}

func TestMaxTraceSpansTruncates(t *testing.T) {
	a := engine.New(engine.Config{MaxTraceSpans: 5})
	consume(t, a, twoLayerTrace(1)...)
	a.Flush()
	st, r := a.Stats(), a.Report()
	if st.TruncatedTraces != 1 || st.SpansHeld != 5 || !hasNote(r, "per-trace cap of 5 spans") {
		t.Errorf("stats %+v notes %q", st, r.Notes)
	}
	v, ok := a.Snapshot(testNow).Trace(tid(1))
	if !ok || !v.Truncated {
		t.Errorf("view = %+v", v)
	}
}

func TestSnapshotTraceViewOrderAndLayers(t *testing.T) {
	a, _ := run(t, engine.Config{}, twoLayerTrace(1)...)
	v, ok := a.Snapshot(testNow).Trace(tid(1))
	if !ok {
		t.Fatal("trace not found")
	}
	pos := map[spans.SpanID]int{}
	for i, s := range v.Spans {
		pos[s.SpanID] = i
	}
	for i, s := range v.Spans {
		if !s.ParentID.IsZero() && pos[s.ParentID] >= i {
			t.Errorf("span %d shown before its parent", i)
		}
		if s.ParentID.IsZero() && v.Depth[i] != 0 || !s.ParentID.IsZero() && v.Depth[i] != v.Depth[pos[s.ParentID]]+1 {
			t.Errorf("depth of span %d = %d", i, v.Depth[i])
		}
	}
	if len(v.Layers) != 2 || v.Layers[0] != (analyzer.Layer{Service: "edge", Attempts: 2}) ||
		v.Layers[1] != (analyzer.Layer{Service: "api", Attempts: 3}) || v.LeafDependency != "dep" {
		t.Errorf("layers = %+v leaf %q", v.Layers, v.LeafDependency)
	}
	if len(v.Findings) != 1 || v.Findings[0].Severity != analyzer.SeverityWarning || !v.Findings[0].Evidence["factor"].Equal(analyzer.Int(6)) {
		t.Errorf("findings = %+v", v.Findings)
	}
	// The chain of operations from a leaf call up to the root names the owners.
	for _, op := range v.Operations {
		if op.Dependency == "dep" {
			chain := op.Chain()
			if len(chain) != 2 || chain[0].Owner != "edge" || chain[1].Owner != "api" {
				t.Errorf("chain = %v", chain)
			}
		}
	}
}

func TestSnapshotIsCachedAndHistoryTicks(t *testing.T) {
	clk := &clock{t: time.Unix(0, t0)}
	a := engine.New(engine.Config{Settle: time.Second, Now: clk.Now, HistoryInterval: time.Second})
	a.Settle(clk.Now())
	consume(t, a, twoLayerTrace(1)...)
	a.Settle(clk.Add(2 * time.Second))
	s1, s2 := a.Snapshot(clk.Now()), a.Snapshot(clk.Add(time.Millisecond))
	if s1.HeldOperations == 0 || !s1.SameOperations(s2) || &s1.Report.Dependencies[0] != &s2.Report.Dependencies[0] {
		t.Error("unchanged analyzer rebuilt its snapshot")
	}
	if s2.AtUnixNano == s1.AtUnixNano {
		t.Error("snapshot time not updated")
	}
	if h := s2.History["dep"]; len(h) != 1 || h[0] != 6 {
		t.Errorf("history = %v", s2.History)
	}
	// Idle, the history still moves every interval; the report and the operations are the same
	// ones, so a reader has nothing to redo but the sparklines.
	sum1 := a.Summary(clk.Now())
	a.Settle(clk.Add(2 * time.Second))
	// A headless collector's summary (/metrics, the status line) does not rebuild its report either.
	if sum2 := a.Summary(clk.Now()); len(sum2.History["dep"]) != 2 || &sum2.Report.Dependencies[0] != &sum1.Report.Dependencies[0] {
		t.Errorf("a summary whose only change is the history: %d points, the report shared %v",
			len(sum2.History["dep"]), &sum2.Report.Dependencies[0] == &sum1.Report.Dependencies[0])
	}
	s3 := a.Snapshot(clk.Now())
	if h := s3.History["dep"]; len(h) != 2 || h[1] != 0 {
		t.Errorf("idle history = %v", s3.History)
	}
	if !s3.SameOperations(s2) || &s3.Report.Dependencies[0] != &s2.Report.Dependencies[0] {
		t.Error("a snapshot whose only change is the history did not share the report and the operations")
	}
	if len(s2.History["dep"]) != 1 {
		t.Error("the history of an earlier snapshot changed")
	}
}

// TestSummaryIsTheSnapshotWithoutOperations: a summary (what /metrics and the status line read)
// has the snapshot's report, history and figures at the same moment, no operations, and follows
// every change - whichever of the two was asked first.
func TestSummaryIsTheSnapshotWithoutOperations(t *testing.T) {
	clk := &clock{t: time.Unix(0, t0)}
	a := engine.New(engine.Config{Settle: time.Second, Now: clk.Now, HistoryInterval: time.Second})
	a.Settle(clk.Now())
	for i, summaryFirst := range []bool{true, false, true} {
		consume(t, a, twoLayerTrace(byte(i+1))...)
		a.Settle(clk.Add(2 * time.Second))
		var sum, snap *engine.Snapshot
		if summaryFirst {
			sum, snap = a.Summary(clk.Now()), a.Snapshot(clk.Now())
		} else {
			snap, sum = a.Snapshot(clk.Now()), a.Summary(clk.Now())
		}
		if sum.Operations() != nil {
			t.Fatalf("round %d: a summary lists %d operations", i, len(sum.Operations()))
		}
		if sum.Report.Input.Traces != i+1 || len(snap.Operations()) != snap.Report.Input.Operations {
			t.Fatalf("round %d: summary counts %d traces (want %d); snapshot lists %d operations, counts %d",
				i, sum.Report.Input.Traces, i+1, len(snap.Operations()), snap.Report.Input.Operations)
		}
		if !reflect.DeepEqual(sum.Report, snap.Report) || sum.Stats != snap.Stats || !reflect.DeepEqual(sum.History, snap.History) {
			t.Fatalf("round %d (summary first %v): the summary's figures differ from the snapshot's:\n%+v\n%+v", i, summaryFirst, sum.Report.Input, snap.Report.Input)
		}
	}
}

// Run with -race: ingestion, settling and snapshots from different goroutines.
func TestConcurrentConsumeSettleSnapshot(t *testing.T) {
	clk := &clock{t: time.Unix(0, t0)}
	a := engine.New(engine.Config{Settle: time.Millisecond, Now: clk.Now, MaxSpans: 200})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 20 {
				consume(t, a, twoLayerTrace(byte(g*20+n+1))...)
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			a.Settle(clk.Add(time.Millisecond))
			s := a.Snapshot(clk.Now())
			for _, op := range s.Operations() {
				_ = op.PhysicalCalls()
			}
			s.Trace(tid(1))
		}
	}()
	wg.Wait()
	close(done)
	a.Flush()
	if r := a.Report(); r.Input.Traces != 80 {
		t.Errorf("traces = %d, want 80", r.Input.Traces)
	}
}

// feedFailedCall gives a trace n of two spans at time at: a SERVER span and its CLIENT call, which
// a 503 failed.
func feedFailedCall(t *testing.T, a *engine.Engine, n byte, at int64) {
	t.Helper()
	if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: []spans.Span{
		sp(n, 1, 0, spans.KindServer, "api", at, at+50),
		sp(n, 2, 1, spans.KindClient, "api", at+1, at+9, get("http://dep:80/x", 503)...),
	}}); err != nil {
		t.Fatal(err)
	}
}

// The windowed detectors run when the operations held changed since their last run, not on every
// tick: their window is measured from the latest operation, so an idle analyzer would find the same
// again, and re-reading a million held operations every ten seconds is what idling would cost.
func TestWindowRunsOnlyWhenOperationsChanged(t *testing.T) {
	runs := 0
	counter := &analyzer.Detector{Name: "window-counter", Title: "t", Doc: "counts its runs", Scope: analyzer.ScopeWindow,
		Run: func(p *analyzer.Pass) error { runs++; return nil }}
	a := engine.New(engine.Config{Detectors: []*analyzer.Detector{counter}, Settle: time.Second,
		WindowInterval: 10 * time.Second})
	trace := func(n byte, at int64) { feedFailedCall(t, a, n, at) }
	now := time.Unix(0, t0)
	tick := func(d time.Duration) { now = now.Add(d); a.Settle(now) }
	trace(1, 0)
	tick(11 * time.Second) // settled and due
	if runs != 1 {
		t.Fatalf("runs after the first trace = %d, want 1", runs)
	}
	for range 5 {
		tick(11 * time.Second) // due by the clock, nothing new
	}
	if runs != 1 {
		t.Errorf("runs while idle = %d, want still 1", runs)
	}
	trace(2, 60_000)
	tick(2 * time.Second) // settled: due again, by the clock and by the data
	if runs != 2 {
		t.Errorf("runs after a new trace = %d, want 2", runs)
	}
}

// A long windowed run pushes the next one back so that the runs take at most WindowShare of the
// time: under load the window sits at its bound and every run reads all of it again. A negative
// share runs them every WindowInterval, however long they take.
func TestWindowRunsPacedByTheirLength(t *testing.T) {
	for _, share := range []float64{0.001, -1} {
		runs := 0
		slow := &analyzer.Detector{Name: "slow-window", Title: "t", Doc: "a run of 20 ms", Scope: analyzer.ScopeWindow,
			Run: func(p *analyzer.Pass) error { runs++; time.Sleep(20 * time.Millisecond); return nil }}
		a := engine.New(engine.Config{Detectors: []*analyzer.Detector{slow}, Settle: time.Second,
			WindowInterval: time.Second, WindowShare: share})
		trace := func(n byte, at int64) { feedFailedCall(t, a, n, at) }
		now := time.Unix(0, t0)
		tick := func(d time.Duration) { now = now.Add(d); a.Settle(now) }
		trace(1, 0)
		tick(2 * time.Second)
		st := a.Stats()
		if runs != 1 || st.WindowRun < 20*time.Millisecond {
			t.Fatalf("share %v: %d runs, the last %v long; want 1 of 20 ms or more", share, runs, st.WindowRun)
		}
		trace(2, 60_000)
		tick(2 * time.Second) // due by WindowInterval and by the data
		if share < 0 {
			if runs != 2 || st.WindowEvery != time.Second {
				t.Errorf("share %v: %d runs, every %v; want 2, every 1s", share, runs, st.WindowEvery)
			}
			continue
		}
		// 20 ms at a share of 0.001: 20 s or more to the next run.
		if runs != 1 || st.WindowEvery < 20*time.Second {
			t.Fatalf("share %v: %d runs, next after %v; want still 1, the next 20s or more after it", share, runs, st.WindowEvery)
		}
		tick(st.WindowEvery) // 2 s of it have passed already
		if runs != 2 {
			t.Errorf("share %v: %d runs once the gap had passed, want 2", share, runs)
		}
	}
}

// A live reader that compares reports needs to know what is not in one yet: the stats say through
// when every trace has been analyzed (the oldest still settling holds it back) and through when
// the windowed detectors have judged what was analyzed (their next run moves it on).
func TestStatsSayWhatIsSettledAndJudged(t *testing.T) {
	counter := &analyzer.Detector{Name: "window-counter", Title: "t", Doc: "counts its runs", Scope: analyzer.ScopeWindow,
		Run: func(p *analyzer.Pass) error { return nil }}
	c := &clock{t: time.Unix(0, t0)}
	a := engine.New(engine.Config{Detectors: []*analyzer.Detector{counter}, Settle: time.Second,
		WindowInterval: 10 * time.Second, Now: c.Now})
	start := c.Now().UnixNano()
	a.Settle(c.Now())
	feedFailedCall(t, a, 1, 0)
	if st := a.Stats(); st.PendingTraces != 1 || st.SettledThroughUnixNano > start {
		t.Fatalf("a trace settling: pending %d, settled through %d, want 1 and at most %d", st.PendingTraces, st.SettledThroughUnixNano, start)
	}
	first := c.Add(1500 * time.Millisecond)
	a.Settle(first) // settled, and the first windowed run is due
	if st := a.Stats(); st.SettledThroughUnixNano != first.UnixNano() || st.WindowThroughUnixNano != first.UnixNano() {
		t.Fatalf("all settled and judged at %d: settled through %d, judged through %d", first.UnixNano(), st.SettledThroughUnixNano, st.WindowThroughUnixNano)
	}
	c.Add(500 * time.Millisecond)
	feedFailedCall(t, a, 2, 0)
	second := c.Add(1100 * time.Millisecond)
	a.Settle(second) // analyzed, but the windowed detectors are not due for 10 s
	if st := a.Stats(); st.SettledThroughUnixNano != second.UnixNano() || st.WindowThroughUnixNano != first.UnixNano() {
		t.Errorf("analyzed, not judged: settled through %d (want %d), judged through %d (want %d)",
			st.SettledThroughUnixNano, second.UnixNano(), st.WindowThroughUnixNano, first.UnixNano())
	}
	third := c.Add(10 * time.Second)
	a.Settle(third)
	if st := a.Stats(); st.WindowThroughUnixNano != third.UnixNano() {
		t.Errorf("after the next windowed run: judged through %d, want %d", st.WindowThroughUnixNano, third.UnixNano())
	}
}

// An idle collector's report is read through a snapshot that nothing has changed since it was
// made: its clock-derived stats must still say what is settled at the time it is taken. Held from
// when it was made, they said an older time for as long as no span arrived, and `stormwatch diff`
// against a collector that had already settled everything waited for a verdict that never came.
func TestIdleSnapshotsSaySettledThroughTheirOwnTime(t *testing.T) {
	c := &clock{t: time.Unix(0, t0)}
	a := engine.New(engine.Config{Detectors: suite.Default(), Settle: time.Second, WindowInterval: 10 * time.Second, Now: c.Now})
	feedFailedCall(t, a, 1, 0)
	done := c.Add(15 * time.Second)
	a.Settle(done) // analyzed and judged: nothing pending
	for _, take := range []struct {
		name string
		at   func(time.Time) *engine.Snapshot
	}{{"Snapshot", a.Snapshot}, {"Summary", a.Summary}} {
		first := take.at(c.Add(time.Second))
		later := take.at(c.Add(time.Minute)) // nothing arrived or settled in between
		for _, s := range []*engine.Snapshot{first, later} {
			if s.Stats.PendingTraces != 0 || s.Stats.SettledThroughUnixNano != s.AtUnixNano || s.Stats.WindowThroughUnixNano != s.AtUnixNano {
				t.Errorf("%s taken at %d with nothing pending: settled through %d, judged through %d; want both at the time it was taken",
					take.name, s.AtUnixNano, s.Stats.SettledThroughUnixNano, s.Stats.WindowThroughUnixNano)
			}
		}
	}
}

// A trace a pass has taken out of pending and is still analyzing is in no report yet: a snapshot
// taken meanwhile must not say it is settled through now, or `stormwatch diff` takes a report
// without the traces of the pass's last chunk.
func TestSnapshotsDuringAPassAreNotSettledPastItsTraces(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	blocking := &analyzer.Detector{Name: "blocking", Title: "t", Doc: "waits to be released", Scope: analyzer.ScopeTrace,
		Run: func(p *analyzer.Pass) error { entered <- struct{}{}; <-release; return nil }}
	c := &clock{t: time.Unix(0, t0)}
	a := engine.New(engine.Config{Detectors: []*analyzer.Detector{blocking}, Settle: time.Second, WindowInterval: -1, Now: c.Now})
	arrived := c.Now().UnixNano()
	feedFailedCall(t, a, 1, 0)
	done := make(chan struct{})
	go func() { defer close(done); a.Settle(c.Add(5 * time.Second)) }()
	<-entered
	for _, take := range []func(time.Time) *engine.Snapshot{a.Snapshot, a.Summary} {
		s := take(c.Add(time.Second))
		if s.Stats.SettledThroughUnixNano > arrived {
			t.Errorf("taken at %d while the trace that arrived at %d is analyzed: settled through %d, holding %d traces",
				s.AtUnixNano, arrived, s.Stats.SettledThroughUnixNano, s.Report.Input.Traces)
		}
	}
	close(release)
	<-done
	if s := a.Snapshot(c.Add(time.Second)); s.Stats.SettledThroughUnixNano != s.AtUnixNano || s.Report.Input.Traces != 1 {
		t.Errorf("after the pass: settled through %d at %d with %d traces; want through the time taken, 1 trace",
			s.Stats.SettledThroughUnixNano, s.AtUnixNano, s.Report.Input.Traces)
	}
}
