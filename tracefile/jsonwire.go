package tracefile

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/stormwatch/stormwatch/spans/jsonlex"
)

// OTLP/JSON to protobuf without protojson: replaying a .jsonl recording needs the protobuf form of
// every request, and protojson's reflection made that cost some 50 us of CPU per span - more than
// a recording's pace allows. This is a table-driven transcoder for the trace schema only: the JSON
// scanner spans.DecodeJSON reads with (jsonlex.Scanner, in its strict mode) walks the request and
// this appends protobuf as it goes. It accepts what OTLP/JSON allows
// (lowerCamelCase or proto field names, hex ids, enums as numbers or names, 64-bit integers as
// strings or numbers, NaN/Infinity as strings, unknown fields, null as absent) and gives up -
// errSlowJSON - on anything else, so that JSONToProto falls back to protojson, which decides and
// words the error. FuzzJSONToProto holds it to protojson's result wherever both succeed.

var errSlowJSON = errors.New("transcode through protojson")

// maxJSONNesting bounds recursion on hostile input (AnyValue nests without limit).
const maxJSONNesting = 64

type jsonToPB struct {
	s     jsonlex.Scanner
	depth int
	str   []byte // scratch for unescaped strings
	bin   []byte // scratch for decoded ids and bytes
}

// appendJSONAsProto transcodes one OTLP/JSON request, appending to dst.
func appendJSONAsProto(dst, body []byte) ([]byte, error) {
	t := &jsonToPB{s: jsonlex.Scanner{Buf: body, MaxDepth: maxJSONNesting, TooDeep: errSlowJSON, Strict: true}}
	out, err := t.message(dst, otlpRequestDesc)
	if err != nil {
		return nil, err
	}
	if t.s.Space(); t.s.Pos != len(body) {
		return nil, errSlowJSON
	}
	return out, nil
}

// message parses a JSON object described by d and appends its fields as protobuf.
func (t *jsonToPB) message(dst []byte, d *pbMessageDesc) ([]byte, error) {
	if t.depth++; t.depth > maxJSONNesting {
		return nil, errSlowJSON
	}
	defer func() { t.depth-- }()
	if err := t.s.Expect('{'); err != nil {
		return nil, err
	}
	for first := true; ; {
		if ok, err := t.s.More('}', &first); err != nil || !ok {
			return dst, err
		}
		key, err := t.stringValue()
		if err != nil {
			return nil, err
		}
		if err := t.s.Expect(':'); err != nil {
			return nil, err
		}
		f := d.fields[string(key)]
		switch {
		case f == nil:
			err = t.s.Skip(t.depth + 1)
		case t.s.Null():
		case f.repeated:
			dst, err = t.repeated(dst, f)
		default:
			dst, err = t.field(dst, f, false)
		}
		if err != nil {
			return nil, err
		}
	}
}

func (t *jsonToPB) repeated(dst []byte, f *pbField) ([]byte, error) {
	if err := t.s.Expect('['); err != nil {
		return nil, err
	}
	for first := true; ; {
		if ok, err := t.s.More(']', &first); err != nil || !ok {
			return dst, err
		}
		var err error
		// An element, unlike a singular field, is written even when empty or zero.
		if dst, err = t.field(dst, f, true); err != nil {
			return nil, err
		}
	}
}

// field writes one value of f; force writes it even when it is the zero value (a oneof member or a
// repeated element), which proto3 otherwise leaves out.
func (t *jsonToPB) field(dst []byte, f *pbField, force bool) ([]byte, error) {
	force = force || f.oneof
	switch f.kind {
	case pbMessage:
		// The message is written in place after a one-byte length, which most messages (an
		// attribute, a status) fit; a longer one is moved up once to make room for its length.
		// A byte is moved once per enclosing message of 128 bytes or more (a span's: its span,
		// scope and resource), all in one buffer: no nesting level builds its message apart.
		dst = appendTag(dst, f.num, 2)
		at := len(dst)
		out, err := t.message(append(dst, 0), f.msg)
		if err != nil {
			return nil, err
		}
		n := len(out) - at - 1
		if n < 0x80 {
			out[at] = byte(n)
			return out, nil
		}
		var size [binary.MaxVarintLen64]byte
		l := binary.PutUvarint(size[:], uint64(n))
		out = append(out, size[:l-1]...)
		copy(out[at+l:], out[at+1:at+1+n])
		copy(out[at:], size[:l])
		return out, nil
	case pbString:
		s, err := t.stringValue()
		if err != nil || !utf8.Valid(s) {
			return nil, errSlowJSON
		}
		if len(s) == 0 && !force {
			return dst, nil
		}
		return appendLenField(dst, f.num, s), nil
	case pbHexID, pbBase64:
		s, err := t.stringValue()
		if err != nil {
			return nil, err
		}
		var b []byte
		if f.kind == pbHexID {
			b, err = hex.AppendDecode(t.bin[:0], s)
		} else {
			b, err = base64.StdEncoding.AppendDecode(t.bin[:0], s)
		}
		if err != nil {
			return nil, errSlowJSON
		}
		t.bin = b
		if len(b) == 0 && !force {
			return dst, nil
		}
		return appendLenField(dst, f.num, b), nil
	case pbBool:
		v, err := t.s.Bool()
		if err != nil {
			return nil, err
		}
		if !v && !force {
			return dst, nil
		}
		dst = appendTag(dst, f.num, 0)
		if v {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case pbDouble:
		v, err := t.double()
		if err != nil {
			return nil, err
		}
		if v == 0 && !math.Signbit(v) && !force {
			return dst, nil
		}
		dst = appendTag(dst, f.num, 1)
		return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v)), nil
	case pbEnum:
		var v int64
		if t.s.Peek() == '"' {
			name, err := t.stringValue()
			if err != nil {
				return nil, err
			}
			n, ok := f.enum[string(name)]
			if !ok {
				return nil, errSlowJSON
			}
			v = int64(n)
		} else {
			var err error
			if v, err = t.integer(math.MinInt32, math.MaxInt32); err != nil {
				return nil, err
			}
		}
		if v == 0 && !force {
			return dst, nil
		}
		dst = appendTag(dst, f.num, 0)
		return binary.AppendUvarint(dst, uint64(v)), nil
	}
	// The integer kinds.
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	switch f.kind {
	case pbFixed32, pbUint32:
		lo, hi = 0, math.MaxUint32
	case pbInt32:
		lo, hi = math.MinInt32, math.MaxInt32
	case pbFixed64:
		lo = 0
	}
	v, err := t.integer(lo, hi)
	if err != nil {
		return nil, err
	}
	// (A fixed64 above MaxInt64 does not parse as int64 and goes to protojson.)
	if v == 0 && !force {
		return dst, nil
	}
	switch f.kind {
	case pbFixed64:
		dst = appendTag(dst, f.num, 1)
		return binary.LittleEndian.AppendUint64(dst, uint64(v)), nil
	case pbFixed32:
		dst = appendTag(dst, f.num, 5)
		return binary.LittleEndian.AppendUint32(dst, uint32(v)), nil
	}
	dst = appendTag(dst, f.num, 0)
	return binary.AppendUvarint(dst, uint64(v)), nil
}

func appendTag(dst []byte, num uint32, wire uint8) []byte {
	return binary.AppendUvarint(dst, uint64(num)<<3|uint64(wire))
}

// appendLenField appends field num holding b: a message, a string or bytes.
func appendLenField(dst []byte, num uint32, b []byte) []byte {
	dst = binary.AppendUvarint(appendTag(dst, num, 2), uint64(len(b)))
	return append(dst, b...)
}

// integer reads an integer in [lo, hi], as a JSON number or (for 64-bit fields, and as protojson
// also allows for 32-bit ones) a string holding one. Exponents and fractions go to protojson.
func (t *jsonToPB) integer(lo, hi int64) (int64, error) {
	var text []byte
	var err error
	if t.s.Peek() == '"' {
		text, err = t.stringValue()
	} else {
		text, err = t.s.Number()
	}
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(string(text), 10, 64)
	if err != nil || v < lo || v > hi {
		return 0, errSlowJSON
	}
	return v, nil
}

func (t *jsonToPB) double() (float64, error) {
	if t.s.Peek() == '"' {
		s, err := t.stringValue()
		if err != nil {
			return 0, err
		}
		if f, ok := jsonlex.NonFinite(s); ok {
			return f, nil
		}
		return 0, errSlowJSON
	}
	text, err := t.s.Number()
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseFloat(string(text), 64)
	if err != nil {
		return 0, errSlowJSON
	}
	return v, nil
}

// stringValue reads a JSON string and returns its content: the input itself when it has no
// escapes, else an unescaped copy in scratch that is valid until the next call. A lone UTF-16
// surrogate, which protojson refuses, goes to protojson to be refused.
func (t *jsonToPB) stringValue() ([]byte, error) {
	raw, esc, err := t.s.RawString()
	if err != nil || !esc {
		return raw, err
	}
	out, ok := jsonlex.AppendUnescaped(t.str[:0], raw)
	t.str = out
	if !ok {
		return nil, errSlowJSON
	}
	return out, nil
}
