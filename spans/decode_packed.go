package spans

import (
	"encoding/binary"
	"errors"
	"unsafe"

	"github.com/stormwatch/stormwatch/internal/packio"
)

// The protobuf decoder with PackByTrace packs straight from the wire: no batch of span values is
// made. A request's spans come interleaved across traces, and a trace's block is written whole,
// so the decoder reads the request in two passes:
//
//  1. the structure: each ResourceSpans' resource (decoded, a value of its own), each
//     ScopeSpans' scope name, and each span's place in the body and trace id, read from its
//     first field (see firstTraceID);
//  2. the spans, trace by trace (in the order each trace first appears, each trace's spans in
//     the order they came, as Batch.Pack groups them): each written into its trace's block from
//     its wire bytes (packSpan), the bytes the packer would write of it decoded.
//
// The rules are DecodeProto's: the writer reads a span with DecodeProto's reader (wireSpan.read)
// and its attributes, links and events with DecodeProto's functions, and a request the passes
// cannot write (malformed, or a span's ids not what the first pass read) is decoded again as
// DecodeProto decodes it, for DecodeProto's error (the first fault in the request's order) or
// verdict (packedVerdict). A span whose ids make it a reject is decoded (decodeAside)
// where the first pass finds it, and counted, so that a request is refused
// for what it holds whichever of its spans holds it, as DecodeProto refuses it; only the spans to
// keep are remembered for the second pass, in 32 bytes without a pointer each (a span to keep
// takes at least 20 bytes of the request: a hostile body of tiny spans cannot make the decoder
// hold more than a few times its own size).

// spanRef is a span to keep's place in the request, found by the first pass.
type spanRef struct {
	off, n uint32 // the Span message's bytes in the request
	scope  int32  // its ScopeSpans' scope name, in protoPacked.scopes
	res    int32  // its ResourceSpans' resource, in protoPacked.res
	trace  TraceID
}

// protoPacked is a batch's memory for decoding straight into the packed form, kept from request
// to request with the batch, and emptied after each (reset): nothing of a request outlives it.
type protoPacked struct {
	refs   []spanRef
	scopes []string
	res    []Resource
}

// reset empties pp, letting go of every string of the request it held.
func (pp *protoPacked) reset() {
	pp.refs = pp.refs[:0]
	clear(pp.scopes)
	pp.scopes = pp.scopes[:0]
	clear(pp.res)
	pp.res = pp.res[:0]
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
	d := protoDecoder{opt: opt, b: b, places: *b.places.ready()}
	d.attrs.initIn(b.attrBuf, 256)
	err := d.structure(pp, buf)
	if err == nil {
		err = d.packTraces(bp, pp, buf)
	}
	b.places = d.places
	if reuse {
		b.attrBuf = d.attrs.buf[:0]
	}
	return packedVerdict(b, buf, opt, reuse, err)
}

// packedVerdict finishes decoding buf packed by trace into b, the two passes having ended with
// err. A request the passes refused is decoded again as DecodeProto decodes it, for DecodeProto's
// error: the second pass meets the spans trace by trace, not in the request's order, and reads a
// span in several walks, so the first fault it meets need not be the request's first. Bad input
// so costs a second decoding, which a sender of good requests never pays. errRegroup is decoded
// the same way, then packed from the span values.
func packedVerdict(b *Batch, buf []byte, opt DecodeOptions, reuse bool, err error) error {
	if err == nil {
		return nil
	}
	b.Packed, b.Rejected, b.RejectReason = nil, 0, ""
	derr := decodeProto(b, buf, DecodeOptions{AllAttributes: opt.AllAttributes}, reuse)
	switch {
	case errors.Is(err, errRegroup) && derr == nil:
		b.Pack()
	case derr == nil:
		// DecodeProto takes what the passes refused (the fuzz targets hold that it never
		// does): refused all the same, in the passes' words.
		derr = malformed("decode OTLP protobuf request", err)
	}
	b.Spans = nil
	return derr
}

// structure is the first pass: the resources, the scopes and each span's place and trace.
func (d *protoDecoder) structure(pp *protoPacked, buf []byte) error {
	return eachMessage(buf, fReqResourceSpans, "resource_spans", func(rs []byte) error {
		k := int32(len(pp.res))
		pp.res = append(pp.res, Resource{})
		if err := d.resourceOf(&pp.res[k], rs); err != nil {
			return err
		}
		return eachMessage(rs, fRSScopeSpans, "scope_spans", func(ss []byte) error {
			scope, err := scopeOf(ss)
			if err != nil {
				return err
			}
			sc := int32(len(pp.scopes))
			pp.scopes = append(pp.scopes, scope)
			return eachMessage(ss, fSSSpans, "spans", func(sp []byte) error {
				trace, keep, err := d.firstTraceID(sp)
				if err != nil {
					return err
				}
				r := spanRef{off: offsetIn(buf, sp), n: uint32(len(sp)), scope: sc, res: k, trace: trace}
				if !keep {
					return d.rejectRef(buf, &r)
				}
				pp.refs = append(pp.refs, r)
				return nil
			})
		})
	})
}

// offsetIn is where sub, a part of buf (the walk slices the request, it copies nothing), begins
// in it.
func offsetIn(buf, sub []byte) uint32 {
	if len(sub) == 0 {
		return 0 // an empty message: no bytes to find, none to read
	}
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(sub))) - uintptr(unsafe.Pointer(unsafe.SliceData(buf))))
}

// rejectRef checks a span the first pass found a reject and counts it; one that turns out a span
// to keep (a valid trace id after a zero one) is errRegroup.
func (d *protoDecoder) rejectRef(buf []byte, r *spanRef) error {
	_, ok, err := d.decodeAside(buf[r.off : r.off+r.n])
	switch {
	case err != nil:
		return err // found again in the request's words (packedVerdict)
	case ok:
		return errRegroup
	}
	d.b.Rejected++
	d.b.RejectReason = RejectInvalidID
	return nil
}

// decodeAside decodes Span message src as DecodeProto does, for its verdict alone - its error,
// its trace, and whether its ids make it a span to keep - giving back what it took of the slabs.
func (d *protoDecoder) decodeAside(src []byte) (TraceID, bool, error) {
	attrMark, xMark := d.attrs.mark(), d.xattrs.mark()
	links, events := len(d.links), len(d.events)
	var sp Span
	ok, err := d.spanFields(&sp, src)
	d.attrs.rollback(attrMark)
	d.xattrs.rollback(xMark)
	d.links, d.events = d.links[:links], d.events[:events]
	return sp.TraceID, ok, err
}

// firstTraceID is the trace id of Span message src and whether its ids make it a span to keep.
// For a span whose first field is its 16-byte trace id, as every SDK writes it, they are read
// from those bytes alone: the second pass checks what the whole span says (a later occurrence
// wins, and the span id counts too) and falls back to decoding the request into span values when
// it says otherwise (see errRegroup). Any other span has its own fields read (not its attributes,
// links or events: the second pass reads those as it writes them), which say its ids as
// DecodeProto reads them.
func (d *protoDecoder) firstTraceID(src []byte) (TraceID, bool, error) {
	var id TraceID
	if len(src) >= 2+len(id) && src[0] == fSpanTraceID<<3|2 && src[1] == byte(len(id)) {
		copy(id[:], src[2:])
		return id, !id.IsZero(), nil
	}
	var sp Span
	var h wireSpan
	pl := &d.places
	pl.kvs, pl.links, pl.events = pl.kvs[:0], pl.links[:0], pl.events[:0]
	if err := h.read(&sp, src, pl); err != nil {
		return id, false, err
	}
	if len(h.trace) != len(id) || len(h.span) != len(SpanID{}) {
		return id, false, nil
	}
	id = TraceID(h.trace)
	return id, !id.IsZero() && !SpanID(h.span).IsZero(), nil
}

// errRegroup is the second pass finding a span whose trace or validity the first pass read
// wrong from its first field alone (only a span that repeats its ids, or one whose span id is
// invalid, can make it): the request is decoded into span values and packed from them.
var errRegroup = errors.New("a span's ids are not what its first field said")

// packTraces is the second pass: the spans to keep packed trace by trace into b.Packed.
func (d *protoDecoder) packTraces(bp *batchPacker, pp *protoPacked, buf []byte) error {
	refs := pp.refs
	traces, idx, ends := bp.group(len(refs), func(i int) TraceID { return refs[i].trace })
	err := bp.packGroups(traces, idx, ends, func(i int32) error {
		r := &refs[i]
		src := buf[r.off : r.off+r.n]
		return d.packSpan(&bp.p, src, pp.scopes[r.scope], &pp.res[r.res], r.trace)
	})
	if err != nil {
		return err
	}
	d.b.Packed = traces
	return nil
}

// packSpan writes Span message src, of trace tid, straight from the wire into p, the bytes
// packer.span writes of the span DecodeProto makes of it: no span value's attributes, links or
// events are made, each attribute is decoded and written at once. The packed form has a span's
// attributes after its name, status and scope, which the wire may send after them (every SDK
// sends the status last), so a first walk reads the span's own fields and notes where its
// attributes are; the attributes, then the links and the events, are written after it. A span
// whose ids are not the ones its place was found by is errRegroup. An error may be a later fault
// in the span than DecodeProto's: the request is decoded again for DecodeProto's (see
// packedVerdict).
func (d *protoDecoder) packSpan(p *packer, src []byte, scope string, res *Resource, tid TraceID) error {
	var sp Span
	var h wireSpan
	pl := &d.places
	pl.kvs, pl.links, pl.events = pl.kvs[:0], pl.links[:0], pl.events[:0]
	if err := h.read(&sp, src, pl); err != nil {
		return err
	}
	if len(h.trace) != len(tid) || TraceID(h.trace) != tid || len(h.span) != len(sp.SpanID) {
		return errRegroup
	}
	if sp.SpanID = SpanID(h.span); sp.SpanID.IsZero() {
		return errRegroup
	}
	sp.TraceID, sp.Scope, sp.Resource = tid, scope, res
	b := p.head(p.buf, &sp)
	var state *Attr
	if h.state != nil {
		// After the attributes, as the decoders add it.
		state = &Attr{Key: AttrTraceState, Str: bstr(h.state), Type: ValueString}
	}
	b, err := d.packAttrList(p, b, src, pl.kvs, state)
	if err != nil {
		return err
	}
	at, links := len(b), 0
	b = append(b, 0)
	for _, place := range pl.links {
		var kept bool
		if b, kept, err = d.packLink(p, b, placed(src, place)); err != nil {
			return err
		}
		if kept {
			links++
		}
	}
	b = p.setCount(b, at, links)
	p.nLinks += links
	at = len(b)
	b = append(b, 0)
	for _, place := range pl.events {
		if b, err = d.packEvent(p, b, placed(src, place), sp.StartUnixNano); err != nil {
			return err
		}
	}
	b = p.setCount(b, at, len(pl.events))
	p.nEvents += len(pl.events)
	p.facts.add(sp.StartUnixNano, sp.EndUnixNano, sp.Kind == KindConsumer && links == 1 && sp.ParentID.IsZero())
	p.buf = b
	return nil
}

// packLink writes Link message src as the packer does, when its ids make it one to keep (as
// DecodeProto keeps it), and says whether they did.
func (d *protoDecoder) packLink(p *packer, b, src []byte) ([]byte, bool, error) {
	traceID, spanID, kvs, err := linkFields(src, d.places.xkvs[:0])
	if d.places.xkvs = kvs; err != nil {
		return b, false, err
	}
	if len(traceID) != len(TraceID{}) || len(spanID) != len(SpanID{}) {
		// Dropped with its attributes, which are read all the same: DecodeProto refuses a link
		// whose attribute is malformed or nests too deep.
		_, _, err := d.packAttrs(nil, nil, src, kvs)
		return b, false, err
	}
	b = append(append(b, traceID...), spanID...)
	b, err = d.packAttrList(p, b, src, kvs, nil)
	return b, true, err
}

// packEvent writes Event message src, of a span that started at start, as the packer does.
func (d *protoDecoder) packEvent(p *packer, b, src []byte, start int64) ([]byte, error) {
	t, name, kvs, err := eventFields(src, d.places.xkvs[:0])
	if d.places.xkvs = kvs; err != nil {
		return b, err
	}
	b = packio.AppendZZ(b, t-start)
	b = p.str(b, name)
	return d.packAttrList(p, b, src, kvs, nil)
}

// packAttrList writes the attributes of message src that kvs places (see wirePlaces), then
// extra when not nil, as the packer writes a list of them.
func (d *protoDecoder) packAttrList(p *packer, b, src []byte, kvs []uint64, extra *Attr) ([]byte, error) {
	at := len(b)
	b, n, err := d.packAttrs(p, append(b, 0), src, kvs)
	if err != nil {
		return b, err
	}
	if extra != nil {
		b = p.attr(b, extra)
		n++
	}
	p.nAttrs += n
	return p.setCount(b, at, n), nil
}

// packAttrs writes the attributes of message src that kvs places that DecodeProto keeps, and says
// how many; with p nil it only reads them, for their errors.
func (d *protoDecoder) packAttrs(p *packer, b, src []byte, kvs []uint64) ([]byte, int, error) {
	n := 0
	for _, place := range kvs {
		key, val, err := keyValue(placed(src, place))
		if err != nil {
			return b, n, err
		}
		if p != nil && len(val) >= 2 {
			// What nearly every attribute is - a well-known key and a short string or an int,
			// or a string dropped - written here as packer.attr writes it, without the Attr.
			str := val[0] == fAnyString<<3|2 && val[1] < 0x80 && 2+int(val[1]) == len(val)
			iv, size := uint64(0), 0
			if val[0] == fAnyInt<<3 {
				iv, size = binary.Uvarint(val[1:])
			}
			if str || (size > 0 && 1+size == len(val)) {
				e, code := internLookup(key), byte(0)
				if e != nil {
					code = e.code
				}
				switch {
				case e == nil && str && !d.opt.AllAttributes:
					continue // dropped (see dropped)
				case code == 0:
				case str && len(val) == 2:
					b = append(b, code, byte(ValueString))
					n++
					continue
				case str:
					b = p.str(append(b, code, tagStr|byte(ValueString)), bstr(val[2:]))
					n++
					continue
				case iv == 0:
					b = append(b, code, byte(ValueInt))
					n++
					continue
				default:
					b = packio.AppendZZ(append(b, code, tagNum|byte(ValueInt)), int64(iv))
					n++
					continue
				}
			}
		}
		a := Attr{Key: bstr(key)}
		if e := internLookup(key); e != nil {
			a.Key = e.key
		} else if !d.opt.AllAttributes {
			if err := dropped(val); err != nil {
				return b, n, err
			}
			continue
		}
		a, err = d.value(a, val)
		if err != nil {
			return b, n, err
		}
		if p != nil {
			b = p.attr(b, &a)
			n++
		}
	}
	return b, n, nil
}
