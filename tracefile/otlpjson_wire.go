package tracefile

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"math"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/stormwatch/stormwatch/spans/jsonlex"
	"github.com/stormwatch/stormwatch/spans/protowalk"
)

// The recorder transcodes every protobuf request it writes to a .jsonl file. Unmarshalling into the
// generated types first costs tens of allocations per span - more than the collector spends on
// the request itself - so this is the one OTLP/JSON encoder, straight from the wire format, with
// no object tree, walking the schema table the JSON reader uses too (otlpschema.go). It takes a request in canonical form and gives up - errSlowPath - on anything
// where protobuf's rules would need the generated code to get the answer: a singular message
// field sent twice (protobuf merges them), two members of a oneof, an unexpected wire type,
// malformed input. appendResourceSpansJSON then re-encodes the request through the generated
// types and runs it again (FuzzProtoToJSON holds both ways to the same bytes).
//
// A string that is not valid UTF-8 is written with U+FFFD in place of each bad byte, as
// encoding/json writes one (jsonlex.AppendString), rather than refused as the generated decoder
// refuses it: the collector's decoder accepts such a request, as the OpenTelemetry Collector does,
// and a request the collector acknowledged must not go missing from its .jsonl recording, nor a
// trace it shows from the dashboard's export. JSON cannot hold the bad bytes themselves; a .pb
// recording keeps them.

var errSlowPath = errors.New("not in canonical form: transcode through the generated types")

// maxFieldNum is the highest field number of the trace messages (Span.flags = 16).
const maxFieldNum = 16

// wireMsg is one message scanned once: how often each field occurred and its last occurrence
// (protobuf's rule for a repeated scalar: the last one wins).
type wireMsg struct {
	src   []byte
	count [maxFieldNum + 1]uint8
	last  [maxFieldNum + 1]protowalk.Field
}

// scan reads message src into m; errSlowPath when it is malformed (the generated decoder words
// the error).
func (m *wireMsg) scan(src []byte) error {
	m.src = src
	m.count = [maxFieldNum + 1]uint8{}
	fc := protowalk.Fields{Src: src}
	for fc.Next() {
		if fc.Num <= maxFieldNum {
			if m.count[fc.Num] < 255 {
				m.count[fc.Num]++
			}
			m.last[fc.Num] = fc.Field
		}
	}
	if fc.Err != nil {
		return errSlowPath
	}
	return nil
}

// wireJSON builds the JSON. The first error sticks and ends the work.
type wireJSON struct {
	dst []byte
	err error
}

func (w *wireJSON) fail(err error) bool {
	if err != nil && w.err == nil {
		w.err = err
	}
	return w.err != nil
}

// appendResourceSpansWire is appendResourceSpansJSON for a request in canonical form.
func appendResourceSpansWire(dst, body []byte) ([]byte, error) {
	w := &wireJSON{}
	var m wireMsg
	if err := m.scan(body); err != nil {
		return nil, err
	}
	o := jsonObj{dst: dst}
	w.elements(&m, &o, otlpRequestDesc.order[0])
	if w.err != nil {
		return nil, w.err
	}
	return o.dst, nil
}

// object writes the message b, described by d, as a JSON object. Each call scans its own wireMsg
// on its stack: nothing here escapes to the heap per message.
func (w *wireJSON) object(b []byte, d *pbMessageDesc) {
	var m wireMsg
	if w.fail(m.scan(b)) {
		return
	}
	o := jsonObj{dst: append(w.dst, '{')}
	oneofs := 0
	for _, f := range d.order {
		if m.count[f.num] == 0 && !f.always {
			continue // absent: most fields of most messages (an AnyValue has one of eight)
		}
		if f.oneof {
			if oneofs++; oneofs > 1 {
				w.fail(errSlowPath) // two members of a oneof: the generated code keeps the last
				return
			}
		}
		if f.repeated {
			o.key(f.name)
			o.dst = append(o.dst, '[')
			w.elements(&m, &o, f)
			o.dst = append(o.dst, ']')
		} else {
			w.member(&m, &o, f)
		}
		if w.err != nil {
			return
		}
	}
	w.dst = append(o.dst, '}')
}

// elements writes the occurrences of repeated field f of m to o.dst, comma-separated: the inside
// of a JSON array. m was scanned whole: walking it again cannot fail.
func (w *wireJSON) elements(m *wireMsg, o *jsonObj, f *pbField) {
	first := true
	for fc := (protowalk.Fields{Src: m.src}); w.err == nil && fc.Next(); {
		if fc.Num != f.num {
			continue
		}
		// Messages, or strings: the one repeated scalar of the schema.
		if fc.Type != protowire.BytesType {
			w.fail(errSlowPath)
			return
		}
		if !first {
			o.dst = append(o.dst, ',')
		}
		first = false
		if f.kind == pbMessage {
			w.dst = o.dst
			w.object(fc.Data, f.msg)
			o.dst = w.dst
		} else {
			o.dst = jsonlex.AppendString(o.dst, alias(fc.Data))
		}
	}
}

// member writes singular field f of m as a member of o: the last occurrence (protobuf's rule for
// a scalar), left out when proto3 JSON leaves it out - absent or zero, unless forced.
func (w *wireJSON) member(m *wireMsg, o *jsonObj, f *pbField) {
	force := f.oneof || f.always
	n := m.count[f.num]
	if n == 0 {
		if f.always {
			o.key(f.name)
			if f.kind == pbMessage {
				o.dst = append(o.dst, "{}"...)
			} else {
				o.dst = append(o.dst, `""`...)
			}
		}
		return
	}
	fc := &m.last[f.num]
	// A field of another wire type than its kind's is an unknown field to protobuf, and a message
	// sent more than once would be merged: both are the generated code's to read.
	if fc.Type != wireTypes[f.kind] || (f.kind == pbMessage && n > 1) {
		w.fail(errSlowPath)
		return
	}
	switch f.kind {
	case pbMessage:
		o.key(f.name)
		w.dst = o.dst
		w.object(fc.Data, f.msg)
		o.dst = w.dst
	case pbString:
		if len(fc.Data) != 0 || force {
			o.key(f.name)
			o.dst = jsonlex.AppendString(o.dst, alias(fc.Data))
		}
	case pbHexID, pbBase64:
		if len(fc.Data) != 0 || force {
			o.key(f.name)
			o.dst = append(o.dst, '"')
			if f.kind == pbHexID {
				o.dst = hex.AppendEncode(o.dst, fc.Data)
			} else {
				o.dst = base64.StdEncoding.AppendEncode(o.dst, fc.Data)
			}
			o.dst = append(o.dst, '"')
		}
	case pbFixed64:
		// A string, as protobuf's JSON mapping (and the file exporter) write 64-bit integers: JSON
		// numbers lose precision beyond 2^53 in many readers.
		if fc.V != 0 {
			o.key(f.name)
			o.dst = append(o.dst, '"')
			o.dst = strconv.AppendUint(o.dst, fc.V, 10)
			o.dst = append(o.dst, '"')
		}
	case pbFixed32, pbUint32:
		o.u32(f.name, uint32(fc.V)) // protobuf truncates a wider varint
	case pbEnum, pbInt32:
		if v := int32(fc.V); v != 0 || force {
			// Kinds and codes are int32 on the wire: a negative one must stay negative.
			o.key(f.name)
			o.dst = strconv.AppendInt(o.dst, int64(v), 10)
		}
	case pbInt64:
		if v := int64(fc.V); v != 0 || force {
			o.key(f.name)
			o.dst = append(o.dst, '"')
			o.dst = strconv.AppendInt(o.dst, v, 10)
			o.dst = append(o.dst, '"')
		}
	case pbDouble:
		if v := math.Float64frombits(fc.V); v != 0 || math.Signbit(v) || force {
			o.key(f.name)
			o.dst = jsonlex.AppendFloat(o.dst, v)
		}
	case pbBool:
		if fc.V != 0 || force {
			o.key(f.name)
			o.dst = strconv.AppendBool(o.dst, fc.V != 0)
		}
	}
}

// wireTypes is the wire type of each kind of field.
var wireTypes = [...]protowire.Type{
	pbMessage: protowire.BytesType, pbString: protowire.BytesType, pbHexID: protowire.BytesType,
	pbBase64: protowire.BytesType, pbFixed64: protowire.Fixed64Type, pbFixed32: protowire.Fixed32Type,
	pbUint32: protowire.VarintType, pbEnum: protowire.VarintType, pbInt64: protowire.VarintType,
	pbInt32: protowire.VarintType, pbDouble: protowire.Fixed64Type, pbBool: protowire.VarintType,
}

// jsonObj writes the commas of one JSON object whose fields are all optional.
type jsonObj struct {
	dst  []byte
	more bool
}

func (o *jsonObj) key(k string) {
	if o.more {
		o.dst = append(o.dst, ',')
	}
	o.more = true
	o.dst = append(o.dst, '"')
	o.dst = append(o.dst, k...)
	o.dst = append(o.dst, '"', ':')
}

func (o *jsonObj) u32(k string, v uint32) {
	if v != 0 {
		o.key(k)
		o.dst = strconv.AppendUint(o.dst, uint64(v), 10)
	}
}
