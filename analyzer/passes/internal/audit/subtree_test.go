package audit_test

import (
	"slices"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/analyzer/passes/internal/audit"
	"github.com/stormwatch/stormwatch/fixtures"
	"github.com/stormwatch/stormwatch/spans"
)

// CallsUnder answers what a walk of the subtree finds: over every fixture's traces, for every span
// and every dependency a CLIENT span of the trace calls, the CLIENT spans to it under the span, in
// the walk's order; and all the CLIENT spans under it, to any dependency.
func TestCallsUnderIsTheWalk(t *testing.T) {
	asked := 0
	keep := &analyzer.Detector{Name: "keep", Title: "t", Doc: "compares CallsUnder with a walk", Run: func(p *analyzer.Pass) error {
		tr := p.Trace
		var deps []string
		for j := range tr.Len() {
			if tr.Spans[j].Kind == spans.KindClient && !slices.Contains(deps, tr.Dependency(j)) {
				deps = append(deps, tr.Dependency(j))
			}
		}
		var under audit.CallsUnder
		for i := range tr.Len() {
			var all []int32
			tr.Walk(i, func(j int) bool {
				if tr.Spans[j].Kind == spans.KindClient {
					all = append(all, int32(j))
				}
				return true
			})
			if got := under.All(tr, i); !slices.Equal(got, all) {
				t.Errorf("trace %s, span %d: CallsUnder.All %v, the walk %v", tr.ID, i, got, all)
			}
			for _, dep := range deps {
				var want []int32
				tr.Walk(i, func(j int) bool {
					if tr.Spans[j].Kind == spans.KindClient && tr.Dependency(j) == dep {
						want = append(want, int32(j))
					}
					return true
				})
				if got := under.Of(tr, i, dep); !slices.Equal(got, want) {
					t.Errorf("trace %s, span %d, %s: CallsUnder %v, the walk %v", tr.ID, i, dep, got, want)
				}
				asked += len(want)
			}
		}
		return nil
	}}
	for _, n := range fixtures.Names() {
		detectortest.Feed(t, engine.New(engine.Config{Detectors: []*analyzer.Detector{keep}, MaxSpans: -1}), n)
	}
	if asked == 0 {
		t.Error("no span had a call under it: the comparison proves nothing")
	}
}
