package main

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/collector"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/tui"
)

// dashboardFlags are the flags every command that opens the dashboard shares (live, demo, replay).
type dashboardFlags struct {
	policy  string
	logFile string
	settle  time.Duration
	refresh time.Duration
}

func (d *dashboardFlags) register(fs interface {
	StringVar(p *string, name, value, usage string)
	DurationVar(p *time.Duration, name string, value time.Duration, usage string)
}, settle time.Duration) {
	fs.StringVar(&d.policy, "policy", "", "retry policy `FILE` (docs/policy.md): detector settings and per-class rules, applied live")
	fs.StringVar(&d.logFile, "log-file", "", "write logs to `FILE` (default: stormwatch.log in the user cache directory); the terminal belongs to the dashboard")
	fs.DurationVar(&d.settle, "settle", settle, "how long a trace must stay quiet before it is analyzed (longer than your exporters' batch delay)")
	fs.DurationVar(&d.refresh, "refresh", tui.DefaultRefresh, "how often the dashboard takes a snapshot of the analysis")
}

// newLiveCmd is the root command: with no subcommand, stormwatch runs the collector and the live TUI.
func newLiveCmd(io streams) *cobra.Command {
	var (
		f collectorFlags
		d dashboardFlags
	)
	cmd := &cobra.Command{
		Use:   "stormwatch",
		Short: "Find retry storms: an OTLP collector, analyzer and live dashboard",
		Long: `stormwatch receives OpenTelemetry traces (OTLP gRPC :4317, HTTP :4318), rebuilds logical
operations from attempt spans, and shows which dependency is being hammered, by how much and by whom.

With no subcommand it runs the collector and the live dashboard in one process; it needs a
terminal. Headless: 'stormwatch collect'. Offline reports: 'stormwatch analyze FILE'.
Keys, screens and troubleshooting: docs/tui.md (or press ? in the dashboard).`,
		Example: `  stormwatch
  stormwatch --grpc 127.0.0.1:14317 --http 127.0.0.1:14318 --policy retry-policy.yaml
  stormwatch demo        # a retry storm to explore, no setup`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLive(cmd.Context(), io, &f, &d)
		},
	}
	f.register(cmd.Flags())
	d.register(cmd.Flags(), 2*time.Second)
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

func runLive(ctx context.Context, io streams, f *collectorFlags, d *dashboardFlags) error {
	// Bad flags and a bad policy file are reported first, wherever the command runs.
	if _, err := f.config(); err != nil {
		return withExitCode(2, err)
	}
	s, err := newSession(d, f.maxSpans, nil)
	if err != nil {
		return withExitCode(2, err)
	}
	if err := requireTerminal(io); err != nil {
		return err
	}
	log, closeLog, err := openLog(d.logFile)
	if err != nil {
		return withExitCode(2, err)
	}
	defer closeLog()
	s.log = log
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.run(runCtx)

	c, err := startCollector(ctx, f, s, s.held, log)
	if err != nil {
		return err
	}
	demo := &demoTraffic{log: log, grpcAddr: c.GRPCAddr(), httpAddr: c.HTTPAddr()}
	opt := s.tuiOptions(d)
	opt.Endpoints, opt.HTTPEndpoint = endpoints(c, isTLS(f))
	opt.Dropped = func() int64 { return c.Stats().RejectedSpans }
	if !isTLS(f) && f.tokenFile == "" {
		// The demo sends through the collector's own OTLP port, which a token or TLS would refuse.
		opt.StartDemo = func() error { return demo.start(runCtx) }
	}
	log.Info("dashboard starting", "grpc", c.GRPCAddr(), "http", c.HTTPAddr())
	uiErr := runDashboard(ctx, io, opt)
	cancel()
	demo.wait()
	stopErr := stopCollector(c, f)
	fmt.Fprintf(io.err, "stormwatch: logs are in %s\n", s.logPath(d))
	return errors.Join(uiErr, stopErr)
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

// runDashboard runs the TUI until the user quits or ctx ends (SIGTERM).
func runDashboard(ctx context.Context, io streams, opt tui.Options) error {
	out := io.out.(*os.File)
	opt.Renderer = lipgloss.NewRenderer(out)
	// NO_COLOR (https://no-color.org): any non-empty value turns colour off.
	opt.Color = os.Getenv("NO_COLOR") == ""
	p := tea.NewProgram(tui.New(opt), tea.WithContext(ctx), tea.WithInput(io.in), tea.WithOutput(out),
		tea.WithAltScreen(), tea.WithMouseCellMotion())
	_, err := p.Run()
	if err != nil && errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil // stopped by a signal: a normal exit
	}
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

// session is the analysis behind a dashboard: the analyzer, behind a pointer so that C (clear)
// swaps in a fresh one without stopping ingestion, and the ticker that settles traces.
type session struct {
	cfg analyzer.Config
	cur atomic.Pointer[analyzer.Analyzer]
	log *slog.Logger
}

func newSession(d *dashboardFlags, maxSpans int, log *slog.Logger) (*session, error) {
	if d.settle <= 0 {
		return nil, fmt.Errorf("--settle %s: must be positive", d.settle)
	}
	if d.refresh <= 0 {
		return nil, fmt.Errorf("--refresh %s: must be positive", d.refresh)
	}
	cfg := analyzer.Config{Settle: d.settle, MaxSpans: maxSpans, Detectors: suite.Default(), Now: time.Now}
	if d.policy != "" {
		p, err := policy.Load(d.policy)
		if err != nil {
			return nil, fmt.Errorf("--policy: %w", err)
		}
		policy.Configure(&cfg, p, policy.Live)
	} else {
		policy.Configure(&cfg, nil, policy.Live)
	}
	s := &session{cfg: cfg, log: log}
	s.cur.Store(analyzer.New(cfg))
	return s, nil
}

// ConsumeBatch implements spans.Consumer for the collector and the players.
func (s *session) ConsumeBatch(ctx context.Context, b *spans.Batch) error {
	return s.cur.Load().ConsumeBatch(ctx, b)
}

// Snapshot implements tui.Source.
func (s *session) Snapshot(now time.Time) *analyzer.Snapshot { return s.cur.Load().Snapshot(now) }

// Clear drops everything held: the next spans start a fresh analysis.
func (s *session) Clear() {
	s.cur.Store(analyzer.New(s.cfg))
	if s.log != nil {
		s.log.Info("cleared: a fresh analysis starts now")
	}
}

func (s *session) held() collector.HeldStats {
	st := s.cur.Load().Stats()
	return collector.HeldStats{Spans: int64(st.SpansHeld), Traces: int64(st.TracesHeld),
		EvictedSpans: int64(st.EvictedSpans), EvictedTraces: int64(st.EvictedTraces)}
}

// run settles quiet traces until ctx ends; the analyzer reads no clock of its own.
func (s *session) run(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.cur.Load().Settle(now)
		}
	}
}

func (s *session) tuiOptions(d *dashboardFlags) tui.Options {
	dir, _ := os.Getwd()
	return tui.Options{Source: s, Refresh: d.refresh, Clear: s.Clear, ExportDir: dir}
}

func (s *session) logPath(d *dashboardFlags) string {
	if d.logFile != "" {
		return d.logFile
	}
	return defaultLogPath()
}
