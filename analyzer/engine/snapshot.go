package engine

import (
	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// Snapshot is an immutable view of the analyzer at one moment. The TUI and /metrics read snapshots
// while ingestion goes on; nothing in a snapshot changes after it is taken, and taking one never
// waits for ingestion to finish a trace.
type Snapshot struct {
	// AtUnixNano is the time the snapshot was taken (the caller's clock).
	AtUnixNano int64
	// Report holds dependencies (worst amplification first), findings and notes.
	Report analyzer.Report
	// Operations are the logical operations of the traces held, in no particular order; the
	// pointed-to values are immutable (re-analysis of a trace makes new ones).
	Operations []*analyzer.Operation
	// History is each dependency's amplification per interval, oldest first, for sparklines.
	History map[string][]float64
	// Stats describes the store behind the snapshot.
	Stats StoreStats

	// TraceLookup finds one trace's analysis. The analyzer sets it; tests may set their own. It must
	// be safe to call from any goroutine and return immutable views.
	TraceLookup func(spans.TraceID) (*TraceView, bool)
}

// StoreStats describes what the analyzer holds and what it had to drop.
type StoreStats struct {
	SpansHeld  int
	TracesHeld int
	// PackedBytes is the memory of the spans held (SpansHeld), all packed from their arrival:
	// about 70-250 bytes a span, strings included (the bytes in use; a trace whose spans came in
	// several batches may hold up to twice its pending bytes until it is analyzed).
	PackedBytes int
	// PendingTraces are traces still waiting for their settle period.
	PendingTraces int
	// EvictedTraces and EvictedSpans count what the --max-spans bound pushed out, oldest first.
	EvictedTraces int
	EvictedSpans  int
	// TruncatedTraces hit the per-trace span cap; TruncatedSpans are the spans it refused, every
	// one of them, those that came after the trace was analyzed included.
	TruncatedTraces int
	TruncatedSpans  int
	// DuplicateSpans were received more than once and dropped.
	DuplicateSpans int
}

// Trace returns the analysis of one held trace, or false when it is not (or no longer) held.
func (s *Snapshot) Trace(id spans.TraceID) (*TraceView, bool) {
	if s == nil || s.TraceLookup == nil {
		return nil, false
	}
	return s.TraceLookup(id)
}

// TraceView is one trace as the TUI's waterfall and the span detail need it. Immutable.
type TraceView struct {
	TraceID spans.TraceID
	// Spans are ordered for display: parents before children, siblings by start time.
	Spans []spans.Span
	// Depth[i] is Spans[i]'s depth in the tree (0 for roots and orphans).
	Depth []int
	// Operations are the logical operations found in the trace.
	Operations []*analyzer.Operation
	Findings   []analyzer.Finding
	// Layers is the worst root-to-leaf chain of retrying layers, top first: the
	// "3 x 3 x 3 = 27 calls to dep" line. Empty when no layer retried.
	Layers []analyzer.Layer
	// LeafDependency is the dependency at the bottom of Layers.
	LeafDependency string
	Truncated      bool
	Notes          []string
}
