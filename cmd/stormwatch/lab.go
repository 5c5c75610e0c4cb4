package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/stormwatch/stormwatch/internal/loopback"
	"github.com/stormwatch/stormwatch/reference/lab"
	"github.com/stormwatch/stormwatch/tracefile"
)

// labOptions are lab's flags.
type labOptions struct {
	json     bool
	record   string
	otlp     string
	realtime bool
	seed     uint64
	list     bool
	start    string
	// The layers scenario as one variant (lab.LayersConfig).
	attempts string
	requests int
	budget   float64
	breaker  int
}

func newLabCmd(io streams) *cobra.Command {
	var o labOptions
	cmd := &cobra.Command{
		Use:   "lab [SCENARIO]",
		Short: "Re-run the experiments behind the rules with the reference client and print their tables (docs/lab.md)",
		Long: `lab runs the experiments behind stormwatch's rules (docs/principles.md) against in-process
origins (real HTTP servers on 127.0.0.1 with injected latency, failures, refused connections and
recovery) using the reference resilient client, and prints each experiment's table. Without
SCENARIO it runs them all.

Origins are addressed by stable names, http://<name>:8080 (http://catalog:8080,
http://primary-a:8080), which the lab's own dialer maps to their loopback ports: spans and
recordings name them the same on every run, and no request leaves the machine.

Time: by default the scenarios run on a fake clock that moves only when every caller and origin
is waiting on it: a 2 s origin or a 5 s breaker recovery takes no real time and every figure is
exact and the same on each run. --realtime runs them on the wall clock instead (about 30 s in
all; timings then vary by a few milliseconds, counts do not).

SIGINT or SIGTERM stops the running scenario at once (its origins' work and its clients' calls
are cancelled, its servers closed) and lab exits with status 130 after flushing the spans
recorded so far.

Spans: --record FILE writes every span (callers, layers and origins, each its own service.name)
to a trace file (.jsonl OTLP/JSON lines; .json, .pb, .gz also accepted) that 'stormwatch analyze'
and 'stormwatch replay' read; --otlp ENDPOINT sends them over OTLP/gRPC to a collector such as
'stormwatch collect' (host:port, plaintext on loopback addresses, TLS otherwise).

Layers as you like: 'lab layers' with --attempts (per layer, top first: 4,4,4 is 64 calls for a
request, 3,1,1 one retry owner), --requests, --budget or --breaker runs that one variant, each
recordable on its own for 'stormwatch diff' (docs/diff.md).

Scenarios: ` + strings.Join(lab.Names(), ", ") + `.`,
		Example: `  stormwatch lab
  stormwatch lab budget --json
  stormwatch lab breaker-waves --record waves.jsonl && stormwatch analyze waves.jsonl
  stormwatch lab --otlp 127.0.0.1:4317
  stormwatch lab layers --attempts 4,4,4
  stormwatch lab layers --attempts 3,3,3 --requests 40 --record before.jsonl
  stormwatch lab layers --attempts 3,3,3 --requests 40 --budget 0.1 --record after.jsonl`,
		Args: cobra.MaximumNArgs(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return lab.Names(), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLab(cmd.Context(), io, o, args)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.json, "json", false, "print one JSON object per table row instead of the tables")
	f.StringVar(&o.record, "record", "", "write the run's spans to this trace `FILE`")
	f.StringVar(&o.otlp, "otlp", "", "send the run's spans over OTLP/gRPC to this `ENDPOINT` (host:port)")
	f.BoolVar(&o.realtime, "realtime", false, "run on the wall clock instead of the fake clock")
	f.Uint64Var(&o.seed, "seed", lab.DefaultSeed, "seed of the clients' jitter (counts do not depend on it)")
	f.BoolVar(&o.list, "list", false, "list the scenarios and exit")
	f.StringVar(&o.start, "start", "", "the fake clock's reading at the start, a `TIME` in RFC 3339 (default: now); fixes span times so two recordings can be laid end to end")
	f.StringVar(&o.attempts, "attempts", "", "layers: attempts per layer (`COUNTS`), top first, e.g. 4,4,4 (runs one variant)")
	f.IntVar(&o.requests, "requests", 0, "layers: the user's requests, one after another (default 1)")
	f.Float64Var(&o.budget, "budget", 0, "layers: a retry budget of this ratio in every layer, e.g. 0.1")
	f.IntVar(&o.breaker, "breaker", 0, "layers: a per-origin breaker in every layer, opening after this many consecutive failed calls")
	cmd.MarkFlagsMutuallyExclusive("record", "otlp")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return withExitCode(2, err) })
	return cmd
}

// runScenario runs one lab scenario; tests replace it to watch a run from the inside.
var runScenario = lab.Run

func runLab(ctx context.Context, io streams, o labOptions, args []string) error {
	if o.list {
		for _, s := range lab.Scenarios() {
			fmt.Fprintf(io.out, "%-16s %s (%s)\n", s.Name, s.Title, s.Source)
		}
		return nil
	}
	names := lab.Names()
	if len(args) == 1 {
		if _, ok := lab.Lookup(args[0]); !ok {
			return withExitCode(2, fmt.Errorf("lab: unknown scenario %q; known: %s", args[0], strings.Join(names, ", ")))
		}
		names = args[:1]
	}
	if o.seed == 0 {
		return withExitCode(2, errors.New("lab: --seed must not be 0"))
	}

	opts := lab.Options{Realtime: o.realtime, Seed: o.seed}
	if o.start != "" {
		t, err := time.Parse(time.RFC3339Nano, o.start)
		if err != nil {
			return withExitCode(2, fmt.Errorf("lab: --start %q: want an RFC 3339 time such as 2026-01-01T00:00:00Z", o.start))
		}
		if o.realtime {
			return withExitCode(2, errors.New("lab: --start sets the fake clock; --realtime runs on the wall clock"))
		}
		opts.Start = t
	}
	layers, err := o.layersConfig()
	if err != nil {
		return withExitCode(2, err)
	}
	if layers != nil {
		if len(args) != 1 || args[0] != "layers" {
			return withExitCode(2, errors.New("lab: --attempts, --requests, --budget and --breaker set up the layers scenario: run 'stormwatch lab layers --attempts 3,3,3 ...'"))
		}
		opts.Layers = layers
	}
	var tracing *lab.Tracing
	var file *tracefile.Writer
	switch {
	case o.record != "":
		w, err := tracefile.Create(o.record)
		if err != nil {
			return withExitCode(2, fmt.Errorf("lab: --record: %w", err))
		}
		file = w
		tracing = lab.NewTracing(tracefile.NewSpanExporter(w))
	case o.otlp != "":
		exp, err := otlpExporter(ctx, o.otlp)
		if err != nil {
			return withExitCode(2, err)
		}
		tracing = lab.NewTracing(exp)
	}
	if tracing != nil {
		opts.TracerProvider = func(service string) trace.TracerProvider { return tracing.Provider(service) }
	}

	runErr := func() error {
		for _, name := range names {
			res, err := runScenario(ctx, name, opts)
			if ctx.Err() != nil {
				// SIGINT/SIGTERM: the run has stopped its origins and clients; say so and exit
				// non-zero, since the tables are incomplete.
				return withExitCode(labInterruptedCode, fmt.Errorf("lab: interrupted during %s: origins and clients stopped, tables incomplete", name))
			}
			if err != nil {
				return err
			}
			if o.json {
				err = res.WriteJSON(io.out)
			} else {
				err = res.WriteText(io.out)
			}
			if err != nil {
				return fmt.Errorf("lab: write %s: %w", name, err)
			}
		}
		return nil
	}()

	if tracing != nil {
		// Flush what was recorded even when interrupted, but do not keep an interrupted process
		// waiting long on a collector that does not answer. A file has no peer to wait for: its
		// bound only has to outlast a slow disk on a loaded machine.
		flush := 10 * time.Second
		if o.record != "" {
			flush = time.Minute
		}
		if ctx.Err() != nil {
			flush = 2 * time.Second
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flush)
		defer cancel()
		if err := tracing.Shutdown(sctx); err != nil && runErr == nil {
			runErr = fmt.Errorf("lab: flush spans: %w", err)
		}
	}
	if file != nil {
		if err := file.Close(); err != nil && runErr == nil {
			runErr = fmt.Errorf("lab: close %s: %w", o.record, err)
		}
		if runErr == nil && !o.json {
			fmt.Fprintf(io.err, "lab: spans written to %s\n", o.record)
		}
	}
	return runErr
}

// layersConfig reads the layers flags; nil when none is set (the default two variants run).
func (o labOptions) layersConfig() (*lab.LayersConfig, error) {
	if o.attempts == "" && o.requests == 0 && o.budget == 0 && o.breaker == 0 {
		return nil, nil
	}
	c := &lab.LayersConfig{Requests: o.requests, Budget: o.budget, Breaker: o.breaker, Attempts: []int{3, 3, 3}}
	if o.attempts != "" {
		c.Attempts = nil
		for _, p := range strings.Split(o.attempts, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(p))
			if err != nil {
				return nil, fmt.Errorf("lab: --attempts %q: want whole numbers per layer, top first, such as 4,4,4", o.attempts)
			}
			c.Attempts = append(c.Attempts, n)
		}
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("lab: --%w", err)
	}
	return c, nil
}

// labInterruptedCode is the exit code of a lab run stopped by SIGINT or SIGTERM (128+SIGINT, as
// shells report an interrupted command).
const labInterruptedCode = 130

// otlpExporter dials endpoint (host:port) over OTLP/gRPC, plaintext only on loopback.
func otlpExporter(ctx context.Context, endpoint string) (sdktrace.SpanExporter, error) {
	host, _, err := net.SplitHostPort(endpoint)
	if err != nil {
		return nil, fmt.Errorf("lab: --otlp %q: want host:port: %w", endpoint, err)
	}
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(endpoint)}
	if loopback.Is(host) {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("lab: --otlp %s: %w", endpoint, err)
	}
	return exp, nil
}
