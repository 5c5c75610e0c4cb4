package spans

// The protobuf decoder's way of packing by trace before it wrote the packed form straight from
// the wire: each span decoded into a span value, which the packer then packs. Kept for the tests
// alone, as the oracle the direct writer is held to (byte for byte, errors too): only the second
// pass is the old one; the first pass, its rejects and the fallbacks are the decoder's own.

// DecodeProtoPackedVia decodes buf packed by trace into b the way before the direct writer.
func DecodeProtoPackedVia(b *Batch, buf []byte, opt DecodeOptions) error {
	opt.PackByTrace = true
	return decodeProtoPackedOld(b, buf, opt, true)
}

func decodeProtoPackedOld(b *Batch, buf []byte, opt DecodeOptions, reuse bool) error {
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
		err = d.packTracesOld(bp, pp, buf)
	}
	b.places = d.places
	if reuse {
		b.attrBuf = d.attrs.buf[:0]
	}
	return packedVerdict(b, buf, opt, reuse, err)
}

// spanOfOld decodes the span r names into sp, giving back what the span before it used of the
// decoder's slabs (from the marks; a slab that moved is given back from where it is now), and
// says whether its ids make it a span to keep. Not the arena of rendered values: the packer knows
// a string it wrote by its address, so a string's bytes must stay as they are until the request
// is packed.
func (d *protoDecoder) spanOfOld(sp *Span, pp *protoPacked, buf []byte, r *spanRef, attrMark, xMark *slabMark) (bool, error) {
	d.attrs.rollback(*attrMark)
	*attrMark = d.attrs.mark()
	d.xattrs.rollback(*xMark)
	*xMark = d.xattrs.mark()
	d.links, d.events = d.links[:0], d.events[:0]
	*sp = Span{}
	ok, err := d.spanFields(sp, buf[r.off:r.off+r.n])
	if err != nil {
		return false, err // found again in the request's words (packedVerdict)
	}
	sp.Scope, sp.Resource = pp.scopes[r.scope], &pp.res[r.res]
	return ok, nil
}

// packTracesOld is the second pass as it was: each span to keep decoded into a span value, packed.
func (d *protoDecoder) packTracesOld(bp *batchPacker, pp *protoPacked, buf []byte) error {
	refs := pp.refs
	traces, idx, ends := bp.group(len(refs), func(i int) TraceID { return refs[i].trace })
	attrMark, xMark := d.attrs.mark(), d.xattrs.mark()
	var sp Span
	err := bp.packGroups(traces, idx, ends, func(i int32) error {
		ok, err := d.spanOfOld(&sp, pp, buf, &refs[i], &attrMark, &xMark)
		if err == nil && (!ok || sp.TraceID != refs[i].trace) {
			err = errRegroup
		}
		if err == nil {
			bp.p.span(&sp)
		}
		return err
	})
	if err != nil {
		return err
	}
	d.b.Packed = traces
	return nil
}
