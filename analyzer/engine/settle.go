package engine

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// Settling: the passes that analyze the traces held (Settle live, once quiet for Config.Settle;
// Flush offline, all of them). A trace's analysis is a job in three steps - take under a.mu, run
// without it, publish under it again - so that ConsumeBatch, Snapshot and Report never wait for an
// analysis; publish swaps the trace's contribution to the report (report.go) for the new one.

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
		a.windowRuns++
		a.windowJudged = n // its findings are published now, not when it was due
		a.mu.Unlock()
	}
}

// forget drops the released traces whose last span arrived at horizon or before (see
// Config.ForgetAfter). The held list is in the order of last arrival, so the walk stops at the
// first trace that arrived after it; the traces it passes over are being analyzed again.
func (a *Engine) forget(horizon int64) {
	if !a.forgets() {
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
		a.analyzing = 0
		for i := range jobs {
			if ls := jobs[i].t.lastSeen; a.analyzing == 0 || ls < a.analyzing {
				a.analyzing = ls
			}
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
	pending []byte // the spans taken, not analyzed yet, packed (and more); the job owns them
	more    [][]byte
	carved  uint8  // which of pending and more were carved from a slab (traceState.carved)
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
	j := job{t: t, pending: t.pending, more: t.later(), carved: t.carved, dropped: t.dropped}
	j.late = t.res != nil && t.res.released
	// Re-analysis starts from the spans analyzed before, then the new ones, as it always has.
	// The packed spans stay with the trace (immutable) so that lookups see them until the new
	// analysis is published; they are counted in out meanwhile.
	j.from = t.packed
	t.out = t.npending + t.held
	t.outBytes = t.pendingBytes()
	t.held = 0
	t.pending, t.more, t.npending, t.carved = nil, nil, 0, 0
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
	src := append(sc.sources[:0], j.from, j.pending)
	src = append(src, j.more...)
	sc.sources = src // reused by the next trace; reset lets go of these bytes
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
	j.from = nil
	if j.carved == 0 {
		j.pending, j.more = nil, nil
	} // else kept for publish to let go of (under a.mu, as the slabs are carved)
}

// publish swaps a trace's contribution to the report for its new analysis.
func (a *Engine) publish(j *job) {
	t, res := j.t, j.res
	t.inFlight = false
	a.letGoCarved(j.carved, j.pending, j.more)
	j.pending, j.more, j.carved = nil, nil, 0
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
		chunk, err := a.win.observe(t, j.win, j.late || t.res == nil)
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

// release drops an analyzed trace's spans and index; its findings and operation count stay (for
// the report), and its operations too unless the trace is to be forgotten (Config.ForgetAfter).
// Spans not analyzed yet stay, for the next analysis.
//
// A trace to be forgotten keeps no operations: the windowed detectors' window holds its own
// reference to them until it judges them, and nothing else reads them (a late fragment is
// analyzed on its own, and Snapshot.Operations is for a caller that forgets nothing). Kept, they
// were the largest part of `stormwatch analyze`'s heap: every operation of the last --settle of
// the recording as values, about 470 bytes each, long after the window had judged them.
func (a *Engine) release(t *traceState) {
	n := t.held
	a.spansHeld -= n
	a.releasedSpans += n
	a.packedBytes -= len(t.packed)
	t.packed, t.held, t.resSpans, t.meta = nil, 0, 0, nil
	r := &traceResult{nOps: t.res.nOps, findings: t.res.findings, released: true}
	if !a.forgets() {
		r.ops, r.packedOps = t.res.ops, t.res.packedOps
	}
	t.res = r
}

// forgets says whether released traces are forgotten (Config.ForgetAfter), and so keep no
// operations (see release).
func (a *Engine) forgets() bool { return a.cfg.ReleaseSpans && a.cfg.ForgetAfter > 0 }

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
	case a.forgets():
		// Released traces keep no operations (see release): the fragment's are the window's.
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
