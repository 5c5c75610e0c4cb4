package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/analyzer/workload"
	"github.com/stormwatch/stormwatch/fixtures"
	"github.com/stormwatch/stormwatch/spans"
)

// The windowed detectors judge a window fed as traces are analyzed (see window.go), not the
// store. These tests hold its findings to a straightforward reference: the same detectors run
// over every operation the store holds, in the store's order, as a tick that read the store
// would. Where no trace left the store the two must agree finding for finding, evidence and
// tie-breaks (the first operation with the most retries, the first refusal) included.

// windowFindings is the findings of rep made by the windowed detectors of ds, rendered as JSON
// and sorted, so that two runs compare as sets with every field.
func windowFindings(t *testing.T, ds []*analyzer.Detector, fs []analyzer.Finding) []string {
	t.Helper()
	var out []string
	for _, f := range fs {
		if i := slices.IndexFunc(ds, func(d *analyzer.Detector) bool { return d.Name == f.Detector }); i < 0 || ds[i].Scope != analyzer.ScopeWindow {
			continue
		}
		b, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	slices.Sort(out)
	return out
}

// reference runs cfg's windowed detectors over the operations a holds.
func reference(t *testing.T, a *engine.Engine, cfg engine.Config) []string {
	t.Helper()
	return windowFindings(t, cfg.Detectors, referenceOver(t, cfg, engine.HeldOperations(a)))
}

// referenceOver runs cfg's windowed detectors over ops.
func referenceOver(t *testing.T, cfg engine.Config, ops []*analyzer.Operation) []analyzer.Finding {
	t.Helper()
	var found []analyzer.Finding
	for _, d := range cfg.Detectors {
		if d.Scope != analyzer.ScopeWindow {
			continue
		}
		pass := &analyzer.Pass{Detector: d, Operations: ops, RunSettings: cfg.Settings}
		pass.Report = func(f analyzer.Finding) {
			f = f.Clone()
			if f.Detector == "" {
				f.Detector = d.Name
			}
			found = append(found, f)
		}
		if err := d.Run(pass); err != nil {
			t.Fatalf("%s: %v", d.Name, err)
		}
	}
	return found
}

func sameFindings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: the window's findings differ from the reference's\ngot  %d:\n%s\nwant %d:\n%s", what, len(got), jsonLines(got), len(want), jsonLines(want))
	}
}

func jsonLines(ss []string) string {
	out := ""
	for _, s := range ss {
		out += "  " + s + "\n"
	}
	return out
}

// liveConfig is a live analyzer's configuration with the built-in policy, its window set to w.
func liveConfig(w time.Duration) engine.Config {
	cfg := engine.Config{Detectors: suite.Default(), MaxSpans: -1, MaxFindings: -1, Settle: time.Second, WindowInterval: 2 * time.Second}
	p := policy.Default()
	p.Window.Value = w
	policy.Configure(&cfg.Detectors, &cfg.Settings, p, policy.Live)
	return cfg
}

// feedTicking feeds batches to a as a live collector would, the recording's time standing for the
// clock: Settle before each batch with the latest end time read so far, then Flush.
func feedTicking(t *testing.T, a *engine.Engine, batches []*spans.Batch) {
	t.Helper()
	var now int64
	for _, b := range batches {
		for i := range b.Spans {
			now = max(now, b.Spans[i].EndUnixNano)
		}
		if now > 0 {
			a.Settle(time.Unix(0, now))
		}
		if err := a.ConsumeBatch(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	a.Flush()
}

func TestWindowMatchesReferenceOnFixtures(t *testing.T) {
	names := fixtures.Names()
	if len(names) < 50 {
		t.Fatalf("only %d fixtures found", len(names))
	}
	found := 0
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			// As `stormwatch analyze` runs: offline, the whole input judged once at Flush.
			cfg := engine.Config{Detectors: suite.Default(), WindowInterval: -1, MaxFindings: -1}
			a := engine.New(cfg)
			detectortest.Feed(t, a, name)
			got := windowFindings(t, cfg.Detectors, a.Report().Findings)
			sameFindings(t, "offline", got, reference(t, a, cfg))
			found += len(got)

			// Live: ticks as the recording's time goes by, the operations held packed.
			cfg = liveConfig(time.Minute)
			a = engine.New(cfg)
			feedTicking(t, a, detectortest.Batches(t, name))
			sameFindings(t, "live", windowFindings(t, cfg.Detectors, a.Report().Findings), reference(t, a, cfg))
		})
	}
	// The comparison proves nothing if the windowed detectors never fire.
	if found < 5 {
		t.Errorf("the windowed detectors found only %d things over all fixtures", found)
	}
}

func TestWindowMatchesReferenceOnWorkload(t *testing.T) {
	const n = 150_000
	clone := workloadBatches(n)

	cfg := engine.Config{Detectors: suite.Default(), MaxSpans: -1, WindowInterval: -1, MaxFindings: -1}
	a := engine.New(cfg)
	for _, b := range clone() {
		if err := a.ConsumeBatch(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	a.Flush()
	got := windowFindings(t, cfg.Detectors, a.Report().Findings)
	if len(got) == 0 {
		t.Fatal("the workload gave the windowed detectors nothing to find")
	}
	sameFindings(t, "offline", got, reference(t, a, cfg))

	// Live, with a window (5 s) much shorter than the traffic (about 14 s): the window expires
	// operations at every tick, and at the end holds those the reference keeps (audit.Windowed).
	cfg = liveConfig(5 * time.Second)
	a = engine.New(cfg)
	feedTicking(t, a, clone())
	got = windowFindings(t, cfg.Detectors, a.Report().Findings)
	if len(got) == 0 {
		t.Fatal("the live window found nothing")
	}
	sameFindings(t, "live", got, reference(t, a, cfg))
}

// Live, the window is bounded: over MaxWindowOps the earliest analyzed traces' operations leave
// it (they were judged by earlier ticks), and the report says so.
func TestWindowBoundLive(t *testing.T) {
	cfg := engine.Config{Detectors: suite.Default(), MaxSpans: -1, MaxWindowOps: 1000}
	a := engine.New(cfg)
	if err := workload.NewWorkload(t0).Feed(a, 50_000, nil); err != nil {
		t.Fatal(err)
	}
	a.Flush()
	dropped := engine.WindowDropped(a)
	if dropped == 0 {
		t.Fatal("nothing left a window bounded at 1000 operations")
	}
	rep := a.Report()
	if !slices.ContainsFunc(rep.Notes, func(n string) bool {
		return strings.Contains(n, "operations left the windowed detectors' window") && strings.Contains(n, "1000 held")
	}) {
		t.Errorf("no note of the %d operations dropped: %q", dropped, rep.Notes)
	}
}

// chunkSpy is a windowed detector that keeps every run's operations and reports one finding per
// run: what the windowed detectors were given, and whether every run's findings reach the report.
type chunkSpy struct{ runs [][]*analyzer.Operation }

func (s *chunkSpy) detector() *analyzer.Detector {
	return &analyzer.Detector{Name: "chunk-spy", Title: "Chunk spy", Doc: "test", Scope: analyzer.ScopeWindow,
		Severity: analyzer.SeverityInfo, Run: func(p *analyzer.Pass) error {
			s.runs = append(s.runs, slices.Clone(p.Operations))
			p.Report(analyzer.Finding{Severity: analyzer.SeverityInfo, Summary: fmt.Sprintf("run %d: %d operations", len(s.runs), len(p.Operations))})
			return nil
		}}
}

// Offline, the bound cuts the window into chunks, each judged as it fills: every operation is
// judged once, every chunk's findings stay in the report, and the report says the input was
// judged in chunks. An input within the bound is judged whole, as before.
func TestWindowChunksOffline(t *testing.T) {
	const n = 50_000
	for _, c := range []struct {
		name   string
		maxOps int
		chunks bool
	}{{"over the bound", 1000, true}, {"within it", 100_000, false}} {
		t.Run(c.name, func(t *testing.T) {
			spy := &chunkSpy{}
			cfg := engine.Config{Detectors: append(suite.Default(), spy.detector()), MaxSpans: -1, WindowInterval: -1,
				MaxWindowOps: c.maxOps, MaxFindings: -1}
			a := engine.New(cfg)
			if err := workload.NewWorkload(t0).Feed(a, n, nil); err != nil {
				t.Fatal(err)
			}
			a.Flush()
			rep := a.Report()
			if got := len(spy.runs) > 1; got != c.chunks {
				t.Fatalf("%d runs of the windowed detectors, bound %d", len(spy.runs), c.maxOps)
			}
			// Every operation held, judged exactly once, each chunk within the bound.
			seen := map[*analyzer.Operation]int{}
			for i, run := range spy.runs {
				if len(run) > c.maxOps {
					t.Errorf("run %d judged %d operations, bound %d", i+1, len(run), c.maxOps)
				}
				for _, op := range run {
					seen[op]++
				}
			}
			held := engine.HeldOperations(a)
			if len(held) != rep.Input.Operations || len(seen) != len(held) {
				t.Fatalf("judged %d distinct operations, %d held, %d in the input", len(seen), len(held), rep.Input.Operations)
			}
			for _, op := range held {
				if seen[op] != 1 {
					t.Fatalf("operation %s of trace %s judged %d times", op.Name, op.TraceID, seen[op])
				}
			}
			// The report holds what the detectors found in every chunk, early ones included: the
			// suite's windowed detectors over each chunk the spy saw, as the reference, and one
			// finding of the spy's per run.
			ref := engine.Config{Detectors: suite.Default()}
			var want []string
			for _, run := range spy.runs {
				want = append(want, windowFindings(t, ref.Detectors, referenceOver(t, ref, run))...)
			}
			slices.Sort(want)
			sameFindings(t, c.name, windowFindings(t, ref.Detectors, rep.Findings), want)
			var spied []string
			for _, f := range rep.Findings {
				if f.Detector == "chunk-spy" {
					spied = append(spied, f.Summary)
				}
			}
			if len(spied) != len(spy.runs) || !slices.ContainsFunc(spied, func(s string) bool { return strings.HasPrefix(s, "run 1:") }) {
				t.Errorf("the spy's findings in the report: %q, after %d runs", spied, len(spy.runs))
			}
			note := slices.ContainsFunc(rep.Notes, func(n string) bool {
				return strings.Contains(n, fmt.Sprintf("judged the input in %d chunks of at most %d operations", len(spy.runs), c.maxOps))
			})
			if note != c.chunks {
				t.Errorf("note of the chunks: %v, want %v: %q", note, c.chunks, rep.Notes)
			}
			if engine.WindowDropped(a) != 0 {
				t.Errorf("%d operations dropped from the window offline", engine.WindowDropped(a))
			}
		})
	}
}
