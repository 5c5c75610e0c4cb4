package retryamplification_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/analyzertest"
	"github.com/stormwatch/stormwatch/analyzer/passes/passtest"
	"github.com/stormwatch/stormwatch/analyzer/passes/retryamplification"
	"github.com/stormwatch/stormwatch/fixtures"
)

// The first look may only skip traces the full count would not report: over every fixture and
// the synthetic workload, whenever some chain has at least `need` retrying layers, MayFire says
// yes. It must also skip something, or it would be no first look at all.
func TestMayFireNeverSkipsAFinding(t *testing.T) {
	var passes [][]*analyzer.Operation
	keep := &analyzer.Detector{Name: "keep", Title: "t", Doc: "keeps every trace's operations", Run: func(p *analyzer.Pass) error {
		passes = append(passes, p.Operations)
		return nil
	}}
	cfg := analyzer.Config{Detectors: []*analyzer.Detector{keep}, MaxSpans: -1}
	for _, n := range fixtures.Names() {
		passtest.Feed(t, analyzer.New(cfg), n)
	}
	a := analyzer.New(cfg)
	w := analyzertest.NewWorkload(1_767_225_600_000_000_000)
	if err := w.Feed(a, 20_000, nil); err != nil {
		t.Fatal(err)
	}
	a.Flush()

	skipped := 0
	for _, ops := range passes {
		most := 0 // the most retrying layers of any chain
		for _, c := range analyzer.LeafChains(ops) {
			most = max(most, len(c.RetryingLayers()))
		}
		for need := 0; need <= 4; need++ {
			may := retryamplification.MayFire(ops, need)
			if most >= need && !may {
				t.Fatalf("a trace with a chain of %d retrying layers was skipped for need %d", most, need)
			}
			if need == 2 && !may {
				skipped++
			}
		}
	}
	if skipped == 0 || skipped == len(passes) {
		t.Errorf("the first look skipped %d of %d traces: it should skip the healthy ones and keep the storms", skipped, len(passes))
	}
}
