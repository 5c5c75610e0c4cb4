package engine

import "github.com/stormwatch/stormwatch/spans"

// A consumer that links to the publish span instead of continuing its trace makes one trace per
// delivery (see deliveryLink). Analyzed alone, each would hold one try of the broker's layer: the
// redelivery would go uncounted. So the analyzer files such a trace with the trace its link
// names - the publisher's, whether its spans ever arrive or not - and analyzes them together as
// one: the CONSUMER spans hang under the PRODUCER span (buildTrace), or, without it, are grouped
// by the span they link to (unseenPublishes). The join is made when the delivery's root span
// arrives, from its one link: no index over other traces, no search, whatever the number of
// traces held. Its trace maps to the publisher's state in Engine.traces, so spans of it that
// arrive later go there directly.

// traceJoin is a delivery's trace (from) to be filed with the publish span's (to).
type traceJoin struct{ from, to spans.TraceID }

// joinDeliveries files trace j.from's spans with trace j.to's. The delivery's trace may have been
// analyzed already (live: its root span, which ends last, came in an export after the others,
// more than the settle time later): while its spans are held, its analysis is taken back - its
// counts, findings and window operations - and its spans move, so the joined analysis replaces
// it. A delivery whose spans were released (ReleaseSpans) or are being analyzed stays a trace of
// its own, and its analysis says so (linkedDelivery); so does one that would take the
// publisher's trace over the per-trace cap. The move is the delivery's packed bytes filed after
// the publisher's pending ones (framed blocks, as they are), so the analysis reads the same spans in any
// arrival order.
func (a *Engine) joinDeliveries(j traceJoin, capT int, now int64) {
	d := a.traces[j.from]
	if d == nil || d.id != j.from || d.inFlight || d.out > 0 || d.dropped > 0 || d.res != nil && d.res.released {
		return // gone, already filed with another, or its spans are not all here
	}
	p := a.traces[j.to]
	if p == d {
		return
	}
	moving := d.npending + d.held
	if capT > 0 && p != nil && p.npending+p.held+p.out+moving > capT {
		return
	}
	if p == nil {
		p = &traceState{id: j.to, bare: true}
		a.traces[j.to] = p
		a.held.pushBack(p)
	}
	traces := 1 + len(d.joined) // the input's trace ids moving to p
	if d.res != nil {
		// Counted as a trace of its own: taken back, to be counted with p's analysis.
		a.contribute(d.res, d.id, d.resSpans, d.meta.dataIssues(), -1)
		a.inTraces -= traces - d.uncounted
		if a.hasWindow {
			_, _ = a.win.observe(d, winOps{}, false) // no operations: no chunk, no error
		}
		a.version++
	}
	// p may stay pending long after d's slab neighbours have gone: d's carved buffers move as
	// buffers of their own.
	a.uncarve(d)
	for _, b := range append([][]byte{d.packed, d.pending}, d.later()...) {
		if moved := p.addPending(b, false); moved != nil {
			a.letGo(moved)
		}
	}
	p.npending += moving
	p.uncounted += traces
	p.joined = append(append(p.joined, d.id), d.joined...)
	for _, id := range p.joined[len(p.joined)-traces:] {
		a.traces[id] = p
	}
	if d.inPending.linked {
		a.pending.remove(d)
	}
	a.held.remove(d)
	*d = traceState{id: d.id, gone: true}
	a.touch(p, max(now, p.lastSeen))
}
