package engine

import (
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
)

// The Engine's Config: its bounds (spans, traces, findings, the window), its timing (settle,
// history, the windowed detectors' interval) and the detectors it runs. Every zero value means a
// documented default, so engine.New(engine.Config{}) is a working analyzer.

// Defaults used when a Config field is zero.
const (
	// DefaultSettle is how long a trace must stay quiet before live mode analyzes it: long enough
	// for the slowest exporter's batch interval (the SDK default is 5 s) in most deployments.
	DefaultSettle = 5 * time.Second
	// DefaultMaxSpans bounds the spans held at once. Analyzed, a span costs 160-380 bytes with its
	// trace's operations held packed (docs/performance.md, "Held memory"); a span still settling,
	// 75-230 (spans are packed from arrival).
	DefaultMaxSpans = 2_000_000
	// DefaultMaxTraceSpans caps one trace; a trace over it is marked truncated.
	DefaultMaxTraceSpans = 50_000
	// DefaultMaxFindings bounds the findings a long live session keeps; the oldest go first.
	DefaultMaxFindings = 10_000
	// DefaultHistoryInterval and DefaultHistoryLen shape the sparklines in Snapshot.History.
	DefaultHistoryInterval = time.Second
	DefaultHistoryLen      = 120
	// DefaultWindowInterval is how often live mode re-runs the cross-trace (windowed) detectors.
	DefaultWindowInterval = 10 * time.Second
	// DefaultWindowShare is the largest share of time live mode's windowed runs take (see
	// Config.WindowShare).
	DefaultWindowShare = 0.02
)

// Config configures an [Engine]. The zero value is usable: no detectors (pass suite.Default()
// from analyzer/suite for the standard set), live-mode settle of DefaultSettle, the bounds above.
//
// Who sets what:
//   - the live collector wires --settle to Settle and --max-spans to MaxSpans, and sets Now;
//   - `stormwatch analyze` leaves Settle alone (it calls Flush once at the end);
//   - the OpenTelemetry Collector connector sets the bounds from its component config;
//   - the detector suite (and a policy) fill Detectors and Settings.
type Config struct {
	// Settle is the quiet period after the last span of a trace before live mode analyzes it.
	// 0 means DefaultSettle.
	Settle time.Duration
	// MaxSpans bounds the spans held across all traces, analyzed ones (held packed) included.
	// When it is exceeded the least recently updated traces are analyzed as they are and their
	// spans released (counted in StoreStats.EvictedTraces/EvictedSpans and noted in the report);
	// their findings and dependency counts stay in the report. 0 means DefaultMaxSpans; negative
	// means no bound.
	MaxSpans int
	// MaxTraceSpans caps one trace: spans beyond it are dropped and the trace marked truncated.
	// 0 means DefaultMaxTraceSpans; negative means no cap.
	MaxTraceSpans int
	// MaxFindings bounds the findings kept for the report (oldest dropped and counted).
	// 0 means DefaultMaxFindings; negative means no bound.
	MaxFindings int
	// MaxWindowOps bounds the operations the windowed detectors' window holds (see window):
	// over it, live, the earliest analyzed traces' operations leave it; offline (WindowInterval
	// negative) the window is judged in chunks of at most this many; either is noted in the
	// report. Offline, a chunk is held as Operation values (about 470 bytes each with their
	// attempts) when it is judged: the bound is what an offline analyzer's peak memory follows
	// (`stormwatch analyze` sets it: --max-window-ops). 0 means a quarter of MaxSpans (with its default), about the operations a full store holds,
	// and no bound when MaxSpans is negative; negative means no bound.
	MaxWindowOps int
	// Detectors run on every analyzed trace (ScopeTrace) or over the window of operations
	// (ScopeWindow, see window). nil runs none: the engine does not import the detectors (they are a suite
	// the caller chooses), so callers pass suite.Default().
	Detectors []*analyzer.Detector
	// ReleaseSpans drops a trace's spans and index as soon as it is analyzed, keeping only its
	// operations and findings: for offline analysis of large inputs, where nothing looks a trace
	// up afterwards. Spans that arrive for a released trace are analyzed on their own and noted.
	// Leave it off when snapshots' TraceLookup is used (the TUI).
	ReleaseSpans bool
	// ForgetAfter, with ReleaseSpans, forgets a released trace once the clock given to Settle is
	// Settle + ForgetAfter past its last span: it is no longer held, not even its operations
	// (its counts and findings stay in the report, and the windowed detectors judge its
	// operations as if it were held), and spans arriving for it later are analyzed as a trace of
	// their own. The report notes how many were forgotten. A released trace that will be
	// forgotten keeps no operations, only their count and its findings: the window holds them
	// until it has judged them, and Snapshot.Operations lists none of them. Without it, released traces are held
	// to the end, which grows with the input. 0 means never: for a caller that reads every
	// operation at the end (Snapshot.Operations, as `stormwatch analyze --what-if` does).
	ForgetAfter time.Duration
	// Settings are the run-wide values detectors read (see [analyzer.RunSettings]).
	Settings analyzer.RunSettings
	// Now stamps span arrival for the settle period, and spans more than a day ahead of it are
	// noted in the report (a wrong clock). The analyzer reads no clock for span times itself
	// (it times only its own windowed runs, to pace them: see WindowShare): when Now is
	// nil, arrival is stamped with the time of the latest Settle or Snapshot call, which is
	// precise to one tick of the caller's loop, and span times are not checked against a clock.
	Now func() time.Time
	// HistoryInterval and HistoryLen shape Snapshot.History. 0 means the defaults.
	HistoryInterval time.Duration
	HistoryLen      int
	// WindowInterval is how often Settle re-runs ScopeWindow detectors. 0 means the default;
	// negative means never from Settle, only from Flush (an offline driver that calls Settle
	// with the recording's time to release memory, like `stormwatch analyze`). It also decides
	// how analyzed traces hold their operations (see holdsOperationsPacked).
	WindowInterval time.Duration
	// WindowShare bounds the share of time Settle's windowed runs take: after a run that took d
	// (wall time), the next waits at least d/WindowShare, WindowInterval at the least. A window
	// at its bound (MaxWindowOps) costs a few hundred milliseconds to read back and judge, and a
	// collector under load keeps it there: every 10 s, that was 3-5% of a core re-judging a
	// window that had barely moved. Paced, the windowed findings come later under load, never
	// wrong. 0 means DefaultWindowShare; negative means no bound (every WindowInterval).
	WindowShare float64

	// carried indexes the attribute keys Detectors declare (analyzer.Detector.CarriedAttrs),
	// made by New.
	carried *carriedIndex
}

// windowInterval is WindowInterval with its default: negative for never (offline).
func (c *Config) windowInterval() time.Duration {
	if c.WindowInterval == 0 {
		return DefaultWindowInterval
	}
	return c.WindowInterval
}

// windowGap is how long after a windowed run that took d the next may start (see WindowShare).
func (c *Config) windowGap(d time.Duration) time.Duration {
	share := c.WindowShare
	if share == 0 {
		share = DefaultWindowShare
	}
	if share < 0 {
		return 0
	}
	return time.Duration(float64(d) / share)
}

// holdsOperationsPacked says whether analyzed traces hold their operations packed (see
// heldops.go) rather than as values. A live analyzer (the collector, the dashboard, the
// connector: WindowInterval 0 or positive) does, whoever reads them: its store stays full for
// hours, the garbage collector marks every held operation on every cycle, and packing them made
// the connector about 7% cheaper per span; the dashboard reads them back only for the screen
// that lists them (Snapshot.Operations). So does an offline one that forgets its released traces
// (ReleaseSpans and ForgetAfter: `stormwatch analyze`), where only the windowed detectors' window
// holds the operations until it judges them: packed, the window is about 200 bytes an operation
// the collector never marks, where values were 470 bytes of pointers it marked on every cycle
// (they are read back for the moment a chunk is judged; see readWindow): analyze peaks 20-30 MiB
// lower, for 3-7% more CPU (docs/performance.md, "Peak memory"). An offline one that keeps its
// traces (every span held, or every operation read at Flush for a prediction) does not: its heap
// only grows, so the collector marks the operations in a handful of cycles, and packing them to
// read them all back at Flush made BenchmarkAnalyze 16-26% dearer per span.
func (c *Config) holdsOperationsPacked() bool {
	return c.WindowInterval >= 0 || c.ReleaseSpans && c.ForgetAfter > 0
}

// WindowOps is the bound on the windowed detectors' window that the engine applies: MaxWindowOps
// with its default (a quarter of MaxSpans); negative for none. An offline caller sizes its memory
// from it: judged in chunks, the window is most of what an offline analyzer holds at its peak.
func (c *Config) WindowOps() int { return c.maxWindowOps() }

// maxWindowOps is MaxWindowOps with its default (see there); negative for none.
func (c *Config) maxWindowOps() int {
	if c.MaxWindowOps != 0 {
		return c.MaxWindowOps
	}
	if s := orDefault(c.MaxSpans, DefaultMaxSpans); s > 0 {
		return max(1, s/windowOpsPerSpan)
	}
	return -1
}

func (c Config) settle() int64 {
	if c.Settle > 0 {
		return int64(c.Settle)
	}
	return int64(DefaultSettle)
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}
