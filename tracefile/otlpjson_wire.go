package tracefile

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/VictoriaMetrics/easyproto"

	"github.com/stormwatch/stormwatch/spans/jsonlex"
)

// The recorder transcodes every protobuf request it writes to a .jsonl file. Unmarshalling into the
// generated types first costs tens of allocations per span - more than the collector spends on
// the request itself - so this is the one OTLP/JSON encoder, straight from the wire format, with
// no object tree. It takes a request in canonical form and gives up - errSlowPath - on anything
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
		if src, err = fc.NextField(src); err != nil || fc.FieldNum == 0 {
			return errSlowPath // field 0 is invalid protobuf; the generated decoder says so
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

func (m *wireMsg) has(n uint32) bool { return m.count[n] > 0 }

// message returns a singular message field's bytes; sent more than once, protobuf would merge them.
func (m *wireMsg) message(n uint32) ([]byte, bool, error) {
	switch m.count[n] {
	case 0:
		return nil, false, nil
	case 1:
		b, ok := m.last[n].MessageData()
		if !ok {
			return nil, false, errSlowPath
		}
		return b, true, nil
	}
	return nil, false, errSlowPath
}

func (m *wireMsg) str(n uint32) (string, error) {
	if m.count[n] == 0 {
		return "", nil
	}
	s, ok := m.last[n].String()
	if !ok || !utf8.ValidString(s) {
		return "", errSlowPath
	}
	return s, nil
}

func (m *wireMsg) bytes(n uint32) ([]byte, error) {
	if m.count[n] == 0 {
		return nil, nil
	}
	b, ok := m.last[n].Bytes()
	if !ok {
		return nil, errSlowPath
	}
	return b, nil
}

func (m *wireMsg) uint32v(n uint32) (uint32, error) {
	if m.count[n] == 0 {
		return 0, nil
	}
	v, ok := m.last[n].Uint64()
	if !ok {
		return 0, errSlowPath
	}
	return uint32(v), nil // protobuf truncates a wider varint
}

func (m *wireMsg) int32v(n uint32) (int32, error) {
	if m.count[n] == 0 {
		return 0, nil
	}
	v, ok := m.last[n].Uint64()
	if !ok {
		return 0, errSlowPath
	}
	return int32(v), nil
}

func (m *wireMsg) fixed32(n uint32) (uint32, error) {
	if m.count[n] == 0 {
		return 0, nil
	}
	v, ok := m.last[n].Fixed32()
	if !ok {
		return 0, errSlowPath
	}
	return v, nil
}

func (m *wireMsg) fixed64(n uint32) (uint64, error) {
	if m.count[n] == 0 {
		return 0, nil
	}
	v, ok := m.last[n].Fixed64()
	if !ok {
		return 0, errSlowPath
	}
	return v, nil
}

// each calls f with the bytes of every occurrence of repeated message field n, in order.
func (m *wireMsg) each(n uint32, f func([]byte) error) error {
	if m.count[n] == 0 {
		return nil
	}
	var fc easyproto.FieldContext
	for src := m.src; len(src) > 0; {
		var err error
		if src, err = fc.NextField(src); err != nil {
			return errSlowPath
		}
		if fc.FieldNum != n {
			continue
		}
		b, ok := fc.MessageData()
		if !ok {
			return errSlowPath
		}
		if err := f(b); err != nil {
			return err
		}
	}
	return nil
}

// eachString is each for a repeated string field.
func (m *wireMsg) eachString(n uint32, f func(string)) error {
	if m.count[n] == 0 {
		return nil
	}
	var fc easyproto.FieldContext
	for src := m.src; len(src) > 0; {
		var err error
		if src, err = fc.NextField(src); err != nil {
			return errSlowPath
		}
		if fc.FieldNum != n {
			continue
		}
		s, ok := fc.String()
		if !ok || !utf8.ValidString(s) {
			return errSlowPath
		}
		f(s)
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
	w := &wireJSON{dst: dst}
	var m wireMsg
	if err := m.scan(body); err != nil {
		return nil, err
	}
	if w.elements(&m, 1, w.resourceSpans); w.err != nil {
		return nil, w.err
	}
	return w.dst, nil
}

// elements writes the occurrences of repeated message field n of m to w.dst comma-separated, each
// by elem: the inside of a JSON array.
func (w *wireJSON) elements(m *wireMsg, n uint32, elem func([]byte)) {
	first := true
	w.fail(m.each(n, func(b []byte) error {
		if !first {
			w.dst = append(w.dst, ',')
		}
		first = false
		elem(b)
		return w.err
	}))
}

// array writes repeated message field n of m as the array member key of o, unless it is absent.
func (w *wireJSON) array(m *wireMsg, o *jsonObj, key string, n uint32, elem func([]byte)) {
	if !m.has(n) || w.err != nil {
		return
	}
	o.key(key)
	w.dst = append(o.dst, '[')
	w.elements(m, n, elem)
	o.dst = append(w.dst, ']')
}

// Each message writer below scans its own wireMsg and opens its own jsonObj: through a shared
// object(b, fields func(*wireMsg, *jsonObj)) helper both would escape to the heap for every message.
func (w *wireJSON) resourceSpans(b []byte) {
	var m wireMsg
	if w.fail(m.scan(b)) {
		return
	}
	o := jsonObj{dst: append(w.dst, '{')}
	res, ok, err := m.message(1)
	if w.fail(err) {
		return
	}
	if ok {
		o.key("resource")
		w.dst = o.dst
		w.resource(res)
		o.dst = w.dst
	}
	w.array(&m, &o, "scopeSpans", 2, w.scopeSpans)
	w.str(&m, &o, "schemaUrl", 3)
	w.dst = append(o.dst, '}')
}

func (w *wireJSON) str(m *wireMsg, o *jsonObj, key string, n uint32) {
	s, err := m.str(n)
	if !w.fail(err) {
		o.str(key, s)
	}
}

func (w *wireJSON) u32(m *wireMsg, o *jsonObj, key string, n uint32) {
	v, err := m.uint32v(n)
	if !w.fail(err) {
		o.u32(key, v)
	}
}

func (w *wireJSON) attrs(m *wireMsg, o *jsonObj, key string, n uint32) {
	if !m.has(n) || w.err != nil {
		return
	}
	o.key(key)
	w.dst = o.dst
	w.keyValues(m, n)
	o.dst = w.dst
}

func (w *wireJSON) resource(b []byte) {
	var m wireMsg
	if w.fail(m.scan(b)) {
		return
	}
	o := jsonObj{dst: append(w.dst, '{')}
	w.attrs(&m, &o, "attributes", 1)
	w.u32(&m, &o, "droppedAttributesCount", 2)
	w.array(&m, &o, "entityRefs", 3, func(b []byte) {
		var e wireMsg
		if w.fail(e.scan(b)) {
			return
		}
		eo := jsonObj{dst: append(w.dst, '{')}
		w.str(&e, &eo, "schemaUrl", 1)
		w.str(&e, &eo, "type", 2)
		w.strs(&e, &eo, "idKeys", 3)
		w.strs(&e, &eo, "descriptionKeys", 4)
		w.dst = append(eo.dst, '}')
	})
	w.dst = append(o.dst, '}')
}

func (w *wireJSON) strs(m *wireMsg, o *jsonObj, key string, n uint32) {
	if !m.has(n) || w.err != nil {
		return
	}
	o.key(key)
	o.dst = append(o.dst, '[')
	first := true
	w.fail(m.eachString(n, func(s string) {
		if !first {
			o.dst = append(o.dst, ',')
		}
		first = false
		o.dst = jsonlex.AppendString(o.dst, s)
	}))
	o.dst = append(o.dst, ']')
}

func (w *wireJSON) scopeSpans(b []byte) {
	var m wireMsg
	if w.fail(m.scan(b)) {
		return
	}
	o := jsonObj{dst: append(w.dst, '{')}
	sc, ok, err := m.message(1)
	if w.fail(err) {
		return
	}
	if ok {
		var s wireMsg
		if w.fail(s.scan(sc)) {
			return
		}
		o.key("scope")
		so := jsonObj{dst: append(o.dst, '{')}
		w.str(&s, &so, "name", 1)
		w.str(&s, &so, "version", 2)
		w.attrs(&s, &so, "attributes", 3)
		w.u32(&s, &so, "droppedAttributesCount", 4)
		o.dst = append(so.dst, '}')
	}
	w.array(&m, &o, "spans", 2, w.span)
	w.str(&m, &o, "schemaUrl", 3)
	w.dst = append(o.dst, '}')
}

func (w *wireJSON) id(m *wireMsg, o *jsonObj, key string, n uint32) {
	b, err := m.bytes(n)
	if !w.fail(err) {
		o.id(key, b)
	}
}

func (w *wireJSON) span(b []byte) {
	var m wireMsg
	if w.fail(m.scan(b)) {
		return
	}
	o := jsonObj{dst: append(w.dst, '{')}
	w.id(&m, &o, "traceId", 1)
	w.id(&m, &o, "spanId", 2)
	w.str(&m, &o, "traceState", 3)
	w.id(&m, &o, "parentSpanId", 4)
	flags, err := m.fixed32(16)
	w.fail(err)
	o.u32("flags", flags)
	w.str(&m, &o, "name", 5)
	kind, err := m.int32v(6)
	w.fail(err)
	o.i32("kind", kind)
	start, err := m.fixed64(7)
	w.fail(err)
	o.u64("startTimeUnixNano", start)
	end, err := m.fixed64(8)
	w.fail(err)
	o.u64("endTimeUnixNano", end)
	w.attrs(&m, &o, "attributes", 9)
	w.u32(&m, &o, "droppedAttributesCount", 10)
	w.array(&m, &o, "events", 11, func(b []byte) {
		var e wireMsg
		if w.fail(e.scan(b)) {
			return
		}
		eo := jsonObj{dst: append(w.dst, '{')}
		t, err := e.fixed64(1)
		w.fail(err)
		eo.u64("timeUnixNano", t)
		w.str(&e, &eo, "name", 2)
		w.attrs(&e, &eo, "attributes", 3)
		w.u32(&e, &eo, "droppedAttributesCount", 4)
		w.dst = append(eo.dst, '}')
	})
	w.u32(&m, &o, "droppedEventsCount", 12)
	w.array(&m, &o, "links", 13, func(b []byte) {
		var l wireMsg
		if w.fail(l.scan(b)) {
			return
		}
		lo := jsonObj{dst: append(w.dst, '{')}
		w.id(&l, &lo, "traceId", 1)
		w.id(&l, &lo, "spanId", 2)
		w.str(&l, &lo, "traceState", 3)
		w.attrs(&l, &lo, "attributes", 4)
		w.u32(&l, &lo, "droppedAttributesCount", 5)
		f, err := l.fixed32(6)
		w.fail(err)
		lo.u32("flags", f)
		w.dst = append(lo.dst, '}')
	})
	w.u32(&m, &o, "droppedLinksCount", 14)
	o.key("status")
	so := jsonObj{dst: append(o.dst, '{')}
	st, ok, err := m.message(15)
	if w.fail(err) {
		return
	}
	if ok {
		var s wireMsg
		if w.fail(s.scan(st)) {
			return
		}
		w.str(&s, &so, "message", 2)
		code, err := s.int32v(3)
		w.fail(err)
		so.i32("code", code)
	}
	o.dst = append(so.dst, '}')
	w.dst = append(o.dst, '}')
}

// keyValues writes repeated KeyValue field n of m as a JSON array.
func (w *wireJSON) keyValues(m *wireMsg, n uint32) {
	w.dst = append(w.dst, '[')
	w.elements(m, n, w.keyValue)
	w.dst = append(w.dst, ']')
}

func (w *wireJSON) keyValue(b []byte) {
	var kv wireMsg
	if w.fail(kv.scan(b)) {
		return
	}
	o := jsonObj{dst: append(w.dst, '{')}
	key, err := kv.str(1)
	if w.fail(err) {
		return
	}
	o.key("key")
	o.dst = jsonlex.AppendString(o.dst, key)
	ks, err := kv.int32v(3)
	w.fail(err)
	if ks != 0 {
		o.key("keyStrindex")
		o.dst = strconv.AppendInt(o.dst, int64(ks), 10)
	}
	v, ok, err := kv.message(2)
	if w.fail(err) {
		return
	}
	if ok {
		o.key("value")
		w.dst = o.dst
		w.anyValue(v)
		o.dst = w.dst
	}
	w.dst = append(o.dst, '}')
}

func (w *wireJSON) anyValue(b []byte) {
	var m wireMsg
	if w.fail(m.scan(b)) {
		return
	}
	set := uint32(0)
	for n := uint32(1); n <= 8; n++ {
		if m.has(n) {
			if set != 0 {
				w.fail(errSlowPath) // two members of the oneof: the generated code keeps the last
				return
			}
			set = n
		}
	}
	if m.count[set] > 1 && (set == 5 || set == 6) {
		w.fail(errSlowPath) // a repeated message member merges
		return
	}
	fc := &m.last[set]
	var ok bool
	switch set {
	case 0:
		w.dst = append(w.dst, "{}"...)
		return
	case 1:
		var s string
		if s, ok = fc.String(); ok && utf8.ValidString(s) {
			w.dst = append(w.dst, `{"stringValue":`...)
			w.dst = jsonlex.AppendString(w.dst, s)
		} else {
			ok = false
		}
	case 2:
		var v uint64
		if v, ok = fc.Uint64(); ok {
			w.dst = append(w.dst, `{"boolValue":`...)
			w.dst = strconv.AppendBool(w.dst, v != 0)
		}
	case 3:
		var v int64
		if v, ok = fc.Int64(); ok {
			w.dst = append(w.dst, `{"intValue":"`...)
			w.dst = strconv.AppendInt(w.dst, v, 10)
			w.dst = append(w.dst, '"')
		}
	case 4:
		var v float64
		if v, ok = fc.Double(); ok {
			w.dst = append(w.dst, `{"doubleValue":`...)
			w.dst = jsonlex.AppendFloat(w.dst, v)
		}
	case 5, 6:
		var inner []byte
		if inner, ok = fc.MessageData(); ok {
			var a wireMsg
			if w.fail(a.scan(inner)) {
				return
			}
			if set == 5 {
				w.dst = append(w.dst, `{"arrayValue":{`...)
				if a.has(1) {
					w.dst = append(w.dst, `"values":[`...)
					w.elements(&a, 1, w.anyValue)
					w.dst = append(w.dst, ']')
				}
			} else {
				w.dst = append(w.dst, `{"kvlistValue":{`...)
				if a.has(1) {
					w.dst = append(w.dst, `"values":`...)
					w.keyValues(&a, 1)
				}
			}
			w.dst = append(w.dst, '}')
		}
	case 7:
		var v []byte
		if v, ok = fc.Bytes(); ok {
			w.dst = append(w.dst, `{"bytesValue":"`...)
			w.dst = base64.StdEncoding.AppendEncode(w.dst, v)
			w.dst = append(w.dst, '"')
		}
	case 8:
		var v uint64
		if v, ok = fc.Uint64(); ok {
			w.dst = append(w.dst, `{"stringValueStrindex":`...)
			w.dst = strconv.AppendInt(w.dst, int64(int32(v)), 10)
		}
	}
	if !ok {
		w.fail(errSlowPath)
		return
	}
	w.dst = append(w.dst, '}')
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

func (o *jsonObj) str(k, v string) {
	if v != "" {
		o.key(k)
		o.dst = jsonlex.AppendString(o.dst, v)
	}
}

// i32 writes a signed enum: kinds and codes are int32 on the wire, and a negative one must stay
// negative.
func (o *jsonObj) i32(k string, v int32) {
	if v != 0 {
		o.key(k)
		o.dst = strconv.AppendInt(o.dst, int64(v), 10)
	}
}

func (o *jsonObj) u32(k string, v uint32) {
	if v != 0 {
		o.key(k)
		o.dst = strconv.AppendUint(o.dst, uint64(v), 10)
	}
}

// u64 writes a 64-bit integer as a string, as protobuf's JSON mapping (and the file exporter) do:
// JSON numbers lose precision beyond 2^53 in many readers.
func (o *jsonObj) u64(k string, v uint64) {
	if v != 0 {
		o.key(k)
		o.dst = append(o.dst, '"')
		o.dst = strconv.AppendUint(o.dst, v, 10)
		o.dst = append(o.dst, '"')
	}
}

func (o *jsonObj) id(k string, v []byte) {
	if len(v) != 0 {
		o.key(k)
		o.dst = append(o.dst, '"')
		o.dst = hex.AppendEncode(o.dst, v)
		o.dst = append(o.dst, '"')
	}
}
