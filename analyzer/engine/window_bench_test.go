package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/analyzer/workload"
	"github.com/stormwatch/stormwatch/internal/cputime"
	"github.com/stormwatch/stormwatch/spans"
)

// BenchmarkWindowTick measures one run of the windowed detectors of a live analyzer (what Settle
// does every WindowInterval) with the store full at two sizes and the same recent traffic: the
// workload makes about 11k spans a second of its time, the policy's window is 5 s (some 55k
// spans), and the store holds the last 100k or 1M spans (9 or 90 s). The run's cost must not
// depend on the store's size, only on the window's traffic. Each op is one run (Flush with
// nothing left to analyze); cpu-ns/tick is the process's CPU time per run.
//
// window=bound is the run a collector under load makes: the policy's default window (a minute,
// some 660k spans of this workload) over a store of 1M, so the window sits at its bound
// (MaxWindowOps, a quarter of --max-spans). Its cost is what Config.WindowShare paces.
func BenchmarkWindowTick(b *testing.B) {
	for _, c := range []struct {
		name   string
		held   int
		window time.Duration
	}{{"held=100000", 100_000, 5 * time.Second}, {"held=1000000", 1_000_000, 5 * time.Second}, {"window=bound", 1_000_000, 0}} {
		held := c.held
		b.Run(c.name, func(b *testing.B) {
			cfg := engine.Config{Detectors: suite.Default(), MaxSpans: held, Settle: time.Second, WindowInterval: 10 * time.Second}
			p := policy.Default()
			if c.window > 0 {
				p.Window.Value = c.window
			}
			policy.Configure(&cfg.Detectors, &cfg.Settings, p, policy.Live)
			a := engine.New(cfg)
			w := workload.NewWorkload(t0)
			var now int64
			for n := 0; n < held+held/10; {
				batch := &spans.Batch{Spans: make([]spans.Span, 0, 600)}
				n += w.Fill(batch, 512)
				for i := range batch.Spans {
					now = max(now, batch.Spans[i].EndUnixNano)
				}
				a.Settle(time.Unix(0, now))
				if err := a.ConsumeBatch(context.Background(), batch); err != nil {
					b.Fatal(err)
				}
			}
			a.Flush() // analyzes what is left; each Flush after it is a windowed run alone
			if s := a.Stats(); s.SpansHeld < held*9/10 {
				b.Fatalf("the store holds %d spans, want about %d", s.SpansHeld, held)
			}
			b.ReportAllocs()
			cpu0 := cputime.Process()
			b.ResetTimer()
			for range b.N {
				a.Flush()
			}
			b.StopTimer()
			b.ReportMetric(float64((cputime.Process()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/tick")
		})
	}
}
