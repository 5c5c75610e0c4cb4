package audit

import (
	"slices"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/spans"
)

// Window is what a windowed detector judged: the operations, and the time they span.
type Window struct {
	Ops []*analyzer.Operation
	// start and end are the time the operations span, found by Bounds when a finding needs
	// them: a loop over every operation that a window without findings never pays.
	start, end int64
	bounded    bool
}

// Windowed selects the operations a cross-trace detector looks at: offline every operation (the
// whole input), live only those that ended within the policy's window before the latest one. A
// live engine hands over its window already cut so (and bounded: engine.Config.MaxWindowOps), and
// this keeps them all; it decides for a caller that hands over more, such as a test.
func Windowed(pass *analyzer.Pass) Window {
	ops := pass.Operations
	d := policy.Window(pass.RunSettings)
	if d <= 0 {
		return Window{Ops: ops}
	}
	var latest int64
	for _, op := range ops {
		latest = max(latest, op.EndUnixNano)
	}
	from := latest - int64(d)
	// Shared, not copied, when the window holds every operation (each of the four windowed
	// detectors made its own copy).
	first := slices.IndexFunc(ops, func(op *analyzer.Operation) bool { return op.EndUnixNano < from })
	if first < 0 {
		return Window{Ops: ops}
	}
	kept := make([]*analyzer.Operation, first, len(ops))
	copy(kept, ops[:first])
	for _, op := range ops[first+1:] {
		if op.EndUnixNano >= from {
			kept = append(kept, op)
		}
	}
	return Window{Ops: kept}
}

// Bounds is the time the window's operations span: from the earliest start to the latest end
// (0 when there are none). The latest end of the operations kept is the latest of all held, as
// the window is measured back from it.
func (w *Window) Bounds() (start, end int64) {
	if !w.bounded {
		for _, op := range w.Ops {
			w.end = max(w.end, op.EndUnixNano)
		}
		w.start = w.end
		for _, op := range w.Ops {
			w.start = min(w.start, op.StartUnixNano)
		}
		w.bounded = true
	}
	return w.start, w.end
}

// Evidence adds the window to a finding's evidence: its bounds (RFC 3339, UTC) and length.
func (w *Window) Evidence(ev analyzer.Evidence) {
	start, end := w.Bounds()
	ev["window_start"] = analyzer.Text(time.Unix(0, start).UTC().Format(time.RFC3339Nano))
	ev["window_end"] = analyzer.Text(time.Unix(0, end).UTC().Format(time.RFC3339Nano))
	ev["window_ms"] = analyzer.Float(Ms(end - start))
}

// MaxTraceIDs bounds the trace ids a cross-trace finding lists in its evidence.
const MaxTraceIDs = 100

// TraceIDs adds the traces a cross-trace finding counted to its evidence (trace_ids, at most
// MaxTraceIDs of them; its count of traces says how many there were in all), so a reader can open
// every one of them, not only the example the finding cites.
func TraceIDs(ev analyzer.Evidence, ids []spans.TraceID) {
	n := min(len(ids), MaxTraceIDs)
	out := make([]string, n)
	for i := range n {
		out[i] = ids[i].String()
	}
	ev["trace_ids"] = analyzer.Texts(out)
}
