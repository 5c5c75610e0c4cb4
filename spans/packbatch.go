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

func (f *spanFacts) add(s *Span) {
	if s.StartUnixNano <= 0 || s.EndUnixNano <= 0 {
		f.unset++
	} else {
		f.latest = max(f.latest, s.StartUnixNano, s.EndUnixNano)
	}
	if s.Kind == KindConsumer && len(s.Links) == 1 && s.ParentID.IsZero() {
		f.rootLinks++
	}
}

// batchPacker is a batch's memory for packing its spans by trace, kept from request to request
// with the batch (see recycle).
type batchPacker struct {
	p      packer
	buf    []byte
	traces []PackedTrace
	// slot is each trace's index in traces; idx the spans' indexes grouped by trace.
	slot  map[TraceID]int32
	idx   []int32
	count []int32
}

// maxPackerKeep bounds what a batch keeps of its packing memory for the next request: one huge
// request does not leave its buffers behind.
const maxPackerKeep = 4 << 20

// Pack packs b's spans by trace into b.Packed: one block a trace, the traces in the order each
// first appears in b.Spans, each trace's spans in the order they came. b.Spans stays as it is.
// Producers call it (the decoders with DecodeOptions.PackByTrace) so that a consumer that holds
// spans packed (the analyzer) takes each trace's block as it is, on the producer's goroutine's
// time, instead of regrouping and packing the batch itself.
func (b *Batch) Pack() {
	bp := b.pk
	if bp == nil {
		bp = &batchPacker{slot: make(map[TraceID]int32)}
		b.pk = bp
	}
	ss := b.Spans
	b.Packed = bp.traces[:0]
	if len(ss) == 0 {
		return
	}
	// The traces in order of first appearance, with their counts; grouped stays true while each
	// trace's spans are one run, the usual case outside the collector, packed without an index.
	clear(bp.slot)
	count := bp.count[:0]
	traces := b.Packed
	grouped := true
	last := int32(-1)
	var lastID TraceID
	for i := range ss {
		id := ss[i].TraceID
		if last < 0 || id != lastID {
			k, seen := bp.slot[id]
			if !seen {
				k = int32(len(traces))
				bp.slot[id] = k
				traces = append(traces, PackedTrace{ID: id})
				count = append(count, 0)
			} else {
				grouped = false
			}
			last, lastID = k, id
		}
		count[last]++
	}
	var idx []int32
	if !grouped {
		// A counting sort of the spans' indexes by trace, stable.
		at := int32(0)
		for k, c := range count {
			count[k] = at
			at += c
		}
		idx = slices.Grow(bp.idx[:0], len(ss))[:len(ss)]
		last = -1
		for i := range ss {
			id := ss[i].TraceID
			if last < 0 || id != lastID {
				last, lastID = bp.slot[id], id
			}
			idx[count[last]] = int32(i)
			count[last]++
		}
		bp.idx = idx
	}
	buf := bp.buf[:0]
	from := 0
	for k := range traces {
		t := &traces[k]
		at := len(buf)
		var f spanFacts
		if grouped {
			n := int(count[k])
			f = bp.p.pack(buf, ss[from:from+n], nil)
			t.Spans = n
			from += n
		} else {
			end := int(count[k]) // the counting sort left each trace's end here
			f = bp.p.pack(buf, ss, idx[from:end])
			t.Spans = end - from
			from = end
		}
		buf = bp.p.buf
		t.Block = buf[at:len(buf):len(buf)]
		t.UnsetTimes, t.Latest, t.RootLinks = f.unset, f.latest, f.rootLinks
	}
	bp.p.forget()
	bp.buf, bp.count, bp.traces = buf, count, traces
	b.Packed = traces
}

// resetPacked lets go of b's packed traces for the next request, keeping the memory unless it
// grew past maxPackerKeep.
func (b *Batch) resetPacked() {
	b.Packed = nil
	if bp := b.pk; bp != nil && (cap(bp.buf) > maxPackerKeep || cap(bp.idx) > maxPackerKeep/4) {
		b.pk = nil
	}
}
