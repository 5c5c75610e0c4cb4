package engine

import (
	"cmp"
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/cost"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/spans"
)

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
	now           int64 // the latest time the caller gave us
	// ConsumeBatch's scratches, reused between batches: each span's trace, the traces in the
	// order they came, the batch regrouped by trace (see regroup) and the packing buffer.
	scratch []*traceState
	order   []*traceState
	gather  []spans.Span
	ingest  []byte
	// joins are the batch's deliveries that start a trace of their own (see joinDeliveries).
	joins []traceJoin
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
	// batch that brought some; see store.go); npending counts them.
	pending  []byte
	npending int
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
	// inFlight: a job is analyzing the trace; it owns the pending spans it took (out of them,
	// still counted as held; packed stays for lookups until the new analysis replaces it), and
	// spans arriving meanwhile start a new pending.
	inFlight bool
	// joined are the ids of the traces filed with this one (joinDeliveries), which map to it in
	// Engine.traces; uncounted how many of them the report's input count lacks.
	joined    []spans.TraceID
	uncounted int
	// bare: made by a join for the trace a delivery links to, none of whose own spans has
	// arrived (not received, or evicted before): not an input trace until one does.
	bare     bool
	out      int
	outBytes int // the packed size of the pending spans out, counted in packedBytes until publish
	// Used by ConsumeBatch within one batch: the spans coming for the trace, and where regroup
	// writes the next of them.
	incoming  int32
	cursor    int32
	res       *traceResult
	lastSeen  int64
	dropped   int // over the per-trace cap
	inHeld    elem
	inPending elem
	gone      bool
}

type depAgg struct {
	service string
	// origins counts physical calls per address (scheme://host:port), at most maxOrigins of
	// them; the calls to addresses past those are originsOver's.
	origins     map[string]int
	originsOver int
	physical    int
	logical     int
	outcomes    map[string]int
	byCaller    map[string]*callerAgg
}

type callerAgg struct {
	physical, logical int
	outcomes          map[string]int
}

type findingRec struct {
	trace spans.TraceID
	f     analyzer.Finding
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

// ConsumeBatch files b's spans under their traces, packed (see store.go): it copies what it
// keeps, so b is free for its caller to reuse once ConsumeBatch returns, and it releases b
// (spans.Batch.Release) so that the collector reuses the request's memory. It implements
// spans.Consumer, so the collector and the trace-file reader can hand batches straight to it. It
// never fails for bad data (that ends up in the report's notes); it returns ctx's error when ctx
// is already done.
func (a *Engine) ConsumeBatch(ctx context.Context, b *spans.Batch) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("analyzer: %w", err)
	}
	if b == nil {
		return nil
	}
	var now int64
	if a.cfg.Now != nil {
		now = a.cfg.Now().UnixNano()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.countBadTimes(b.Spans, now)
	if now == 0 {
		now = a.now
	}
	a.batches++
	a.rejected += b.Rejected
	capT := a.maxTraceSpans()
	// First each span's trace (made when new) and how many spans each trace gets from this batch,
	// the traces in the order they first appear.
	ts := a.scratch[:0]
	order := a.order[:0]
	var last *traceState
	var lastID spans.TraceID
	grouped := true // every trace's spans are one run of the batch
	joins := a.joins[:0]
	for i := range b.Spans {
		s := &b.Spans[i]
		id := s.TraceID
		t := last
		if t == nil || lastID != id {
			// A trace filed with another (joinDeliveries) maps to that trace's state.
			t = a.traces[id]
			if t == nil {
				t = &traceState{id: id}
				a.traces[id] = t
				a.held.pushBack(t)
			}
			if t.incoming > 0 {
				grouped = false // seen before in this batch, with another trace in between
			} else {
				order = append(order, t)
			}
			last, lastID = t, id
			if t.bare && t.id == id {
				t.bare = false
				if t.res != nil {
					t.uncounted++ // analyzed before with its deliveries alone
				}
			}
		}
		t.incoming++
		ts = append(ts, t)
		if s.Kind == spans.KindConsumer && s.ParentID.IsZero() {
			if l, ok := deliveryLink(s); ok {
				joins = append(joins, traceJoin{from: id, to: l.TraceID})
			}
		}
	}
	// Each trace's spans of the batch packed as one block of its pending spans (see store.go):
	// where traces arrive interleaved, the batch is regrouped by trace first, in arrival order.
	ss := b.Spans
	if !grouped {
		ss = a.regroup(b.Spans, ts, order)
	}
	at := 0
	for _, t := range order {
		n := int(t.incoming)
		t.incoming = 0
		run := ss[at : at+n]
		at += n
		room := n
		if capT > 0 {
			room = max(0, min(n, capT-t.npending-t.held-t.out))
		}
		if room < n {
			if t.dropped == 0 {
				a.truncatedT++
			}
			t.dropped += n - room
			a.truncatedS += n - room
		}
		if room == 0 {
			continue
		}
		before := len(t.pending)
		t.pending = a.appendPending(t.pending, run[:room])
		a.packedBytes += len(t.pending) - before
		t.npending += room
		a.spansHeld += room
		a.touch(t, now)
	}
	if !grouped {
		a.endRegroup()
	}
	for _, j := range joins {
		a.joinDeliveries(j, capT, now)
	}
	a.joins = joins[:0]
	clear(ts) // the scratches must not keep dropped traces alive
	a.scratch = ts[:0]
	clear(order)
	a.order = order[:0]
	a.version++
	a.evict()
	// Everything kept is a copy (the packed bytes): the producer may reuse the request's memory.
	b.Release()
	return nil
}

// futureSkew is how far past the analyzer's clock a span time may be before it is noted as wrong:
// hosts' clocks disagree by seconds, not by a day.
const futureSkew = int64(24 * time.Hour)

// countBadTimes counts spans whose times cannot be right: unset (0), which an exporter sends for a
// span it never started or ended, or more than futureSkew after now, the time Config.Now gave
// (0 without it: an analyzer of recorded traffic has no clock the spans should agree with, and
// its result must not depend on when it runs). Their timing - order, overlap, deadlines - means
// nothing, so the report says how many there were.
func (a *Engine) countBadTimes(ss []spans.Span, now int64) {
	limit := int64(math.MaxInt64)
	if now > 0 && now < math.MaxInt64-futureSkew {
		limit = now + futureSkew
	}
	for i := range ss {
		s := &ss[i]
		switch {
		case s.StartUnixNano <= 0 || s.EndUnixNano <= 0:
			a.zeroTimes++
		case s.StartUnixNano > limit || s.EndUnixNano > limit:
			a.futureTimes++
		}
	}
}

func (a *Engine) touch(t *traceState, now int64) {
	t.lastSeen = now
	a.held.moveToBack(t)
	if t.inPending.linked {
		a.pending.moveToBack(t)
	} else {
		a.pending.pushBack(t)
	}
}

// evict pushes out the least recently updated traces until the span bound holds. An evicted trace
// is analyzed as it is first, so the report keeps its findings and counts. Traces whose analysis is
// in flight are passed over (they are about to be analyzed, and released when ReleaseSpans is on):
// the bound may be exceeded by their spans until the next batch.
func (a *Engine) evict() {
	limit := a.maxSpans()
	if limit < 0 {
		return
	}
	for t := a.held.front(); t != nil && a.spansHeld > limit; {
		next := a.held.next(t)
		if t.inFlight {
			t = next
			continue
		}
		if t.res != nil && t.res.released && t.npending == 0 {
			// Only its operations were held (the window keeps its own): no span is lost, so
			// it is not counted as evicted.
			a.drop(t)
			t = next
			continue
		}
		if t.npending > 0 || t.res == nil {
			// Under the lock: eviction is the ingest path's own back-pressure. Not packed: the
			// spans are dropped right after.
			j := a.take(t)
			j.noPack = true
			a.run(&j, nil, &a.evictAttempts)
			a.publish(&j)
			clear(a.evictAttempts) // no trace's strings kept
			a.evictAttempts = a.evictAttempts[:0]
		}
		a.evictedT++
		a.evictedS += t.npending + t.held
		a.drop(t)
		t = next
	}
}

// drop forgets a trace's spans and operations; its findings and counts stay in the report.
func (a *Engine) drop(t *traceState) {
	a.spansHeld -= t.npending + t.held
	a.packedBytes -= len(t.pending) + len(t.packed)
	if t.inPending.linked {
		a.pending.remove(t)
	}
	a.held.remove(t)
	delete(a.traces, t.id)
	for _, id := range t.joined {
		delete(a.traces, id)
	}
	t.joined = nil
	t.gone = true
	t.pending, t.npending = nil, 0
	t.packed, t.held, t.meta = nil, 0, nil
	t.res = nil
}

// passChunk is how many traces a pass takes out per lock: few enough that eviction and the
// window see little in flight, enough that the lock is not taken per trace.
const passChunk = 64

// Settle analyzes the traces that have been quiet for Config.Settle (live mode) and, every
// WindowInterval, re-runs the windowed detectors. The caller ticks it; now is the caller's clock.
// The analysis runs outside the lock that ConsumeBatch, Snapshot and Report take.
func (a *Engine) Settle(now time.Time) {
	n := now.UnixNano()
	a.passMu.Lock()
	defer a.passMu.Unlock()
	a.mu.Lock()
	a.now = max(a.now, n)
	a.mu.Unlock()
	settle := a.cfg.settle()
	a.pass(func(t *traceState) bool { return t.lastSeen+settle <= n })
	a.mu.Lock()
	a.forget(n - settle - int64(a.cfg.ForgetAfter))
	a.tickHistory(n)
	every := a.windowEvery()
	due := every > 0 && n-a.lastWindow >= int64(every) && a.win.epoch != a.windowEpoch
	if due {
		a.lastWindow = n
	}
	a.mu.Unlock()
	if due {
		start := time.Now()
		a.runWindow()
		took := time.Since(start)
		a.mu.Lock()
		a.windowRun, a.windowGap = took, int64(a.cfg.windowGap(took))
		a.windowJudged = n // its findings are published now, not when it was due
		a.mu.Unlock()
	}
}

// forget drops the released traces whose last span arrived at horizon or before (see
// Config.ForgetAfter). The held list is in the order of last arrival, so the walk stops at the
// first trace that arrived after it; the traces it passes over are being analyzed again.
func (a *Engine) forget(horizon int64) {
	if !a.cfg.ReleaseSpans || a.cfg.ForgetAfter <= 0 {
		return
	}
	for t := a.held.front(); t != nil && t.lastSeen <= horizon; {
		next := a.held.next(t)
		if t.res != nil && t.res.released && t.npending == 0 && !t.inFlight {
			a.drop(t)
			a.forgotten++
		}
		t = next
	}
}

// Flush analyzes every trace held, complete or not, then runs the windowed detectors over the
// window: offline, every operation analyzed since the window was last judged (see window.observe;
// offline mode: call it once after the last batch).
func (a *Engine) Flush() {
	a.passMu.Lock()
	defer a.passMu.Unlock()
	a.pass(func(*traceState) bool { return true })
	a.runWindow()
}

// maxPassAttempts bounds the last-attempts buffer a pass leaves for the next (entries of a
// dependency name and three numbers): a chunk of 64 traces of a few dependencies each keeps
// its buffer, one of traces calling thousands does not leave it behind.
const maxPassAttempts = 4096

// maxPackBuf bounds the packing scratch an Engine keeps between passes: deep traces of a few
// hundred spans pack into tens of kilobytes; a trace of a million spans does not leave its
// hundreds of megabytes behind.
const maxPackBuf = 1 << 20

// pass analyzes pending traces, oldest first, while due says so: it takes a chunk out under the
// lock, analyzes it without the lock and publishes the results with the next chunk's taking.
// Spans that arrive for a trace while it is analyzed put it back in pending, so it is analyzed
// again (with them) once quiet; the pass itself stops at the first trace not due, so it ends.
func (a *Engine) pass(due func(*traceState) bool) {
	jobs := a.passJobs         // reused chunk to chunk: a job is a value, not an allocation per trace
	attempts := a.passAttempts // the jobs' last attempts, reused chunk to chunk likewise
	scratch := a.packBuf
	defer func() {
		if cap(scratch) <= maxPackBuf {
			a.packBuf = scratch[:0]
		} else {
			a.packBuf = nil // a huge trace's buffer is not held for the ones after it
		}
		a.passJobs = jobs[:0] // cleared below before the last return
		if cap(attempts) <= maxPassAttempts {
			a.passAttempts = attempts[:0]
		} else {
			a.passAttempts = nil // a chunk of traces calling thousands of dependencies
		}
	}()
	for {
		a.mu.Lock()
		for i := range jobs {
			a.publish(&jobs[i])
		}
		clear(jobs) // no trace or result kept alive by the reused chunk
		jobs = jobs[:0]
		clear(attempts)
		attempts = attempts[:0]
		for t := a.pending.front(); t != nil && len(jobs) < passChunk; {
			next := a.pending.next(t)
			if !due(t) {
				break
			}
			if !t.inFlight {
				jobs = append(jobs, a.take(t))
			}
			t = next
		}
		a.mu.Unlock()
		if len(jobs) == 0 {
			return
		}
		for i := range jobs {
			a.run(&jobs[i], &scratch, &attempts)
		}
	}
}

// job is one trace's analysis in flight: take (locked) -> run (unlocked) -> publish (locked).
type job struct {
	t       *traceState
	pending []byte // the spans taken, not analyzed yet, packed; the job owns them
	from    []byte // the previous analysis's spans, packed: read in front of pending
	late    bool   // a fragment of a released trace (Config.ReleaseSpans)
	// noPack: nothing of the spans is kept (an evicted trace, dropped once published).
	noPack  bool
	dropped int
	res     *traceResult
	n       int        // the spans res was made from (after deduplication)
	packed  []byte     // res's spans, packed, unless the trace's spans are not kept
	meta    *heldTrace // what res's trace had to say
	// win is what the windowed detectors' window keeps of res's operations (see opsForWindow).
	win winOps
	// attempts are res's last attempts per dependency, in the buffer run was given.
	attempts []depLastAttempt
}

// take moves a trace's unanalyzed state into a job. The trace stays held and its spans counted.
func (a *Engine) take(t *traceState) job {
	if t.inPending.linked {
		a.pending.remove(t)
	}
	j := job{t: t, pending: t.pending, dropped: t.dropped}
	j.late = t.res != nil && t.res.released
	// Re-analysis starts from the spans analyzed before, then the new ones, as it always has.
	// The packed spans stay with the trace (immutable) so that lookups see them until the new
	// analysis is published; they are counted in out meanwhile.
	j.from = t.packed
	t.out = t.npending + t.held
	t.outBytes = len(t.pending)
	t.held = 0
	t.pending, t.npending = nil, 0
	t.inFlight = true
	return j
}

// run analyzes a taken trace. It touches nothing of the analyzer but its immutable config and the
// interner's own locked parts, so it runs without a.mu. scratch is a packing buffer reused from
// job to job; nil only for a job that keeps nothing packed (noPack). The job's last attempts are
// appended to attempts, a buffer the caller reuses once the job is published.
func (a *Engine) run(j *job, scratch *[]byte, attempts *[]depLastAttempt) {
	sc := a.intern.getScratch()
	defer a.intern.putScratch(sc)
	// The spans are read back into the scratch, their strings aliasing the packed bytes: what
	// the analysis keeps is detached from them (see detachOps and detachRest), so the packed bytes stay the only
	// copy of the spans.
	src := sources{j.from, j.pending}
	ss, lost := sc.unpack(src)
	// Operations are held packed by a live analyzer (see holdsOperationsPacked). An evicted
	// trace's are neither packed nor detached: its result is dropped as soon as it is published.
	packOps := a.cfg.holdsOperationsPacked()
	res := analyzeTrace(j.t.id, ss, j.dropped, &a.cfg, a.seed, a.intern, sc, &src, !packOps && !j.noPack)
	if lost != nil {
		// Only a bug in the packed form gets here; the report says so rather than hiding it.
		res.errs = append(res.errs, fmt.Sprintf("analyzer: trace %s analyzed without some of its spans: %v", j.t.id, lost))
	}
	j.n = len(res.trace.Spans)
	from := len(*attempts)
	*attempts = appendLastAttempts(*attempts, res.ops)
	j.attempts = (*attempts)[from:]
	if !a.cfg.ReleaseSpans && !j.late && !j.noPack {
		j.packed = keepPacked(src, res.trace.Spans, len(ss), lost, scratch)
		if a.packed != nil {
			a.packed(j.packed)
		}
	}
	// The trace (spans and index) lives in the scratch: the result goes on without it. An
	// evicted trace's result is dropped once published: its operations are not worth packing.
	j.res, j.meta = hold(res, &sc.ops, packOps && !j.noPack)
	if a.hasWindow {
		// Held as values, the operations are detached and immutable from now on; held packed,
		// the frames are; an evicted trace's are packed for the window alone.
		j.win = opsForWindow(res.ops, !packOps && !j.noPack, j.res.packedOps, &sc.ops)
	}
	if packOps || j.noPack {
		// Held packed, or dropped once published (an evicted trace: its result is counted and
		// its findings kept, its operations read no more): nothing points to the operations'
		// memory any more (the findings are copies, see Pass.Report; the window was given
		// frames above). The next trace's are made in it. Held as values, they stay.
		if j.noPack {
			j.res.ops = nil // the counts go on in nOps; the memory is the next trace's
		}
		sc.spare.give(&sc.bufs, res.ops)
	}
	j.pending, j.from = nil, nil
}

// publish swaps a trace's contribution to the report for its new analysis.
func (a *Engine) publish(j *job) {
	t, res := j.t, j.res
	t.inFlight = false
	// Duplicates are dropped for good: the held count shrinks to what the analysis kept.
	a.spansHeld -= t.out - j.n
	t.out = 0
	a.packedBytes -= t.outBytes
	t.outBytes = 0
	// Spans that arrived during the analysis stay in t.pending (the trace is pending again for
	// them); the analyzed ones are held packed.
	if a.hasWindow {
		// In publish order: see window for why the order matters. A trace not analyzed before
		// (t.res nil) whose id is in the window had its earlier spans dropped (evicted,
		// forgotten): its operations join theirs.
		chunk, err := a.win.observe(t.id, j.win, j.late || t.res == nil)
		if err != nil {
			// Only a bug in the packed form gets here; the report says so rather than hiding it.
			a.detErrs[fmt.Sprintf("analyzer: operations of trace %s: %v", t.id, err)] = true
		}
		j.win = winOps{}
		if chunk != nil {
			// Offline, one goroutine feeds the analyzer: judging the chunk under the lock
			// keeps its findings in publish order, and it happens once per MaxWindowOps.
			found, errs := a.judge(chunk, math.MinInt64)
			a.chunkFindings = append(a.chunkFindings, found...)
			for _, e := range errs {
				a.detErrs[e] = true
			}
		}
	}
	// Raised, never taken back: see Snapshot.LastAttempts.
	addLastAttempts(a.lastAttempts, j.attempts)
	j.attempts = nil
	a.inTraces += t.uncounted // the traces filed with it, counted as the input had them
	t.uncounted = 0
	if j.late {
		a.publishLate(t, res, j.meta, j.n, j.noPack)
		return
	}
	if t.res != nil && !t.res.released {
		a.contribute(t.res, t.id, t.resSpans, t.meta.dataIssues(), -1)
	} else if !t.bare {
		a.inTraces++
	}
	t.res, t.resSpans, t.meta = res, j.n, j.meta
	a.contribute(res, t.id, j.n, j.meta.dataIssues(), +1)
	a.packedBytes += len(j.packed) - len(t.packed)
	t.packed, t.held = j.packed, j.n
	if a.cfg.ReleaseSpans {
		a.release(t)
	}
	a.version++
}

// release drops an analyzed trace's spans and index; its operations and findings stay (for the
// windowed detectors and the report). Spans not analyzed yet stay, for the next analysis.
func (a *Engine) release(t *traceState) {
	n := t.held
	a.spansHeld -= n
	a.releasedSpans += n
	a.packedBytes -= len(t.packed)
	t.packed, t.held, t.resSpans, t.meta = nil, 0, 0, nil
	t.res = &traceResult{ops: t.res.ops, packedOps: t.res.packedOps, nOps: t.res.nOps, findings: t.res.findings, released: true}
}

// publishLate accounts spans that arrived after their trace was analyzed and released: analyzed
// on their own, as a fragment, since the rest of the trace is gone. Counted and noted in the report.
func (a *Engine) publishLate(t *traceState, res *traceResult, meta *heldTrace, n int, evicted bool) {
	a.lateFragments++
	a.contribute(res, t.id, n, meta.dataIssues(), +1)
	a.spansHeld -= n
	a.releasedSpans += n
	late := &traceResult{nOps: t.res.nOps + res.nOps, findings: append(slices.Clip(t.res.findings), res.findings...), released: true}
	switch {
	case evicted:
		// Dropped right after (see evict): its operations are not joined, read back or kept.
	case t.res.ops == nil && res.ops == nil:
		// Both packed: the fragment's operations follow as a frame of their own.
		late.packedOps = append(slices.Clip(t.res.packedOps), res.packedOps...)
	default:
		// Held as values on one side at least (an offline analyzer): values on both.
		late.ops = append(slices.Clip(a.heldOpsOf(t.id, t.res)), a.heldOpsOf(t.id, res)...)
	}
	t.res = late
	a.version++
}

// contribute adds (sign +1) or takes back (-1) the counts and findings of trace id's analysis r;
// n is the number of spans it was made from and is the data issues its trace found (r may be held
// without its trace: see hold).
func (a *Engine) contribute(r *traceResult, id spans.TraceID, n int, is traceIssues, sign int) {
	a.inSpans += sign * n
	a.inOps += sign * r.nOps
	a.issues.add(is, sign)
	a.costs.Add(r.costs, sign)
	// The accounting was made with the analysis (outside the lock): adding it is a few map updates.
	for i := range r.acct {
		row := &r.acct[i]
		g := a.deps[row.dep]
		if g == nil {
			g = &depAgg{outcomes: map[string]int{}, byCaller: map[string]*callerAgg{}}
			a.deps[row.dep] = g
		}
		// A dependency has one service.name at most (it is named by it when there is one); the
		// smallest is kept all the same, so the report never depends on the order of traces.
		if row.service != "" && (g.service == "" || row.service < g.service) {
			g.service = row.service
		}
		p, l := sign*int(row.physical), sign*int(row.logical)
		g.addOrigin(row.origin, p)
		g.physical += p
		g.logical += l
		if g.outcomes[row.status] += p; g.outcomes[row.status] <= 0 {
			delete(g.outcomes, row.status)
		}
		c := g.byCaller[row.caller]
		if c == nil {
			c = &callerAgg{outcomes: map[string]int{}}
			g.byCaller[row.caller] = c
		}
		c.physical += p
		c.logical += l
		if c.outcomes[row.status] += p; c.outcomes[row.status] <= 0 {
			delete(c.outcomes, row.status)
		}
		if c.physical <= 0 && c.logical <= 0 {
			delete(g.byCaller, row.caller)
		}
		if g.physical <= 0 && g.logical <= 0 {
			delete(a.deps, row.dep)
		}
	}
	for _, e := range r.errs {
		a.detErrs[e] = true
	}
	if sign > 0 {
		for _, f := range r.findings {
			a.findings = append(a.findings, findingRec{id, f})
		}
		// Dropped in chunks of a quarter, so a full list costs amortized O(1) per finding.
		if m := a.maxFindings(); m > 0 && len(a.findings) > m+m/4 {
			over := len(a.findings) - m
			a.droppedFind += over
			a.findings = slices.Delete(a.findings, 0, over)
		}
	} else if len(r.findings) > 0 {
		a.findings = slices.DeleteFunc(a.findings, func(fr findingRec) bool { return fr.trace == id })
	}
}

// runWindow runs the ScopeWindow detectors over the window (see window): the operations that
// ended within the policy's window before the latest one, all of them offline. The list is taken
// under the lock (the operations are immutable), the detectors run without it.
func (a *Engine) runWindow() {
	if !a.hasWindow {
		return
	}
	a.mu.Lock()
	refs, from := a.win.take(int64(policy.Window(a.cfg.Settings)))
	a.windowEpoch = a.win.epoch
	a.mu.Unlock()
	found, errs := a.judge(refs, from)
	a.mu.Lock()
	a.windowFindings = found
	for _, e := range errs {
		a.detErrs[e] = true
	}
	a.version++
	a.mu.Unlock()
}

// judge runs the ScopeWindow detectors over the operations of refs that ended at from or later,
// and returns their findings and errors. It touches nothing of the analyzer's but its config.
func (a *Engine) judge(refs []winRef, from int64) ([]analyzer.Finding, []string) {
	ops, errs := readWindow(refs, from)
	var found []analyzer.Finding
	for _, d := range a.cfg.Detectors {
		if d.Scope != analyzer.ScopeWindow {
			continue
		}
		pass := &analyzer.Pass{Detector: d, Operations: ops, RunSettings: a.cfg.Settings}
		pass.Report = func(f analyzer.Finding) {
			f = f.Clone() // the window's operations leave it: see Pass.Report
			if f.Detector == "" {
				f.Detector = d.Name
			}
			found = append(found, f)
		}
		if err := runDetector(d, pass); err != nil {
			errs = append(errs, err.Error())
		}
	}
	return found, errs
}

// Report is the report over everything analyzed so far (held and evicted traces).
func (a *Engine) Report() analyzer.Report {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.report()
}

func (a *Engine) report() analyzer.Report {
	r := analyzer.Report{
		Version:      analyzer.ReportVersion,
		Input:        analyzer.InputStats{Spans: a.inSpans, Traces: a.inTraces, Operations: a.inOps},
		Dependencies: []analyzer.DependencyStats{},
		Findings:     make([]analyzer.Finding, 0, len(a.findings)+len(a.chunkFindings)+len(a.windowFindings)),
	}
	for dep, g := range a.deps {
		ds := analyzer.DependencyStats{Dependency: dep, Service: g.service, PhysicalCalls: g.physical,
			LogicalOperations: g.logical, Outcomes: make(map[string]int, len(g.outcomes))}
		if g.logical > 0 {
			ds.Amplification = float64(g.physical) / float64(g.logical)
		}
		ds.Origins, ds.MoreOrigins = g.listOrigins()
		for k, v := range g.outcomes {
			ds.Outcomes[k] = v
		}
		ds.ByCaller = make([]analyzer.CallerStats, 0, len(g.byCaller))
		for name, c := range g.byCaller {
			if name != "" && c.physical > 0 {
				ds.Callers = append(ds.Callers, name)
			}
			cs := analyzer.CallerStats{Caller: name, PhysicalCalls: c.physical, LogicalOperations: c.logical,
				Outcomes: make(map[string]int, len(c.outcomes))}
			if c.logical > 0 {
				cs.Amplification = float64(c.physical) / float64(c.logical)
			}
			for k, v := range c.outcomes {
				cs.Outcomes[k] = v
			}
			ds.ByCaller = append(ds.ByCaller, cs)
		}
		sort.Strings(ds.Callers)
		slices.SortFunc(ds.ByCaller, func(x, y analyzer.CallerStats) int {
			if c := cmp.Compare(y.PhysicalCalls, x.PhysicalCalls); c != 0 {
				return c
			}
			return cmp.Compare(x.Caller, y.Caller)
		})
		r.Dependencies = append(r.Dependencies, ds)
	}
	slices.SortFunc(r.Dependencies, func(x, y analyzer.DependencyStats) int {
		if c := cmp.Compare(y.Amplification, x.Amplification); c != 0 {
			return c
		}
		if c := cmp.Compare(y.PhysicalCalls, x.PhysicalCalls); c != 0 {
			return c
		}
		return cmp.Compare(x.Dependency, y.Dependency)
	})
	for _, fr := range a.findings {
		r.Findings = append(r.Findings, fr.f)
	}
	r.Findings = append(r.Findings, a.chunkFindings...)
	r.Findings = append(r.Findings, a.windowFindings...)
	sortFindings(r.Findings)
	r.Groups = analyzer.GroupFindings(r.Findings)
	r.Costs = a.costs.Entries()
	r.Notes = a.notes()
	return r
}

func (a *Engine) notes() []string {
	// Never nil: the JSON report always carries its notes, empty when there is nothing to say.
	notes := []string{}
	add := func(n int, format string, args ...any) {
		if n > 0 {
			notes = append(notes, fmt.Sprintf(format, append([]any{n}, args...)...))
		}
	}
	is := a.issues
	add(is.duplicates, "%d duplicate spans dropped (the same span id received more than once)")
	add(is.orphans, "%d orphan spans: their parent never arrived; each was analyzed as the root of its own subtree")
	add(is.selfParent, "%d spans named themselves as their parent; treated as roots")
	add(is.cycles, "%d parent cycles broken; the span where each loop closed was treated as a root")
	add(is.badTimes, "%d spans end before they start; taken as zero-length")
	add(a.zeroTimes, "%d spans have a start or end time of 0 (not set by their exporter): their timing is meaningless")
	add(a.futureTimes, "%d spans have times more than a day ahead of the clock (a host's clock or an exporter is wrong): their timing is meaningless")
	add(a.truncatedT, "%d traces hit the per-trace cap of %d spans and were truncated (%d spans dropped)", a.maxTraceSpans(), a.truncatedS)
	add(a.evictedT, "%d traces (%d spans) were evicted by the span bound (--max-spans %d) before their last spans could arrive; they were analyzed as they were", a.evictedS, a.maxSpans())
	add(is.clientRoots, "%d failed operations start at a CLIENT span with no parent and nothing links them to another trace: if that client retried, its attempts are in separate traces and are not counted together (add a parent span, span links, or resilience.operation.id)")
	add(is.splitLinked, "%d operations continue an operation of another trace (joined by a span link, or by resilience.operation.id with an attempt number above 1); counted as physical calls, not as new logical operations")
	add(is.untraced, untracedNote)
	add(is.bridged, bridgedNote)
	add(is.unbridged, unbridgedNote)
	add(is.appLoops, appLoopNote)
	add(is.redelivered, redeliveredNote)
	add(is.linkedDeliveries, linkedDeliveriesNote)
	add(is.joinedDeliveries, joinedDeliveriesNote)
	add(is.unseenPublishes, unseenPublishNote)
	add(a.lateFragments, "%d traces received spans after they had been analyzed and released (the settle period was too short for them); the late spans were analyzed on their own, so their chains may be cut")
	add(a.droppedFind, "%d older findings dropped (more than %d held)", a.maxFindings())
	add(a.win.dropped, "%d operations left the windowed detectors' window before it ended (more than %d held at once): those detectors judged the latest ones", a.win.max)
	if a.win.chunks > 0 {
		bound := ""
		if a.cfg.MaxWindowOps == 0 {
			bound = " (a quarter of --max-spans)"
		}
		notes = append(notes, fmt.Sprintf("the windowed detectors judged the input in %d chunks of at most %d operations%s, one after another: each of their findings covers its chunk's time (window_start to window_end)", a.win.chunks+1, a.win.max, bound))
	}
	add(a.forgotten, "%d analyzed traces were forgotten once the recording had moved %s past their last span: spans of theirs arriving later would count as traces of their own", time.Duration(a.cfg.settle())+a.cfg.ForgetAfter)
	add(a.rejected, "%d spans rejected while decoding (invalid ids)")
	errs := make([]string, 0, len(a.detErrs))
	for e := range a.detErrs {
		errs = append(errs, e)
	}
	sort.Strings(errs)
	notes = append(notes, errs...)
	return notes
}

// Changes counts the changes to what the analyzer holds and reports: batches, analyses, runs of
// the windowed detectors (not the history's points, which move every interval). Two equal counts
// mean nothing changed between them: a caller can tell an idle analyzer.
func (a *Engine) Changes() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.version
}

// Stats describes what the analyzer holds.
func (a *Engine) Stats() StoreStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats()
}

// windowEvery is the least time from one live windowed run to the next: WindowInterval, or the
// gap the last run's length asks for (Config.WindowShare) when longer. Negative: never live
// (offline). Under a.mu.
func (a *Engine) windowEvery() time.Duration {
	every := a.cfg.windowInterval()
	if every <= 0 {
		return every
	}
	return max(every, time.Duration(a.windowGap))
}

func (a *Engine) stats() StoreStats {
	return StoreStats{
		SpansHeld:       a.spansHeld,
		PackedBytes:     a.packedBytes,
		TracesHeld:      a.held.len, // a.traces also maps the ids of traces filed with another
		PendingTraces:   a.pending.len,
		EvictedTraces:   a.evictedT,
		EvictedSpans:    a.evictedS,
		TruncatedTraces: a.truncatedT,
		TruncatedSpans:  a.truncatedS,
		DuplicateSpans:  a.issues.duplicates,
		WindowRun:       a.windowRun,
		WindowEvery:     a.windowEvery(),

		SettledThroughUnixNano: a.settledThrough(),
		WindowThroughUnixNano:  a.windowThrough(),
	}
}

// settledThrough is StoreStats.SettledThroughUnixNano. The pending list is in the order of last
// arrival, so its front is the trace that has waited longest. Under a.mu.
func (a *Engine) settledThrough() int64 {
	if t := a.pending.front(); t != nil {
		return t.lastSeen
	}
	return a.now
}

// windowThrough is StoreStats.WindowThroughUnixNano. Under a.mu.
func (a *Engine) windowThrough() int64 {
	if !a.hasWindow || a.win.epoch == a.windowEpoch {
		return a.now // nothing analyzed waits for the windowed detectors
	}
	return a.windowJudged
}

// Snapshot is an immutable view for the TUI. When nothing changed since the last one, the same
// report, operations and history are shared (they are immutable), so taking a few snapshots a
// second costs a pointer copy; when only the history moved (every HistoryInterval, idle or not),
// only the history is new. The operations stay packed in the analyzer: a snapshot lists the held
// analyses, and Snapshot.Operations reads them back for a reader that shows them.
func (a *Engine) Snapshot(now time.Time) *Snapshot {
	n := now.UnixNano()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.now = max(a.now, n)
	cur := [2]uint64{a.version, a.histVersion}
	switch {
	case a.snapCache != nil && a.snapCached == cur:
	case a.snapCache != nil && a.snapCached[0] == a.version:
		s := *a.snapCache
		s.History = a.history()
		a.snapCache, a.snapCached = &s, cur
	default:
		var s *Snapshot
		if a.sumCache != nil && a.sumCached == cur {
			c := *a.sumCache // the figures a summary made of this state already
			s = &c
		} else {
			s = a.summary()
		}
		s.held = make([]heldRef, 0, len(a.traces))
		for t := a.held.front(); t != nil; t = a.held.next(t) {
			if t.res != nil && t.res.nOps > 0 {
				s.held = append(s.held, heldRef{id: t.id, r: t.res})
				s.HeldOperations += t.res.nOps
			}
		}
		s.held = slices.Clip(s.held)
		s.bad = a.badOps
		a.snapCache, a.snapCached = s, cur
	}
	out := *a.snapCache
	out.AtUnixNano = n
	return &out
}

// badOps notes held operations that did not read back for a snapshot (only a bug in the packed
// form gets here): the next report says so rather than hiding it.
func (a *Engine) badOps(msg string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.detErrs[msg] {
		a.detErrs[msg] = true
		a.version++
	}
}

// Summary is a Snapshot without its operations (it lists none): the report, history and store
// figures, for readers of the figures alone (/metrics, the status line). It shares a current
// Snapshot's figures when there is one.
func (a *Engine) Summary(now time.Time) *Snapshot {
	n := now.UnixNano()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.now = max(a.now, n)
	cur := [2]uint64{a.version, a.histVersion}
	var out Snapshot
	switch {
	case a.snapCache != nil && a.snapCached == cur:
		out = *a.snapCache
		out.held, out.HeldOperations, out.bad = nil, 0, nil
	case a.sumCache != nil && a.sumCached == cur:
		out = *a.sumCache
	default:
		var s Snapshot
		switch {
		// Only the history moved (idle, every interval): the report is the same one.
		case a.sumCache != nil && a.sumCached[0] == a.version:
			s = *a.sumCache
			s.History = a.history()
		case a.snapCache != nil && a.snapCached[0] == a.version:
			s = *a.snapCache
			s.held, s.HeldOperations, s.bad = nil, 0, nil
			s.History = a.history()
		default:
			s = *a.summary()
		}
		a.sumCache, a.sumCached = &s, cur
		out = s
	}
	out.AtUnixNano = n
	return &out
}

// summary makes a snapshot's figures: everything but the operations. Under a.mu.
func (a *Engine) summary() *Snapshot {
	s := &Snapshot{Report: a.report(), Stats: a.stats(), History: a.history(), LastAttempts: copyLastAttempts(a.lastAttempts)}
	// Looked up when asked, not indexed per snapshot: the TUI opens one trace at a time.
	// The result found is immutable; a trace re-analyzed since shows its newer analysis.
	s.TraceLookup = a.lookup
	return s
}

// history is a copy of the sparklines' points. Under a.mu.
func (a *Engine) history() map[string][]float64 {
	h := make(map[string][]float64, len(a.hist))
	for k, v := range a.hist {
		h[k] = slices.Clone(v)
	}
	return h
}

// heldOpsOf is the operations of trace id's held analysis r, read back when they are packed
// (late fragments' joins). r is not changed: held results are immutable. Under a.mu.
func (a *Engine) heldOpsOf(id spans.TraceID, r *traceResult) []*analyzer.Operation {
	if r.ops != nil || r.nOps == 0 {
		return r.ops
	}
	ops, err := unpackOps(make([]*analyzer.Operation, 0, r.nOps), r.packedOps)
	if err != nil {
		// Only a bug in the packed form gets here; the next report says so.
		a.detErrs[fmt.Sprintf("analyzer: operations of trace %s: %v", id, err)] = true
		a.version++
	}
	return ops
}

// tickHistory appends one point per elapsed interval: each dependency's amplification over the
// calls counted during the interval.
func (a *Engine) tickHistory(n int64) {
	iv := int64(a.cfg.HistoryInterval)
	if iv <= 0 {
		iv = int64(DefaultHistoryInterval)
	}
	if a.histAt == 0 {
		a.histAt = n
		return
	}
	if n-a.histAt < iv {
		return
	}
	a.histAt = n
	hl := orDefault(a.cfg.HistoryLen, DefaultHistoryLen)
	for dep, g := range a.deps {
		prev := a.histPrev[dep]
		dp, dl := g.physical-prev[0], g.logical-prev[1]
		v := 0.0
		if dp > 0 && dl > 0 {
			v = float64(dp) / float64(dl)
		}
		h := append(a.hist[dep], v)
		if len(h) > hl {
			h = slices.Delete(h, 0, len(h)-hl)
		}
		a.hist[dep] = h
		a.histPrev[dep] = [2]int{g.physical, g.logical}
	}
	a.histVersion++
}

// lookup finds a held trace's latest analysis (Snapshot.TraceLookup). A trace held packed is
// unpacked and indexed again outside the lock: the view is the same as the analysis's own.
func (a *Engine) lookup(id spans.TraceID) (*TraceView, bool) {
	a.mu.Lock()
	t := a.traces[id]
	var r traceResult // a copy: the view reads back its operations into it
	var packed []byte
	var meta *heldTrace
	found := t != nil && t.res != nil
	if found {
		// A delivery's trace is analyzed with its publisher's (joinDeliveries): that view.
		id, r, packed, meta = t.id, *t.res, t.packed, t.meta
	}
	a.mu.Unlock()
	if !found {
		return nil, false
	}
	return a.viewHeld(id, r, meta, packed), true
}

// viewHeld is the trace view of a held analysis r: its operations read back when they are
// packed, with its spans when they are held (packed).
func (a *Engine) viewHeld(id spans.TraceID, r traceResult, meta *heldTrace, packed []byte) *TraceView {
	var lost error
	if r.ops == nil && r.nOps > 0 {
		r.ops, lost = unpackOps(make([]*analyzer.Operation, 0, r.nOps), r.packedOps)
	}
	var v *TraceView
	if packed != nil {
		v = a.viewPacked(id, &r, meta, packed)
	} else {
		v = r.view()
	}
	if lost != nil {
		// Only a bug in the packed form gets here: show what is left, and say why.
		v.Notes = append(slices.Clip(v.Notes), fmt.Sprintf("operations lost: %v", lost))
	}
	return v
}
