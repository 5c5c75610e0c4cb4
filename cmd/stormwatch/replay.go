package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/stormwatch/stormwatch/internal/termsafe"
	"github.com/stormwatch/stormwatch/tracefile"
	"github.com/stormwatch/stormwatch/tracefile/replay"
	"github.com/stormwatch/stormwatch/tui"
)

// The player is the dashboard's replay control: space, + and - act on it.
var _ tui.ReplayControl = (*replay.Player)(nil)

// replayOptions are replay's flags.
type replayOptions struct {
	speed       float64
	max         bool
	loop        bool
	to          string
	protocol    string
	connections int
	tokenFile   string
	insecure    bool
	strict      bool
	duration    time.Duration
	maxRecord   int
	dash        dashboardFlags
	maxSpans    int
}

func newReplayCmd(io streams) *cobra.Command {
	var o replayOptions
	cmd := &cobra.Command{
		Use:   "replay [flags] FILE...",
		Short: "Play recorded traces into the dashboard, or re-send them as OTLP to a collector (docs/tracefiles.md)",
		Long: `replay plays trace files (OTLP/JSON lines, a .json request, length-prefixed protobuf, Jaeger
or Zipkin JSON; gzip allowed; '-' is standard input) at their recorded pace (--speed 2 plays twice as fast). Each pass
is moved to now by one time shift, applied to every span, event and time-valued attribute
(resilience.deadline, captured Request-Deadline and Retry-After dates), so every trace keeps its
timing exactly, and gets fresh trace ids (docs/tracefiles.md says what changes).

Without --to the recording plays into the live dashboard (space pauses, + and - change the speed).
With --to it is sent as OTLP to another collector - stormwatch's or any OpenTelemetry one:
  --to 127.0.0.1:4317            OTLP/gRPC (plaintext on loopback, TLS elsewhere unless --insecure)
  --to http://127.0.0.1:4318     OTLP/HTTP protobuf to /v1/traces (--protocol http/json for JSON)

--max (or --speed 0) sends as fast as the collector takes it: every request is encoded once up
front and sent from --connections connections at once - a load generator for the collector.`,
		Example: `  stormwatch replay traces.jsonl
  stormwatch replay --speed 4 --loop fixtures/amplification-27-reference.jsonl
  stormwatch replay --to 127.0.0.1:4317 recording.pb.gz
  stormwatch replay --to http://otelcol:4318 --protocol http/json --token-file token traces.jsonl
  stormwatch replay --to 127.0.0.1:4317 --max --connections 8 --duration 30s --loop traces.pb`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReplay(cmd.Context(), io, o, args)
		},
	}
	f := cmd.Flags()
	f.Float64Var(&o.speed, "speed", 1, "playback speed: 2 is twice as fast, 0 as fast as possible")
	f.BoolVar(&o.max, "max", false, "as fast as possible (same as --speed 0): pre-encode every request and send from --connections at once")
	f.BoolVar(&o.loop, "loop", false, "start again after the last file (every pass gets its own trace ids); with --max, run for --duration")
	f.StringVar(&o.to, "to", "", "send to this OTLP `ENDPOINT` instead of the dashboard: host:port (gRPC) or http(s)://host:port")
	f.StringVar(&o.protocol, "protocol", "", "`PROTOCOL`: grpc, http/protobuf or http/json (default: grpc for host:port, http/protobuf for a URL)")
	f.IntVar(&o.connections, "connections", 4, "requests in flight at once, each on its own connection")
	f.StringVar(&o.tokenFile, "token-file", "", "send the bearer token in `FILE` (Authorization: Bearer ...)")
	f.BoolVar(&o.insecure, "insecure", false, "no TLS, even to a non-loopback host:port")
	f.BoolVar(&o.strict, "strict", false, "stop at the first malformed record instead of skipping it")
	f.DurationVar(&o.duration, "duration", 0, "with --max: keep sending (round and round) for this `DURATION`")
	f.IntVar(&o.maxRecord, "max-record-bytes", tracefile.DefaultMaxRecordBytes, "the largest record (line, request) read from a file")
	f.IntVar(&o.maxSpans, "max-spans", 1_000_000, "dashboard: spans held at once; the oldest traces are evicted beyond it")
	o.dash.register(f, 2*time.Second)
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return withExitCode(2, err) })
	return cmd
}

func runReplay(ctx context.Context, io streams, o replayOptions, files []string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.speed < 0 {
		return withExitCode(2, fmt.Errorf("--speed %g: must be 0 (as fast as possible) or more", o.speed))
	}
	if o.max {
		o.speed = 0
	}
	ropt := tracefile.ReadOptions{Strict: o.strict, MaxRecordBytes: o.maxRecord, Stdin: io.in,
		OnWarning: func(err error) { fmt.Fprintln(io.err, "stormwatch replay: skipped:", termsafe.String(err.Error())) }}
	for _, f := range files {
		if f == "-" && o.loop {
			return withExitCode(2, errors.New("--loop cannot replay standard input: it can be read only once"))
		}
	}
	// Check the files before anything is sent or the screen is taken over: a typo, or a file
	// that is not a trace file, should read as one.
	if err := checkTraceFiles(files, ropt); err != nil {
		return withExitCode(2, fmt.Errorf("replay: %w", err))
	}
	if o.to == "" {
		if o.protocol != "" || o.tokenFile != "" || o.duration != 0 {
			return withExitCode(2, errors.New("--protocol, --token-file and --duration need --to ENDPOINT"))
		}
		return replayToDashboard(ctx, io, o, files, ropt)
	}
	target := replay.Target{Endpoint: o.to, Insecure: o.insecure}
	if o.protocol != "" {
		p, err := replay.ParseProtocol(o.protocol)
		if err != nil {
			return withExitCode(2, fmt.Errorf("--protocol: %w", err))
		}
		target.Protocol = p
	}
	if o.tokenFile != "" {
		tok, err := readToken("--token-file", o.tokenFile)
		if err != nil {
			return withExitCode(2, err)
		}
		target.Token = tok
	}
	if o.connections < 1 {
		return withExitCode(2, fmt.Errorf("--connections %d: must be at least 1", o.connections))
	}
	if o.duration != 0 && o.speed != 0 {
		return withExitCode(2, errors.New("--duration applies to --max (as fast as possible) only"))
	}
	// Probe the endpoint's form now, so a typo is a usage error before any file is read.
	probe, err := replay.NewSender(target)
	if err != nil {
		return withExitCode(2, fmt.Errorf("--to: %w", err))
	}
	where := probe.Endpoint()
	proto := probe.Protocol()
	probe.Close()
	sopt := replay.SendOptions{Target: target, Connections: o.connections, Progress: io.err, Duration: o.duration}
	var st replay.Stats
	if o.speed == 0 {
		reqs, err := replay.LoadRequests(files, ropt, proto, time.Now())
		if err != nil {
			return withExitCode(2, fmt.Errorf("replay: %w", err))
		}
		if o.loop && o.duration == 0 {
			// Looping flat out has no natural end: run until interrupted.
			sopt.Duration = 100 * 365 * 24 * time.Hour
		}
		fmt.Fprintf(io.err, "stormwatch replay: sending %d requests to %s from %d connections as fast as it takes them\n", len(reqs), where, o.connections)
		st, err = replay.Blast(ctx, reqs, sopt)
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
	} else {
		fmt.Fprintf(io.err, "stormwatch replay: sending to %s at %gx speed\n", where, o.speed)
		p := replay.NewPlayer(files, replay.Options{Speed: o.speed, Loop: o.loop, Read: ropt})
		st, err = replay.Send(ctx, p, sopt)
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("replay: %w", err)
		}
	}
	fmt.Fprintf(io.err, "stormwatch replay: done: %s\n", st)
	return nil
}

// replayToDashboard plays the files into an analyzer behind the live dashboard, with the player as
// the dashboard's replay control (space, + and -).
func replayToDashboard(ctx context.Context, io streams, o replayOptions, files []string, ropt tracefile.ReadOptions) error {
	if err := requireTerminal(io); err != nil {
		return err
	}
	log, closeLog, err := openLog(o.dash.logFile)
	if err != nil {
		return withExitCode(2, err)
	}
	defer closeLog()
	s, err := newSession(&o.dash, o.maxSpans, log)
	if err != nil {
		return withExitCode(2, err)
	}
	// Warnings go to the log: the terminal belongs to the dashboard.
	ropt.OnWarning = func(err error) { log.Warn("replay: skipped a record", "err", err) }
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.startSettling(runCtx)
	p := replay.NewPlayer(files, replay.Options{Speed: o.speed, Loop: o.loop, Read: ropt})
	go func() {
		if err := p.PlayTo(runCtx, s); err != nil && !errors.Is(err, context.Canceled) {
			log.Error("replay stopped", "err", err)
		}
	}()
	opt := s.tuiOptions(&o.dash)
	opt.Replay = p
	uiErr := runDashboard(ctx, io, opt)
	cancel()
	fmt.Fprintf(io.err, "stormwatch: logs are in %s\n", s.logPath(&o.dash))
	return uiErr
}

// checkTraceFiles opens each file (not standard input, which can be read only once) and reads its
// first record, so that a file that cannot be opened or is not a trace file fails as analyze
// fails, before anything is replayed. Malformed records later in a file are skipped while
// replaying, with a warning, as analyze skips them.
func checkTraceFiles(files []string, ropt tracefile.ReadOptions) error {
	ropt.OnWarning = nil
	for _, f := range files {
		if f == "-" {
			continue
		}
		r, err := tracefile.Open(f, ropt)
		if err != nil {
			return err
		}
		_, err = r.Next()
		r.Close()
		if errors.Is(err, tracefile.ErrNotTraceFile) {
			return err
		}
	}
	return nil
}
