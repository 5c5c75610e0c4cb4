package spans

import "slices"

// PackedTrace is one trace's spans of a batch packed as one block (the form [AppendPacked]
// writes), with what the analyzer checks of every span as it files them, gathered while packing so
// that it need not read the block back for it.
type PackedTrace struct {
	ID TraceID
	// Block is the packed spans, in the batch's memory: valid until the batch is released.
	Block []byte
	Spans int
	// UnsetTimes counts the spans whose start or end is unset (0 or less).
	UnsetTimes int
	// Latest is the latest start or end of the other spans (0 when there are none).
	Latest int64
	// RootLinks counts the CONSUMER spans without a parent and with one link: deliveries that may
	// belong with the trace of the message they consumed.
	RootLinks int
}

// spanFacts is a PackedTrace's checks, added up span by span.
type spanFacts struct {
	unset, rootLinks int
	latest           int64
}

// add adds a span's checks: its start and end, and whether it is a CONSUMER span without a parent
// and with one link.
func (f *spanFacts) add(start, end int64, rootLink bool) {
	if start <= 0 || end <= 0 {
		f.unset++
	} else {
		f.latest = max(f.latest, start, end)
	}
	if rootLink {
		f.rootLinks++
	}
}

// Len is the number of spans in b: in Packed when the producer packed them, else in Spans.
func (b *Batch) Len() int {
	if b.Packed == nil {
		return len(b.Spans)
	}
	n := 0
	for i := range b.Packed {
		n += b.Packed[i].Spans
	}
	return n
}

// batchPacker is a batch's memory for packing its spans by trace, kept from request to request
// with the batch (see recycle).
type batchPacker struct {
	p      packer
	buf    []byte
	traces []PackedTrace
	// slot is each trace's index in traces; idx the spans' indexes grouped by trace, ends where
	// each trace's end in idx (see group).
	slot  map[TraceID]int32
	idx   []int32
	ends  []int32
	slots []int32
	proto protoPacked
}

// maxPackerKeep bounds what a batch keeps of its packing memory for the next request: one huge
// request does not leave its buffers behind.
const maxPackerKeep = 4 << 20

// Packing is memory for packing spans by trace, kept from one batch to the next: what Batch.Pack
// does, for a consumer that packs batch after batch itself (the analyzer, given a batch its
// producer did not pack), or a producer that makes each span only when its turn to be packed
// comes (the Collector connector, from pdata). The zero value is ready to use; it is not safe for
// concurrent use.
type Packing struct{ bp batchPacker }

// Pack packs ss by trace as Batch.Pack does. The traces and their blocks live in p until its
// next Pack; p keeps nothing of ss.
func (p *Packing) Pack(ss []Span) []PackedTrace {
	return p.PackFrom(len(ss), func(i int) TraceID { return ss[i].TraceID }, func(i int) *Span { return &ss[i] })
}

// PackFrom packs n spans by trace as Pack does: id(i) is the i-th span's trace id, and span(i)
// makes the span, when its turn comes - trace by trace, each trace's spans in order - so that a
// producer can make each span in the memory of the one before, and no batch of span values is
// made. The packer copies the span's fields at once, but knows a string it wrote by the address
// of its bytes and a resource by its pointer: the bytes of a span's strings and its Resource
// must stay as they are until PackFrom returns (a string rendered into a buffer reused span
// after span would be packed as the one rendered there before). The caller calls Trim once it is
// done with the traces.
func (p *Packing) PackFrom(n int, id func(int) TraceID, span func(int) *Span) []PackedTrace {
	traces, idx, ends := p.bp.group(n, id)
	_ = p.bp.packGroups(traces, idx, ends, func(i int32) error {
		p.bp.p.span(span(int(i)))
		return nil
	})
	return traces
}

// Trim lets go of p's memory if the last batch grew it past what is kept for the next one. Every
// user of a Packing calls it once done with a batch's traces (a Batch when it is recycled): a
// huge batch followed by no other would otherwise keep its memory for as long as p lives.
func (p *Packing) Trim() {
	if p.bp.oversized() {
		p.bp = batchPacker{}
	}
}

// Pack packs b's spans by trace into b.Packed: one block a trace, the traces in the order each
// first appears in b.Spans, each trace's spans in the order they came. b.Spans stays as it is; a
// producer that changes it afterwards packs again. Producers call it (the JSON decoder with
// DecodeOptions.PackByTrace) so that a consumer that holds spans packed (the analyzer) takes
// each trace's block as it is, on the producer's goroutine's time, instead of packing the batch
// itself.
func (b *Batch) Pack() {
	if b.pk == nil {
		b.pk = &Packing{}
	}
	b.Packed = b.pk.Pack(b.Spans)
}

// packGroups packs each trace of traces (see group) as one block, put packing each of its spans
// by index into bp.p, and stops at put's first error. The blocks go in bp's buffer, the packer
// keeps nothing of the spans after.
func (bp *batchPacker) packGroups(traces []PackedTrace, idx, ends []int32, put func(i int32) error) error {
	defer bp.p.forget()
	buf := bp.buf[:0]
	from := int32(0)
	for k := range traces {
		at := len(buf)
		bp.p.begin(buf)
		for _, i := range idx[from:ends[k]] {
			if err := put(i); err != nil {
				return err
			}
		}
		from = ends[k]
		buf = bp.endTrace(&traces[k], at)
	}
	bp.buf, bp.traces = buf, traces
	return nil
}

// group orders n spans by trace, as id tells each one's: the traces in the order each first
// appears, their ids set; idx the spans' indexes grouped by trace, in the order they came, trace
// k's idx[ends[k-1]:ends[k]]. A counting sort, stable: two passes over the ids and a map lookup a
// run of one trace's spans.
func (bp *batchPacker) group(n int, id func(int) TraceID) (traces []PackedTrace, idx, ends []int32) {
	if bp.slot == nil {
		bp.slot = make(map[TraceID]int32)
	}
	clear(bp.slot)
	traces, ends = bp.traces[:0], bp.ends[:0]
	slots := slices.Grow(bp.slots[:0], n)[:n] // each span's trace
	last := int32(-1)
	var lastID TraceID
	for i := range n {
		if tid := id(i); last < 0 || tid != lastID {
			k, seen := bp.slot[tid]
			if !seen {
				k = int32(len(traces))
				bp.slot[tid] = k
				traces = append(traces, PackedTrace{ID: tid})
				ends = append(ends, 0)
			}
			last, lastID = k, tid
		}
		slots[i] = last
		ends[last]++
	}
	at := int32(0)
	for k, c := range ends {
		ends[k] = at // the trace's start, until the spans are placed
		at += c
	}
	idx = slices.Grow(bp.idx[:0], n)[:n]
	for i, k := range slots {
		idx[ends[k]] = int32(i)
		ends[k]++
	}
	bp.slots, bp.idx, bp.ends = slots, idx, ends
	return traces, idx, ends
}

// endTrace finishes the trace the packer is writing into the block that begins at at, and fills
// in pt; it returns the buffer.
func (bp *batchPacker) endTrace(pt *PackedTrace, at int) []byte {
	bp.p.end()
	b := bp.p.buf
	pt.Block = b[at:len(b):len(b)]
	pt.Spans = bp.p.n
	pt.UnsetTimes, pt.Latest, pt.RootLinks = bp.p.facts.unset, bp.p.facts.latest, bp.p.facts.rootLinks
	return b
}

// resetPacked lets go of b's packed traces for the next request, keeping the memory unless it
// grew past maxPackerKeep.
func (b *Batch) resetPacked() {
	b.Packed = nil
	if b.pk != nil {
		b.pk.Trim()
	}
}

// oversized says bp grew past what is kept for the next request: one request of very many spans
// or traces leaves none of its memory behind, nor a map every later request would clear whole.
func (bp *batchPacker) oversized() bool {
	return cap(bp.buf) > maxPackerKeep || cap(bp.idx)+cap(bp.slots) > maxPackerKeep/4 ||
		cap(bp.proto.refs) > maxPackerKeep/64 ||
		cap(bp.traces) > maxPackerKeep/64 || len(bp.slot) > maxPackerKeep/64
}
