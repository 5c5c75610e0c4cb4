package spans

import (
	"errors"
	"fmt"
	"unsafe"
)

// The protobuf decoder with PackByTrace packs straight from the wire: no batch of span values is
// made. A request's spans come interleaved across traces, and a trace's block is written whole,
// so the decoder reads the request in two passes:
//
//  1. the structure: each ResourceSpans' resource (decoded, a value of its own), each
//     ScopeSpans' scope name, and each span's place in the body and trace id, read from the
//     span's top-level fields only (the walk the counting pass of DecodeProto makes anyway);
//  2. the spans, trace by trace (in the order each trace first appears, each trace's spans in
//     the order they came, as Batch.Pack groups them): each decoded into one span value, used
//     again for the next, and packed at once.
//
// The rules are DecodeProto's (one span decoder, spanFields, serves both). A span whose ids make
// it a reject is decoded where the first pass finds it, and counted, so that a request is refused
// for what it holds whichever of its spans holds it, as DecodeProto refuses it; only the spans to
// keep are remembered for the second pass, in 44 bytes without a pointer each (a span to keep
// takes at least 20 bytes of the request: a hostile body of tiny spans cannot make the decoder
// hold more than a few times its own size).

// spanRef is a span to keep's place in the request, found by the first pass.
type spanRef struct {
	off, n uint32   // the Span message's bytes in the request
	scope  int32    // its ScopeSpans' scope name, in protoPacked.scopes
	res    int32    // its ResourceSpans' resource, in protoPacked.res
	at     [3]int32 // resource_spans, scope_spans and spans index, to name the span in errors
	trace  TraceID
}

// protoPacked is a batch's memory for decoding straight into the packed form, kept from request
// to request with the batch, and emptied after each (reset): nothing of a request outlives it.
type protoPacked struct {
	refs   []spanRef
	scopes []string
	res    []Resource
	sp     Span
}

// reset empties pp, letting go of every string of the request it held.
func (pp *protoPacked) reset() {
	pp.refs = pp.refs[:0]
	clear(pp.scopes)
	pp.scopes = pp.scopes[:0]
	clear(pp.res)
	pp.res = pp.res[:0]
	pp.sp = Span{}
}

func decodeProtoPacked(b *Batch, buf []byte, opt DecodeOptions, reuse bool) error {
	if reuse {
		b.recycle()
	}
	if b.pk == nil {
		b.pk = &Packing{}
	}
	bp := &b.pk.bp
	pp := &bp.proto
	defer pp.reset() // on every way out: the next request must find nothing of this one
	d := protoDecoder{opt: opt, b: b}
	d.attrs.initIn(b.attrBuf, 256)
	err := d.structure(pp, buf)
	if err == nil {
		err = d.packTraces(bp, pp, buf)
	}
	if errors.Is(err, errRegroup) {
		// Decoded as DecodeProto does, then packed from the span values.
		b.Packed, b.Rejected, b.RejectReason = nil, 0, ""
		err = decodeProto(b, buf, DecodeOptions{AllAttributes: opt.AllAttributes}, reuse)
		if err == nil {
			b.Pack()
			b.Spans = nil
		}
		return err
	}
	if reuse {
		b.attrBuf = d.attrs.buf[:0]
	}
	if err != nil {
		b.Packed = nil
		return malformed("decode OTLP protobuf request", err)
	}
	return nil
}

// structure is the first pass: the resources, the scopes and each span's place and trace.
func (d *protoDecoder) structure(pp *protoPacked, buf []byte) error {
	var at [3]int32
	at[0] = -1
	return eachMessage(buf, fReqResourceSpans, "resource_spans", func(rs []byte) error {
		at[0]++
		at[1] = -1
		k := int32(len(pp.res))
		pp.res = append(pp.res, Resource{})
		if err := d.resourceOf(&pp.res[k], rs); err != nil {
			return err
		}
		return eachMessage(rs, fRSScopeSpans, "scope_spans", func(ss []byte) error {
			at[1]++
			at[2] = -1
			scope, err := scopeOf(ss)
			if err != nil {
				return err
			}
			sc := int32(len(pp.scopes))
			pp.scopes = append(pp.scopes, scope)
			return eachMessage(ss, fSSSpans, "spans", func(sp []byte) error {
				at[2]++
				trace, keep, err := firstTraceID(sp)
				if err != nil {
					return err
				}
				r := spanRef{off: offsetIn(buf, sp), n: uint32(len(sp)), scope: sc, res: k, at: at, trace: trace}
				if !keep {
					return d.rejectRef(pp, buf, &r)
				}
				pp.refs = append(pp.refs, r)
				return nil
			})
		})
	})
}

// spanOf decodes the span r names into pp.sp, giving back what the span before it used of the
// decoder's slabs (from the marks; a slab that moved is given back from where it is now), and
// says whether its ids make it a span to keep. Not the arena of rendered values: the packer knows
// a string it wrote by its address, so a string's bytes must stay as they are until the request
// is packed.
func (d *protoDecoder) spanOf(pp *protoPacked, buf []byte, r *spanRef, attrMark, xMark *slabMark) (bool, error) {
	d.attrs.rollback(*attrMark)
	*attrMark = d.attrs.mark()
	d.xattrs.rollback(*xMark)
	*xMark = d.xattrs.mark()
	d.links, d.events = d.links[:0], d.events[:0]
	sp := &pp.sp
	*sp = Span{}
	ok, err := d.spanFields(sp, buf[r.off:r.off+r.n])
	if err != nil {
		return false, fmt.Errorf("resource_spans[%d]: scope_spans[%d]: spans[%d]: %w", r.at[0], r.at[1], r.at[2], err)
	}
	sp.Scope, sp.Resource = pp.scopes[r.scope], &pp.res[r.res]
	return ok, nil
}

// offsetIn is where sub, a part of buf (the walk slices the request, it copies nothing), begins
// in it.
func offsetIn(buf, sub []byte) uint32 {
	if len(sub) == 0 {
		return 0 // an empty message: no bytes to find, none to read
	}
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(sub))) - uintptr(unsafe.Pointer(unsafe.SliceData(buf))))
}

// rejectRef decodes a span the first pass found a reject and counts it; one that turns out a span
// to keep (a valid trace id after a zero one) is errRegroup.
func (d *protoDecoder) rejectRef(pp *protoPacked, buf []byte, r *spanRef) error {
	attrMark, xMark := d.attrs.mark(), d.xattrs.mark()
	ok, err := d.spanOf(pp, buf, r, &attrMark, &xMark)
	d.attrs.rollback(attrMark)
	d.xattrs.rollback(xMark)
	d.links, d.events = d.links[:0], d.events[:0]
	switch {
	case err != nil:
		return err
	case ok:
		return errRegroup
	}
	d.b.Rejected++
	d.b.RejectReason = RejectInvalidID
	return nil
}

// firstTraceID is spanIDs for a span whose first field is its 16-byte trace id, as every SDK
// writes it, read from those bytes alone: the second pass checks what the whole span says (a
// later occurrence wins, and the span id counts too) and falls back to decoding the request
// into span values when it says otherwise (see errRegroup).
func firstTraceID(src []byte) (TraceID, bool, error) {
	var id TraceID
	if len(src) >= 2+len(id) && src[0] == fSpanTraceID<<3|2 && src[1] == byte(len(id)) {
		copy(id[:], src[2:])
		return id, !id.IsZero(), nil
	}
	return spanIDs(src)
}

// errRegroup is the second pass finding a span whose trace or validity the first pass read
// wrong from its first field alone (only a span that repeats its ids, or one whose span id is
// invalid, can make it): the request is decoded into span values and packed from them.
var errRegroup = errors.New("a span's ids are not what its first field said")

// spanIDs reads the trace id of Span message src from its top-level fields, and whether its ids
// make it a span to keep, by spanFields' rules (the last occurrence of a field wins).
func spanIDs(src []byte) (TraceID, bool, error) {
	var trace, span []byte
	fc := protoFields{src: src}
	for fc.next() {
		switch {
		case fc.num == fSpanTraceID && fc.typ == 2:
			trace = fc.data
		case fc.num == fSpanSpanID && fc.typ == 2:
			span = fc.data
		}
	}
	if fc.err != nil {
		return TraceID{}, false, fc.err
	}
	var id TraceID
	var sid SpanID
	if len(trace) != len(id) || len(span) != len(sid) {
		return id, false, nil
	}
	copy(id[:], trace)
	copy(sid[:], span)
	return id, !id.IsZero() && !sid.IsZero(), nil
}

// packTraces is the second pass: the spans to keep packed trace by trace into b.Packed.
func (d *protoDecoder) packTraces(bp *batchPacker, pp *protoPacked, buf []byte) error {
	refs := pp.refs
	traces, idx, ends := bp.group(len(refs), func(i int) TraceID { return refs[i].trace })
	attrMark, xMark := d.attrs.mark(), d.xattrs.mark()
	err := bp.packGroups(traces, idx, ends, func(i int32) (*Span, error) {
		ok, err := d.spanOf(pp, buf, &refs[i], &attrMark, &xMark)
		if err == nil && (!ok || pp.sp.TraceID != refs[i].trace) {
			err = errRegroup
		}
		return &pp.sp, err
	})
	if err != nil {
		return err
	}
	d.b.Packed = traces
	return nil
}
