package retryamplification_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/analyzer/passes/retryamplification"
	"github.com/stormwatch/stormwatch/analyzer/workload"
	"github.com/stormwatch/stormwatch/fixtures"
)

func TestTestdata(t *testing.T) { detectortest.Run(t, retryamplification.Detector, "testdata") }

// The first look may only skip traces the full count would not report: over every fixture and
// the synthetic workload, whenever some chain has at least `need` retrying layers, MayFire says
// yes. It must also skip something, or it would be no first look at all.
func TestMayFireNeverSkipsAFinding(t *testing.T) {
	// Judged during the pass: the operations live only as long as it (see analyzer.Pass).
	type look struct {
		most int // the most retrying layers of any chain
		may  [5]bool
	}
	var looks []look
	keep := &analyzer.Detector{Name: "keep", Title: "t", Doc: "looks at every trace's operations", Run: func(p *analyzer.Pass) error {
		var l look
		for _, c := range analyzer.LeafChains(p.Operations) {
			l.most = max(l.most, len(c.RetryingLayers()))
		}
		for need := range l.may {
			l.may[need] = retryamplification.MayFire(p.Operations, need)
		}
		looks = append(looks, l)
		return nil
	}}
	feedAll(t, keep)

	skipped := 0
	for _, l := range looks {
		for need, may := range l.may {
			if l.most >= need && !may {
				t.Fatalf("a trace with a chain of %d retrying layers was skipped for need %d", l.most, need)
			}
			if need == 2 && !may {
				skipped++
			}
		}
	}
	if skipped == 0 || skipped == len(looks) {
		t.Errorf("the first look skipped %d of %d traces: it should skip the healthy ones and keep the storms", skipped, len(looks))
	}
}

// RetryingChains are the chains the detector reports: over every fixture and the synthetic
// workload, for each need, the first chain of each leaf dependency (in LeafChains' order) with at
// least need retrying layers, measured the same - though it measures only those, counts the
// others' retrying layers from each operation's parent, and lists only the ends of a chain's
// retrying layers (for halves small enough that the fixtures' chains have ends to pick).
func TestRetryingChainsAreTheReportedOnes(t *testing.T) {
	fired, picked := 0, 0
	keep := &analyzer.Detector{Name: "keep", Title: "t", Doc: "compares the chains of every trace", Run: func(p *analyzer.Pass) error {
		all := analyzer.LeafChains(p.Operations)
		for need := 1; need <= 4; need++ {
			var want []analyzer.LeafChain
			seen := map[string]bool{}
			for _, c := range all {
				if !seen[c.Dependency] && len(c.RetryingLayers()) >= need {
					seen[c.Dependency] = true
					want = append(want, c)
				}
			}
			for _, half := range []int{1, 2, 32} {
				got := analyzer.RetryingChains(p.Operations, need, half)
				if len(got) != len(want) {
					t.Errorf("trace %s, need %d: RetryingChains %+v, want %+v", p.Trace.ID, need, got, want)
					continue
				}
				for k, c := range want {
					retrying := c.RetryingLayers()
					ends := retrying
					if len(ends) > 2*half {
						ends = slices.Concat(retrying[:half], retrying[len(retrying)-half:])
						picked++
					}
					c.Layers, c.Ends, c.Retrying = nil, ends, len(retrying)
					if !reflect.DeepEqual(got[k], c) {
						t.Errorf("trace %s, need %d, half %d: RetryingChains[%d] %+v, want %+v", p.Trace.ID, need, half, k, got[k], c)
					}
				}
				if need == 2 && half == 32 {
					fired += len(got)
				}
			}
			if need == 1 { // the chain a trace's view shows, every layer of it
				first, ok := analyzer.FirstRetryingChain(p.Operations)
				if ok != (len(want) > 0) || ok && !reflect.DeepEqual(first, want[0]) {
					t.Errorf("trace %s: FirstRetryingChain %+v (%v), want the first of %+v", p.Trace.ID, first, ok, want)
				}
			}
		}
		return nil
	}}
	feedAll(t, keep)
	if fired == 0 || picked == 0 {
		t.Errorf("%d traces had a chain of two retrying layers, %d chains ends to pick: the comparison proves little", fired, picked)
	}
}

// feedAll runs keep over every fixture's traces and the synthetic workload's.
func feedAll(t *testing.T, keep *analyzer.Detector) {
	t.Helper()
	cfg := engine.Config{Detectors: []*analyzer.Detector{keep}, MaxSpans: -1}
	for _, n := range fixtures.Names() {
		detectortest.Feed(t, engine.New(cfg), n)
	}
	a := engine.New(cfg)
	w := workload.NewWorkload(1_767_225_600_000_000_000)
	if err := w.Feed(a, 20_000, nil); err != nil {
		t.Fatal(err)
	}
	a.Flush()
}
