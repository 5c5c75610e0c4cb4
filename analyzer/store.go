package analyzer

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/stormwatch/stormwatch/spans"
)

// The live analyzer holds every analyzed trace until --max-spans pushes it out: for re-analysis
// when late spans arrive, and for the TUI's trace view. Held as []spans.Span plus the trace's
// index, that was about 730 bytes per span, and the garbage collector marked every string pointer
// of every attribute on every cycle (close to a fifth of the collector's CPU). So once a trace is
// analyzed its spans are packed (spans.AppendPacked: one pointer-free byte string per trace) and
// its index dropped; what the report and the windowed detectors read - operations, findings,
// accounting - stays as it was. The spans come back (spans.AppendUnpacked) only when needed.

// pack packs the analyzed spans into a byte string of its own, exactly sized, through the reused
// scratch buffer when there is one.
func pack(ss []spans.Span, scratch *[]byte) []byte {
	if scratch == nil {
		return spans.AppendPacked(nil, ss)
	}
	*scratch = spans.AppendPacked((*scratch)[:0], ss)
	return bytes.Clone(*scratch)
}

// heldTrace is what a held analysis keeps of its trace besides the packed spans: the data issues
// (the report's counts, taken back when late spans re-analyze the trace) and what the trace view
// shows. Most traces have none of it, and hold none (nil).
type heldTrace struct {
	issues    traceIssues
	notes     []string
	truncated bool
}

// hold is a fresh analysis as held once its spans are packed: operations, findings, accounting
// and detector errors, without the trace (spans and index), and what the trace had to say. The
// held result is a copy of its own: the analysis makes the result and its trace in one
// allocation, and holding the result there would keep the whole trace alive.
func hold(r *traceResult) (*traceResult, *heldTrace) {
	t := r.trace
	held := new(traceResult)
	*held = *r
	held.trace = nil
	if t.issues == (traceIssues{}) && t.notes == nil && !t.Truncated {
		return held, nil
	}
	return held, &heldTrace{issues: t.issues, notes: t.notes, truncated: t.Truncated}
}

// issuesOf is the data issues of analysis r, held (meta) or not.
func issuesOf(r *traceResult, meta *heldTrace) traceIssues {
	switch {
	case r.trace != nil:
		return r.trace.issues
	case meta != nil:
		return meta.issues
	}
	return traceIssues{}
}

// unpackFor unpacks a trace's analyzed spans with room for extra more (the late spans).
func unpackFor(packed []byte, extra int) ([]spans.Span, error) {
	n, err := spans.PackedLen(packed)
	if err != nil {
		return nil, fmt.Errorf("unpacking held spans: %w", err)
	}
	ss, err := spans.AppendUnpacked(make([]spans.Span, 0, n+extra), packed)
	if err != nil {
		return nil, fmt.Errorf("unpacking held spans: %w", err)
	}
	return ss, nil
}

// viewPacked rebuilds the trace view of an analysis held packed: the spans unpacked and indexed
// again (they are the ones the analysis indexed, already deduplicated and in span-id order, so the
// display order and depths come out the same), with the analysis's own operations, findings,
// truncation and notes.
//
// The index is rebuilt through analyzeTrace without detectors rather than buildTrace alone: the
// trace assembly's internals are being reworked, and analyzeTrace is their stable entry point. The
// inference it also runs is thrown away; lookups are rare (the TUI opens one trace at a time).
func (a *Analyzer) viewPacked(id spans.TraceID, r *traceResult, meta *heldTrace, packed []byte) *TraceView {
	if meta == nil {
		meta = &heldTrace{}
	}
	ss, err := unpackFor(packed, 0)
	if err != nil {
		// Only a bug in the packed form gets here: show what is left, and say why.
		return &TraceView{TraceID: id, Operations: r.ops, Findings: r.findings, Truncated: meta.truncated,
			Notes: append(slices.Clip(meta.notes), fmt.Sprintf("spans lost: %v", err))}
	}
	// The view reads the trace's index (order, depths), not its inference: the held result's
	// operations and findings are the analysis's own.
	t := &Trace{}
	sc := a.intern.getScratch()
	buildTrace(t, id, ss, 0, sc)
	a.intern.putScratch(sc)
	t.Truncated = meta.truncated
	t.notes = meta.notes
	full := *r
	full.trace = t
	return full.view()
}
