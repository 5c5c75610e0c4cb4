package engine_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/fixtures"
	"github.com/stormwatch/stormwatch/spans"
)

// TestCarriesAttrAgreesWithScan: Trace.CarriesAttr answers the keys the detectors ask about from
// inference's attribute index; on every fixture's traces it must say what a scan of every
// attribute says, for those keys and for keys outside the index. The fixtures must carry each
// indexed key somewhere, or the test would only ever compare "false" with "false".
func TestCarriesAttrAgreesWithScan(t *testing.T) {
	keys := []string{spans.AttrDeadlineRemaining, spans.AttrRetryAfter, spans.AttrResHeaderRetryAfter,
		spans.AttrIdempotencyKey, spans.AttrReqHeaderIdempotencyKey,
		spans.AttrURLFull, spans.AttrHTTPResendCount, "no.such.key"}
	seen := map[string]bool{}
	traces := 0
	probe := &analyzer.Detector{Name: "carries-probe", Title: "probe", Run: func(p *analyzer.Pass) error {
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
	for _, k := range keys[:5] {
		if !seen[k] {
			t.Errorf("no fixture carries %q: the index is not exercised for it", k)
		}
	}
}
