package spans

// attrSlab hands out sub-slices of few large arrays, so that a request's attributes cost a few
// allocations however many spans hold them. When an array fills up the slab moves to a bigger one,
// carrying along only the run in progress; runs already handed out stay where they are.
type attrSlab struct {
	buf   []Attr
	start int // where the run in progress begins
	gen   int // counts moves, so that a rollback never crosses one
	// used and allocated drive compact.
	used, allocated int
}

type slabMark struct{ n, gen int }

func (a *attrSlab) init(capacity int) {
	a.buf = make([]Attr, 0, capacity)
	a.allocated = capacity
}

// initIn starts the slab in buf's array when it has room for capacity (a recycled batch's: add
// writes every field of every slot, so what it held does not matter), else in a new one.
func (a *attrSlab) initIn(buf []Attr, capacity int) {
	if cap(buf) < capacity {
		a.init(capacity)
		return
	}
	a.buf, a.allocated = buf[:0], cap(buf)
}

// begin starts a run: the attributes of one resource, span, event or link.
func (a *attrSlab) begin() { a.start = len(a.buf) }

func (a *attrSlab) add(x Attr) {
	if len(a.buf) == cap(a.buf) {
		// Half the current size more: the estimate was short, probably not by much.
		n := max(cap(a.buf)/2, 64, 2*(len(a.buf)-a.start))
		nb := make([]Attr, 0, n)
		a.buf = append(nb, a.buf[a.start:]...)
		a.start = 0
		a.gen++
		a.allocated += n
	}
	// Field by field into the slot, not append(a.buf, x): copying the whole struct into the heap
	// while the garbage collector marks goes through its bulk write barrier (wbMove), which costs
	// more than the two pointer stores' own barriers.
	n := len(a.buf)
	a.buf = a.buf[:n+1]
	p := &a.buf[n]
	p.Key, p.Str, p.Num, p.Type = x.Key, x.Str, x.Num, x.Type
	a.used++
}

// end returns the run, capped so that an append by a consumer cannot overwrite a neighbour, or nil
// when it is empty.
func (a *attrSlab) end() []Attr {
	if len(a.buf) == a.start {
		return nil
	}
	return a.buf[a.start:len(a.buf):len(a.buf)]
}

func (a *attrSlab) mark() slabMark { return slabMark{n: len(a.buf), gen: a.gen} }

// rollback gives back what was added since m (a rejected span's attributes), unless the slab has
// moved since: then the space is simply not reused.
func (a *attrSlab) rollback(m slabMark) {
	if m.gen == a.gen && m.n <= len(a.buf) {
		a.used -= len(a.buf) - m.n
		a.buf = a.buf[:m.n]
		if a.start > m.n {
			a.start = m.n
		}
	}
}

// compact moves the resource and span attributes of spans into one exact-size array when the slab
// holds much more than it uses (the estimate was high, or many attributes were dropped): held
// spans would otherwise keep the slack alive.
func (a *attrSlab) compact(spans []Span) {
	if a.allocated-a.used <= a.used/4+32 {
		return
	}
	exact := make([]Attr, 0, a.used)
	take := func(run []Attr) []Attr {
		if len(run) == 0 {
			return run
		}
		n := len(exact)
		exact = append(exact, run...)
		return exact[n:len(exact):len(exact)]
	}
	var last *Resource
	for i := range spans {
		s := &spans[i]
		if r := s.Resource; r != nil && r != last {
			r.Attrs = take(r.Attrs)
			last = r
		}
		s.Attrs = take(s.Attrs)
	}
	a.buf, a.allocated = exact, a.used
}

// finishDecode is both decoders' last step, failed or not. A batch decoded into again keeps its
// arrays for the next request, as far as this one filled them (recycle clears that much); a fresh
// one gets them trimmed to what the request used, since its spans may be held as they are.
func finishDecode(b *Batch, a *attrSlab, reuse bool) {
	if reuse {
		b.attrBuf, b.decoded = a.buf[:0], b.Spans
		return
	}
	b.Spans = trimSpans(b.Spans)
	a.compact(b.Spans)
}

// trimSpans returns spans in an exact-size array when the estimate that sized it overshot by much
// (OTLP/JSON counts link ids too; rejected spans leave gaps): held spans keep the whole array alive.
func trimSpans(spans []Span) []Span {
	if len(spans) == 0 {
		return nil
	}
	if cap(spans)-len(spans) > len(spans)/4+4 {
		return append(make([]Span, 0, len(spans)), spans...)
	}
	return spans[:len(spans):len(spans)]
}
