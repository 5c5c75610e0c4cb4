package engine_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/fixtures"
	"github.com/stormwatch/stormwatch/spans"
)

// TestCarriesAttrAgreesWithScan: Trace.CarriesAttr answers the keys the run's detectors declare
// (Detector.CarriedAttrs) from inference's attribute index; on every fixture's traces it must say
// what a scan of every attribute says, for those keys and for undeclared ones, with few declared
// keys and with more than the index has bits for. The fixtures must carry each declared key
// somewhere, or the test would only ever compare "false" with "false".
func TestCarriesAttrAgreesWithScan(t *testing.T) {
	declared := []string{spans.AttrDeadlineRemaining, spans.AttrRetryAfter, spans.AttrResHeaderRetryAfter,
		spans.AttrIdempotencyKey, spans.AttrReqHeaderIdempotencyKey}
	undeclared := []string{spans.AttrURLFull, spans.AttrHTTPResendCount, "no.such.key"}
	var many []string // more than the index's 64 bits: the keys past them are answered by a scan
	for i := range 70 {
		many = append(many, fmt.Sprintf("no.such.key.%02d", i))
	}
	for _, c := range []struct {
		name         string
		declare, ask []string
	}{
		{"declared", declared, append(slices.Clone(declared), undeclared...)},
		{"none declared", nil, append(slices.Clone(declared), undeclared...)},
		{"many declared", append(slices.Clone(many), declared...), append(append(slices.Clone(declared), undeclared...), many...)},
	} {
		t.Run(c.name, func(t *testing.T) { carriesAgreesWithScan(t, c.declare, c.ask, declared) })
	}
}

// carriesAgreesWithScan runs a probe declaring declare over every fixture and checks its
// CarriesAttr answers for the keys ask, of which mustSee must each be carried somewhere.
func carriesAgreesWithScan(t *testing.T, declare, ask, mustSee []string) {
	keys := ask
	seen := map[string]bool{}
	traces := 0
	probe := &analyzer.Detector{Name: "carries-probe", Title: "probe", CarriedAttrs: declare, Run: func(p *analyzer.Pass) error {
		traces++
		for _, k := range keys {
			scan := false
			for i := range p.Trace.Spans {
				for _, a := range p.Trace.Spans[i].Attrs {
					scan = scan || a.Key == k
				}
			}
			if got := p.Trace.CarriesAttr(k); got != scan {
				t.Errorf("trace %s: CarriesAttr(%q) = %v, a scan says %v", p.Trace.ID, k, got, scan)
			}
			seen[k] = seen[k] || scan
		}
		return nil
	}}
	for _, c := range fixtures.Cases {
		detectortest.Load(t, c.Name, engine.Config{Detectors: []*analyzer.Detector{probe}})
	}
	if traces == 0 {
		t.Fatal("the probe saw no trace")
	}
	for _, k := range mustSee {
		if !seen[k] {
			t.Errorf("no fixture carries %q: the index is not exercised for it", k)
		}
	}
}
