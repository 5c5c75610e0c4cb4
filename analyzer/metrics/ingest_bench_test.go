package metrics

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/analyzer/workload"
	"github.com/stormwatch/stormwatch/spans"
)

// BenchmarkIngestWhileScraped is live ingestion (a batch of 512 realistic spans, then a settle
// tick) while a scraper gathers /metrics a thousand times a second (a storm: Prometheus scrapes
// every 15 s or so): scrapes=none is the baseline,
// scrapes=cached the collector as wired (one snapshot per second however often it is scraped),
// scrapes=uncached every scrape taking its own snapshot - what the cache saves ingestion from.
// One op is one batch; compare the modes of one run (go test -count interleaves them). B/op and
// allocs/op include the scraper's.
func BenchmarkIngestWhileScraped(b *testing.B) {
	for _, mode := range []string{"none", "cached", "uncached"} {
		b.Run("scrapes="+mode, func(b *testing.B) {
			t0 := time.Unix(1_700_000_000, 0)
			now := t0
			a := engine.New(engine.Config{Detectors: suite.Default(), Settle: time.Second, MaxSpans: 200_000,
				Now: func() time.Time { return now }})
			w := workload.NewWorkload(t0.UnixNano())
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var scrapes int
			if mode != "none" {
				maxAge := DefaultMaxAge
				if mode == "uncached" {
					maxAge = -1
				}
				reg := prometheus.NewRegistry()
				reg.MustRegister(NewCollector(NewCache(a, maxAge, nil), suite.Default()))
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						if _, err := reg.Gather(); err != nil {
							panic(err)
						}
						scrapes++
						time.Sleep(time.Millisecond)
					}
				})
			}
			// Warm up: hold some traffic, so snapshots have something to copy.
			for range 200 {
				batch := &spans.Batch{Spans: make([]spans.Span, 0, 600)}
				w.Fill(batch, 512)
				a.ConsumeBatch(context.Background(), batch)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				batch := &spans.Batch{Spans: make([]spans.Span, 0, 600)}
				w.Fill(batch, 512)
				if err := a.ConsumeBatch(context.Background(), batch); err != nil {
					b.Fatal(err)
				}
				now = now.Add(10 * time.Millisecond)
				a.Settle(now)
			}
			b.StopTimer()
			close(stop)
			wg.Wait()
			b.ReportMetric(float64(scrapes)/float64(b.N), "scrapes/op")
		})
	}
}
