package engine_test

import (
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/spans"
)

// callTrace is a trace of web calling url once at start (ms from t0), with the outcome given
// (refused: a breaker said no) or 200.
func callTrace(trace byte, url string, start int64, refused bool) []spans.Span {
	attrs := get(url, 200)
	if refused {
		attrs = append(get(url, 0), spans.StringAttr(spans.AttrOutcome, analyzer.OutcomeRefused))
	}
	return []spans.Span{
		sp(trace, 1, 0, spans.KindServer, "web", start-1, start+10),
		sp(trace, 2, 1, spans.KindClient, "web", start, start+5, attrs...),
	}
}

// Snapshot.LastAttempts holds, per dependency, the latest attempt and the latest refused one of
// every trace analyzed: kept when the trace that made them is evicted or analyzed again, raised by
// later ones, refusals that never made a call included. The analyzer here holds its operations
// packed, as a live one does.
func TestLastAttemptsOutliveEvictionAndReanalysis(t *testing.T) {
	const pricing, reviews = "http://pricing:8080", "http://reviews:8080"
	// The dependencies, named by their hosts: the callees export nothing.
	const pricingDep, reviewsDep = "pricing", "reviews"
	clk := &clock{t: time.Unix(0, t0)}
	a := engine.New(engine.Config{Settle: time.Millisecond, MaxSpans: 5, Now: clk.Now})
	at := func(ms int64) int64 { return t0 + ms*msec }
	check := func(when, dep string, want engine.LastAttempt) {
		t.Helper()
		if got := a.Snapshot(clk.Now()).LastAttempts[dep]; got != want {
			t.Errorf("%s: last attempts to %s = %+v, want %+v", when, dep, got, want)
		}
	}
	refusedHeld := func() bool {
		for _, op := range a.Snapshot(clk.Now()).Operations() {
			for _, at := range op.Attempts {
				if op.Dependency == pricingDep && at.Outcome == analyzer.OutcomeRefused {
					return true
				}
			}
		}
		return false
	}

	consume(t, a, callTrace(1, pricing+"/price", 10, true)...)
	consume(t, a, callTrace(2, pricing+"/price", 110, false)...)
	a.Settle(clk.Add(10 * time.Millisecond))
	check("analyzed", pricingDep, engine.LastAttempt{StartUnixNano: at(110), RefusedStartUnixNano: at(10), Refused: true})
	if !refusedHeld() {
		t.Fatal("the refused call is not among the operations held: the test exercises nothing")
	}

	consume(t, a, callTrace(3, reviews+"/r", 300, true)...) // over 5 spans: trace 1 is evicted
	a.Settle(clk.Add(10 * time.Millisecond))
	if a.Stats().EvictedTraces != 1 || refusedHeld() {
		t.Fatalf("trace 1 not evicted (%d evicted)", a.Stats().EvictedTraces)
	}
	check("trace 1 evicted", pricingDep, engine.LastAttempt{StartUnixNano: at(110), RefusedStartUnixNano: at(10), Refused: true})
	check("trace 1 evicted", reviewsDep, engine.LastAttempt{StartUnixNano: at(300), RefusedStartUnixNano: at(300), Refused: true})

	// Trace 2 analyzed again with a later call: its contribution is taken back and added anew.
	consume(t, a, sp(2, 3, 1, spans.KindClient, "web", 150, 155, get(pricing+"/price", 200)...))
	a.Settle(clk.Add(10 * time.Millisecond))
	check("trace 2 analyzed again", pricingDep, engine.LastAttempt{StartUnixNano: at(150), RefusedStartUnixNano: at(10), Refused: true})

	// A call the breaker refused before it was made: the operation span alone.
	refusal := sp(4, 1, 0, spans.KindInternal, "web", 400, 401, spans.StringAttr(spans.AttrURLFull, pricing+"/price"),
		spans.StringAttr(spans.AttrOutcome, analyzer.OutcomeRefused), spans.StringAttr(spans.AttrStopReason, "breaker_open"))
	consume(t, a, refusal)
	a.Settle(clk.Add(10 * time.Millisecond))
	check("refused before the call", pricingDep, engine.LastAttempt{StartUnixNano: at(400), RefusedStartUnixNano: at(400), Refused: true})
}

// A trace evicted before it was analyzed is analyzed at eviction: its attempts count too.
func TestLastAttemptsOfTraceEvictedBeforeItsAnalysis(t *testing.T) {
	const pricing, pricingDep = "http://pricing:8080", "pricing"
	clk := &clock{t: time.Unix(0, t0)}
	a := engine.New(engine.Config{Settle: time.Hour, MaxSpans: 2, Now: clk.Now})
	consume(t, a, callTrace(1, pricing+"/price", 10, true)...)
	consume(t, a, callTrace(2, pricing+"/price", 110, false)...)
	if st := a.Stats(); st.EvictedTraces != 1 || st.PendingTraces != 1 {
		t.Fatalf("%d traces evicted, %d pending; want 1 and 1", st.EvictedTraces, st.PendingTraces)
	}
	want := engine.LastAttempt{StartUnixNano: t0 + 10*msec, RefusedStartUnixNano: t0 + 10*msec, Refused: true}
	if got := a.Snapshot(clk.Now()).LastAttempts[pricingDep]; got != want {
		t.Errorf("last attempts to %s = %+v, want %+v", pricingDep, got, want)
	}
}
