package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	runtimemetrics "runtime/metrics"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/metrics"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/render"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/collector"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/tui"
)

// flagSet is what the flag groups register into: a pflag.FlagSet, or cobra's.
type flagSet interface {
	StringVar(p *string, name, value, usage string)
	DurationVar(p *time.Duration, name string, value time.Duration, usage string)
}

// analysisFlags are the live analyzer's flags, the same for collect, the dashboard, demo and replay.
type analysisFlags struct {
	policy string
	settle time.Duration
}

func (a *analysisFlags) register(fs flagSet, settle time.Duration) {
	fs.StringVar(&a.policy, "policy", "", "retry policy `FILE` (docs/policy.md): detector settings and per-class rules, applied live")
	fs.DurationVar(&a.settle, "settle", settle, "how long (`DURATION`) a trace must stay quiet before it is analyzed (longer than your exporters' batch delay)")
}

// reportPath is where the analysis API serves the current report.
const reportPath = "/api/v1/report"

// session is the live analysis: the analyzer, behind a pointer so that C (clear) swaps in a fresh
// one without stopping ingestion, and the ticker that settles traces.
type session struct {
	cfg engine.Config
	cur atomic.Pointer[engine.Engine]
	log *slog.Logger
	// mem keeps the soft memory limit above the live heap (limitLiveMemory); nil does nothing.
	mem *memoryGuard
}

// newSession is the dashboard's session: the analysis flags plus --refresh.
func newSession(d *dashboardFlags, maxSpans int, log *slog.Logger) (*session, error) {
	if d.refresh <= 0 {
		return nil, fmt.Errorf("--refresh %s: must be positive", d.refresh)
	}
	return newAnalysisSession(&d.analysisFlags, maxSpans, log)
}

// newAnalysisSession builds the analyzer every live command runs: the default suite, the policy
// (or the built-in one) in live mode, --settle and --max-spans.
func newAnalysisSession(a *analysisFlags, maxSpans int, log *slog.Logger) (*session, error) {
	if a.settle <= 0 {
		return nil, fmt.Errorf("--settle %s: must be positive", a.settle)
	}
	cfg := engine.Config{Settle: a.settle, MaxSpans: maxSpans, Detectors: suite.Default(), Now: time.Now}
	var p *policy.Policy
	if a.policy != "" {
		var err error
		if p, err = policy.Load(a.policy, cfg.Detectors); err != nil {
			return nil, fmt.Errorf("--policy: %w", err)
		}
	}
	policy.Configure(&cfg.Detectors, &cfg.Settings, p, policy.Live)
	s := &session{cfg: cfg, log: log}
	s.cur.Store(engine.New(cfg))
	return s, nil
}

// ConsumeBatch implements spans.Consumer for the collector and the players.
func (s *session) ConsumeBatch(ctx context.Context, b *spans.Batch) error {
	return s.cur.Load().ConsumeBatch(ctx, b)
}

// Snapshot implements tui.Source.
func (s *session) Snapshot(now time.Time) *engine.Snapshot { return s.cur.Load().Snapshot(now) }

// Summary implements metrics.Source.
func (s *session) Summary(now time.Time) *engine.Snapshot { return s.cur.Load().Summary(now) }

// Clear drops everything held: the next spans start a fresh analysis.
func (s *session) Clear() {
	s.cur.Store(engine.New(s.cfg))
	if s.log != nil {
		s.log.Info("cleared: a fresh analysis starts now")
	}
}

// flush analyzes every trace still waiting for its settle period: at shutdown, once nothing more
// arrives, so the final report holds everything received.
func (s *session) flush() { s.cur.Load().Flush() }

func (s *session) held() collector.HeldStats {
	st := s.cur.Load().Stats()
	return collector.HeldStats{Spans: int64(st.SpansHeld), Traces: int64(st.TracesHeld),
		EvictedSpans: int64(st.EvictedSpans), EvictedTraces: int64(st.EvictedTraces)}
}

// exitGCPercent is the garbage collector's target at exit (see tightenGCForExit).
const exitGCPercent = 10

// tightenGCForExit makes the garbage collector collect once the heap has grown a tenth over what
// is live, for the rest of the process. What the exit does - draining the queue, the final
// Flush (the windowed detectors read back up to a quarter of --max-spans operations: about 120 MB
// allocated with a full store of a million spans), the final snapshot and report - is short-lived
// garbage; with the default target (the heap may double before a collection) it grew the process
// by the headroom the full store leaves, some 400 MiB with a million spans held. A collection at
// a tenth costs little there: the held spans and operations are pointer-free bytes the collector
// does not scan.
func tightenGCForExit() { debug.SetGCPercent(exitGCPercent) }

// idleRelease is how long the analysis stays unchanged before run gives the memory the garbage
// collector keeps for the heap's growth back to the system. A full store is mostly spans and
// operations packed into pointer-free bytes, and the collector lets the heap grow to twice what
// is live before a cycle: a busy collector uses that room, an idle one only holds it (with a
// million spans held, about 200 MiB).
const idleRelease = 5 * time.Second

// idleGrowth is how far the process's memory may grow while the analysis stays idle before run
// gives it back again. The dashboard still draws a few frames a second while idle, and each
// allocates: without a bound the heap would grow back into the room given back, a few tens of
// MiB a minute.
const idleGrowth = 32 << 20

// settleEvery is how often run settles traces while spans arrive or traces wait for their settle
// period: a trace is analyzed at most this long after it has been quiet for --settle.
const settleEvery = 200 * time.Millisecond

// idleSettleEvery is how often run settles while nothing arrives and nothing waits: only the
// history's points (one a second) and the idle memory release need the clock then. The first
// batch after an idle spell brings the pace back to settleEvery at the next tick, before its
// traces are due: the idle pace is never longer than --settle.
const idleSettleEvery = time.Second

// run settles quiet traces until ctx ends; the analyzer reads no clock of its own. Once the
// analysis has been idle for idleRelease it returns the free memory to the system, and again
// whenever the process has grown idleGrowth since: each time one garbage collection, about 0.2 s
// of CPU with a million spans held.
func (s *session) run(ctx context.Context) {
	every := settleEvery
	t := time.NewTicker(every)
	defer t.Stop()
	var l settleLoop
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if d := s.settle(&l, now); d != every {
				every = d
				t.Reset(every)
			}
		}
	}
}

// startSettling gives the live store its soft memory limit and starts run, which keeps the limit
// above the live heap: collect, the dashboard, demo and replay's dashboard alike. The limit is in
// force before it returns.
func (s *session) startSettling(ctx context.Context) {
	s.mem = limitLiveMemory(s.cfg.MaxSpans)
	go s.run(ctx)
}

// settleLoop is what run remembers from one tick to the next.
type settleLoop struct {
	changes uint64
	since   time.Time // when the analysis last changed
	// kept is the memory the process kept after it last gave some back while idle; 0 while busy.
	kept uint64
	// analyzer and windowRuns are the analyzer of the last tick and its count of windowed runs
	// then (see windowRan).
	analyzer   *engine.Engine
	windowRuns int
}

// windowRan reports whether a's windowed detectors ran since the loop's last tick, st being a's
// stats now. A cleared session's new analyzer counts from 0: its first tick is no run.
func (l *settleLoop) windowRan(a *engine.Engine, st engine.StoreStats) bool {
	ran := a == l.analyzer && st.WindowRuns != l.windowRuns
	l.analyzer, l.windowRuns = a, st.WindowRuns
	return ran
}

// settle is one tick of run at now: it settles quiet traces, keeps the soft memory limit above
// the live heap, gives idle memory back, and says how long until the next tick.
func (s *session) settle(l *settleLoop, now time.Time) time.Duration {
	a := s.cur.Load()
	a.Settle(now)
	st := a.Stats()
	// A run of the windowed detectors reads the window's operations back for its length (about
	// 100 MB with a million spans held): a collection that ended during it found that live.
	s.mem.adjust(l.windowRan(a, st))
	c := a.Changes()
	idle := c == l.changes && !l.since.IsZero()
	switch {
	case !idle:
		l.changes, l.since, l.kept = c, now, 0
	case l.kept == 0 && now.Sub(l.since) >= idleRelease, l.kept > 0 && heldMemory() > l.kept+idleGrowth:
		debug.FreeOSMemory()
		l.kept = heldMemory()
	}
	if idle && st.PendingTraces == 0 {
		return min(idleSettleEvery, max(s.cfg.Settle, settleEvery))
	}
	return settleEvery
}

// heldMemory is the memory the Go runtime holds from the system (what it maps and has not given
// back), which is most of the process's resident set.
func heldMemory() uint64 {
	m := [2]runtimemetrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	runtimemetrics.Read(m[:])
	return m[0].Value.Uint64() - m[1].Value.Uint64()
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

// pipeline is a running collector feeding a session, with the analysis published on the HTTP
// port: the shared start-up of collect, the dashboard and demo.
type pipeline struct {
	*session
	c     *collector.Collector
	f     *collectorFlags
	log   *slog.Logger
	cache *metrics.Cache
	// ctx ends with cancel: the settle loop and anything else that lives as long as the pipeline
	// (the demo's traffic).
	ctx      context.Context
	cancel   context.CancelFunc
	closeLog func()
}

// startPipeline starts s's settle loop and the collector delivering into s, with the analysis
// figures in /metrics and the report at GET /api/v1/report (token-protected like exports).
func startPipeline(ctx context.Context, f *collectorFlags, s *session, log *slog.Logger) (*pipeline, error) {
	s.log = log
	cache := metrics.NewCache(s, metrics.DefaultMaxAge, nil)
	runCtx, cancel := context.WithCancel(ctx)
	s.startSettling(runCtx)
	c, err := startCollector(ctx, f, s, s.held, log,
		collector.WithHTTPHandler(reportPath, reportHandler(cache), true))
	if err == nil {
		if err = c.Registry().Register(metrics.NewCollector(cache, s.cfg.Detectors)); err != nil {
			err = fmt.Errorf("register the analysis metrics: %w", err)
			stopCollector(c, f)
		}
	}
	if err != nil {
		cancel()
		return nil, err
	}
	if _, httpURL := endpoints(c, isTLS(f)); httpURL != "" {
		log.Info("analysis report served", "url", httpURL+reportPath, "needs_token", f.tokenFile != "")
	}
	return &pipeline{session: s, c: c, f: f, log: log, cache: cache, ctx: runCtx, cancel: cancel, closeLog: func() {}}, nil
}

// startDashboard is the start-up of the commands that show the dashboard (live, demo): flags and
// policy checked before the terminal (so a mistake is reported wherever the command runs), the
// log file opened (the terminal belongs to the dashboard), then the pipeline.
func startDashboard(ctx context.Context, io streams, f *collectorFlags, d *dashboardFlags) (*pipeline, error) {
	if _, err := f.config(); err != nil {
		return nil, withExitCode(2, err)
	}
	s, err := newSession(d, f.maxSpans, nil)
	if err != nil {
		return nil, withExitCode(2, err)
	}
	if err := requireTerminal(io); err != nil {
		return nil, err
	}
	log, closeLog, err := openLog(d.logFile)
	if err != nil {
		return nil, withExitCode(2, err)
	}
	p, err := startPipeline(ctx, f, s, log)
	if err != nil {
		closeLog()
		return nil, err
	}
	p.closeLog = closeLog
	return p, nil
}

// tuiOptions are the dashboard's options for this pipeline: its source, its endpoints, its drops.
func (p *pipeline) tuiOptions(f *collectorFlags, d *dashboardFlags) tui.Options {
	opt := p.session.tuiOptions(d)
	opt.Endpoints, opt.HTTPEndpoint = endpoints(p.c, isTLS(f))
	opt.Dropped = func() int64 { return p.c.Stats().RejectedSpans }
	opt.IgnoredSignals = func() int64 {
		st := p.c.Stats()
		return st.IgnoredMetricsRequests + st.IgnoredLogsRequests
	}
	return opt
}

// stop stops accepting and drains the queue into the analyzer, then ends the settle loop.
func (p *pipeline) stop() error {
	err := stopCollector(p.c, p.f)
	p.cancel()
	return err
}

// endDashboard ends what a dashboard command started once the dashboard is gone: the demo
// traffic, then the pipeline (draining the queue); it says where the logs went.
func (p *pipeline) endDashboard(io streams, d *dashboardFlags, demo *demoTraffic, uiErr error) error {
	tightenGCForExit()
	p.cancel()
	demo.wait()
	stopErr := p.stop()
	fmt.Fprintf(io.err, "stormwatch: logs are in %s\n", p.logPath(d))
	return errors.Join(uiErr, stopErr)
}

// defaultReportFindings is how many findings GET /api/v1/report carries unless asked for more
// (?findings=N, or all): a live analyzer keeps up to --max-findings (10,000 by default), which as
// JSON is tens of megabytes, and a poller asking every few seconds would render it each time.
const defaultReportFindings = 1000

// boundedReport is r with at most the first limit findings ("" for defaultReportFindings, "all"
// for every one), saying so in its notes when some were left out. r itself is not changed (it is
// the cached snapshot's).
func boundedReport(r *analyzer.Report, limit string) (*analyzer.Report, error) {
	n := defaultReportFindings
	switch limit {
	case "":
	case "all":
		n = len(r.Findings)
	default:
		v, err := strconv.Atoi(limit)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("findings=%q: want a number of findings (0 or more) or all", limit)
		}
		n = v
	}
	if len(r.Findings) <= n {
		return r, nil
	}
	out := *r
	out.Findings = r.Findings[:n:n]
	out.Notes = append(slices.Clip(r.Notes), fmt.Sprintf("this answer carries the first %d of %d findings (the groups count them all): ask %s?findings=N for more, or ?findings=all", n, len(r.Findings), reportPath))
	return &out, nil
}

// reportHandler serves the latest report in the --format json contract. It reads the shared
// snapshot cache, so it is as fresh as /metrics (at most metrics.DefaultMaxAge old) and a burst
// of requests costs the analyzer one snapshot. The answer is bounded (see boundedReport).
func reportHandler(cache *metrics.Cache) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, fmt.Sprintf("%s %s: use GET", r.Method, reportPath), http.StatusMethodNotAllowed)
			return
		}
		snap := cache.Latest()
		full := snap.Report // a copy: the snapshot is shared
		st := &snap.Stats
		full.Live = &analyzer.LiveState{AtUnixNano: snap.AtUnixNano, PendingTraces: st.PendingTraces,
			SettledThroughUnixNano: st.SettledThroughUnixNano, WindowThroughUnixNano: st.WindowThroughUnixNano,
			WindowEveryMs: max(st.WindowEvery.Milliseconds(), 0)}
		rep, err := boundedReport(&full, r.URL.Query().Get("findings"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("X-Stormwatch-Findings-Total", strconv.Itoa(len(full.Findings)))
		var buf bytes.Buffer
		if err := render.JSON(&buf, rep); err != nil {
			http.Error(w, "render the report: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(buf.Bytes())
	})
}
