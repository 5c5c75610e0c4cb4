package synchronizedretries_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/analyzer/passes/synchronizedretries"
	"github.com/stormwatch/stormwatch/spans"
)

func TestTestdata(t *testing.T) { detectortest.Run(t, synchronizedretries.Detector, "testdata") }

// herd makes n operations that all failed at t0 and retried twice, the pause before retry k
// drawn by pause(k); each operation in its own trace, as independent clients are.
func herd(n int, pause func(k int) time.Duration) []*analyzer.Operation {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	ops := make([]*analyzer.Operation, n)
	for i := range ops {
		var tid spans.TraceID
		tid[0], tid[1], tid[2] = byte(i), byte(i>>8), 1
		op := &analyzer.Operation{TraceID: tid, Caller: "client", Dependency: "http://origin:8080"}
		t := t0 + int64(i%7)*1000 // a few microseconds apart: one moment for all
		for k := 0; k < 3; k++ {
			a := analyzer.Attempt{Number: k + 1, Kind: analyzer.KindInitial, StartUnixNano: t, EndUnixNano: t + 2e6, Outcome: "retryable", Status: "503"}
			if k > 0 {
				p := pause(k)
				a.Kind, a.BackoffNanos = analyzer.KindRetry, int64(p)
				a.StartUnixNano = op.Attempts[k-1].EndUnixNano + int64(p)
				a.EndUnixNano = a.StartUnixNano + 2e6
			}
			op.Attempts = append(op.Attempts, a)
		}
		op.StartUnixNano, op.EndUnixNano = op.Attempts[0].StartUnixNano, op.Attempts[2].EndUnixNano
		ops[i] = op
	}
	return ops
}

func run(t *testing.T, ops []*analyzer.Operation) []analyzer.Finding {
	t.Helper()
	var got []analyzer.Finding
	pass := &analyzer.Pass{Detector: synchronizedretries.Detector, Operations: ops,
		Report: func(f analyzer.Finding) { got = append(got, f) }}
	if err := synchronizedretries.Detector.Run(pass); err != nil {
		t.Fatal(err)
	}
	return got
}

// Full jitter, uniform(0, min(cap, base*2^n)), is never reported: not at 40 clients, not at
// 20,000, whatever the seed.
func TestFullJitterIsNotSynchronized(t *testing.T) {
	for seed := range uint64(5) {
		for _, n := range []int{40, 20_000} {
			rng := rand.New(rand.NewPCG(seed, 99))
			full := func(k int) time.Duration {
				ceil := min(time.Second, 100*time.Millisecond<<(k-1))
				return time.Duration(rng.Int64N(int64(ceil)))
			}
			if got := run(t, herd(n, full)); len(got) != 0 {
				t.Errorf("seed %d, %d clients, full jitter reported: %s %v", seed, n, got[0].Summary, got[0].Evidence)
			}
		}
	}
}

func TestEqualJitterIsNotSynchronized(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	equal := func(k int) time.Duration {
		half := int64(100*time.Millisecond<<(k-1)) / 2
		return time.Duration(half + rng.Int64N(half))
	}
	if got := run(t, herd(500, equal)); len(got) != 0 {
		t.Errorf("equal jitter reported: %s", got[0].Summary)
	}
}

// Identical pauses across clients are reported, with the pause distribution and the waves.
func TestIdenticalPausesAreSynchronized(t *testing.T) {
	fixed := func(k int) time.Duration { return 100 * time.Millisecond << (k - 1) }
	got := run(t, herd(40, fixed))
	if len(got) != 1 {
		t.Fatalf("findings %d, want 1", len(got))
	}
	ev := got[0].Evidence
	if !ev["cv"].Equal(analyzer.Float(0)) || !ev["samples"].Equal(analyzer.Int(40)) || !ev["mean_pause_ms"].Equal(analyzer.Float(100)) ||
		!ev["retry"].Equal(analyzer.Int(1)) {
		t.Errorf("evidence %v", ev)
	}
	if waves, _ := ev["waves"].Int(); waves < 1 {
		t.Errorf("no wave: %v", ev)
	}
	if largest, _ := ev["largest_wave"].Int(); largest < 40 {
		t.Errorf("40 clients retrying at the same instant make a wave of 40: %v", ev)
	}
	if len(got[0].SpanIDs) == 0 || got[0].TraceID == "" {
		t.Errorf("finding names no spans")
	}
}

// The copies one request's layers make are one trace: identical pauses there are no herd.
func TestCopiesInOneTraceAreNotAHerd(t *testing.T) {
	ops := herd(40, func(k int) time.Duration { return 5 * time.Millisecond })
	for _, op := range ops {
		op.TraceID = ops[0].TraceID
	}
	if got := run(t, ops); len(got) != 0 {
		t.Errorf("one trace reported: %s", got[0].Summary)
	}
}

// The detector's cost per retry is constant: one running sum per (dependency, ordinal).
func BenchmarkSynchronizedRetries(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	ops := herd(10_000, func(k int) time.Duration { return time.Duration(rng.Int64N(int64(time.Second))) })
	pass := &analyzer.Pass{Detector: synchronizedretries.Detector, Operations: ops, Report: func(analyzer.Finding) {}}
	b.ReportAllocs()
	for b.Loop() {
		_ = synchronizedretries.Detector.Run(pass)
	}
}
