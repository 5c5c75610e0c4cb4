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
	// Every batch is filed packed by trace: as its producer packed it (the collector, the
	// connector), or packed here.
	pts := b.Packed
	if pts == nil {
		pts = a.packing.Pack(b.Spans)
	}
	a.filePacked(pts, futureLimit(now), a.maxTraceSpans(), cmp.Or(now, a.now))
	a.packing.Trim() // filed as copies: a huge batch leaves no memory behind
	a.version++
	a.evict()
	// Everything kept is a copy (the packed bytes): the producer may reuse the request's memory.
	b.Release()
	return nil
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

// filePacked files a batch packed by trace (spans.PackedTrace): each trace's block is added to
// its pending spans as it is (a copy: see addPending), and what filing checks of every span - unset times, a time past
// limit, deliveries that may start their trace elsewhere - comes with the block. The rare cases
// that need the spans themselves - a trace over its cap, a delivery, a time past limit - read the
// block back, once.
//
// Where two traces of the batch are filed under one state (a delivery's trace joined to its
// publisher's before), their spans are held as two blocks, one trace's after the other's, not in
// the order they came: analysis sorts a trace's spans by id, so only which of two spans with one
// id is kept could differ.
func (a *Engine) filePacked(pts []spans.PackedTrace, limit int64, capT int, now int64) {
	joins := a.joins[:0]
	for i := range pts {
		pt := &pts[i]
		var ss []spans.Span // the block read back, when something needs its spans
		read := func() []spans.Span {
			if ss == nil {
				ss = a.unpackScratch(pt.Block)
			}
			return ss
		}
		a.zeroTimes += pt.UnsetTimes
		if pt.Latest > limit {
			a.futureTimes += countPast(read(), limit)
		}
		t := a.traceOf(pt.ID)
		if pt.RootLinks > 0 {
			for k := range read() {
				if l, ok := deliveryLink(&ss[k]); ok {
					joins = append(joins, traceJoin{from: ss[k].TraceID, to: l.TraceID})
				}
			}
		}
		room := a.room(t, pt.Spans, capT)
		if room == 0 {
			continue
		}
		var b []byte
		slab := false // b is carved from the Engine's slab (see slabFor)
		if room == pt.Spans {
			slab = a.slabFor(t, blockHeader+len(pt.Block), now)
			b = a.framed(pt.Block, slab)
		} else {
			// Over the cap: the first spans packed again. (A block that does not read, a bug,
			// gives none: counted as truncated rather than taking the ingest path down.)
			if n := len(read()); n < room {
				a.truncatedS += room - n
				t.dropped += room - n
				room = n
			}
			if room == 0 {
				continue
			}
			b = a.packPending(ss[:room])
		}
		if moved := t.addPending(b, slab); moved != nil {
			a.letGo(moved)
		}
		a.filed(t, len(b), room, now)
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
	a.packedBytes -= t.pendingBytes() + len(t.packed)
	if t.inPending.linked {
		a.pending.remove(t)
	}
	a.held.remove(t)
	a.win.orphan(t)
	delete(a.traces, t.id)
	for _, id := range t.joined {
		delete(a.traces, id)
	}
	t.joined = nil
	t.gone = true
	a.letGoCarved(t.carved, t.pending, t.later())
	t.pending, t.more, t.npending, t.carved = nil, nil, 0, 0
	t.packed, t.held, t.meta = nil, 0, nil
	t.res = nil
}
