package tracefile

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/VictoriaMetrics/easyproto"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/stormwatch/stormwatch/spans/jsonlex"
)

// The recorder transcodes every protobuf request it writes to a .jsonl file. Unmarshalling into the
// generated types first costs tens of allocations per span - more than the collector spends on
// the request itself - so this is the one OTLP/JSON encoder, straight from the wire format, with
// no object tree, walking the schema table the JSON reader uses too (otlpschema.go). It takes a request in canonical form and gives up - errSlowPath - on anything
// where protobuf's rules would need the generated code to get the answer: a singular message
// field sent twice (protobuf merges them), two members of a oneof, an unexpected wire type,
// invalid UTF-8 (the generated decoder rejects it), malformed input. appendResourceSpansJSON then
// re-encodes the request through the generated types and runs it again (FuzzProtoToJSON holds
// both ways to the same bytes).

var errSlowPath = errors.New("not in canonical form: transcode through the generated types")

// maxFieldNum is the highest field number of the trace messages (Span.flags = 16).
const maxFieldNum = 16

// wireMsg is one message scanned once: how often each field occurred and its last occurrence
// (protobuf's rule for a repeated scalar: the last one wins).
type wireMsg struct {
	src   []byte
	count [maxFieldNum + 1]uint8
	last  [maxFieldNum + 1]easyproto.FieldContext
}

func (m *wireMsg) scan(src []byte) error {
	m.src = src
	m.count = [maxFieldNum + 1]uint8{}
	var fc easyproto.FieldContext
	for len(src) > 0 {
		var err error
		if src, err = fc.NextField(src); err != nil || fc.FieldNum == 0 || fc.FieldNum > uint32(protowire.MaxValidNumber) {
			// Field 0, and numbers past 2^29-1 (easyproto reads up to 2^32-1), are invalid
			// protobuf: the generated decoder says so. Compared as uint32: a number past 2^31
			// would turn negative as a protowire.Number.
			return errSlowPath
		}
		if fc.FieldNum <= maxFieldNum {
			if m.count[fc.FieldNum] < 255 {
				m.count[fc.FieldNum]++
			}
			m.last[fc.FieldNum] = fc
		}
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
// of a JSON array.
func (w *wireJSON) elements(m *wireMsg, o *jsonObj, f *pbField) {
	var fc easyproto.FieldContext
	first := true
	for src := m.src; len(src) > 0 && w.err == nil; {
		var err error
		if src, err = fc.NextField(src); err != nil {
			w.fail(errSlowPath)
			return
		}
		if fc.FieldNum != f.num {
			continue
		}
		if !first {
			o.dst = append(o.dst, ',')
		}
		first = false
		if f.kind == pbMessage {
			b, ok := fc.MessageData()
			if !ok {
				w.fail(errSlowPath)
				return
			}
			w.dst = o.dst
			w.object(b, f.msg)
			o.dst = w.dst
			continue
		}
		s, ok := fc.String() // the one repeated scalar of the schema: strings
		if !ok || !utf8.ValidString(s) {
			w.fail(errSlowPath)
			return
		}
		o.dst = jsonlex.AppendString(o.dst, s)
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
	ok := false
	switch f.kind {
	case pbMessage:
		var b []byte
		// Sent more than once, protobuf would merge the occurrences.
		if b, ok = fc.MessageData(); ok && n == 1 {
			o.key(f.name)
			w.dst = o.dst
			w.object(b, f.msg)
			o.dst = w.dst
		} else {
			ok = false
		}
	case pbString:
		var s string
		if s, ok = fc.String(); ok && utf8.ValidString(s) {
			if s != "" || force {
				o.key(f.name)
				o.dst = jsonlex.AppendString(o.dst, s)
			}
		} else {
			ok = false
		}
	case pbHexID, pbBase64:
		var b []byte
		if b, ok = fc.Bytes(); ok && (len(b) != 0 || force) {
			o.key(f.name)
			o.dst = append(o.dst, '"')
			if f.kind == pbHexID {
				o.dst = hex.AppendEncode(o.dst, b)
			} else {
				o.dst = base64.StdEncoding.AppendEncode(o.dst, b)
			}
			o.dst = append(o.dst, '"')
		}
	case pbFixed64:
		// A string, as protobuf's JSON mapping (and the file exporter) write 64-bit integers: JSON
		// numbers lose precision beyond 2^53 in many readers.
		var v uint64
		if v, ok = fc.Fixed64(); ok && v != 0 {
			o.key(f.name)
			o.dst = append(o.dst, '"')
			o.dst = strconv.AppendUint(o.dst, v, 10)
			o.dst = append(o.dst, '"')
		}
	case pbFixed32:
		var v uint32
		if v, ok = fc.Fixed32(); ok {
			o.u32(f.name, v)
		}
	case pbUint32:
		var v uint64
		if v, ok = fc.Uint64(); ok {
			o.u32(f.name, uint32(v)) // protobuf truncates a wider varint
		}
	case pbEnum, pbInt32:
		var v uint64
		if v, ok = fc.Uint64(); ok && (int32(v) != 0 || force) {
			// Kinds and codes are int32 on the wire: a negative one must stay negative.
			o.key(f.name)
			o.dst = strconv.AppendInt(o.dst, int64(int32(v)), 10)
		}
	case pbInt64:
		var v int64
		if v, ok = fc.Int64(); ok && (v != 0 || force) {
			o.key(f.name)
			o.dst = append(o.dst, '"')
			o.dst = strconv.AppendInt(o.dst, v, 10)
			o.dst = append(o.dst, '"')
		}
	case pbDouble:
		var v float64
		if v, ok = fc.Double(); ok && (v != 0 || math.Signbit(v) || force) {
			o.key(f.name)
			o.dst = jsonlex.AppendFloat(o.dst, v)
		}
	case pbBool:
		var v uint64
		if v, ok = fc.Uint64(); ok && (v != 0 || force) {
			o.key(f.name)
			o.dst = strconv.AppendBool(o.dst, v != 0)
		}
	}
	if !ok {
		w.fail(errSlowPath)
	}
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
