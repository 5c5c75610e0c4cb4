package cost_test

import (
	"reflect"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/cost"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/fixtures"
)

// The shortcut for traces in which nothing retried gives what walking their paths gives, on
// every fixture - and it is taken, on the healthy ones.
func TestRetriedNothingShortcutChangesNoFigure(t *testing.T) {
	taken := 0
	for _, name := range fixtures.Names() {
		probe := &analyzer.Detector{Name: "probe", Title: "probe", Doc: "compares the shortcut with the walk", Run: func(p *analyzer.Pass) error {
			fast := cost.Measure(p.Trace, p.Operations, p.RunSettings.Skew())
			walked := cost.MeasureWalked(p.Trace, p.Operations, p.RunSettings.Skew())
			if !reflect.DeepEqual(fast, walked) {
				t.Errorf("%s: the shortcut measured %+v, the walk %+v", name, fast, walked)
			}
			if cost.RetriedNothing(p.Operations) && len(fast) > 0 {
				taken++
			}
			return nil
		}}
		detectortest.Load(t, name, engine.Config{Detectors: []*analyzer.Detector{probe}})
	}
	if taken == 0 {
		t.Fatal("no fixture's trace took the shortcut: the test compares nothing")
	}
}
