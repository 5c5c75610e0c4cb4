package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/render"
	"github.com/stormwatch/stormwatch/collector"
	"github.com/stormwatch/stormwatch/internal/termsafe"
	"github.com/stormwatch/stormwatch/internal/words"
)

// collectOptions are collect's own flags, beside the collector's and the analyzer's.
type collectOptions struct {
	statusEvery time.Duration
	report      string
}

func newCollectCmd(io streams) *cobra.Command {
	var (
		f collectorFlags
		a analysisFlags
		o collectOptions
	)
	cmd := &cobra.Command{
		Use:   "collect",
		Short: "Run the collector and analyzer headless: receive, analyze, record, expose /metrics and the report",
		Long: `collect receives OpenTelemetry traces over OTLP/gRPC (--grpc, default 127.0.0.1:4317) and
OTLP/HTTP (--http, default 127.0.0.1:4318: POST /v1/traces with application/x-protobuf or
application/json, gzip accepted) and analyzes them live, as the dashboard does (--settle, --policy,
--max-spans). It optionally records every accepted request (--record), serves Prometheus metrics
(collector and analysis figures) at GET /metrics and the current report as JSON at
GET /api/v1/report on the HTTP port, and prints a status line on stderr.

Both addresses bind loopback only unless you say otherwise; binding another address exposes the
collector to the network and logs a warning: protect it with --token-file and --tls-cert/--tls-key.
With --token-file, /api/v1/report needs the token too; /metrics does not.

Ctrl-C (SIGINT) or SIGTERM stops accepting, drains the queue, flushes the recording, analyzes what
is still settling, prints the final summary (and writes --report) and exits 0.
See docs/collector.md for pointing an OpenTelemetry SDK or Collector at it.`,
		Example: `  stormwatch collect
  stormwatch collect --record traces.jsonl --report final.json
  stormwatch collect --grpc 0.0.0.0:4317 --http none --token-file ./token --tls-cert cert.pem --tls-key key.pem
  curl -s http://127.0.0.1:4318/api/v1/report | jq '.dependencies[0]'
  OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf ./your-service`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCollect(cmd.Context(), io, &f, &a, &o)
		},
	}
	f.register(cmd.Flags())
	a.register(cmd.Flags(), 2*time.Second)
	cmd.Flags().DurationVar(&o.statusEvery, "status-interval", 5*time.Second,
		"how often (`DURATION`) to print the status line (spans/s, totals, rejected, queue depth, findings, worst amplification) on stderr; 0 turns it off")
	cmd.Flags().StringVar(&o.report, "report", "",
		"at shutdown, write the final report to `FILE` in the --format json contract of 'stormwatch analyze'")
	return cmd
}

// runCollect runs the headless collector and analyzer until ctx is cancelled (Ctrl-C).
func runCollect(ctx context.Context, io streams, f *collectorFlags, a *analysisFlags, o *collectOptions) error {
	if o.statusEvery < 0 {
		return fmt.Errorf("--status-interval %s: must not be negative", o.statusEvery)
	}
	s, err := newAnalysisSession(a, f.maxSpans, nil)
	if err != nil {
		return err
	}
	var reportFile *os.File
	if o.report != "" {
		// Opened now, so a path that cannot be written fails at start, not after hours of traffic;
		// not truncated until the report is written, so a run that fails to start, or is killed,
		// leaves a previous report as it was.
		if reportFile, err = os.OpenFile(o.report, os.O_WRONLY|os.O_CREATE, 0o644); err != nil {
			return fmt.Errorf("--report: %w", err)
		}
		defer reportFile.Close()
	}
	p, err := startPipeline(ctx, f, s, newLogger(io.err))
	if err != nil {
		return err
	}

	prev, prevAt := p.c.Stats(), time.Now()
	var tick <-chan time.Time
	if o.statusEvery > 0 {
		t := time.NewTicker(o.statusEvery)
		defer t.Stop()
		tick = t.C
	}
	for running := true; running; {
		select {
		case <-ctx.Done():
			running = false
		case now := <-tick:
			cur := p.c.Stats()
			fmt.Fprintln(io.err, "stormwatch:", collector.StatusLine(prev, cur, now.Sub(prevAt))+analysisStatus(p.cache.Latest()))
			prev, prevAt = cur, now
		}
	}

	p.log.Info("shutting down: draining the queue and flushing the recording")
	tightenGCForExit()
	err = p.stop()
	final := p.c.Stats()
	fmt.Fprintln(io.err, stopSummary(final))
	// Nothing arrives any more: what is still settling is analyzed as it is.
	p.flush()
	snap := p.cache.Fresh()
	finalSummary(io.err, &snap.Report)
	if reportFile != nil {
		if werr := writeReport(reportFile, &snap.Report); werr != nil {
			return fmt.Errorf("--report %s: %w", o.report, werr)
		}
		if cerr := reportFile.Close(); cerr != nil {
			return fmt.Errorf("--report %s: %w", o.report, cerr)
		}
		fmt.Fprintf(io.err, "stormwatch: report written to %s\n", o.report)
	}
	return err
}

// writeReport replaces f's content with r in the JSON contract.
func writeReport(f *os.File, r *analyzer.Report) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	return render.JSON(f, r)
}

// analysisStatus is the status line's analysis part: findings by severity and the worst
// dependency's amplification, e.g. " · findings 2 critical 1 warning 0 info · worst 27.00x dep".
func analysisStatus(snap *engine.Snapshot) string {
	if snap == nil {
		return ""
	}
	c, w, i := render.Counts(&snap.Report)
	s := fmt.Sprintf(" · findings %d critical %d warning %d info", c, w, i)
	if deps := snap.Report.Dependencies; len(deps) > 0 {
		s += fmt.Sprintf(" · worst %.2fx %s", deps[0].Amplification, deps[0].Dependency)
	}
	return s
}

// stopSummary is the collector's totals at shutdown. The counts are plain digits: scripts read
// "stopped: N spans accepted".
func stopSummary(st collector.Stats) string {
	s := fmt.Sprintf("stormwatch: stopped: %d %s accepted, %d rejected, %d %s", st.AcceptedSpans, words.Noun(st.AcceptedSpans, "span", "spans"),
		st.RejectedSpans, st.RefusedRequests, words.Noun(st.RefusedRequests, "request refused", "requests refused"))
	if n := st.IgnoredMetricsRequests + st.IgnoredLogsRequests; n > 0 {
		s += fmt.Sprintf("; %s (%s)", collector.IgnoredSignalsNote, words.Count(int(n), "request"))
	}
	return s
}

// finalSummaryDeps is how many dependencies the shutdown summary lists.
const finalSummaryDeps = 5

// finalSummary prints what the analysis found: the headline counts, the worst dependencies and
// the findings by severity. The whole report is GET /api/v1/report while running, --report at exit.
func finalSummary(w io.Writer, r *analyzer.Report) {
	w = termsafe.NewWriter(w) // dependency and service names come from the data
	c, wn, in := render.Counts(r)
	fmt.Fprintf(w, "stormwatch: analyzed %s, %s, %s; findings: %d critical, %d warning, %d info\n",
		words.Count(r.Input.Traces, "trace"), words.Count(r.Input.Spans, "span"), words.Count(r.Input.Operations, "operation"), c, wn, in)
	for i, d := range r.Dependencies {
		if i == finalSummaryDeps {
			fmt.Fprintf(w, "stormwatch:   ... and %s\n", words.Plural(len(r.Dependencies)-i, "more dependency", "more dependencies"))
			break
		}
		svc := "" // the addresses, as detail: the name is the key
		if o := d.OriginsText(); o != "" {
			svc = " (" + o + ")"
		}
		fmt.Fprintf(w, "stormwatch:   %s%s: %s for %s (%.2fx)\n",
			d.Dependency, svc, words.Count(d.PhysicalCalls, "call"), words.Count(d.LogicalOperations, "intent"), d.Amplification)
	}
}
