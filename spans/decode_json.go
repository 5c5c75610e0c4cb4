package spans

// DecodeJSON decodes one OTLP/JSON ExportTraceServiceRequest into a batch: it transcodes the
// request to protobuf (jsonwire.go), into memory the batch keeps, and decodes that with
// [DecodeProto] - with [DecodeOptions.PackByTrace], straight into the packed form. There is one
// decoder of spans; JSON is a way of writing what it reads.
//
// It reads OTLP/JSON as the OTLP specification defines it: lowerCamelCase field names (the proto
// snake_case names are accepted too), trace and span ids as hex strings, enums as integers or
// their names ("SPAN_KIND_SERVER"), 64-bit integers as strings or numbers, bytes values in base64,
// unknown fields ignored and null treated as absent. A repeated field name replaces the earlier
// value. The span rules are those of [DecodeProto]: a span whose trace or span id is missing, not
// hex, of the wrong length or all zeroes is rejected and counted while the rest are kept.
//
// Ownership: the batch's strings alias the protobuf form, which the batch holds, not buf: the
// caller may reuse buf once DecodeJSON returns. A batch decoded into again (DecodeJSONInto) reuses
// the protobuf form's memory. Errors wrap [ErrMalformed], are marked
// permanent, and give the path and byte offset of the problem in the JSON. Attribute values are
// held to [MaxValueDepth] as in [DecodeProto], kept or dropped, so the two decoders accept the
// same requests; other unknown fields may nest 256 JSON levels.
func DecodeJSON(buf []byte, opt DecodeOptions) (*Batch, error) {
	b := &Batch{}
	if err := decodeJSON(b, buf, opt, false); err != nil {
		return nil, err
	}
	return b, nil
}

// DecodeJSONInto is [DecodeJSON] into b, reusing its arrays as [DecodeProtoInto] does, and the
// memory of its protobuf form.
func DecodeJSONInto(b *Batch, buf []byte, opt DecodeOptions) error {
	return decodeJSON(b, buf, opt, true)
}

func decodeJSON(b *Batch, buf []byte, opt DecodeOptions, reuse bool) error {
	if b.json == nil {
		b.json = &jsonWire{}
	}
	t := b.json
	if err := t.transcode(buf, opt.AllAttributes); err != nil {
		if reuse {
			b.recycle()
		}
		return malformed("decode OTLP/JSON request", err)
	}
	return decodeProto(b, t.out, opt, reuse, t.attrs+8)
}
