package spans

import (
	"errors"
	"fmt"

	"github.com/VictoriaMetrics/easyproto"
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
// The rules are DecodeProto's (one span decoder, spanFields, serves both); the spans whose ids
// make them rejects are decoded too, last, so that a request is refused for what it holds
// whichever of its spans holds it, as DecodeProto refuses it.

// spanRef is a span's place in the request, found by the first pass.
type spanRef struct {
	data  []byte
	scope string
	res   int32    // the ResourceSpans' index, into protoPacked.res
	at    [3]int32 // resource_spans, scope_spans and spans index, to name the span in errors
	trace TraceID
	keep  bool // the ids are valid (see spanIDs)
}

// protoPacked is a batch's memory for decoding straight into the packed form, kept from request
// to request with the batch.
type protoPacked struct {
	refs []spanRef
	res  []Resource
	sp   Span
}

func decodeProtoPacked(b *Batch, buf []byte, opt DecodeOptions, reuse bool) error {
	if reuse {
		b.recycle()
	}
	bp := b.packer()
	pp := &bp.proto
	d := protoDecoder{opt: opt, b: b}
	d.attrs.initIn(b.attrBuf, 256)
	err := d.structure(pp, buf)
	if err == nil {
		err = d.packTraces(bp, pp)
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
	clear(pp.refs) // no string of the request kept
	pp.refs = pp.refs[:0]
	clear(pp.res)
	pp.res = pp.res[:0]
	pp.sp = Span{}
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
			return eachMessage(ss, fSSSpans, "spans", func(sp []byte) error {
				at[2]++
				trace, keep, err := firstTraceID(sp)
				if err != nil {
					return err
				}
				pp.refs = append(pp.refs, spanRef{data: sp, scope: scope, res: k, at: at, trace: trace, keep: keep})
				return nil
			})
		})
	})
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
	var fc easyproto.FieldContext
	var err error
	for len(src) > 0 {
		// One-byte tags with one-byte lengths, nearly every field, without a call (see spanFields).
		if t := src[0]; t < 0x80 && len(src) >= 2 && t&7 == 2 && src[1] < 0x80 && 2+int(src[1]) <= len(src) {
			n := 2 + int(src[1])
			switch t >> 3 {
			case fSpanTraceID:
				trace = src[2:n]
			case fSpanSpanID:
				span = src[2:n]
			}
			src = src[n:]
			continue
		}
		if next, ferr := fc.NextField(src); ferr == nil {
			src = next
		} else if src, err = skipGroup(&fc, src, ferr); err != nil {
			return TraceID{}, false, err
		}
		if data, ok := fc.MessageData(); ok {
			switch fc.FieldNum {
			case fSpanTraceID:
				trace = data
			case fSpanSpanID:
				span = data
			}
		}
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

// packTraces is the second pass: the kept spans packed trace by trace into b.Packed, then the
// rejects decoded and counted.
func (d *protoDecoder) packTraces(bp *batchPacker, pp *protoPacked) error {
	refs := pp.refs
	traces, idx, ends := bp.group(len(refs), func(i int) (TraceID, bool) { return refs[i].trace, refs[i].keep })
	// What the spans decode into is given back before the next one: the slabs from the marks
	// taken after the resources. Not the arena of rendered values: the packer knows a string it
	// wrote by its address, so a string's bytes must stay as they are until the block is done.
	attrMark, xMark := d.attrs.mark(), d.xattrs.mark()
	sp := &pp.sp
	decode := func(r *spanRef) error {
		d.attrs.rollback(attrMark)
		attrMark = d.attrs.mark() // a slab that moved is given back from where it is now
		d.xattrs.rollback(xMark)
		xMark = d.xattrs.mark()
		d.links, d.events = d.links[:0], d.events[:0]
		*sp = Span{}
		ok, err := d.spanFields(sp, r.data)
		if err != nil {
			return fmt.Errorf("resource_spans[%d]: scope_spans[%d]: spans[%d]: %w", r.at[0], r.at[1], r.at[2], err)
		}
		if ok != r.keep || ok && sp.TraceID != r.trace {
			return errRegroup
		}
		sp.Scope, sp.Resource = r.scope, &pp.res[r.res]
		return nil
	}
	err := bp.packGroups(traces, idx, ends, func(i int32) (*Span, error) { return sp, decode(&refs[i]) })
	if err != nil {
		return err
	}
	for i := range refs {
		if refs[i].keep {
			continue
		}
		if err := decode(&refs[i]); err != nil {
			return err
		}
		d.b.Rejected++
		d.b.RejectReason = RejectInvalidID
	}
	d.b.Packed = traces
	return nil
}
