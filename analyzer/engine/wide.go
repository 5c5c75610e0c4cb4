package engine

import (
	"slices"

	"github.com/stormwatch/stormwatch/spans"
)

// Indexes that keep inference linear where one span has very many children or one service very
// many calls (see wideIndex).

// wideIndex holds the per-trace indexes that keep inference linear in a trace's spans where one
// span has many children (a CLIENT span with a hundred thousand SERVER children: a Zipkin shared
// span, a proxy that resends, a hostile batch) or one service many calls: each question that a
// scan of the siblings, the calls or the tries would answer is answered from an index made once
// per trace. Part of the scratch; begin resets it for each trace.
type wideIndex struct {
	// nested marks the SERVER spans that lie inside an earlier SERVER sibling of the same
	// process (see markNested).
	nested []bool
	ends   map[process]int64
	// lastBelow is each span's last CLIENT span below it (see trace.lastCall), made on the first
	// question.
	lastBelow []int32
	lastReady bool
	// origins is, per callee service, the origin of its first CLIENT call (see clientOrigin),
	// made on the first question.
	origins      map[string]string
	originsReady bool
	// tryOp is, per try span of an application loop, the loop's operation (see loopOf).
	tryOp map[int32]int32
	// next and names chain the siblings of one name (see nextSameName).
	next  []int32
	names map[string]int32
}

// process is one service instance: the spans of one process share a clock.
type process struct{ service, instance string }

// wideMapKeep is the largest map the index keeps from one trace to the next: clearing a map costs
// its capacity, so one wide trace must not leave every later trace clearing a big one.
const wideMapKeep = 64

// begin resets the index for a trace of n spans.
func (w *wideIndex) begin(n int) {
	w.nested = slices.Grow(w.nested[:0], n)[:n]
	clear(w.nested)
	w.lastReady, w.originsReady = false, false
	w.ends = resetMap(w.ends)
	w.origins = resetMap(w.origins)
	w.tryOp = resetMap(w.tryOp)
	w.names = resetMap(w.names)
}

// release drops the arrays grown past maxScratch (see scratch.reset).
func (w *wideIndex) release() {
	if cap(w.nested) > maxScratch {
		w.nested = nil
	}
	if cap(w.lastBelow) > maxScratch {
		w.lastBelow = nil
	}
	if cap(w.next) > maxScratch {
		w.next = nil
	}
}

// resetMap empties m, or drops it when it grew past wideMapKeep.
func resetMap[K comparable, V any](m map[K]V) map[K]V {
	if len(m) > wideMapKeep {
		return nil
	}
	clear(m)
	return m
}

// indexWide resets the trace's wide index and marks its nested SERVER spans. Inference calls it
// first, before it reads the calls.
func (t *trace) indexWide(sc *scratch) {
	sc.wide.begin(len(t.Spans))
	for i := range t.Spans {
		if t.Spans[i].Kind == spans.KindClient {
			t.markNested(int32(i), &sc.wide)
		}
	}
}

// markNested marks each SERVER span under CLIENT span i that lies inside an earlier SERVER sibling
// of the same service and instance: two server instrumentations of one process (a framework's span
// and the HTTP server's) both reading the incoming traceparent, one request, not a resend.
// Resends to one instance follow each other. Siblings are by start, so an earlier sibling of the
// same process holds span s exactly when s ends by the latest end among them: one pass with the
// latest end per process, not a scan of the earlier siblings for each.
func (t *trace) markNested(i int32, w *wideIndex) {
	ch := t.Children(int(i))
	servers := t.countKind(ch, spans.KindServer)
	if servers < 2 {
		return
	}
	if servers <= 8 { // a few: pairwise, without a map
		for k, s := range ch {
			x := &t.Spans[s]
			if x.Kind != spans.KindServer {
				continue
			}
			for _, e := range ch[:k] {
				y := &t.Spans[e]
				if y.Kind == spans.KindServer && y.Service() == x.Service() && y.Instance() == x.Instance() &&
					x.EndUnixNano <= t.End(int(e)) {
					w.nested[s] = true
					break
				}
			}
		}
		return
	}
	if w.ends == nil {
		w.ends = map[process]int64{}
	}
	for _, s := range ch {
		x := &t.Spans[s]
		if x.Kind != spans.KindServer {
			continue
		}
		p := process{x.Service(), x.Instance()}
		if end, ok := w.ends[p]; ok && x.EndUnixNano <= end {
			w.nested[s] = true
		}
		if end, ok := w.ends[p]; !ok || t.End(int(s)) > end {
			w.ends[p] = t.End(int(s))
		}
	}
	clear(w.ends)
}

// clientOrigin is the origin of the first CLIENT call (in the trace's calls) whose callee is
// service, "" when there is none.
func (t *trace) clientOrigin(service string, sc *scratch) string {
	w := &sc.wide
	if !w.originsReady {
		if w.origins == nil {
			w.origins = map[string]string{}
		}
		for j := range t.calls {
			c := &t.calls[j]
			if t.Spans[c.idx].Kind != spans.KindClient {
				continue
			}
			if _, ok := w.origins[c.service]; !ok {
				w.origins[c.service] = c.origin
			}
		}
		w.originsReady = true
	}
	return w.origins[service]
}

// addTry records span as a try of the application loop whose operation is op.
func (w *wideIndex) addTry(span, op int32) {
	if w.tryOp == nil {
		w.tryOp = map[int32]int32{}
	}
	w.tryOp[span] = op
}

// nextSameName is, for each of the siblings ch, the index in ch of the next one of the same span
// name, -1 for none.
func (w *wideIndex) nextSameName(t *trace, ch []int32) []int32 {
	next := slices.Grow(w.next[:0], len(ch))[:len(ch)]
	w.next = next
	if w.names == nil {
		w.names = map[string]int32{}
	}
	for k := len(ch) - 1; k >= 0; k-- {
		name := t.Spans[ch[k]].Name
		if n, ok := w.names[name]; ok {
			next[k] = n
		} else {
			next[k] = -1
		}
		w.names[name] = int32(k)
	}
	w.names = resetMap(w.names)
	return next
}

// originServices maps origins to the service first seen answering there. A trace calls few
// origins, so a slice; past a few, a map, so that a trace calling thousands costs no square.
type originServices struct {
	few  [][2]string
	many map[string]string
}

// add maps origin to service unless origin is mapped already.
func (o *originServices) add(origin, service string) {
	if o.many != nil {
		if _, ok := o.many[origin]; !ok {
			o.many[origin] = service
		}
		return
	}
	if slices.ContainsFunc(o.few, func(p [2]string) bool { return p[0] == origin }) {
		return
	}
	o.few = append(o.few, [2]string{origin, service})
	if len(o.few) > 16 {
		o.many = make(map[string]string, 2*len(o.few))
		for _, p := range o.few {
			o.many[p[0]] = p[1]
		}
	}
}

// get is the service mapped to origin, "" for none.
func (o *originServices) get(origin string) string {
	if o.many != nil {
		return o.many[origin]
	}
	for _, p := range o.few {
		if p[0] == origin {
			return p[1]
		}
	}
	return ""
}

// reset empties the map, keeping the slice's array.
func (o *originServices) reset() {
	clear(o.few)
	o.few, o.many = o.few[:0], nil
}
