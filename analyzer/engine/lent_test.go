package engine_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/fixtures"
)

// TestAppendingToWhatATraceLendsChangesNothing: a detector that appends to a span's children or to
// the roots (to build a list of its own from them) gets a copy: the trace's index, which the
// detectors after it read, stays as it was.
func TestAppendingToWhatATraceLendsChangesNothing(t *testing.T) {
	checked := 0
	probe := &analyzer.Detector{Name: "append-probe", Title: "probe", Run: func(p *analyzer.Pass) error {
		tr := p.Trace
		before := make([][]int32, tr.Len())
		for i := range before {
			before[i] = slices.Clone(tr.Children(i))
		}
		roots := slices.Clone(tr.Roots())
		for i := range before {
			_ = append(tr.Children(i), -7, -7)
		}
		_ = append(tr.Roots(), -7)
		for i := range before {
			if got := tr.Children(i); !slices.Equal(got, before[i]) {
				t.Fatalf("trace %s: span %d's children %v became %v", tr.ID, i, before[i], got)
			}
		}
		if !slices.Equal(tr.Roots(), roots) {
			t.Fatalf("trace %s: roots changed by an append", tr.ID)
		}
		checked++
		return nil
	}}
	for _, c := range fixtures.Cases {
		detectortest.Load(t, c.Name, engine.Config{Detectors: []*analyzer.Detector{probe}})
	}
	if checked == 0 {
		t.Fatal("the probe saw no trace")
	}
}

// TestADetectorsPassIsItsOwn: a detector that changes its Pass - drops its trace and
// operations, appends to them, sets the run's skew - changes nothing the detectors after it read.
func TestADetectorsPassIsItsOwn(t *testing.T) {
	checked := 0
	vandal := &analyzer.Detector{Name: "vandal", Title: "vandal", Run: func(p *analyzer.Pass) error {
		_ = append(p.Operations, nil)
		p.Trace, p.Operations = nil, nil
		p.RunSettings.SkewTolerance = time.Hour
		return nil
	}}
	var ops int
	counter := &analyzer.Detector{Name: "counter", Title: "counter", Run: func(p *analyzer.Pass) error {
		ops = len(p.Operations)
		return nil
	}}
	probe := &analyzer.Detector{Name: "probe", Title: "probe", Run: func(p *analyzer.Pass) error {
		if p.Trace == nil || len(p.Operations) != ops || slices.Contains(p.Operations, nil) || p.RunSettings.SkewTolerance != 0 {
			t.Fatalf("the pass after another detector's: trace %v, %d operations (want %d), skew %v",
				p.Trace != nil, len(p.Operations), ops, p.RunSettings.SkewTolerance)
		}
		checked++
		return nil
	}}
	for _, c := range fixtures.Cases {
		detectortest.Load(t, c.Name, engine.Config{Detectors: []*analyzer.Detector{counter, vandal, probe}})
	}
	if checked == 0 {
		t.Fatal("the probe saw no trace")
	}
}
