package analyzer

import (
	"cmp"
	"encoding/binary"
	"slices"

	"github.com/stormwatch/stormwatch/analyzer/internal/build"
	"github.com/stormwatch/stormwatch/spans"
)

// Trace is one assembled trace: its spans indexed by id, the parent/child tree repaired where the
// data is broken, and the logical operation each CLIENT span belongs to. Detectors read it through
// their Pass; it is immutable once built, and lives only as long as its analysis (see Pass.Trace).
// The engine (analyzer/engine) builds it; nothing exported writes it (see build.go).
type Trace struct {
	ID spans.TraceID
	// Spans are deduplicated and sorted by span id (so Lookup is a binary search, no map).
	Spans []spans.Span
	// Truncated is true when the trace hit the per-trace span cap and spans were dropped.
	Truncated bool

	ix build.TraceIndex[*Operation] // what the methods below answer from, the engine's to write
}

// Len is the number of spans.
func (t *Trace) Len() int { return len(t.Spans) }

// CarriesAttr reports whether any span of t has an attribute named key. The keys the run's
// detectors declared (Detector.CarriedAttrs) are answered from the index the engine made in its
// pass over every attribute; any other key, or a trace whose attributes were not indexed, by a
// scan.
func (t *Trace) CarriesAttr(key string) bool {
	for k, c := range t.ix.CarriedKeys {
		if c == key {
			return t.ix.Carried&(1<<k) != 0
		}
	}
	for i := range t.Spans {
		for j := range t.Spans[i].Attrs {
			if t.Spans[i].Attrs[j].Key == key {
				return true
			}
		}
	}
	return false
}

// Lookup finds a span's index by id.
func (t *Trace) Lookup(id spans.SpanID) (int, bool) {
	// Compared as bytes.Compare compares the ids: the big-endian high halves, then the low ones.
	hi, lo := binary.BigEndian.Uint32(id[:4]), binary.BigEndian.Uint32(id[4:])
	ids := t.ix.IDs
	i, j := 0, len(ids)/2
	for i < j {
		h := int(uint(i+j) >> 1)
		if hh := uint32(ids[2*h]); hh < hi || hh == hi && uint32(ids[2*h+1]) < lo {
			i = h + 1
		} else {
			j = h
		}
	}
	return i, 2*i < len(ids) && uint32(ids[2*i]) == hi && uint32(ids[2*i+1]) == lo
}

// Parent is the index of span i's parent, or -1 for a root, an orphan (parent never arrived) or a
// link the analyzer broke (a span that is its own parent, a cycle).
func (t *Trace) Parent(i int) int { return int(t.ix.Parent[i]) }

// Children are span i's children ordered by start time. The slice is the trace's own, lent to
// read: its capacity ends with it, so that appending to it copies instead of writing over the
// next span's children.
func (t *Trace) Children(i int) []int32 {
	lo, hi := t.ix.ChildOff[i], t.ix.ChildOff[i+1]
	return t.ix.Child[lo:hi:hi]
}

// Roots are the spans without a (usable) parent, by start time (lent to read, as Children).
func (t *Trace) Roots() []int32 { return slices.Clip(t.ix.Roots) }

// Start and End are span i's times with bad data repaired: an end before the start is taken as
// the start (a zero-length span).
func (t *Trace) Start(i int) int64 { return t.Spans[i].StartUnixNano }

// End is span i's end, never before its start.
func (t *Trace) End(i int) int64 {
	s := &t.Spans[i]
	return max(s.StartUnixNano, s.EndUnixNano)
}

// Operation is the operation whose attempt made CLIENT span i, or nil. Operation, Outcome,
// Origin and Dependency answer while the trace is analyzed (for the detectors); afterwards they answer as for
// a span that is not a call.
func (t *Trace) Operation(i int) *Operation {
	if c := t.ix.Call[i]; c >= 0 && int(c) < len(t.ix.Calls) {
		return t.op(t.ix.Calls[c].Op)
	}
	return nil
}

// Enclosing is the innermost operation that span i works for: the operation of the nearest
// CLIENT call at or above it. nil for work done directly for the root request.
func (t *Trace) Enclosing(i int) *Operation { return t.op(t.ix.Enclosing[i]) }

// op is operation k of the trace, nil for -1.
func (t *Trace) op(k int32) *Operation {
	if k < 0 {
		return nil
	}
	return t.ix.Ops[k]
}

// Outcome is the outcome class (ok, retryable, permanent, timeout, cancelled, refused) and the
// status text (HTTP status, gRPC code, "" when no answer) of CLIENT span i; "" for other spans.
func (t *Trace) Outcome(i int) (outcome, status string) {
	if c := t.ix.Call[i]; c >= 0 && int(c) < len(t.ix.Calls) {
		return t.ix.Calls[c].Outcome, t.ix.Calls[c].Status
	}
	return "", ""
}

// AddedLatency is the latency retries added to the request whose trace holds span i: the time its
// critical path spent in failed attempts that were retried and in pauses between attempts, in ns
// (see analyzer/cost). false when the span's root is not a request (an orphan) or the driver
// measured none.
func (t *Trace) AddedLatency(i int) (int64, bool) {
	if len(t.ix.RootAdded) != len(t.ix.Roots) || len(t.ix.Pos) <= i {
		return 0, false
	}
	// The roots are in pre-order, each one's subtree from its position on: span i's root is the
	// last one placed at or before i, found without a walk up a deep trace.
	pos := t.ix.Pos[i]
	k, found := slices.BinarySearchFunc(t.ix.Roots, pos, func(root, pos int32) int { return cmp.Compare(t.ix.Pos[root], pos) })
	if !found {
		k--
	}
	if k < 0 || t.ix.RootAdded[k] < 0 {
		return 0, false
	}
	return t.ix.RootAdded[k], true
}

// GiveUp is when the caller of CLIENT span i stopped waiting for its answer, in Unix ns on the
// caller's clock, or 0 when it waited. It is read from time, whatever the span's status says: the
// earliest of the span's end and the deadlines the request carried (resilience.deadline,
// Request-Deadline, grpc-timeout, Envoy's expected and per-try timeouts, on the call or as its
// callee captured them), when the callee's work (its SERVER span and the calls it made while serving
// the request), read on the caller's clock, went on past it - or the span's own timeout or
// cancellation says so. A call that recorded an answer (a status code) was given up on only by a
// deadline that passed before it ended, or by that status.
func (t *Trace) GiveUp(i int) int64 {
	if c := t.ix.Call[i]; c >= 0 && int(c) < len(t.ix.Calls) {
		return t.ix.Calls[c].GiveUp
	}
	return 0
}

// Origin is CLIENT span i's destination (scheme://host:port), "" for other spans.
func (t *Trace) Origin(i int) string {
	if c := t.ix.Call[i]; c >= 0 && int(c) < len(t.ix.Calls) {
		return t.ix.Calls[c].Origin
	}
	return ""
}

// Dependency is the name of CLIENT span i's dependency (an operation's Dependency, a report's
// DependencyStats.Dependency), "" for other spans.
func (t *Trace) Dependency(i int) string {
	if c := t.ix.Call[i]; c >= 0 && int(c) < len(t.ix.Calls) {
		return t.ix.Calls[c].Dependency
	}
	return ""
}

// Walk visits the subtree under span i (not i itself) in pre-order; fn returns false to skip a
// node's descendants.
func (t *Trace) Walk(i int, fn func(j int) bool) {
	// The display order is the pre-order, so a subtree is one run of it: no stack to allocate.
	for k, end := t.ix.Pos[i]+1, t.ix.Pos[i]+t.ix.Size[i]; k < end; {
		j := t.ix.Order[k]
		if fn(int(j)) {
			k++
		} else {
			k += t.ix.Size[j]
		}
	}
}
