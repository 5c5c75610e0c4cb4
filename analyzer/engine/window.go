package engine

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/spans"
)

// The windowed detectors' window (ScopeWindow): the recent operations of every analyzed trace,
// fed as analyses are published and bounded, and the Engine's runs of those detectors over it.

// windowOpsPerSpan is the default bound on the window's operations per span of MaxSpans (see
// Config.MaxWindowOps): a full store of typical traces holds about one operation per three or
// four spans, so the window may hold as many operations as a full store does, and the memory the
// user bounds with MaxSpans bounds it too. A live window holds the store's packed frames, shared
// while the trace is held; an evicted trace's frame costs what the store paid for it.
const windowOpsPerSpan = 4

// window is what the ScopeWindow detectors judge: the operations of the analyzed traces, fed once
// per analysis as it is published (see Engine.publish) and kept until they fall out of the
// policy's window (take) or the bound pushes them out (live) or has them judged (offline: see
// observe). A tick then reads only the window, never the store: its cost depends on the traffic
// within the window, not on how many spans are held.
//
// An entry holds a trace's operations as the store does: packed (a live analyzer, and an offline
// one that forgets its traces; the very bytes its held result keeps, so the window costs no copy
// and nothing the garbage collector marks, and a run reads back only the window's) or as the
// values held (an offline analyzer that keeps its traces, and live after a snapshot). An evicted
// trace's are packed for the window alone.
//
// Entries are in the order their analyses were published, a trace moving to the back when it is
// analyzed again (its earlier operations replaced) or gets a late fragment (added to them): the
// order the store lists its traces in (least recently updated first), which decides the ties of
// the detectors' evidence (the first operation with the most retries, the first refusal). Offline
// the two orders are the same, so the detectors find what they would over the traces held.
//
// It is guarded by Engine.mu. What an entry holds is immutable, so a tick lists the entries
// under the lock and reads them without it while analyses go on being published.
//
// A trace's live entry is found from its state (traceState.win), which the analysis that is
// published has at hand, not by its id: a map of the window's traces by id costs a lookup, an
// insert and a delete per analysis published, each a miss in the processor's caches (the map is
// as large as the window). Only the entry of a trace whose state was
// dropped while its operations are in the window (an evicted or forgotten trace, see orphan) is
// found by id, in orphans: spans of the trace that arrive later make a state of their own, whose
// operations join it.
type window struct {
	entries []winEntry // publish order, from head; dead ones are skipped and compacted away
	head    int
	// orphans are the live entries of traces whose state was dropped, by trace id (see orphan).
	// A live analyzer whose store is full evicts traces whose operations are still in the
	// window, so it is as large as the window; mayBeOrphan keeps a trace the window has no entry
	// for (nearly every new one) from a lookup in it: a bit per hash of an id, set for each
	// orphan, rebuilt by compact (nil until the first orphan).
	orphans     map[spans.TraceID]int
	mayBeOrphan []uint64
	nops        int // the operations of the live entries
	dead        int // dead entries from head on
	max         int // the bound on nops; negative: none
	dropped     int // operations pushed out by the bound (live)
	// tumble: over the bound, the window is cut (offline) rather than its earliest operations
	// dropped (live); chunks counts the cuts. See observe.
	tumble bool
	chunks int
	epoch  uint64
}

// winEntry is one trace's operations in the window: t is the trace's state, whose win is the
// entry's index + 1 while it is live, or nil once the state was dropped (see orphan).
type winEntry struct {
	id spans.TraceID
	t  *traceState
	winOps
	dead bool
}

// winOps is a trace's operations for the window: values (ops) or packed frames (packed), n of
// them, the latest ending at end.
type winOps struct {
	ops    []*analyzer.Operation
	packed []byte
	n      int
	end    int64
}

func newWindow(max int, tumble bool) *window {
	return &window{max: max, tumble: tumble}
}

// opsForWindow is what the window keeps of an analysis's operations: the values held (kept),
// the frames held (packed), or else - an evicted trace, whose result is dropped - frames of
// their own made with p.
func opsForWindow(ops []*analyzer.Operation, kept bool, packed []byte, p *opsPacker) winOps {
	w := winOps{n: len(ops)}
	if len(ops) == 0 {
		return w
	}
	for _, op := range ops {
		w.end = max(w.end, op.EndUnixNano)
	}
	switch {
	case kept:
		w.ops = ops
	case packed != nil:
		w.packed = packed
	default:
		w.packed = p.pack(ops)
	}
	return w
}

// observe puts trace t's operations at the back of the window: they replace the trace's
// earlier ones, or are added to them when add is set (a late fragment of a released trace, or
// spans of a trace the analyzer had dropped: an earlier state's entry, see orphan).
//
// Over the bound, a live window drops its earliest operations: its detectors judge the latest
// traffic on every tick, and what left had its turn on earlier ticks. An offline one (tumble) is
// judged once, at the end, so dropping would leave the input's start unjudged: it is cut instead,
// before o goes in, and observe returns what it held (chunk) for the caller to judge now. Every
// operation is then judged once, in chunks of at most max operations (a trace is never split; one
// over the bound is a chunk of its own), and a window that never reaches the bound is judged whole,
// as if there were none.
func (w *window) observe(t *traceState, o winOps, add bool) (chunk []winRef, err error) {
	old, had := int(t.win)-1, t.win > 0
	if !had && w.mayHaveOrphan(t.id) {
		if old, had = w.orphans[t.id]; had {
			delete(w.orphans, t.id)
		}
	}
	if !had && o.n == 0 {
		return nil, nil
	}
	w.epoch++
	if had {
		if add {
			o, err = joinOps(w.entries[old].winOps, o)
		}
		w.killEntry(old)
		t.win = 0
	}
	if o.n == 0 {
		w.compact()
		return nil, err
	}
	if w.tumble && w.max >= 0 && w.nops > 0 && w.nops+o.n > w.max {
		chunk = w.cut()
	}
	w.entries = append(w.entries, winEntry{id: t.id, t: t, winOps: o})
	last := len(w.entries) - 1
	t.win = int32(last + 1)
	w.nops += o.n
	for !w.tumble && w.max >= 0 && w.nops > w.max && w.head < last {
		// Over the bound: the earliest published go first, whole traces at a time, never the
		// one just put in.
		if !w.entries[w.head].dead {
			w.dropped += w.entries[w.head].n
			w.kill(w.head)
		}
		w.entries[w.head] = winEntry{}
		w.head++
		w.dead--
	}
	w.compact()
	return chunk, err
}

// cut empties the window and returns what it held, in window order.
func (w *window) cut() []winRef {
	refs, _ := w.take(0)
	for _, e := range w.entries[w.head:] {
		if !e.dead && e.t != nil {
			e.t.win = 0
		}
	}
	clear(w.entries)
	w.entries = w.entries[:0]
	clear(w.orphans)
	clear(w.mayBeOrphan)
	w.head, w.dead, w.nops = 0, 0, 0
	w.chunks++
	return refs
}

// joinOps is a trace's operations followed by a late fragment's: frames after frames when both
// are packed, values else (a snapshot came between: the packed side is read back).
func joinOps(a, b winOps) (winOps, error) {
	j := winOps{n: a.n + b.n, end: max(a.end, b.end)}
	switch {
	case a.n == 0:
		return b, nil
	case b.n == 0:
		return a, nil
	case a.ops == nil && b.ops == nil:
		j.packed = append(append(make([]byte, 0, len(a.packed)+len(b.packed)), a.packed...), b.packed...)
		return j, nil
	}
	var err error
	for _, o := range []winOps{a, b} {
		if o.ops != nil {
			j.ops = append(j.ops, o.ops...)
		} else if j.ops, err = unpackOps(j.ops, o.packed); err != nil {
			return winOps{}, err
		}
	}
	j.n = len(j.ops)
	return j, nil
}

// kill takes live entry i out of the window; its slot stays in entries until compact.
func (w *window) kill(i int) {
	if t := w.entries[i].t; t != nil {
		t.win = 0
	} else {
		delete(w.orphans, w.entries[i].id)
	}
	w.killEntry(i)
}

// killEntry is kill, leaving the trace's state or orphans to the caller (observe, which found
// the entry from them).
func (w *window) killEntry(i int) {
	e := &w.entries[i]
	e.dead = true
	w.nops -= e.n
	e.winOps, e.t = winOps{}, nil
	w.dead++
}

// orphan is told that trace t's state is dropped (Engine.drop): its live entry, if it has one,
// stays in the window, found by the trace's id from now on, so that the operations of a state
// made later for spans of the trace join it (observe).
func (w *window) orphan(t *traceState) {
	if t.win == 0 {
		return
	}
	i := int(t.win) - 1
	t.win = 0
	w.entries[i].t = nil
	w.addOrphan(t.id, i)
}

// addOrphan files entry i, of trace id, in orphans and mayBeOrphan.
func (w *window) addOrphan(id spans.TraceID, i int) {
	if w.orphans == nil {
		w.orphans = map[spans.TraceID]int{}
		w.mayBeOrphan = make([]uint64, 1<<orphanBits/64)
	}
	w.orphans[id] = i
	b := orphanBit(id)
	w.mayBeOrphan[b/64] |= 1 << (b % 64)
}

// mayHaveOrphan is false when trace id has no orphaned entry, true when it may have one.
func (w *window) mayHaveOrphan(id spans.TraceID) bool {
	if len(w.orphans) == 0 {
		return false
	}
	b := orphanBit(id)
	return w.mayBeOrphan[b/64]&(1<<(b%64)) != 0
}

// orphanBits is the size of mayBeOrphan: 2^20 bits, 128 KiB, in which a window's orphans set
// about one bit in ten.
const orphanBits = 20

// orphanBit is trace id's bit in mayBeOrphan: both halves of the id mixed, since an id's bytes
// need not be random (sequential ids, ids with a fixed half).
func orphanBit(id spans.TraceID) uint64 {
	lo, hi := binary.LittleEndian.Uint64(id[:8]), binary.LittleEndian.Uint64(id[8:])
	return (lo*0x9e3779b97f4a7c15 ^ hi) * 0xff51afd7ed558ccd >> (64 - orphanBits)
}

// traces is how many traces have operations in the window.
func (w *window) traces() int { return len(w.entries) - w.head - w.dead }

// compact drops the dead slots once they are as many as the live ones, and the slots before
// head once they are half of entries, so entries stays within about twice the traces of the
// window and the work is amortized O(1) per entry.
func (w *window) compact() {
	live := len(w.entries) - w.head - w.dead
	if (w.dead < 64 || w.dead < live) && (w.head == 0 || w.head < len(w.entries)/2) {
		return
	}
	out := w.entries[:0]
	clear(w.mayBeOrphan) // stale bits of the orphans that left go
	for _, e := range w.entries[w.head:] {
		if !e.dead {
			if e.t != nil {
				e.t.win = int32(len(out) + 1)
			} else {
				w.addOrphan(e.id, len(out))
			}
			out = append(out, e)
		}
	}
	clear(w.entries[len(out):])
	w.entries = out
	w.head, w.dead = 0, 0
}

// winRef is an entry taken for a run: the trace and its operations.
type winRef struct {
	id spans.TraceID
	winOps
}

// take drops the traces whose operations all ended more than span before the latest end in the
// window (none when span is 0 or negative: offline, every operation since the last cut) and lists
// the rest in window order, with the time from which their operations are in the window (read
// filters them one by one).
func (w *window) take(span int64) (refs []winRef, from int64) {
	from = math.MinInt64
	if span > 0 {
		var latest int64
		for _, e := range w.entries[w.head:] {
			if !e.dead {
				latest = max(latest, e.end)
			}
		}
		from = latest - span
		for i := w.head; i < len(w.entries); i++ {
			if e := &w.entries[i]; !e.dead && e.end < from {
				w.kill(i)
			}
		}
		w.compact()
	}
	refs = make([]winRef, 0, len(w.entries)-w.head-w.dead)
	for _, e := range w.entries[w.head:] {
		if !e.dead {
			refs = append(refs, winRef{e.id, e.winOps})
		}
	}
	return refs, from
}

// readWindow is the operations of refs that ended at from or later, in order: the values as they
// are, the packed ones read back into arenas for the run (one array per kind for about
// arenaOps operations at a time). A frame that does not read (only a bug in the packed form) is
// reported and skipped.
func readWindow(refs []winRef, from int64) ([]*analyzer.Operation, []string) {
	n := 0
	for _, r := range refs {
		n += r.n
	}
	var ar opsArena
	reserved := 0 // refs before this one are reserved for in ar
	ops := make([]*analyzer.Operation, 0, n)
	var errs []string
	for i, r := range refs {
		if i == reserved {
			reserved = ar.reserveGroup(refs[i:]) + i
		}
		at := len(ops)
		if r.ops != nil {
			ops = append(ops, r.ops...)
		} else {
			var err error
			if ops, err = ar.unpack(ops, r.packed); err != nil {
				errs = append(errs, fmt.Sprintf("analyzer: operations of trace %s: %v", r.id, err))
			}
		}
		kept := ops[:at]
		for _, op := range ops[at:] {
			if op.EndUnixNano >= from {
				kept = append(kept, op)
			}
		}
		ops = kept
	}
	return ops, errs
}

// arenaOps is about how many operations readWindow reads back into one arena: a few traces'.
// A window at its bound is about 45 MB of operation values, read back at once when a chunk of
// `stormwatch analyze` is judged. Into one array per kind, those were a few allocations of tens
// of megabytes, which the runtime placed in pages it mapped afresh and gave back after: at a
// million spans, twice the page faults of the whole run otherwise, and as many more CPU-seconds
// as the collector's marking saved. Arenas of a few kilobytes are small objects, made in the
// memory the heap recycles, as values made per trace were: the page faults are as before (2,048
// operations an arena: 115,000 at a million spans, 256: 95,000, 16: 63,000 as before's 62,000).
const arenaOps = 16

// reserveGroup empties ar and reserves in it for the packed refs from the first on, until they
// hold arenaOps operations (or the refs end; values need no room), and returns how many refs it
// covered (at least one).
func (ar *opsArena) reserveGroup(refs []winRef) int {
	ar.slab, ar.att, ar.calls, ar.origins = nil, nil, nil, nil
	var total [5]int
	k, n := 0, 0
	for k < len(refs) && (k == 0 || n < arenaOps) {
		if refs[k].ops == nil {
			countOps(&total, refs[k].packed)
			n += refs[k].n
		}
		k++
	}
	ar.grow(total)
	return k
}

// The Engine's side of the window: when the windowed detectors run (Settle, Flush) and what
// they are given.

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

// windowThrough is StoreStats.WindowThroughUnixNano. Under a.mu.
func (a *Engine) windowThrough() int64 {
	if !a.hasWindow || a.win.epoch == a.windowEpoch {
		return a.now // nothing analyzed waits for the windowed detectors
	}
	return a.windowJudged
}
