package engine

import (
	"hash/maphash"
	"slices"
	"sync"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/cost"
	"github.com/stormwatch/stormwatch/spans"
)

// The Engine and what it holds per trace (traceState). Its work is in files of their own:
// ingest.go takes batches in, settle.go analyzes the traces held (analysis.go is one trace's
// analysis), report.go and snapshot.go hand out what the analyses found, window.go runs the
// windowed detectors.

// Engine assembles spans into traces, analyzes each trace once it is complete and keeps the
// report. It is safe for concurrent use: the collector calls ConsumeBatch from its receivers while
// the TUI calls Snapshot and a ticker calls Settle.
//
// Live (collector, TUI, OpenTelemetry Collector connector):
//
//	a := engine.New(engine.Config{Settle: settle, MaxSpans: maxSpans, Detectors: suite.Default(), Now: time.Now})
//	// receivers: a.ConsumeBatch(ctx, batch)
//	// a ticker, every few hundred ms: a.Settle(now)
//	// the TUI, a few times a second: snap := a.Snapshot(now)
//
// Offline (`stormwatch analyze`): ConsumeBatch for every record, then Flush, then Report.
type Engine struct {
	cfg    Config
	seed   maphash.Seed
	intern *interner

	// passMu lets one analysis pass (Settle, Flush) run at a time. mu guards everything below;
	// a pass holds it only to take due traces out and to publish their results, never while it
	// analyzes, so ConsumeBatch, Snapshot and Report do not wait for the analysis.
	passMu sync.Mutex
	// packBuf is the packing scratch, kept from pass to pass (guarded by passMu): live, a pass
	// (a Settle tick) packs only a few traces, and a buffer grown afresh for each pass cost more
	// in its regrowth than the packing of a deep trace did. See maxPackBuf.
	packBuf []byte
	// passJobs and passAttempts are a pass's chunk of jobs and their last attempts, kept from
	// pass to pass for the same reason (guarded by passMu, cleared between chunks: they keep no
	// trace alive).
	passJobs     []job
	passAttempts []depLastAttempt
	mu           sync.Mutex
	traces       map[spans.TraceID]*traceState
	// held: every trace, least recently updated first (eviction order). pending: traces with
	// spans not analyzed yet, least recently updated first (settle order).
	held, pending list
	// analyzing is the earliest last arrival of the chunk a pass has taken out of pending and
	// is analyzing (0 when none): those traces are neither pending nor in the report yet.
	analyzing int64
	now       int64 // the latest time the caller gave us
	// ConsumeBatch's scratches, reused between batches: a batch of span values packed by trace,
	// and the buffer a trace over its cap is packed again in.
	packing spans.Packing
	ingest  []byte
	// slab is what the next carved deliveries are cut from (see carve), slabID its record in
	// slabRecs; freeSlabRecs are the records not in use, spareSlabs the slabs to carve again.
	slab         []byte
	slabID       int32
	slabRecs     []slabRec
	freeSlabRecs []int32
	spareSlabs   [][]byte
	// joins are the batch's deliveries that start a trace of their own (see joinDeliveries).
	joins []traceJoin
	// unpacker and unpacked read a packed batch's blocks back where filing it needs the spans
	// (see filePacked).
	unpacker spans.Unpacker
	unpacked []spans.Span
	// evictAttempts is the eviction's buffer for the last attempts of the traces it analyzes
	// (see run).
	evictAttempts []depLastAttempt
	// packed, when set (tests only), is told of every buffer of packed spans made.
	packed func([]byte)

	spansHeld   int
	packedBytes int // the held spans, packed (traceState.pending and packed), in bytes
	evictedT    int
	evictedS    int
	truncatedT  int
	// truncatedS counts every span the per-trace cap refused, when it was refused: a trace that
	// is full and already analyzed is not analyzed again for spans it cannot take, so its own
	// count (the trace's issues) would keep the number of its last analysis.
	truncatedS  int
	zeroTimes   int // spans with a start or end time of 0
	futureTimes int // spans with a time more than futureSkew past the clock
	droppedFind int
	batches     int
	rejected    int

	// Cumulative report state: evicted traces leave their counts and findings here.
	deps map[string]*depAgg
	// lastAttempts are Snapshot.LastAttempts: maxima, only ever raised, so they are kept apart
	// from deps, whose counts a trace analyzed again or evicted takes back.
	lastAttempts map[string]*LastAttempt
	findings     []findingRec
	issues       traceIssues
	costs        cost.Book // what retries cost, per entry point and dependency
	inSpans      int
	inTraces     int
	inOps        int
	detErrs      map[string]bool

	releasedSpans int
	lateFragments int
	forgotten     int // released traces forgotten (Config.ForgetAfter)

	// win is what the windowed detectors judge, fed as analyses are published (see window).
	// hasWindow: some detector is ScopeWindow, so analyses feed it.
	win            *window
	hasWindow      bool
	windowFindings []analyzer.Finding
	lastWindow     int64
	// windowJudged is the clock of the last live windowed run, set once its findings are in.
	windowJudged int64
	// windowGap is the least time from one windowed run to the next that the last run's length
	// (windowRun) allows (Config.WindowShare); Settle waits the longer of it and WindowInterval.
	windowGap int64
	windowRun time.Duration
	// windowRuns counts the live windowed runs (StoreStats.WindowRuns).
	windowRuns int
	// chunkFindings are the windowed detectors' findings over the chunks an offline window was
	// cut into before its last (see window.observe); windowFindings are the last's.
	chunkFindings []analyzer.Finding
	// windowEpoch is win.epoch at the windowed detectors' last run. The window is measured back
	// from the latest operation in it, not from the clock, so while the two are equal a run
	// would find what the last one found: an idle analyzer skips it.
	windowEpoch uint64

	// history: per dependency, the amplification per interval. histVersion counts its changes,
	// version every other change: the history moves every interval, idle or not, and a snapshot
	// whose only change is the history shares the rest with the one before (see Snapshot).
	hist        map[string][]float64
	histAt      int64
	histPrev    map[string][2]int
	histVersion uint64
	version     uint64
	snapCache   *Snapshot
	snapCached  [2]uint64 // version, histVersion
	sumCache    *Snapshot // Summary's, when it had to make one of its own
	sumCached   [2]uint64
}

type traceState struct {
	id spans.TraceID
	// pending are the spans received and not analyzed yet, packed on arrival (one block per
	// batch that brought some; see store.go): the first batch's framed block, then the later
	// ones' in more, each as it came (see addPending); npending counts them.
	pending  []byte
	more     *laterBlocks
	npending int
	// slabAt is when the first of the pending buffers carved from the Engine's slab was filed
	// (see slabFor and carved).
	slabAt int64
	// packed holds the spans res was made from (deduplicated) in the same blocks: pointer-free
	// bytes that the garbage collector never scans, unpacked when late spans make the trace be
	// analyzed again or the TUI looks it up (see store.go). nil with ReleaseSpans (nothing is
	// kept) and when an evicted trace is about to be dropped.
	packed []byte
	// held is how many analyzed spans (packed) count in spansHeld; resSpans how many spans res
	// was made from (what res contributed to the report's input count).
	held, resSpans int
	// meta is what res's trace had to say (see hold); nil when that is nothing, as for most
	// traces.
	meta *heldTrace
	// joined are the ids of the traces filed with this one (joinDeliveries), which map to it in
	// Engine.traces; uncounted how many of them the report's input count lacks.
	joined    []spans.TraceID
	uncounted int
	out       int
	outBytes  int // the packed size of the pending spans out, counted in packedBytes until publish
	res       *traceResult
	lastSeen  int64
	dropped   int // over the per-trace cap
	inHeld    elem
	inPending elem
	// inFlight: a job is analyzing the trace; it owns the pending spans it took (out of them,
	// still counted as held; packed stays for lookups until the new analysis replaces it), and
	// spans arriving meanwhile start a new pending.
	inFlight bool
	// bare: made by a join for the trace a delivery links to, none of whose own spans has
	// arrived (not received, or evicted before): not an input trace until one does.
	bare bool
	gone bool
	// carved has a bit for each pending buffer carved from the Engine's slab (1: pending; 2, 4
	// and 8: more's). Beside the flags, in what would be padding: a trace stays 240 bytes.
	carved uint8
	// win is the index + 1 of the trace's live entry in the windowed detectors' window (0: none;
	// see window). In the padding after the flags too.
	win int32
}

// New makes an analyzer. See [Config] for the zero value.
func New(cfg Config) *Engine {
	cfg.carried = newCarriedIndex(cfg.Detectors)
	a := &Engine{
		cfg:          cfg,
		seed:         maphash.MakeSeed(),
		intern:       newInterner(),
		traces:       map[spans.TraceID]*traceState{},
		deps:         map[string]*depAgg{},
		lastAttempts: map[string]*LastAttempt{},
		detErrs:      map[string]bool{},
		hist:         map[string][]float64{},
		histPrev:     map[string][2]int{},
		win:          newWindow(cfg.maxWindowOps(), cfg.WindowInterval < 0),
	}
	a.hasWindow = slices.ContainsFunc(cfg.Detectors, func(d *analyzer.Detector) bool { return d.Scope == analyzer.ScopeWindow })
	a.held.init(func(t *traceState) *elem { return &t.inHeld })
	a.pending.init(func(t *traceState) *elem { return &t.inPending })
	return a
}

func (a *Engine) maxSpans() int      { return orDefault(a.cfg.MaxSpans, DefaultMaxSpans) }
func (a *Engine) maxTraceSpans() int { return orDefault(a.cfg.MaxTraceSpans, DefaultMaxTraceSpans) }
func (a *Engine) maxFindings() int   { return orDefault(a.cfg.MaxFindings, DefaultMaxFindings) }

// Changes counts the changes to what the analyzer holds and reports: batches, analyses, runs of
// the windowed detectors (not the history's points, which move every interval). Two equal counts
// mean nothing changed between them: a caller can tell an idle analyzer.
func (a *Engine) Changes() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.version
}
