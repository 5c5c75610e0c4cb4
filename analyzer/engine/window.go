package engine

import (
	"strings"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// windowOpsPerSpan is the default bound on the window's operations per span of MaxSpans (see
// Config.MaxWindowOps): a full store of typical traces holds about one operation per three or
// four spans, so the window may hold as many operations as a full store does, and the memory the
// user bounds with MaxSpans bounds it too. A live window holds copies, about half a kilobyte an
// operation with its attempts: some 130 bytes per span of MaxSpans at the bound.
const windowOpsPerSpan = 4

// window is what the ScopeWindow detectors judge: the operations of the analyzed traces, fed once
// per analysis as it is published (see Analyzer.publish) and kept until they fall out of the
// policy's window (expire) or the bound pushes them out. A tick then reads only the window, never
// the store: its cost depends on the traffic within the window, not on how many spans are held.
//
// Entries are in the order their analyses were published, a trace moving to the back when it is
// analyzed again (its earlier operations replaced) or gets a late fragment (added to them): the
// order the store lists its traces in (least recently updated first), which decides the ties of
// the detectors' evidence (the first operation with the most retries, the first refusal). Offline
// the two orders are the same, so the detectors find what they would over the traces held.
//
// It is guarded by Analyzer.mu. The operations are immutable once in it: expiry makes a new
// slice rather than shifting an old one, so a detector run holding the last list reads it
// without the lock while analyses go on being published.
type window struct {
	entries []winEntry // publish order, from head; dead ones are skipped and compacted away
	head    int
	byTrace map[spans.TraceID]int // the live entry of each trace, an index into entries
	nops    int                   // the operations of the live entries
	dead    int                   // dead entries from head on
	max     int                   // the bound on nops; negative: none
	dropped int                   // operations pushed out by the bound
	epoch   uint64
}

// winEntry is one trace's operations in the window.
type winEntry struct {
	id   spans.TraceID
	ops  []*analyzer.Operation
	dead bool
}

func newWindow(max int) *window {
	return &window{byTrace: map[spans.TraceID]int{}, max: max}
}

// observe puts trace id's operations at the back of the window: they replace the trace's
// earlier ones, or are added to them when add is set (a late fragment of a released trace).
func (w *window) observe(id spans.TraceID, ops []*analyzer.Operation, add bool) {
	old, had := w.byTrace[id]
	if !had && len(ops) == 0 {
		return
	}
	w.epoch++
	if had {
		if add {
			ops = append(append(make([]*analyzer.Operation, 0, len(w.entries[old].ops)+len(ops)), w.entries[old].ops...), ops...)
		}
		w.kill(old)
	}
	if len(ops) == 0 {
		w.compact()
		return
	}
	w.entries = append(w.entries, winEntry{id: id, ops: ops})
	last := len(w.entries) - 1
	w.byTrace[id] = last
	w.nops += len(ops)
	for w.max >= 0 && w.nops > w.max && w.head < last {
		// Over the bound: the earliest published go first, whole traces at a time, never the
		// one just put in.
		if !w.entries[w.head].dead {
			w.dropped += len(w.entries[w.head].ops)
			w.kill(w.head)
		}
		w.entries[w.head] = winEntry{}
		w.head++
		w.dead--
	}
	w.compact()
}

// kill takes entry i out of the window; its slot stays in entries until compact.
func (w *window) kill(i int) {
	e := &w.entries[i]
	e.dead = true
	w.nops -= len(e.ops)
	e.ops = nil
	w.dead++
	if j, ok := w.byTrace[e.id]; ok && j == i {
		delete(w.byTrace, e.id)
	}
}

// compact drops the dead slots once they are as many as the live ones, and the slots before
// head once they are half of entries, so entries stays within about twice the traces of the
// window and the work is amortized O(1) per entry.
func (w *window) compact() {
	live := len(w.entries) - w.head - w.dead
	if (w.dead < 64 || w.dead < live) && (w.head == 0 || w.head < len(w.entries)/2) {
		return
	}
	out := w.entries[:0]
	for _, e := range w.entries[w.head:] {
		if !e.dead {
			w.byTrace[e.id] = len(out)
			out = append(out, e)
		}
	}
	clear(w.entries[len(out):])
	w.entries = out
	w.head, w.dead = 0, 0
}

// operations expires the operations that ended more than span before the latest end in the
// window (none when span is 0 or negative: offline, the window is the whole input) and returns
// the rest in window order, in a slice of the caller's.
func (w *window) operations(span int64) []*analyzer.Operation {
	if span > 0 {
		var latest int64
		for _, e := range w.entries[w.head:] {
			if !e.dead {
				for _, op := range e.ops {
					latest = max(latest, op.EndUnixNano)
				}
			}
		}
		w.expire(latest - span)
	}
	out := make([]*analyzer.Operation, 0, w.nops)
	for _, e := range w.entries[w.head:] {
		if !e.dead {
			out = append(out, e.ops...)
		}
	}
	return out
}

// expire drops the operations that ended before from. An entry partly out gets a new slice of
// those left: the old one may be in a list a detector is reading.
func (w *window) expire(from int64) {
	for i := w.head; i < len(w.entries); i++ {
		e := &w.entries[i]
		if e.dead {
			continue
		}
		kept := 0
		for _, op := range e.ops {
			if op.EndUnixNano >= from {
				kept++
			}
		}
		switch kept {
		case len(e.ops):
		case 0:
			w.kill(i)
		default:
			ops := make([]*analyzer.Operation, 0, kept)
			for _, op := range e.ops {
				if op.EndUnixNano >= from {
					ops = append(ops, op)
				}
			}
			w.nops -= len(e.ops) - kept
			e.ops = ops
		}
	}
	w.compact()
}

// copyForWindow copies a trace's operations for the window, in one allocation per kind: the
// analysis's own are made in memory the next trace's reuses (see hold) and their strings may
// alias the trace's packed spans (src), which outlive neither the store's eviction nor the
// window. Strings from src are interned (see detach), as a held analysis's are. A copy has no
// Parent: the chain belongs to the trace, and no windowed detector walks it.
func copyForWindow(ops []*analyzer.Operation, src *sources, in *interner) []*analyzer.Operation {
	if len(ops) == 0 {
		return nil
	}
	nAtt, nCalls, nOrigins, nID := 0, 0, 0, 0
	for _, op := range ops {
		if src != nil && src.owns(op.ID) {
			nID += len(op.ID)
		}
		nAtt += len(op.Attempts)
		for i := range op.Attempts {
			nCalls += len(op.Attempts[i].Calls)
			nOrigins += len(op.Attempts[i].Origins)
		}
	}
	vals := make([]analyzer.Operation, len(ops))
	ptrs := make([]*analyzer.Operation, len(ops))
	atts := make([]analyzer.Attempt, 0, nAtt)
	calls := make([]spans.SpanID, 0, nCalls)
	origins := make([]string, 0, nOrigins)
	// The ids are unique to their operations (not worth a table entry): copied into one string
	// for the trace, each a piece of it.
	var ids strings.Builder
	ids.Grow(nID)
	in.lockStr()
	defer in.unlockStr()
	str := func(s *string) {
		if src != nil && src.owns(*s) {
			*s = in.strLocked(*s)
		}
	}
	for k, op := range ops {
		c := &vals[k]
		*c = *op
		c.Parent = nil
		if src != nil && src.owns(c.ID) {
			ids.WriteString(c.ID) // cut from the whole below
		}
		str(&c.Name)
		str(&c.Caller)
		str(&c.Owner)
		str(&c.Dependency)
		str(&c.DependencyService)
		str(&c.Terminal)
		str(&c.StopReason)
		from := len(atts)
		atts = append(atts, op.Attempts...)
		c.Attempts = atts[from:len(atts):len(atts)]
		for i := range c.Attempts {
			at := &c.Attempts[i]
			if src != nil && src.owns(string(at.Kind)) {
				at.Kind = analyzer.AttemptKind(in.strLocked(string(at.Kind)))
			}
			if at.Calls != nil {
				n := len(calls)
				calls = append(calls, at.Calls...)
				at.Calls = calls[n:len(calls):len(calls)]
			}
			if at.Origins != nil {
				n := len(origins)
				origins = append(origins, at.Origins...)
				at.Origins = origins[n:len(origins):len(origins)]
				for j := range at.Origins {
					str(&at.Origins[j])
				}
			}
			str(&at.Outcome)
			str(&at.Status)
		}
		ptrs[k] = c
	}
	if nID > 0 {
		all, at := ids.String(), 0
		for k, op := range ops {
			if src.owns(op.ID) {
				vals[k].ID = all[at : at+len(op.ID)]
				at += len(op.ID)
			}
		}
	}
	return ptrs
}
