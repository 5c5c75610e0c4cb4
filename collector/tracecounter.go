package collector

import (
	"context"
	"sync"

	"github.com/stormwatch/stormwatch/spans"
)

// TraceCounter is the smallest honest span holder: it keeps no spans, only each held trace's id and
// span count, evicting the oldest traces first once more than maxSpans spans are held - the same
// accounting the analyzer does, at a few dozen bytes per trace. `stormwatch collect` uses it when
// nothing analyzes the spans, so the status line and /metrics still show traces held and evicted.
type TraceCounter struct {
	maxSpans int64

	mu     sync.Mutex
	counts map[spans.TraceID]int64
	// order is the arrival order of held traces, a FIFO: order[head:] are live.
	order   []spans.TraceID
	head    int
	held    int64
	evicted HeldStats
}

// NewTraceCounter counts at most maxSpans held spans; maxSpans <= 0 means no bound.
func NewTraceCounter(maxSpans int) *TraceCounter {
	return &TraceCounter{maxSpans: int64(maxSpans), counts: make(map[spans.TraceID]int64)}
}

// ConsumeBatch counts b's spans by trace and evicts the oldest traces beyond the bound.
func (t *TraceCounter) ConsumeBatch(_ context.Context, b *spans.Batch) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range b.Spans {
		id := b.Spans[i].TraceID
		n, ok := t.counts[id]
		if !ok {
			t.order = append(t.order, id)
		}
		t.counts[id] = n + 1
		t.held++
	}
	for t.maxSpans > 0 && t.held > t.maxSpans && t.head < len(t.order) {
		id := t.order[t.head]
		t.order[t.head] = spans.TraceID{}
		t.head++
		n := t.counts[id]
		delete(t.counts, id)
		t.held -= n
		t.evicted.EvictedSpans += n
		t.evicted.EvictedTraces++
	}
	// Reclaim the evicted prefix once it is half the slice, so order stays proportional to what
	// is held.
	if t.head > 1024 && t.head*2 > len(t.order) {
		t.order = append(t.order[:0], t.order[t.head:]...)
		t.head = 0
	}
	return nil
}

// HeldStats reports held and evicted counts; it is safe for concurrent use.
func (t *TraceCounter) HeldStats() HeldStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.evicted
	s.Spans = t.held
	s.Traces = int64(len(t.counts))
	return s
}
