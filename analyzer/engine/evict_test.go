package engine_test

import (
	"bytes"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/render"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/analyzer/workload"
	"github.com/stormwatch/stormwatch/spans"
)

// A store kept full evicts as it goes: an evicted trace is analyzed as it is, and the memory of
// its operations is made again for the next trace. Whatever an analyzer keeps of operations - a
// held result, the window, a snapshot a reader holds on to, the findings - must not change when
// that memory is reused. Each batch here is a few whole traces, so eviction loses no span of a
// trace that has not arrived: an analyzer holding 40 spans finds what one holding them all does,
// and the operations a snapshot read stay as they were read. Run with -race: a reader takes
// snapshots and reports while batches are consumed, settled and the window judged.
func TestEvictionLeavesFindingsAndHeldOperationsIntact(t *testing.T) {
	var batches [][]spans.Span
	w := workload.NewWorkload(t0)
	for range 150 {
		b := &spans.Batch{}
		w.Fill(b, 30)
		batches = append(batches, b.Spans)
	}
	for _, mode := range []struct {
		name   string
		window time.Duration
	}{
		{"live, operations held packed", time.Millisecond},
		{"offline, operations held as values", -1},
	} {
		t.Run(mode.name, func(t *testing.T) {
			want := evictingRun(t, batches, mode.window, -1)
			got := evictingRun(t, batches, mode.window, 40)
			if got.evicted == 0 {
				t.Fatal("no trace evicted: the test exercises nothing")
			}
			if got.report != want.report {
				t.Fatalf("findings and dependencies differ with the store kept full:\n%s", firstDiff(want.report, got.report))
			}
		})
	}
}

type evictingResult struct {
	report  string // the findings and dependencies, as JSON
	evicted int
}

// evictingRun feeds the batches to an analyzer bounded at maxSpans, settling every third batch (so
// most evicted traces are analyzed at eviction), while a reader takes snapshots and reports. The
// operations of the snapshots it kept are checked against what they were when read.
func evictingRun(t *testing.T, batches [][]spans.Span, window time.Duration, maxSpans int) evictingResult {
	t.Helper()
	clk := &clock{t: time.Unix(0, t0)}
	cfg := engine.Config{Settle: time.Millisecond, WindowInterval: window, MaxSpans: maxSpans, MaxWindowOps: -1,
		Now: clk.Now, Detectors: suite.Default()}
	policy.Configure(&cfg.Detectors, &cfg.Settings, nil, policy.Live)
	a := engine.New(cfg)

	type kept struct {
		ops  []*analyzer.Operation
		json string
	}
	var keep []kept
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			ops := a.Snapshot(clk.Now()).Operations()
			if len(ops) > 0 && len(keep) < 50 {
				keep = append(keep, kept{ops, opsJSON(t, ops)})
			}
			_ = a.Report()
		}
	}()
	for i, b := range batches {
		consume(t, a, append([]spans.Span(nil), b...)...)
		if i%3 == 2 {
			a.Settle(clk.Add(10 * time.Millisecond))
		}
	}
	close(done)
	wg.Wait()
	a.Settle(clk.Add(10 * time.Millisecond))
	a.Flush()
	for i, k := range keep {
		if got := opsJSON(t, k.ops); got != k.json {
			t.Fatalf("the operations of snapshot %d changed after they were read:\n%s", i, firstDiff(k.json, got))
		}
	}
	rep := a.Report()
	var b bytes.Buffer
	if err := render.JSON(&b, &analyzer.Report{Dependencies: rep.Dependencies, Findings: rep.Findings}); err != nil {
		t.Fatal(err)
	}
	return evictingResult{report: b.String(), evicted: a.Stats().EvictedTraces}
}

// opsJSON is the operations as JSON, one a line.
func opsJSON(t *testing.T, ops []*analyzer.Operation) string {
	var b bytes.Buffer
	for _, op := range ops {
		j, err := json.Marshal(op)
		if err != nil {
			t.Error(err)
			return ""
		}
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}
