package cost_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/cost"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/spans"
)

// A Scratch kept from trace to trace, as the engine keeps one, must not hold the arrays one
// wide trace grew once Trim is told the usual size, and must measure the next trace as a fresh
// one would; a usual trace's arrays stay for the next.
func TestTrimDropsWhatOneWideTraceGrew(t *testing.T) {
	const usual = 4096
	wide := newBuilder(1)
	root := wide.span(-1, spans.KindServer, "edge", "GET /all", 0, 5000)
	for i := range 1500 { // 6,001 spans (a call is a CLIENT and a SERVER span), each call retried once: the paths are walked, not skipped
		url := fmt.Sprintf("http://api:8080/item/%d", i)
		wide.call(root, "edge", "api", url, 503, float64(i), float64(i)+1)
		wide.call(root, "edge", "api", url, 200, float64(i)+2, float64(i)+3)
	}
	small := newBuilder(2)
	r := small.span(-1, spans.KindServer, "edge", "GET /a", 0, 1000)
	s1 := small.call(r, "edge", "api", "http://api:8080/a", 503, 10, 310)
	small.call(s1, "api", "db", "http://db:5432/q", 503, 20, 120)
	small.call(s1, "api", "db", "http://db:5432/q", 200, 170, 270)
	small.call(r, "edge", "api", "http://api:8080/a", 200, 400, 900)

	var sc cost.Scratch
	var held []int
	var kept, fresh [][]cost.Request
	probe := &analyzer.Detector{Name: "probe", Title: "probe", Doc: "measures in one Scratch, trimmed after each trace", Run: func(p *analyzer.Pass) error {
		kept = append(kept, sc.Measure(p.Trace, p.Operations, p.RunSettings.Skew()))
		fresh = append(fresh, cost.Measure(p.Trace, p.Operations, p.RunSettings.Skew()))
		if p.Trace.Len() > usual/2 && sc.Held() <= usual {
			t.Errorf("the wide trace (%d spans) grew the scratch to %d elements, not past %d: the test measures nothing", p.Trace.Len(), sc.Held(), usual)
		}
		sc.Trim(usual)
		held = append(held, sc.Held())
		return nil
	}}
	a := engine.New(engine.Config{Detectors: []*analyzer.Detector{probe}, MaxSpans: -1})
	for _, b := range []*builder{wide, small} {
		if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: b.spans}); err != nil {
			t.Fatal(err)
		}
		a.Flush()
	}
	if len(held) != 2 {
		t.Fatalf("measured %d traces, want 2", len(held))
	}
	if held[0] != 0 {
		t.Errorf("after the wide trace, Trim(%d) left %d elements held", usual, held[0])
	}
	if held[1] == 0 {
		t.Error("after a small trace, Trim dropped its arrays: the next trace allocates them again")
	}
	for i := range kept {
		if got, want := fmt.Sprintf("%+v", kept[i]), fmt.Sprintf("%+v", fresh[i]); got != want {
			t.Errorf("trace %d measured in the kept scratch:\n%s\nfresh:\n%s", i, got, want)
		}
	}
}
