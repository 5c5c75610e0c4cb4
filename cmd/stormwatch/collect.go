package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/stormwatch/stormwatch/collector"
)

func newCollectCmd(io streams) *cobra.Command {
	var (
		f           collectorFlags
		statusEvery time.Duration
	)
	cmd := &cobra.Command{
		Use:   "collect",
		Short: "Run the OTLP collector headless: receive, count, record, expose /metrics",
		Long: `collect receives OpenTelemetry traces over OTLP/gRPC (--grpc, default 127.0.0.1:4317) and
OTLP/HTTP (--http, default 127.0.0.1:4318: POST /v1/traces with application/x-protobuf or
application/json, gzip accepted), counts them, optionally records every accepted request (--record),
serves Prometheus metrics at GET /metrics on the HTTP port, and prints a status line on stderr.

Both addresses bind loopback only unless you say otherwise; binding another address exposes the
collector to the network and logs a warning: protect it with --token-file and --tls-cert/--tls-key.

Ctrl-C (SIGINT) or SIGTERM stops accepting, drains the queue, flushes the recording and exits 0.
See docs/collector.md for pointing an OpenTelemetry SDK or Collector at it.`,
		Example: `  stormwatch collect
  stormwatch collect --record traces.jsonl
  stormwatch collect --grpc 0.0.0.0:4317 --http none --token-file ./token --tls-cert cert.pem --tls-key key.pem
  OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf ./your-service`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCollect(cmd.Context(), io, &f, statusEvery)
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().DurationVar(&statusEvery, "status-interval", 5*time.Second,
		"how often to print the status line (spans/s, totals, rejected, queue depth) on stderr; 0 turns it off")
	return cmd
}

// runCollect runs the headless collector until ctx is cancelled (Ctrl-C).
func runCollect(ctx context.Context, io streams, f *collectorFlags, statusEvery time.Duration) error {
	if statusEvery < 0 {
		return fmt.Errorf("--status-interval %s: must not be negative", statusEvery)
	}
	log := newLogger(io.err)
	// Nothing analyzes spans in headless mode yet: the trace counter holds ids only, so --max-spans,
	// the held/evicted metrics and the status line mean what they will mean with the analyzer.
	counter := collector.NewTraceCounter(f.maxSpans)
	c, err := startCollector(ctx, f, counter, counter.HeldStats, log)
	if err != nil {
		return err
	}

	prev, prevAt := c.Stats(), time.Now()
	var tick <-chan time.Time
	if statusEvery > 0 {
		t := time.NewTicker(statusEvery)
		defer t.Stop()
		tick = t.C
	}
	for running := true; running; {
		select {
		case <-ctx.Done():
			running = false
		case now := <-tick:
			cur := c.Stats()
			fmt.Fprintln(io.err, "stormwatch:", collector.StatusLine(prev, cur, now.Sub(prevAt)))
			prev, prevAt = cur, now
		}
	}

	log.Info("shutting down: draining the queue and flushing the recording")
	err = stopCollector(c, f)
	final := c.Stats()
	fmt.Fprintf(io.err, "stormwatch: stopped: %d spans accepted, %d rejected, %d requests refused\n",
		final.AcceptedSpans, final.RejectedSpans, final.RefusedRequests)
	return err
}
