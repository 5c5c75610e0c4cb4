package retryamplification_test

import (
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/analyzer/passes/retryamplification"
	"github.com/stormwatch/stormwatch/analyzer/workload"
	"github.com/stormwatch/stormwatch/fixtures"
	"github.com/stormwatch/stormwatch/spans"
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

// A chain's layers whose tries were read from the callee's SERVER spans are found by one walk
// down the trace's operations, not one walk up each chain: over every fixture and the synthetic
// workload, each listed layer's answer is the one a walk up from each of the chain's leaves
// (every copy) to the root gives, counting each operation once - its owner's tries on the chain,
// how many were read from SERVER spans, and the callee of the first such operation met.
func TestInferredLayersAreTheChainsWalked(t *testing.T) {
	compared, copies := 0, 0
	keep := &analyzer.Detector{Name: "keep", Title: "t", Doc: "compares the inferred layers of every trace", Run: func(p *analyzer.Pass) error {
		for need := 1; need <= 2; need++ {
			for _, half := range []int{1, 32} {
				chains := analyzer.RetryingChains(p.Operations, need, half)
				got := retryamplification.InferredLayers(p.Trace, p.Operations, chains)
				for k := range chains {
					want := walkedLayers(p.Trace, &chains[k])
					if !slices.Equal(got[k], want) {
						t.Errorf("trace %s, need %d, half %d, chain %s: %q, want %q", p.Trace.ID, need, half, chains[k].Dependency, got[k], want)
					}
					if slices.ContainsFunc(want, func(s string) bool { return s != "" }) {
						compared++
						if len(chains[k].Leaves) > 1 {
							copies++
						}
					}
				}
			}
		}
		return nil
	}}
	feedAll(t, keep)
	if compared == 0 || copies == 0 {
		t.Errorf("%d chains with inferred layers, %d of several copies: the comparison proves little", compared, copies)
	}
}

// walkedLayers is what InferredLayers answers for c, found by walking up from each of c's leaves
// in turn to the root, each operation counted once, summed by owner.
func walkedLayers(tr *analyzer.Trace, c *analyzer.LeafChain) []string {
	type sums struct {
		callee          string
		inferred, tries int
	}
	by := map[string]*sums{}
	seen := map[*analyzer.Operation]bool{}
	for _, leaf := range c.Leaves {
		for op := leaf; op != nil && !seen[op]; op = op.Parent {
			seen[op] = true
			z := by[op.Owner]
			if z == nil {
				z = &sums{}
				by[op.Owner] = z
			}
			for i := range op.Attempts {
				z.tries++
				if j, ok := tr.Lookup(op.Attempts[i].SpanID); ok && tr.Spans[j].Kind == spans.KindServer {
					z.inferred++
					if z.callee == "" {
						z.callee = tr.Spans[j].Service()
					}
				}
			}
		}
	}
	out := make([]string, len(c.Ends))
	for i, l := range c.Ends {
		if z := by[l.Service]; z != nil && z.inferred > 0 {
			out[i] = z.callee + " " + strconv.Itoa(z.inferred) + "/" + strconv.Itoa(z.tries)
		}
	}
	return out
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
