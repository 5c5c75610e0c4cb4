package engine

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"time"

	"github.com/stormwatch/stormwatch/spans"
)

// The ingest path: ConsumeBatch files each batch's spans under their traces, packed (see
// store.go), and keeps the store within its bounds - the per-trace cap as the spans arrive, the
// span bound (MaxSpans) by evicting the least recently updated traces, analyzed as they are.
// It runs under a.mu on the receivers' goroutines, so it does no analysis but an evicted trace's.

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
	a.batches++
	a.rejected += b.Rejected
	capT := a.maxTraceSpans()
	if b.Packed != nil {
		a.filePacked(b.Packed, futureLimit(now), capT, cmp.Or(now, a.now))
		a.version++
		a.evict()
		b.Release()
		return nil
	}
	a.countBadTimes(b.Spans, now)
	if now == 0 {
		now = a.now
	}
	ts, order, joins, grouped := a.fileSpans(b.Spans)
	// Each trace's spans of the batch packed as one block of its pending spans (see store.go):
	// where traces arrive interleaved, the batch is regrouped by trace first, in arrival order.
	ss := b.Spans
	if !grouped {
		ss = a.regroup(b.Spans, ts, order)
	}
	a.packRuns(ss, order, capT, now)
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

// fileSpans finds each span's trace (made when new), counts how many spans each trace gets from
// the batch (traceState.incoming) and notes the deliveries that start a trace of their own (see
// joinDeliveries). It returns each span's trace, the traces in the order they first appear (in
// the Engine's scratches) and whether every trace's spans are one run of the batch.
func (a *Engine) fileSpans(ss []spans.Span) (ts, order []*traceState, joins []traceJoin, grouped bool) {
	ts = a.scratch[:0]
	order = a.order[:0]
	var last *traceState
	var lastID spans.TraceID
	grouped = true
	joins = a.joins[:0]
	for i := range ss {
		s := &ss[i]
		id := s.TraceID
		t := last
		if t == nil || lastID != id {
			t = a.traceOf(id)
			if t.incoming > 0 {
				grouped = false // seen before in this batch, with another trace in between
			} else {
				order = append(order, t)
			}
			last, lastID = t, id
		}
		t.incoming++
		ts = append(ts, t)
		if s.Kind == spans.KindConsumer && s.ParentID.IsZero() {
			if l, ok := deliveryLink(s); ok {
				joins = append(joins, traceJoin{from: id, to: l.TraceID})
			}
		}
	}
	return ts, order, joins, grouped
}

// traceOf is the state spans of trace id are filed under, made when new: a trace filed with
// another (joinDeliveries) maps to that trace's state.
func (a *Engine) traceOf(id spans.TraceID) *traceState {
	t := a.traces[id]
	if t == nil {
		t = &traceState{id: id}
		a.traces[id] = t
		a.held.pushBack(t)
	}
	if t.bare && t.id == id {
		t.bare = false
		if t.res != nil {
			t.uncounted++ // analyzed before with its deliveries alone
		}
	}
	return t
}

// filePacked files a batch its producer packed by trace (spans.Batch.Pack): each trace's block
// is added to its pending spans as it is, and what fileSpans, countBadTimes and packRuns read of
// every span comes with the block (spans.PackedTrace). The rare cases that need the spans
// themselves - a trace over its cap, a delivery that may start its trace elsewhere, a time past
// limit - read the block back.
//
// Where two traces of the batch are filed under one state (a delivery's trace joined to its
// publisher's before), their spans are held as two blocks, one trace's after the other's, not in
// the order they came: analysis sorts a trace's spans by id, so only which of two spans with one
// id is kept could differ.
func (a *Engine) filePacked(pts []spans.PackedTrace, limit int64, capT int, now int64) {
	joins := a.joins[:0]
	for i := range pts {
		pt := &pts[i]
		a.zeroTimes += pt.UnsetTimes
		if pt.Latest > limit {
			a.futureTimes += countPast(a.unpackScratch(pt.Block), limit)
		}
		t := a.traceOf(pt.ID)
		if pt.RootLinks > 0 {
			for _, s := range a.unpackScratch(pt.Block) {
				if l, ok := deliveryLink(&s); ok {
					joins = append(joins, traceJoin{from: s.TraceID, to: l.TraceID})
				}
			}
		}
		room := a.room(t, pt.Spans, capT)
		if room == 0 {
			continue
		}
		before := len(t.pending)
		if room == pt.Spans {
			t.pending = a.appendFramed(t.pending, pt.Block)
		} else {
			// Over the cap: the first spans packed again. (A block that does not read, a bug,
			// gives none: counted as truncated rather than taking the ingest path down.)
			ss := a.unpackScratch(pt.Block)
			if len(ss) < room {
				a.truncatedS += room - len(ss)
				t.dropped += room - len(ss)
				room = len(ss)
			}
			if room == 0 {
				continue
			}
			t.pending = a.appendPending(t.pending, ss[:room])
		}
		a.filed(t, len(t.pending)-before, room, now)
	}
	for _, j := range joins {
		a.joinDeliveries(j, capT, now)
	}
	a.joins = joins[:0]
	a.unpacker.Reset()
	clear(a.unpacked)
	a.unpacked = a.unpacked[:0]
}

// unpackScratch reads a packed block of a batch into the ingest path's scratch spans, valid
// until the batch is filed. A block that does not read gives no spans: the producer's packer
// wrote it, so that is a bug, and what the spans would have told (a join, a time past the clock)
// is lost with it, not the spans, which are held as they came.
func (a *Engine) unpackScratch(block []byte) []spans.Span {
	ss, err := a.unpacker.Append(a.unpacked[:0], block)
	if err != nil {
		return nil
	}
	a.unpacked = ss
	return ss
}

// packRuns packs each trace's run of ss (the batch, grouped by trace in the order of order) as one
// block of its pending spans, within the per-trace cap capT, and marks the traces touched at now.
func (a *Engine) packRuns(ss []spans.Span, order []*traceState, capT int, now int64) {
	at := 0
	for _, t := range order {
		n := int(t.incoming)
		t.incoming = 0
		run := ss[at : at+n]
		at += n
		room := a.room(t, n, capT)
		if room == 0 {
			continue
		}
		before := len(t.pending)
		t.pending = a.appendPending(t.pending, run[:room])
		a.filed(t, len(t.pending)-before, room, now)
	}
}

// room is how many of n spans arriving for t its cap capT (0: none) takes; the rest are counted
// as truncated.
func (a *Engine) room(t *traceState, n, capT int) int {
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
	return room
}

// filed counts k spans (bytes of them packed) just added to t's pending spans at now.
func (a *Engine) filed(t *traceState, bytes, k int, now int64) {
	a.packedBytes += bytes
	t.npending += k
	a.spansHeld += k
	a.touch(t, now)
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
	limit := futureLimit(now)
	for i := range ss {
		s := &ss[i]
		if s.StartUnixNano <= 0 || s.EndUnixNano <= 0 {
			a.zeroTimes++
		}
	}
	a.futureTimes += countPast(ss, limit)
}

// futureLimit is the latest a span time may be when the clock says now (0: no clock).
func futureLimit(now int64) int64 {
	if now > 0 && now < math.MaxInt64-futureSkew {
		return now + futureSkew
	}
	return math.MaxInt64
}

// countPast counts the spans with both times set and one of them past limit.
func countPast(ss []spans.Span, limit int64) int {
	n := 0
	for i := range ss {
		s := &ss[i]
		if s.StartUnixNano > 0 && s.EndUnixNano > 0 && (s.StartUnixNano > limit || s.EndUnixNano > limit) {
			n++
		}
	}
	return n
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
