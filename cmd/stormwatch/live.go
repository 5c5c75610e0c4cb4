package main

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"

	"github.com/stormwatch/stormwatch/collector"
	"github.com/stormwatch/stormwatch/sources/jaeger"
	"github.com/stormwatch/stormwatch/tui"
)

// dashboardFlags are the flags every command that opens the dashboard shares (live, demo, replay).
// The analyzer's own flags (--policy, --settle) are in analysisFlags, shared with collect.
type dashboardFlags struct {
	analysisFlags
	logFile string
	refresh time.Duration
}

func (d *dashboardFlags) register(fs flagSet, settle time.Duration) {
	d.analysisFlags.register(fs, settle)
	fs.StringVar(&d.logFile, "log-file", "", "write logs to `FILE` (default: stormwatch.log in the user cache directory); the terminal belongs to the dashboard")
	fs.DurationVar(&d.refresh, "refresh", tui.DefaultRefresh, "how often (`DURATION`) the dashboard takes a snapshot of the analysis")
}

// newLiveCmd is the root command: with no subcommand, stormwatch runs the collector and the live TUI.
func newLiveCmd(io streams) *cobra.Command {
	var (
		f collectorFlags
		d dashboardFlags
		j liveJaegerFlags
	)
	cmd := &cobra.Command{
		Use:   "stormwatch",
		Short: "Find retry storms: an OTLP collector, analyzer and live dashboard",
		Long: `stormwatch receives OpenTelemetry traces (OTLP gRPC :4317, HTTP :4318), rebuilds logical
operations from attempt spans, and shows which dependency is being hammered, by how much and by whom.

With no subcommand it runs the collector and the live dashboard in one process; it needs a
terminal. The HTTP port also serves Prometheus metrics (GET /metrics) and the current report
(GET /api/v1/report), as 'stormwatch collect' does. Headless: 'stormwatch collect'.
Offline reports: 'stormwatch analyze FILE'.
Keys, screens and troubleshooting: docs/tui.md (or press ? in the dashboard).`,
		Example: `  stormwatch
  stormwatch --grpc 127.0.0.1:14317 --http 127.0.0.1:14318 --policy retry-policy.yaml
  stormwatch demo        # a retry storm to explore, no setup
  stormwatch --jaeger http://jaeger:16686 --service checkout   # follow a Jaeger's traces too`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLive(cmd.Context(), io, &f, &d, &j)
		},
	}
	f.register(cmd.Flags())
	d.register(cmd.Flags(), 2*time.Second)
	j.register(cmd.Flags(), 100)
	cmd.Flags().DurationVar(&j.poll, "poll", jaeger.DefaultPoll, "with --jaeger: how often (`DURATION`) to search it for new traces")
	return cmd
}

// errNoTerminal is what the dashboard commands say when stdin or stdout is not a terminal.
var errNoTerminal = errors.New("the dashboard needs a terminal, and stdin or stdout is not one.\n" +
	"  Without a terminal, run the collector headless:  stormwatch collect [--record traces.jsonl]\n" +
	"  or analyze recorded traces:                       stormwatch analyze traces.jsonl")

// requireTerminal refuses to start the TUI when it cannot draw: piped into a file, started by a
// service manager, or in CI.
func requireTerminal(io streams) error {
	in, ok1 := io.in.(*os.File)
	out, ok2 := io.out.(*os.File)
	if !ok1 || !ok2 || !term.IsTerminal(in.Fd()) || !term.IsTerminal(out.Fd()) {
		return withExitCode(2, errNoTerminal)
	}
	return nil
}

func runLive(ctx context.Context, io streams, f *collectorFlags, d *dashboardFlags, j *liveJaegerFlags) error {
	jc, err := j.liveClient()
	if err != nil {
		return withExitCode(2, err)
	}
	p, err := startDashboard(ctx, io, f, d)
	if err != nil {
		return err
	}
	defer p.closeLog()
	fl := j.follow(p.ctx, jc, p.session, p.log)
	demo := &demoTraffic{log: p.log, grpcAddr: p.c.GRPCAddr(), httpAddr: p.c.HTTPAddr()}
	opt := p.tuiOptions(f, d)
	if fl != nil {
		opt.Upstream = upstream(fl)
	}
	if !isTLS(f) && f.tokenFile == "" {
		// The demo sends through the collector's own OTLP port, which a token or TLS would refuse.
		opt.StartDemo = func() error { return demo.start(p.ctx) }
	}
	p.log.Info("dashboard starting", "grpc", p.c.GRPCAddr(), "http", p.c.HTTPAddr())
	uiErr := runDashboard(ctx, io, opt)
	return p.endDashboard(io, d, demo, uiErr)
}

func isTLS(f *collectorFlags) bool { return f.tlsCert != "" }

// endpoints names the bound addresses (the real ports when :0 was asked) for the header and the
// empty state.
func endpoints(c *collector.Collector, tls bool) ([]string, string) {
	var eps []string
	httpURL := ""
	if a := c.GRPCAddr(); a != "" {
		eps = append(eps, "grpc "+a)
	}
	if a := c.HTTPAddr(); a != "" {
		scheme := "http://"
		if tls {
			scheme = "https://"
		}
		httpURL = scheme + a
		eps = append(eps, "http "+a)
	}
	return eps, httpURL
}

// dashboardFPS is how often the dashboard's renderer looks for a new frame to draw: a key's echo
// waits at most a tick (50 ms), and frames come at most a few times a second otherwise. Each look
// wakes the process, idle or not: at 30 a second the wake-ups were about a third of an idle
// dashboard's CPU (0.93-1.05% of a core against 0.66% at 20, docs/performance.md).
const dashboardFPS = 20

// runDashboard runs the TUI until the user quits or ctx ends (SIGTERM).
func runDashboard(ctx context.Context, io streams, opt tui.Options) error {
	out := io.out.(*os.File)
	// NO_COLOR (https://no-color.org): any non-empty value turns colour off; bold and reverse
	// video stay (tui.NewRenderer).
	opt.Color = os.Getenv("NO_COLOR") == ""
	opt.Renderer = tui.NewRenderer(out, opt.Color)
	// The signals are ctx's alone. Bubble Tea's own handler would race ctx for a SIGTERM: when
	// ctx ends the program first, the handler waits forever to hand its quit message to the
	// stopped loop, and the process never exits. In the terminal's raw mode Ctrl-C is a key, not
	// a signal.
	//
	// tui.Filter: Bubble Tea's renderer copies a frame equal to the last one drawn on every tick
	// until a different one comes, so the model is never handed a snapshot that leaves the frame
	// as it is.
	//
	// ctx ends the program by quitting it, not through tea.WithContext: a program killed that way
	// closes its input reader without waiting for the goroutine reading it, which the race
	// detector caught; quitting waits for that goroutine (it stops at once: the read is
	// cancelled) and restores the terminal as a key's quit does.
	p := tea.NewProgram(tui.New(opt), tea.WithInput(io.in), tea.WithOutput(out),
		tea.WithAltScreen(), tea.WithMouseCellMotion(), tea.WithoutSignalHandler(), tea.WithFPS(dashboardFPS),
		tea.WithFilter(tui.Filter))
	ended := make(chan struct{})
	defer close(ended)
	go func() {
		select {
		case <-ctx.Done():
			p.Quit() // returns at once once the program has ended
		case <-ended:
		}
	}()
	_, err := p.Run()
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	return nil
}

// openLog opens the log file; the terminal belongs to the dashboard, so nothing may log to it.
func openLog(path string) (*slog.Logger, func(), error) {
	if path == "" {
		path = defaultLogPath()
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, nil, fmt.Errorf("--log-file %s: %w", path, err)
	}
	fh, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("--log-file: %w", err)
	}
	// Libraries that print with the standard log package (net/http's server errors, httptest in the
	// lab) would write over the dashboard: the process-wide default goes to the file too, and back
	// to stderr when the dashboard is gone.
	stdlog.SetOutput(fh)
	restore := func() {
		stdlog.SetOutput(os.Stderr)
		fh.Close()
	}
	return slog.New(slog.NewTextHandler(fh, &slog.HandlerOptions{Level: slog.LevelInfo})), restore, nil
}

func defaultLogPath() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "stormwatch", "stormwatch.log")
}
