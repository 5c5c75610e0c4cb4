package spans

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/stormwatch/stormwatch/spans/jsonlex"
	"github.com/stormwatch/stormwatch/spans/otlpschema"
)

// OTLP/JSON is read one way: transcoded to protobuf by one walker over the schema table
// (otlpschema), which appends protobuf as the JSON scanner (jsonlex) goes, in one of two modes.
//
//   - The decoder's (DecodeJSON): the JSON is read as the decoder reads it (see DecodeJSON), and
//     the protobuf written is what makes DecodeProto give that answer: only the fields the decoder
//     reads, a repeated member name replacing the earlier one where JSON says so (its bytes are
//     cut out), an invalid id left out or written at a length DecodeProto rejects, dropped
//     attributes left out. Every error is the walker's own, with the JSON path and offset:
//     DecodeProto meets only protobuf it accepts.
//   - The strict one (AppendJSONAsProto, for tracefile's JSONToProto): protojson's reading of
//     the whole schema, giving up on anything unusual for protojson to decide.

// errSlowJSON is the strict mode giving up: protojson decides.
var errSlowJSON = errors.New("transcode through protojson")

const (
	// maxJSONDepth bounds the nesting of JSON values the decoder skips (unknown fields), so
	// hostile input cannot recurse without limit.
	maxJSONDepth = 256
	// maxJSONNesting bounds the strict mode's recursion (AnyValue nests without limit there).
	maxJSONNesting = 64
	// maxFields is the most fields a message of the schema has (Span: 16).
	maxFields = 16
)

var (
	resourceSpansMsg = otlpschema.Request.Order[0].Msg
	resourceMsg      = resourceSpansMsg.Order[0].Msg
	scopeSpansMsg    = resourceSpansMsg.Order[1].Msg
	spanMsg          = scopeSpansMsg.Order[1].Msg
	spanTraceID      = spanMsg.Order[0]
)

// jsonWire is the transcoder's state; a batch keeps one with its scratch memory.
type jsonWire struct {
	s      jsonlex.Scanner
	all    bool // DecodeOptions.AllAttributes
	depth  int  // the strict mode's message nesting
	str    []byte
	bin    []byte
	keyBuf []byte
	// The resource of the ResourceSpans being read, kept aside until its end: its service name
	// and instance attributes, and the rest of the last attributes array (see ResourceAttrs).
	res     []byte
	resSvc  int // res[:resSvc] are the service name and instance
	resSeen bool
	// What the KeyValue just read was: kept, or the service name or instance.
	kvKeep, kvService bool
	// attrs counts the attributes written, for the decoder's slab; moved the bytes cut-outs
	// moved, for the test that bounds it.
	attrs, moved int
	out          []byte // the decoder's output, kept with the batch
	// The scratch slices start in these, part of the one allocation of the transcoder.
	strBuf [256]byte
	binBuf [64]byte
	resBuf [512]byte
	keys   [1 << jsonKeyBits]jsonKey
}

// AppendJSONAsProto transcodes one OTLP/JSON request to protobuf, appending to dst, as protojson
// reads it (lowerCamelCase or proto field names, hex ids, enums as numbers or names, 64-bit
// integers as strings or numbers, NaN/Infinity as strings, unknown fields, null as absent). It
// returns false on anything else, for the caller to ask protojson, which decides and words the
// error. tracefile.FuzzJSONToProto holds it to protojson wherever both succeed.
func AppendJSONAsProto(dst, body []byte) ([]byte, bool) {
	t := &jsonWire{s: jsonlex.Scanner{Buf: body, MaxDepth: maxJSONNesting, TooDeep: errSlowJSON, Strict: true}}
	out, err := t.message(dst, otlpschema.Request)
	if err != nil {
		return nil, false
	}
	if t.s.Space(); t.s.Pos != len(body) {
		return nil, false
	}
	return out, true
}

// transcode is the decoder's mode: body to protobuf in t.out, or the error DecodeJSON returns.
func (t *jsonWire) transcode(body []byte, all bool) error {
	t.s = jsonlex.Scanner{Buf: body, MaxDepth: maxJSONDepth, TooDeep: ErrTooDeep}
	t.all, t.depth, t.attrs, t.moved, t.out = all, 0, 0, 0, t.out[:0]
	if t.str == nil {
		t.str, t.bin, t.res = t.strBuf[:0], t.binBuf[:0], t.resBuf[:0]
	}
	if cap(t.out) < len(body)+64 {
		// Protobuf takes fewer bytes than OTLP/JSON (about half): one allocation, and the
		// transcoder never moves what it wrote.
		t.out = make([]byte, 0, len(body)+64)
	}
	err := t.request()
	// Nothing of the body is kept: the batch does not hold on to the caller's buffer.
	t.s.Buf = nil
	clear(t.keys[:])
	return err
}

func (t *jsonWire) request() error {
	s := &t.s
	if s.Peek() == 0 {
		return s.Errorf("empty body")
	}
	out, err := t.object(t.out, otlpschema.Request)
	if err != nil {
		return err
	}
	t.out = out
	// Not Peek() != 0: Peek reads a NUL byte as the end of input, and what follows one would be
	// ignored.
	if s.Space(); s.Pos != len(s.Buf) {
		return s.Errorf("data after the request object")
	}
	return nil
}

// span is a field's bytes in the output, [at, end); end 0 when none were written.
type span struct{ at, end int }

// object transcodes the JSON object at the scanner, described by d, by the decoder's rules.
func (t *jsonWire) object(dst []byte, d *otlpschema.Message) ([]byte, error) {
	s := &t.s
	if err := s.Expect('{'); err != nil {
		return nil, err
	}
	begin, isRS := len(dst), d == resourceSpansMsg
	if isRS {
		t.res, t.resSvc, t.resSeen = t.res[:0], 0, false
	}
	var last [maxFields]span
	for first := true; ; {
		ok, err := s.More('}', &first)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		key, err := s.Key(&t.keyBuf)
		if err != nil {
			return nil, err
		}
		f := d.Field(key)
		if f == nil || !f.Decoded {
			if err := s.Skip(0); err != nil {
				return nil, err
			}
			continue
		}
		r := &last[f.Index]
		null := s.Null()
		if r.end > 0 && f.Join == otlpschema.Replace && !(null && (f.Kind == otlpschema.KindEnum || f.Kind == otlpschema.KindFixed64)) {
			dst = t.cut(dst, r, last[:len(d.Order)])
		}
		at := len(dst)
		if null {
			switch {
			case f.Join == otlpschema.ResourceAttrs:
				t.res = t.res[:t.resSvc]
			case f.Kind == otlpschema.KindString:
				dst = appendLenField(dst, f.Num, nil) // "" replaces an earlier name, also in a merged message
			}
		} else if dst, err = t.member(dst, f); err != nil {
			if f.Repeated {
				return nil, err // named by member, with the element's index
			}
			return nil, fmt.Errorf("%s: %w", f.Name, err)
		}
		if len(dst) > at {
			*r = span{at, len(dst)}
		}
	}
	if isRS && t.resSeen {
		dst = appendLenField(dst, 1, t.res)
	}
	if r := last[spanTraceID.Index]; d == spanMsg && r.at > begin && r.end-r.at == 2+len(TraceID{}) {
		// The trace id goes first, where DecodeProto's first pass looks for it (OTLP/JSON
		// exporters that sort their members write it last).
		var id [2 + len(TraceID{})]byte
		copy(id[:], dst[r.at:r.end])
		copy(dst[begin+len(id):], dst[begin:r.at])
		copy(dst[begin:], id[:])
	}
	return dst, nil
}

// cut removes the bytes of an earlier occurrence r of a field from dst, moving those written
// after it (the other fields' spans in last move with them). A message has a few fields and each
// cut puts the field after the others, so a byte moves at most once per field of its message
// whatever the input repeats: the work stays linear.
func (t *jsonWire) cut(dst []byte, r *span, last []span) []byte {
	n := r.end - r.at
	t.moved += copy(dst[r.at:], dst[r.end:])
	dst = dst[:len(dst)-n]
	for i := range last {
		if last[i].at >= r.end {
			last[i].at -= n
			last[i].end -= n
		}
	}
	*r = span{}
	return dst
}

// member transcodes the (non-null) value of field f (of an AnyValue too, but for its arrays and
// maps: see list).
func (t *jsonWire) member(dst []byte, f *otlpschema.Field) ([]byte, error) {
	s := &t.s
	switch f.Kind {
	case otlpschema.KindString:
		v, err := t.text()
		if err != nil {
			return nil, err
		}
		return appendLenField(dst, f.Num, v), nil
	case otlpschema.KindHexID:
		raw, err := t.text()
		if err != nil {
			return nil, err
		}
		// An id that is not hex is left out: DecodeProto then rejects the span (or link), or
		// reads no parent, as it does an id of the wrong length, which it gets as sent.
		start := len(dst)
		dst = binary.AppendUvarint(appendTag(dst, f.Num, 2), uint64(len(raw)/2))
		if out, ok := unhex(dst, raw); ok {
			return out, nil
		}
		return dst[:start], nil
	case otlpschema.KindEnum:
		v, err := s.Enum(f.EnumNames)
		if err != nil {
			return nil, err
		}
		return binary.AppendUvarint(appendTag(dst, f.Num, 0), v), nil
	case otlpschema.KindFixed64:
		v, err := s.Uint64()
		if err != nil {
			return nil, err
		}
		return binary.LittleEndian.AppendUint64(appendTag(dst, f.Num, 1), uint64(v)), nil
	case otlpschema.KindInt64:
		v, err := s.Int64()
		if err != nil {
			return nil, err
		}
		return binary.AppendUvarint(appendTag(dst, f.Num, 0), uint64(v)), nil
	case otlpschema.KindDouble:
		v, err := s.Float64()
		if err != nil {
			return nil, err
		}
		return binary.LittleEndian.AppendUint64(appendTag(dst, f.Num, 1), math.Float64bits(v)), nil
	case otlpschema.KindBool:
		v, err := s.Bool()
		if err != nil {
			return nil, err
		}
		dst = appendTag(dst, f.Num, 0)
		if v {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case otlpschema.KindBase64:
		raw, err := t.text()
		if err != nil {
			return nil, err
		}
		b, err := unbase64(t.bin[:0], raw)
		if err != nil {
			return nil, err
		}
		t.bin = b
		return appendLenField(dst, f.Num, b), nil
	}
	// Messages.
	if !f.Repeated {
		if f.Msg == resourceMsg {
			// Kept aside until the end of its ResourceSpans (see object).
			t.resSeen = true
			return t.object(dst, f.Msg)
		}
		dst, at := openMessage(dst, f.Num, 1)
		out, err := t.object(dst, f.Msg)
		if err != nil {
			return nil, err
		}
		return closeMessage(out, at, 1), nil
	}
	if f.Join == otlpschema.ResourceAttrs {
		t.res = t.res[:t.resSvc]
	}
	if err := s.Expect('['); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name, err)
	}
	for i, first := 0, true; ; i++ {
		ok, err := s.More(']', &first)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name, err)
		}
		if !ok {
			return dst, nil
		}
		if dst, err = t.element(dst, f); err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", f.Name, i, err)
		}
	}
}

// element transcodes one element of repeated message field f: written even when empty (null).
func (t *jsonWire) element(dst []byte, f *otlpschema.Field) ([]byte, error) {
	if f.Msg != otlpschema.KeyValue {
		if t.s.Null() {
			return appendLenField(dst, f.Num, nil), nil
		}
		w := lengthWidth(f.Msg)
		dst, at := openMessage(dst, f.Num, w)
		out, err := t.object(dst, f.Msg)
		if err != nil {
			return nil, err
		}
		return closeMessage(out, at, w), nil
	}
	// An attribute.
	if f.Join == otlpschema.Checked {
		return dst, t.skipKeyValue()
	}
	start := len(dst)
	out, ok := t.attrFast(dst, f.Num)
	if !ok {
		dst, at := openMessage(dst, f.Num, 1)
		var err error
		if out, err = t.keyValue(dst, true, 1); err != nil {
			return nil, err
		}
		out = closeMessage(out, at, 1)
	}
	switch {
	case f.Join == otlpschema.ResourceAttrs:
		// Kept aside until the end of the ResourceSpans: a later attributes array replaces the
		// others, not the service name or instance.
		if t.kvService {
			t.res = slices.Insert(t.res, t.resSvc, out[start:]...)
			t.resSvc += len(out) - start
		} else if t.kvKeep {
			t.res = append(t.res, out[start:]...)
			t.attrs++
		}
		return out[:start], nil
	case !t.kvKeep:
		return out[:start], nil // dropped by the decoder: not written
	}
	t.attrs++
	return out, nil
}

// keyValue transcodes a KeyValue object (null is an empty one). In an attributes array (attr)
// the key decides, as it comes, whether the value is read or only checked (see skipValue), and
// kvKeep says at the end whether the decoder keeps the attribute. depth is the value's nesting.
func (t *jsonWire) keyValue(dst []byte, attr bool, depth int) ([]byte, error) {
	s := &t.s
	keep, haveKey, service := t.all, false, false
	if s.Null() {
		t.kvKeep, t.kvService = keep, false
		return dst, nil
	}
	if err := s.Expect('{'); err != nil {
		return nil, err
	}
	var last [2]span // the key, the value
	for first := true; ; {
		ok, err := s.More('}', &first)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		name, err := s.Key(&t.keyBuf)
		if err != nil {
			return nil, err
		}
		switch string(name) {
		case "key":
			k, err := t.text()
			if err != nil {
				return nil, fmt.Errorf("key: %w", err)
			}
			if last[0].end > 0 {
				dst = t.cut(dst, &last[0], last[:])
			}
			at := len(dst)
			dst = appendLenField(dst, 1, k)
			last[0] = span{at, len(dst)}
			haveKey = true
			if attr {
				_, known := Intern(k)
				keep = known || t.all
				service = string(k) == AttrServiceName || string(k) == AttrServiceInstance
			}
		case "value":
			if attr && haveKey && !keep {
				// Not read, only checked, and what was read before it stays: as the decoder
				// always read a dropped attribute.
				if err := t.skipValue(); err != nil {
					return nil, err
				}
				continue
			}
			if last[1].end > 0 {
				dst = t.cut(dst, &last[1], last[:])
			}
			if s.Null() {
				continue
			}
			at := len(dst)
			var lenAt int
			dst, lenAt = openMessage(dst, 2, 1)
			out, err := t.anyValue(dst, depth)
			if err != nil {
				return nil, fmt.Errorf("value: %w", err)
			}
			dst = closeMessage(out, lenAt, 1)
			last[1] = span{at, len(dst)}
		default:
			if err := s.Skip(0); err != nil {
				return nil, err
			}
		}
	}
	// Set at the end: a map in the value reads KeyValues of its own.
	t.kvKeep, t.kvService = keep, service && keep
	return dst, nil
}

// attrFast transcodes the layout exporters write almost every attribute in - compact, key
// first, a string, integer or bool value: {"key":"k","value":{"stringValue":"v"}} - read where it
// lies, without the general walk: as keyValue and element num would, kvKeep and kvService set, a
// dropped one not written. Anything else (white space, escapes in the key, other members or
// order, a bad escape) returns false without consuming input, for keyValue to read the
// attribute (and say what is wrong with it).
func (t *jsonWire) attrFast(dst []byte, num uint32) ([]byte, bool) {
	buf, i := t.s.Buf, t.s.Pos
	if !at(buf, i, `{"key":"`) {
		return dst, false
	}
	i += len(`{"key":"`)
	key, keep, service, i, ok := t.attrKey(buf, i)
	if !ok || !at(buf, i, `,"value"`) || !at(buf, i+8, `:{"`) {
		return dst, false
	}
	i += len(`,"value":{"`)
	var (
		member uint32
		str    []byte
		n      uint64
	)
	switch {
	case at(buf, i, `stringVa`) && at(buf, i+8, `lue":"`):
		i += len(`stringValue":"`)
		j := jsonlex.SkipPlain(buf, i)
		switch {
		case j >= len(buf):
			return dst, false
		case buf[j] == '"':
			str, i = buf[i:j], j+1
		case buf[j] == '\\':
			// Go's encoding/json escapes & < > (URLs with a query); other exporters escape less.
			end, ok := skipEscaped(buf, j)
			if !ok {
				return dst, false
			}
			if keep {
				t.str, _ = jsonlex.AppendUnescaped(t.str[:0], buf[i:end-1])
				str = t.str
			}
			i = end
		default:
			return dst, false
		}
		member = fAnyString
	case at(buf, i, `intValue`) && at(buf, i+8, `":`):
		i += len(`intValue":`)
		quoted := i < len(buf) && buf[i] == '"'
		if quoted {
			i++
		}
		v, j, ok := jsonlex.ParseInt(buf, i)
		if !ok {
			return dst, false
		}
		if quoted {
			if j >= len(buf) || buf[j] != '"' {
				return dst, false
			}
			j++
		}
		member, n, i = fAnyInt, uint64(v), j
	case at(buf, i, `boolValu`) && at(buf, i+8, `e":true`):
		member, n, i = fAnyBool, 1, i+len(`boolValue":true`)
	case at(buf, i, `boolValu`) && at(buf, i+8, `e":false`):
		member, i = fAnyBool, i+len(`boolValue":false`)
	default:
		return dst, false
	}
	if !at(buf, i, `}}`) {
		return dst, false
	}
	t.s.Pos = i + 2
	t.kvKeep, t.kvService = keep, service
	if !keep {
		return dst, true
	}
	// The AnyValue, the KeyValue, then the element, each after its length.
	value := 1 + varintLen(n)
	if member == fAnyString {
		value = 1 + varintLen(uint64(len(str))) + len(str)
	}
	if kv := 4 + len(key) + value; kv < 0x80 && num < 16 {
		// Every length one byte, what nearly every attribute takes: written as bytes.
		dst = append(dst, byte(num<<3|2), byte(kv), fKVKey<<3|2, byte(len(key)))
		dst = append(append(dst, key...), fKVValue<<3|2, byte(value))
		if member == fAnyString {
			return append(append(dst, fAnyString<<3|2, byte(len(str))), str...), true
		}
		return binary.AppendUvarint(append(dst, byte(member<<3)), n), true
	}
	kv := 1 + varintLen(uint64(len(key))) + len(key) + 1 + varintLen(uint64(value)) + value
	dst = binary.AppendUvarint(appendTag(dst, num, 2), uint64(kv))
	dst = appendLenField(dst, fKVKey, key)
	dst = binary.AppendUvarint(appendTag(dst, fKVValue, 2), uint64(value))
	if member == fAnyString {
		return appendLenField(dst, fAnyString, str), true
	}
	return binary.AppendUvarint(appendTag(dst, member, 0), n), true
}

// attrKey reads the key of an attribute at i, up to its closing quote, and whether the decoder
// keeps it: from the cache of the keys met in the request, else by interning it. The key is
// scanned only when it is not in the cache (by the 24 bytes from its start: its text and, for
// short keys, what follows it, `","value":{"` and the value's kind, which repeat with the key).
func (t *jsonWire) attrKey(buf []byte, i int) (key []byte, keep, service bool, next int, ok bool) {
	var slot *jsonKey
	if i+24 <= len(buf) {
		h := load64(buf[i:i+8]) ^ bits.RotateLeft64(load64(buf[i+8:i+16]), 21) ^ bits.RotateLeft64(load64(buf[i+16:i+24]), 42)
		slot = &t.keys[h*0x9E3779B97F4A7C15>>(64-jsonKeyBits)]
		if n := len(slot.key); n > 0 && i+n < len(buf) && buf[i+n] == '"' && string(buf[i:i+n]) == slot.key {
			return buf[i : i+n], slot.keep, slot.service, i + n + 1, true
		}
	}
	j := jsonlex.SkipPlain(buf, i)
	if j >= len(buf) || buf[j] != '"' {
		return nil, false, false, 0, false
	}
	key = buf[i:j]
	_, known := Intern(key)
	keep = known || t.all
	service = keep && (string(key) == AttrServiceName || string(key) == AttrServiceInstance)
	if slot != nil && len(key) > 0 {
		*slot = jsonKey{key: bstr(key), keep: keep, service: service}
	}
	return key, keep, service, j + 1, true
}

// jsonKeyBits sizes the transcoder's cache of attribute keys. The cache is cleared after each
// request: its keys alias the request's body.
const jsonKeyBits = 6

type jsonKey struct {
	key           string
	keep, service bool
}

func varintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// at reports whether buf holds lit at offset i. With a constant lit of up to eight bytes the
// compiler turns the comparison into one load and compare, which bytes.HasPrefix (a call to
// memequal) is not.
func at(buf []byte, i int, lit string) bool {
	return len(buf)-i >= len(lit) && string(buf[i:i+len(lit)]) == lit
}

// skipEscaped continues a string whose content has an escape at j: it returns the offset after
// the closing quote, or false when an escape is invalid, a control character appears or the
// input ends first.
func skipEscaped(buf []byte, j int) (int, bool) {
	for j < len(buf) {
		switch buf[j] {
		case '"':
			return j + 1, true
		case '\\':
			n := jsonlex.EscapeLen(buf[j:])
			if n == 0 {
				return 0, false
			}
			j += n
		default:
			return 0, false
		}
		j = jsonlex.SkipPlain(buf, j)
	}
	return 0, false
}

var errOneofTwice = errors.New("more than one of stringValue, boolValue, intValue, doubleValue, arrayValue, kvlistValue, bytesValue")

// anyValue transcodes the inside of an AnyValue object (null is an empty one): one member at
// most - a null member counts as absent, any member after the one set is an error (as in
// protojson) - and arrays and maps nested no deeper than MaxValueDepth, depth being this value's.
func (t *jsonWire) anyValue(dst []byte, depth int) ([]byte, error) {
	s := &t.s
	if s.Null() {
		return dst, nil
	}
	if err := s.Expect('{'); err != nil {
		return nil, err
	}
	set := false
	for first := true; ; {
		ok, err := s.More('}', &first)
		if err != nil {
			return nil, err
		}
		if !ok {
			return dst, nil
		}
		name, err := s.Key(&t.keyBuf)
		if err != nil {
			return nil, err
		}
		if s.Null() {
			continue
		}
		if set {
			return nil, errOneofTwice
		}
		f := otlpschema.AnyValue.Field(name)
		if f == nil || !f.Decoded {
			if err := s.Skip(0); err != nil {
				return nil, err
			}
			continue
		}
		set = true
		if f.Kind == otlpschema.KindMessage {
			dst, err = t.list(dst, f, depth)
		} else {
			dst, err = t.member(dst, f)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name, err)
		}
	}
}

// list transcodes the array or map member f of an AnyValue at nesting depth.
func (t *jsonWire) list(dst []byte, f *otlpschema.Field, depth int) ([]byte, error) {
	s := &t.s
	if depth > MaxValueDepth {
		return nil, fmt.Errorf("%w: %w", ErrTooDeep, s.Errorf("arrays and maps nested more than %d deep", MaxValueDepth))
	}
	kv := f.Msg.Order[0].Msg == otlpschema.KeyValue
	dst, at := openMessage(dst, f.Num, 1)
	if err := s.Expect('{'); err != nil {
		return nil, err
	}
	for first := true; ; {
		ok, err := s.More('}', &first)
		if err != nil {
			return nil, err
		}
		if !ok {
			return closeMessage(dst, at, 1), nil
		}
		name, err := s.Key(&t.keyBuf)
		if err != nil {
			return nil, err
		}
		if string(name) != "values" {
			if err := s.Skip(0); err != nil {
				return nil, err
			}
			continue
		}
		if s.Null() {
			continue
		}
		if dst, err = t.values(dst, kv, depth+1); err != nil {
			return nil, err
		}
	}
}

// values transcodes the values array of an array or a map, each element written even when
// empty (null).
func (t *jsonWire) values(dst []byte, kv bool, depth int) ([]byte, error) {
	s := &t.s
	if err := s.Expect('['); err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	for i, first := 0, true; ; i++ {
		ok, err := s.More(']', &first)
		if err != nil {
			return nil, fmt.Errorf("values: %w", err)
		}
		if !ok {
			return dst, nil
		}
		var at int
		var out []byte
		dst, at = openMessage(dst, 1, 1)
		if kv {
			out, err = t.keyValue(dst, false, depth)
		} else {
			out, err = t.anyValue(dst, depth)
		}
		if err != nil {
			return nil, fmt.Errorf("values[%d]: %w", i, err)
		}
		dst = closeMessage(out, at, 1)
	}
}

// text reads a string value: the input itself when it has no escapes, else unescaped into
// scratch, valid until the next call.
func (t *jsonWire) text() ([]byte, error) {
	raw, esc, err := t.s.RawString()
	if err != nil || !esc {
		return raw, err
	}
	t.str, _ = jsonlex.AppendUnescaped(t.str[:0], raw)
	return t.str, nil
}

// unhex decodes hex digits into dst; false when src is not hex.
func unhex(dst, src []byte) ([]byte, bool) {
	if len(src)%2 != 0 {
		return dst, false
	}
	// Invalid digits are -1, all bits set: or-ed together they are checked once at the end
	// instead of a branch per digit.
	bad, n := 0, len(dst)
	dst = slices.Grow(dst, len(src)/2)[:n+len(src)/2]
	out := dst[n:]
	for i := range out {
		pair := src[2*i : 2*i+2 : 2*i+2] // one bounds check for the two digits
		hi, lo := jsonlex.Unhex(pair[0]), jsonlex.Unhex(pair[1])
		bad |= hi | lo
		out[i] = byte(hi<<4 | lo)
	}
	return dst, bad >= 0
}

// unbase64 decodes a protobuf JSON bytes value: standard or URL base64, padded or not.
func unbase64(dst, raw []byte) ([]byte, error) {
	enc := base64.StdEncoding
	if bytes.ContainsAny(raw, "-_") {
		enc = base64.URLEncoding
	}
	if len(raw)%4 != 0 {
		enc = enc.WithPadding(base64.NoPadding)
	}
	out, err := enc.AppendDecode(dst, raw)
	if err != nil {
		return dst, fmt.Errorf("invalid base64: %w", err)
	}
	return out, nil
}

// skipValueJSONDepth is how deep the JSON of a skipped AnyValue may nest for skipValue to pass
// it over without looking at its structure: each array or map level takes at least three JSON
// levels (the AnyValue object, the array or map object, its values array), so a value that nests
// no deeper than this is within MaxValueDepth.
const skipValueJSONDepth = 3 * MaxValueDepth

// skipValue steps over the AnyValue of a dropped attribute, validating it as JSON, and fails with
// ErrTooDeep when its arrays and maps nest deeper than MaxValueDepth, as DecodeProto does with
// the values it drops: what one decoder accepts, the other reads back from a recording. Nearly
// every value is passed over as any JSON value; only one whose JSON nests deep is walked.
func (t *jsonWire) skipValue() error {
	start := t.s.Pos
	err := t.s.Skip(maxJSONDepth - skipValueJSONDepth)
	if !errors.Is(err, ErrTooDeep) {
		return err
	}
	t.s.Pos = start
	return t.valueDepth(0)
}

// valueDepth walks an AnyValue object inside depth arrays and maps, for skipValue.
func (t *jsonWire) valueDepth(depth int) error {
	return t.eachMember(func(k string) error {
		kv := k == "kvlistValue" || k == "kvlist_value"
		if !kv && k != "arrayValue" && k != "array_value" {
			return t.s.Skip(0)
		}
		if depth+1 > MaxValueDepth {
			return ErrTooDeep
		}
		return t.eachMember(func(k string) error {
			if k != "values" {
				return t.s.Skip(0)
			}
			return t.eachElement(func() error {
				if !kv {
					return t.valueDepth(depth + 1)
				}
				return t.eachMember(func(k string) error {
					if k != "value" {
						return t.s.Skip(0)
					}
					return t.valueDepth(depth + 1)
				})
			})
		})
	})
}

// skipKeyValue steps over a KeyValue object of attributes the decoder does not keep (a scope's).
func (t *jsonWire) skipKeyValue() error {
	return t.eachMember(func(k string) error {
		if k == "value" {
			return t.skipValue()
		}
		return t.s.Skip(0)
	})
}

// eachMember calls member with the name of each member of an object (null is an empty one), for
// the checks of values the decoder does not keep.
func (t *jsonWire) eachMember(member func(k string) error) error {
	s := &t.s
	if s.Null() {
		return nil
	}
	if err := s.Expect('{'); err != nil {
		return err
	}
	for first := true; ; {
		ok, err := s.More('}', &first)
		if err != nil || !ok {
			return err
		}
		key, err := s.Key(&t.keyBuf)
		if err != nil {
			return err
		}
		if err := member(bstr(key)); err != nil {
			return err
		}
	}
}

// eachElement calls elem for each element of an array (null is an empty one).
func (t *jsonWire) eachElement(elem func() error) error {
	s := &t.s
	if s.Null() {
		return nil
	}
	if err := s.Expect('['); err != nil {
		return fmt.Errorf("values: %w", err)
	}
	for i, first := 0, true; ; i++ {
		ok, err := s.More(']', &first)
		if err != nil {
			return fmt.Errorf("values: %w", err)
		}
		if !ok {
			return nil
		}
		if err := elem(); err != nil {
			return fmt.Errorf("values[%d]: %w", i, err)
		}
	}
}

// openMessage writes the tag of message field num and w bytes for its length, to fill in when the
// message is written (closeMessage). A message whose length does not fit is moved up to make
// room for it: a byte is moved once per enclosing message too long for its length's bytes, all
// in one buffer (no nesting level builds its message apart). One byte fits an attribute or a
// status; the messages that hold spans get the bytes their length may take (see lengthWidth).
func openMessage(dst []byte, num uint32, w int) ([]byte, int) {
	dst = appendTag(dst, num, 2)
	return append(dst, make([]byte, w)...), len(dst)
}

// closeMessage writes the length of the message after the w bytes at at, in those bytes when it
// fits them: padded, as protobuf's varints may be (with continuation bits to make up w bytes).
func closeMessage(out []byte, at, w int) []byte {
	n := len(out) - at - w
	if l := varintLen(uint64(n)); l > w {
		out = append(out, make([]byte, l-w)...)
		copy(out[at+l:], out[at+w:at+w+n])
		w = l
	}
	for i := range w - 1 {
		out[at+i] = byte(n>>(7*i)) | 0x80
	}
	out[at+w-1] = byte(n >> (7 * (w - 1)))
	return out
}

// lengthWidth is how many bytes the length of an element of m gets before it is written: five
// for the resource spans and the scope spans (the whole request, most of it), two for a span (up
// to 16 KiB, what DecodeProto's walk reads without a call), one for the rest.
func lengthWidth(m *otlpschema.Message) int {
	switch m {
	case resourceSpansMsg, scopeSpansMsg:
		return 5
	case spanMsg:
		return 2
	}
	return 1
}

func appendTag(dst []byte, num uint32, wire uint8) []byte {
	return binary.AppendUvarint(dst, uint64(num)<<3|uint64(wire))
}

// appendLenField appends field num holding b: a message, a string or bytes.
func appendLenField(dst []byte, num uint32, b []byte) []byte {
	dst = binary.AppendUvarint(appendTag(dst, num, 2), uint64(len(b)))
	return append(dst, b...)
}

// The strict mode.

// message parses a JSON object described by d and appends its fields as protobuf.
func (t *jsonWire) message(dst []byte, d *otlpschema.Message) ([]byte, error) {
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
		f := d.Field(key)
		switch {
		case f == nil:
			err = t.s.Skip(t.depth + 1)
		case t.s.Null():
		case f.Repeated:
			dst, err = t.repeated(dst, f)
		default:
			dst, err = t.field(dst, f, false)
		}
		if err != nil {
			return nil, err
		}
	}
}

func (t *jsonWire) repeated(dst []byte, f *otlpschema.Field) ([]byte, error) {
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
func (t *jsonWire) field(dst []byte, f *otlpschema.Field, force bool) ([]byte, error) {
	force = force || f.Oneof
	switch f.Kind {
	case otlpschema.KindMessage:
		dst, at := openMessage(dst, f.Num, 1)
		out, err := t.message(dst, f.Msg)
		if err != nil {
			return nil, err
		}
		return closeMessage(out, at, 1), nil
	case otlpschema.KindString:
		s, err := t.stringValue()
		if err != nil || !utf8.Valid(s) {
			return nil, errSlowJSON
		}
		if len(s) == 0 && !force {
			return dst, nil
		}
		return appendLenField(dst, f.Num, s), nil
	case otlpschema.KindHexID, otlpschema.KindBase64:
		s, err := t.stringValue()
		if err != nil {
			return nil, err
		}
		var b []byte
		if f.Kind == otlpschema.KindHexID {
			var ok bool
			if b, ok = unhex(t.bin[:0], s); !ok {
				err = errSlowJSON
			}
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
		return appendLenField(dst, f.Num, b), nil
	case otlpschema.KindBool:
		v, err := t.s.Bool()
		if err != nil {
			return nil, err
		}
		if !v && !force {
			return dst, nil
		}
		dst = appendTag(dst, f.Num, 0)
		if v {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case otlpschema.KindDouble:
		v, err := t.double()
		if err != nil {
			return nil, err
		}
		if v == 0 && !math.Signbit(v) && !force {
			return dst, nil
		}
		dst = appendTag(dst, f.Num, 1)
		return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v)), nil
	case otlpschema.KindEnum:
		var v int64
		if t.s.Peek() == '"' {
			name, err := t.stringValue()
			if err != nil {
				return nil, err
			}
			n, ok := f.EnumValues[string(name)]
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
		dst = appendTag(dst, f.Num, 0)
		return binary.AppendUvarint(dst, uint64(v)), nil
	}
	// The integer kinds.
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	switch f.Kind {
	case otlpschema.KindFixed32, otlpschema.KindUint32:
		lo, hi = 0, math.MaxUint32
	case otlpschema.KindInt32:
		lo, hi = math.MinInt32, math.MaxInt32
	case otlpschema.KindFixed64:
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
	switch f.Kind {
	case otlpschema.KindFixed64:
		dst = appendTag(dst, f.Num, 1)
		return binary.LittleEndian.AppendUint64(dst, uint64(v)), nil
	case otlpschema.KindFixed32:
		dst = appendTag(dst, f.Num, 5)
		return binary.LittleEndian.AppendUint32(dst, uint32(v)), nil
	}
	dst = appendTag(dst, f.Num, 0)
	return binary.AppendUvarint(dst, uint64(v)), nil
}

// integer reads an integer in [lo, hi], as a JSON number or (for 64-bit fields, and as protojson
// also allows for 32-bit ones) a string holding one. Exponents and fractions go to protojson.
func (t *jsonWire) integer(lo, hi int64) (int64, error) {
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

func (t *jsonWire) double() (float64, error) {
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
func (t *jsonWire) stringValue() ([]byte, error) {
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
