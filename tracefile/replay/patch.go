package replay

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"strconv"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/spans/protowalk"
)

// A shift changes a few places of an encoded request: trace ids, span and event times, and the
// values of the attributes that hold an instant. They are found once (a plan) and patched in a
// copy of the bytes - for Shift.Request, and for each pass after the first of Blast, which sends
// every pass as the first with another Shift: walking each request again, let alone encoding
// OTLP/JSON again, would cost the sender as much as the collector's decoding, and a load
// generator must stay cheap. A value whose shifted form has another length cannot be patched;
// nor, in OTLP/JSON, can an instant written as text or as a double, or a request that captured a
// Request-Deadline or Retry-After header at all: those have no plan, or a plan that gives up, and
// are shifted the long way (Shift.generated).

// siteKind is what a place in an encoded request holds.
type siteKind uint8

const (
	siteRawTraceID siteKind = iota + 1 // protobuf: 16 bytes
	siteFixed64                        // protobuf: a span or event time, 8 bytes little-endian
	siteVarint                         // protobuf: an int attribute of Unix ns, n bytes
	siteDouble                         // protobuf: a double attribute of Unix ns, 8 bytes
	siteText                           // protobuf: a string attribute holding an instant, n bytes
	siteHexTraceID                     // OTLP/JSON: 32 lowercase hex digits
	siteTime                           // OTLP/JSON: a span or event time, decimal digits
	siteUnixNano                       // OTLP/JSON: an intValue attribute of Unix ns, decimal digits
)

// site is one place: the offset of its first byte, its kind, for a varint or a string its length
// (the JSON values end at the next '"'), and for a string how it writes its instant.
type site struct {
	at   int32
	n    uint16
	kind siteKind
	time timeKind
}

// plan is every place a shift changes in one encoded request; nil when there is none to trust.
type plan []site

// errNoPlan is a protobuf request holding a value too long for a site, or nested deeper than the
// decoders take.
var errNoPlan = errors.New("a value too long or too deep to plan")

// planProto finds the places in a protobuf request, walking it once: the fields a shift changes
// and the messages that lead to them, everything else passed over. Nil when they cannot be walked
// (malformed input, for the generated types to refuse: protowalk refuses what they refuse) or
// hold a value too long for a site. What it passes over it does not check.
func planProto(pb []byte) plan {
	p := plan{}
	add := func(kind siteKind, b []byte, n int, t timeKind) {
		p = append(p, site{at: int32(cap(pb) - cap(b)), kind: kind, n: uint16(n), time: t}) // b aliases pb up to its end
	}
	traceID := func(fc *protowalk.Field, _ []byte) error {
		if fc.Type == protowire.BytesType && len(fc.Data) == 16 {
			add(siteRawTraceID, fc.Data, 0, 0)
		}
		return nil
	}
	instant := func(fc *protowalk.Field, field []byte) error {
		if fc.Type == protowire.Fixed64Type {
			add(siteFixed64, field[len(field)-8:], 0, 0)
		}
		return nil
	}
	// anyValue finds the instant in an AnyValue of a time-valued attribute of kind t, depth arrays
	// deep. Past spans.MaxValueDepth, which every decoder refuses, there is no plan: the generated
	// types decide, and the recursion stays bounded for any caller of Shift.Request, whatever it
	// hands in.
	var anyValue func(t timeKind, b []byte, depth int) error
	anyValue = func(t timeKind, b []byte, depth int) error {
		if depth > spans.MaxValueDepth {
			return errNoPlan
		}
		return walkFields(b, func(fc *protowalk.Field, field []byte) error {
			switch fc.Num {
			case fAnyInt:
				if fc.Type == protowire.VarintType && t == unixNanos {
					add(siteVarint, field[1:], len(field)-1, 0) // the varint is the field's tail: its tag is one byte
				}
			case fAnyDouble:
				if fc.Type == protowire.Fixed64Type && t == unixNanos {
					add(siteDouble, field[len(field)-8:], 0, 0)
				}
			case fAnyString:
				// Text that is no instant (a Retry-After in seconds) stays as it is.
				if fc.Type == protowire.BytesType {
					v := string(fc.Data)
					if _, isInstant := shiftText(t, v, int64(time.Second)); !isInstant {
						return nil
					}
					if len(v) > math.MaxUint16 {
						return errNoPlan
					}
					add(siteText, field[len(field)-len(v):], len(v), t)
				}
			case fAnyArray:
				return nested(only(fArrayValues, nested(func(v []byte) error { return anyValue(t, v, depth+1) })))(fc, field)
			}
			return nil
		})
	}
	keyValue := func(b []byte) error {
		var t timeKind
		err := walkFields(b, func(fc *protowalk.Field, _ []byte) error {
			if fc.Num == fKeyValueKey && fc.Type == protowire.BytesType {
				t = timeAttrs[string(fc.Data)]
			}
			return nil
		})
		if err != nil || t == 0 {
			return err
		}
		// Every occurrence of the value: protobuf merges them, so each may hold what it keeps.
		return only(fKeyValueValue, nested(func(v []byte) error { return anyValue(t, v, 1) }))(b)
	}
	span := func(b []byte) error {
		return walkFields(b, func(fc *protowalk.Field, field []byte) error {
			switch fc.Num {
			case fSpanTraceID:
				return traceID(fc, field)
			case fSpanStart, fSpanEnd:
				return instant(fc, field)
			case fSpanAttributes:
				return nested(keyValue)(fc, field)
			case fSpanEvents:
				return nested(only(fEventTime, instant))(fc, field)
			case fSpanLinks:
				return nested(only(fLinkTraceID, traceID))(fc, field)
			}
			return nil
		})
	}
	scopeSpans := only(fScopeSpansSpans, nested(span))
	resourceSpans := only(fResourceSpansScope, nested(scopeSpans))
	if only(fRequestResourceSpans, nested(resourceSpans))(pb) != nil {
		return nil
	}
	return p
}

// fieldFunc is called with a field of a message and its bytes (tag included), which alias the
// message.
type fieldFunc = func(fc *protowalk.Field, field []byte) error

// walkFields calls f for each field of msg.
func walkFields(msg []byte, f fieldFunc) error {
	fc := protowalk.Fields{Src: msg}
	for src := msg; fc.Next(); src = fc.Src {
		if err := f(&fc.Field, src[:len(src)-len(fc.Src)]); err != nil {
			return err
		}
	}
	return fc.Err
}

// only walks a message calling f for its fields numbered num.
func only(num uint32, f fieldFunc) func(msg []byte) error {
	return func(msg []byte) error {
		return walkFields(msg, func(fc *protowalk.Field, field []byte) error {
			if fc.Num == num {
				return f(fc, field)
			}
			return nil
		})
	}
}

// nested walks the message a field holds when it holds one (a wrong wire type is an unknown field
// to protobuf: left alone).
func nested(walk func(msg []byte) error) fieldFunc {
	return func(fc *protowalk.Field, _ []byte) error {
		if fc.Type == protowire.BytesType {
			return walk(fc.Data)
		}
		return nil
	}
}

// OTLP field numbers the wire walk reads.
const (
	fRequestResourceSpans = 1
	fResourceSpansScope   = 2
	fScopeSpansSpans      = 2
	fSpanTraceID          = 1
	fSpanStart            = 7
	fSpanEnd              = 8
	fSpanAttributes       = 9
	fSpanEvents           = 11
	fSpanLinks            = 13
	fEventTime            = 1
	fLinkTraceID          = 1
	fKeyValueKey          = 1
	fKeyValueValue        = 2
	fAnyString            = 1
	fAnyInt               = 3
	fAnyDouble            = 4
	fAnyArray             = 5
	fArrayValues          = 1
)

// jsonPatterns lead to the values a shift changes, in the layout tracefile.ProtoToJSON writes:
// compact, ids in lowercase hex, 64-bit integers as decimal strings.
var jsonPatterns = []struct {
	prefix []byte
	kind   siteKind
}{
	{[]byte(`"traceId":"`), siteHexTraceID},
	{[]byte(`"startTimeUnixNano":"`), siteTime},
	{[]byte(`"endTimeUnixNano":"`), siteTime},
	{[]byte(`"timeUnixNano":"`), siteTime},
	{[]byte(`{"key":"resilience.deadline","value":{"intValue":"`), siteUnixNano},
}

// planJSON finds the places in an OTLP/JSON request. Inside a JSON string a quote is escaped, so
// a pattern, which begins and ends with a bare quote, can only match the member it names.
func planJSON(js []byte) plan {
	for key, kind := range timeAttrs {
		// Instants in attributes other than an intValue of Unix ns would need their text
		// rewritten, perhaps to another length.
		if kind != unixNanos && bytes.Contains(js, []byte(`"key":"`+key+`"`)) {
			return nil
		}
	}
	p := plan{}
	for _, pat := range jsonPatterns {
		for i := 0; ; {
			j := bytes.Index(js[i:], pat.prefix)
			if j < 0 {
				break
			}
			at := i + j + len(pat.prefix)
			end := bytes.IndexByte(js[at:], '"')
			if end < 0 || (pat.kind == siteHexTraceID && end != 32) {
				return nil
			}
			p = append(p, site{at: int32(at), kind: pat.kind})
			i = at + end
		}
	}
	// Every member that holds an id or a time must have been found: counted by its name alone,
	// whatever the layout around it, a miss means the layout is not the one the patterns know.
	switch {
	case bytes.Count(js, []byte(`"traceId"`)) != p.count(siteHexTraceID),
		bytes.Count(js, []byte(`UnixNano"`)) != p.count(siteTime),
		bytes.Count(js, []byte(`"key":"resilience.deadline"`)) != p.count(siteUnixNano): // a double or a string
		return nil
	}
	return p
}

func (p plan) count(k siteKind) int {
	n := 0
	for _, s := range p {
		if s.kind == k {
			n++
		}
	}
	return n
}

// apply returns a copy of body with s applied at every place; false when a value would change
// length (or is not what the plan expects), and the request must be shifted the long way.
func (p plan) apply(body []byte, s Shift) ([]byte, bool) {
	out := bytes.Clone(body)
	var id [16]byte
	var num [20]byte
	for _, st := range p {
		at := int(st.at)
		switch st.kind {
		case siteRawTraceID:
			s.traceID(out[at : at+16])
		case siteFixed64:
			b := out[at : at+8]
			if t := binary.LittleEndian.Uint64(b); t != 0 {
				binary.LittleEndian.PutUint64(b, uint64(int64(t)+s.Delta))
			}
		case siteVarint:
			b := out[at : at+int(st.n)]
			n, size := protowire.ConsumeVarint(b)
			if size != len(b) {
				return nil, false
			}
			if int64(n) <= 0 {
				continue
			}
			if !replace(b, protowire.AppendVarint(num[:0], uint64(int64(n)+s.Delta))) {
				return nil, false
			}
		case siteDouble:
			b := out[at : at+8]
			if f := math.Float64frombits(binary.LittleEndian.Uint64(b)); f > 0 {
				binary.LittleEndian.PutUint64(b, math.Float64bits(f+float64(s.Delta)))
			}
		case siteText:
			b := out[at : at+int(st.n)]
			if w, ok := shiftText(st.time, string(b), s.Delta); ok && !replace(b, []byte(w)) {
				return nil, false
			}
		case siteHexTraceID:
			v := out[at : at+32]
			if _, err := hex.Decode(id[:], v); err != nil {
				return nil, false
			}
			s.traceID(id[:])
			hex.Encode(v, id[:])
		case siteTime, siteUnixNano:
			v := out[at : at+bytes.IndexByte(out[at:], '"')]
			t, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return nil, false
			}
			if t <= 0 {
				continue
			}
			if !replace(v, strconv.AppendInt(num[:0], t+s.Delta, 10)) {
				return nil, false
			}
		}
	}
	return out, true
}

// replace overwrites b with w when w is as long; false when it is not, and b is left as it was.
func replace(b, w []byte) bool {
	if len(w) != len(b) {
		return false
	}
	copy(b, w)
	return true
}
