package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/stormwatch/stormwatch/reference/lab"
)

func newDemoCmd(io streams) *cobra.Command {
	var (
		f collectorFlags
		d dashboardFlags
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "A retry storm to explore: lab traffic into the collector and the dashboard, no setup",
		Long: `demo runs the collector and the dashboard like 'stormwatch' does, and feeds them traffic from
the lab (the experiments behind the rules: three retrying layers making 27 calls, retries tripling
the load on a failing origin, fan-out to the wrong replica, work after the deadline...) in a loop.
The spans are sent by the OpenTelemetry SDK over OTLP to the collector's own port, so they take the
path your services' spans take.

The collector listens on free loopback ports unless --grpc/--http say otherwise, so the demo runs
next to a real 'stormwatch'; the header shows the ports, and you can point your own exporters at
them too. Keys: press ? in the dashboard, or see docs/tui.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.Context(), io, &f, &d)
		},
	}
	f.register(cmd.Flags())
	// Free ports by default, so a demo never collides with a collector already on 4317/4318.
	for _, name := range []string{"grpc", "http"} {
		fl := cmd.Flags().Lookup(name)
		fl.DefValue = "127.0.0.1:0"
		_ = fl.Value.Set(fl.DefValue)
	}
	d.register(cmd.Flags(), time.Second)
	return cmd
}

func runDemo(ctx context.Context, io streams, f *collectorFlags, d *dashboardFlags) error {
	if f.tokenFile != "" || isTLS(f) {
		return withExitCode(2, errors.New("demo sends to its own collector in plaintext: drop --token-file and --tls-cert"))
	}
	p, err := startDashboard(ctx, io, f, d)
	if err != nil {
		return err
	}
	defer p.closeLog()
	demo := &demoTraffic{log: p.log, grpcAddr: p.c.GRPCAddr(), httpAddr: p.c.HTTPAddr()}
	if err := demo.start(p.ctx); err != nil {
		p.cancel()
		return errors.Join(err, p.stop())
	}
	uiErr := runDashboard(ctx, io, p.tuiOptions(f, d))
	return p.endDashboard(io, d, demo, uiErr)
}

// demoScenarios are the lab scenarios the demo cycles through: the storm first, so the landing
// screen has its answer within seconds.
var demoScenarios = []string{"layers", "retry-cost", "fanout", "budget", "breaker-key", "fallback-retry", "post-deadline"}

// demoPause is the quiet time between two scenarios: the dashboard shows the storm building up
// rather than arriving in one block.
const demoPause = 1500 * time.Millisecond

// demoTraffic runs lab scenarios in a loop and exports their spans over OTLP to the collector.
type demoTraffic struct {
	log      *slog.Logger
	grpcAddr string
	httpAddr string

	started atomic.Bool
	wg      sync.WaitGroup
}

// start begins the loop and returns at once; a second call does nothing.
func (d *demoTraffic) start(ctx context.Context) error {
	if !d.started.CompareAndSwap(false, true) {
		return nil
	}
	exp, err := d.exporter(ctx)
	if err != nil {
		d.started.Store(false)
		return err
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.loop(ctx, exp)
	}()
	return nil
}

// wait returns when the loop has stopped (its context ended) and flushed.
func (d *demoTraffic) wait() { d.wg.Wait() }

func (d *demoTraffic) exporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	switch {
	case d.grpcAddr != "":
		exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(d.grpcAddr), otlptracegrpc.WithInsecure())
		if err != nil {
			return nil, fmt.Errorf("demo: OTLP/gRPC exporter to %s: %w", d.grpcAddr, err)
		}
		return exp, nil
	case d.httpAddr != "":
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(d.httpAddr), otlptracehttp.WithInsecure())
		if err != nil {
			return nil, fmt.Errorf("demo: OTLP/HTTP exporter to %s: %w", d.httpAddr, err)
		}
		return exp, nil
	}
	return nil, errors.New("demo: the collector listens on neither gRPC nor HTTP")
}

func (d *demoTraffic) loop(ctx context.Context, exp sdktrace.SpanExporter) {
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = exp.Shutdown(sctx)
	}()
	for i := 0; ctx.Err() == nil; i++ {
		name := demoScenarios[i%len(demoScenarios)]
		err := d.runScenario(ctx, name, uint64(i+1), exp)
		if err != nil && ctx.Err() == nil {
			d.log.Warn("demo scenario failed", "scenario", name, "err", err)
		} else if err == nil {
			d.log.Info("demo scenario sent", "scenario", name)
		}
		select {
		case <-ctx.Done():
		case <-time.After(demoPause):
		}
	}
}

// sharedExporter keeps the exporter open across the scenarios' tracer providers, whose shutdown
// would otherwise close it after the first run.
type sharedExporter struct{ sdktrace.SpanExporter }

func (sharedExporter) Shutdown(context.Context) error { return nil }

// runScenario runs one lab scenario, exporting its spans through exp. The lab stops promptly when
// ctx ends and logs its origins' complaints to the demo's log, never to the terminal.
func (d *demoTraffic) runScenario(ctx context.Context, name string, seed uint64, exp sdktrace.SpanExporter) error {
	tr := lab.NewTracing(sharedExporter{exp})
	_, err := lab.Run(ctx, name, lab.Options{Seed: seed, TracerProvider: tr.Provider, Logger: d.log})
	if serr := tr.Shutdown(context.WithoutCancel(ctx)); serr != nil && err == nil {
		err = serr
	}
	return err
}
