package engine_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/render"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/internal/cputime"
	"github.com/stormwatch/stormwatch/spans"
)

var update = flag.Bool("update", false, "rewrite the wide-shape goldens under testdata/wide")

// The wide shapes, small: a few siblings, just past the few that are compared pairwise, and
// several tens. The report and the operations read from each are the goldens' (written by the
// pairwise scans that the indexes replaced), so the indexes change no figure.
func TestWideShapesReportUnchanged(t *testing.T) {
	for _, shape := range wideShapes {
		for _, n := range []int{3, 12, 40} {
			t.Run(fmt.Sprintf("%s/%d", shape.name, n), func(t *testing.T) {
				a, r := run(t, engine.Config{}, shape.make(n)...)
				var got bytes.Buffer
				if err := render.JSON(&got, &r); err != nil {
					t.Fatal(err)
				}
				for _, op := range a.Snapshot(testNow).Operations() {
					fmt.Fprintf(&got, "op %s owner=%q caller=%q dep=%q tries=%d terminal=%q attempts=[", op.ID, op.Owner, op.Caller, op.Dependency, op.Tries(), op.Terminal)
					for _, at := range op.Attempts {
						fmt.Fprintf(&got, " %d:%s:%s:%d", at.Number, at.Kind, at.Outcome, len(at.Calls))
					}
					fmt.Fprintln(&got, " ]")
				}
				path := filepath.Join("testdata", "wide", fmt.Sprintf("%s-%d.golden", shape.name, n))
				if *update {
					if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.Bytes(), want) {
					t.Errorf("report of %s with %d siblings changed:\n got: %s\nwant: %s", shape.name, n, got.Bytes(), want)
				}
			})
		}
	}
}

// One trace of each wide shape costs about as much per span at 20,000 siblings as at 2,000: a
// pass that compares each sibling with every earlier one costs ten times as much per span there.
// A ratio of CPU times, the best of three runs each, with room for a shared machine's noise -
// not a speed.
func TestWideShapesCostNoSquare(t *testing.T) {
	if testing.Short() {
		t.Skip("analyzes traces of 20,000 siblings")
	}
	perSpan := func(ss []spans.Span) time.Duration {
		best := time.Duration(1<<63 - 1)
		for range 3 {
			batch := append([]spans.Span(nil), ss...)
			a := engine.New(engine.Config{Detectors: suite.Default(), MaxSpans: -1, MaxTraceSpans: -1, WindowInterval: -1})
			cpu0 := cputime.Process()
			if err := a.ConsumeBatch(t.Context(), &spans.Batch{Spans: batch}); err != nil {
				t.Fatal(err)
			}
			a.Flush()
			best = min(best, (cputime.Process()-cpu0)/time.Duration(len(ss)))
		}
		return best
	}
	for _, shape := range wideShapes {
		small, large := perSpan(shape.make(2_000)), perSpan(shape.make(20_000))
		if large > 4*small+time.Microsecond {
			t.Errorf("%s: %v a span at 20,000 siblings, %v at 2,000: the cost grows with the width", shape.name, large, small)
		}
	}
}

// A trace attaches at most 256 orphans to the spans that made their calls (each costs a scan of
// the trace); the report says how many it left as roots instead of leaving them out silently.
func TestOrphansPastTheBoundAreCountedAndNoted(t *testing.T) {
	for _, shape := range wideShapes {
		if shape.name != "orphans" {
			continue
		}
		_, r := run(t, engine.Config{}, shape.make(300)...)
		if !hasNote(r, "44 SERVER spans whose parent span never arrived were left as roots") {
			t.Errorf("no note counts the 44 orphans past the bound: %q", r.Notes)
		}
		if !hasNote(r, "256 SERVER spans whose parent span never arrived were attached") {
			t.Errorf("no note counts the 256 orphans attached: %q", r.Notes)
		}
	}
}
