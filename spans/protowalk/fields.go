package protowalk

import (
	"encoding/binary"
	"fmt"

	"github.com/VictoriaMetrics/easyproto"
	"google.golang.org/protobuf/encoding/protowire"
)

// Field is one field of a message, as [Fields.Next] read it.
type Field struct {
	Num  uint32
	Type protowire.Type // VarintType, Fixed64Type, BytesType, Fixed32Type; StartGroupType for a group (Num 0)
	Data []byte         // BytesType: the field's bytes, a part of the message
	V    uint64         // VarintType, Fixed64Type, Fixed32Type: the value
}

// Fields walks the fields of a protobuf message:
//
//	f := protowalk.Fields{Src: msg}
//	for f.Next() {
//		switch f.Num { ... }
//	}
//	return f.Err
//
// Next reads the fields that nearly every message is made of - a one-byte tag, then a varint of
// one byte, a fixed64, or a length of one or two bytes (up to 16 KiB: a span, an attribute) - by
// itself, and any other through easyproto, which also words the error for malformed input. It
// refuses the field numbers the generated code refuses (0, and past 2^29-1: easyproto reads any
// that fits 32 bits). A deprecated group, which the generated code keeps as an unknown field, is
// skipped whole and read as field 0 of type StartGroupType, which no OTLP message uses.
type Fields struct {
	Field
	Src []byte // what follows the field read
	Err error  // why Next returned false, when it was not the end of the message
}

// Next reads the next field; false at the end of the message or on malformed input (then Err).
func (f *Fields) Next() bool {
	src := f.Src
	if len(src) < 2 {
		if len(src) == 0 {
			return false
		}
	} else if t := src[0]; t-8 < 0x80-8 { // fields 1 to 15; number 0 is refused below
		if w := t & 7; w == 2 {
			if src[1] < 0x80 { // the commonest field: its length and offsets are constants here
				if n := 2 + int(src[1]); n <= len(src) {
					f.Num, f.Type, f.Data, f.Src = uint32(t>>3), 2, src[2:n], src[n:]
					return true
				}
			} else if len(src) >= 3 && src[2] < 0x80 {
				if n := 3 + (int(src[1]&0x7f) | int(src[2])<<7); n <= len(src) {
					f.Num, f.Type, f.Data, f.Src = uint32(t>>3), 2, src[3:n], src[n:]
					return true
				}
			}
		} else if w == 0 {
			if src[1] < 0x80 {
				f.Num, f.Type, f.V, f.Src = uint32(t>>3), 0, uint64(src[1]), src[2:]
				return true
			}
		} else if w == 1 && len(src) >= 9 {
			f.Num, f.Type, f.V, f.Src = uint32(t>>3), 1, binary.LittleEndian.Uint64(src[1:9]), src[9:]
			return true
		}
	}
	var fc easyproto.FieldContext
	next, err := fc.NextField(src)
	if err != nil {
		if f.Src, f.Err = skipGroup(src, err); f.Err != nil {
			return false
		}
		f.Num, f.Type = 0, protowire.StartGroupType
		return true
	}
	if fc.FieldNum == 0 || fc.FieldNum > uint32(protowire.MaxValidNumber) {
		f.Err = fmt.Errorf("invalid field number %d", fc.FieldNum)
		return false
	}
	f.Src, f.Num = next, fc.FieldNum
	if b, ok := fc.MessageData(); ok {
		f.Type, f.Data = protowire.BytesType, b
	} else if x, ok := fc.Uint64(); ok {
		f.Type, f.V = protowire.VarintType, x
	} else if x, ok := fc.Fixed64(); ok {
		f.Type, f.V = protowire.Fixed64Type, x
	} else {
		x, _ := fc.Fixed32()
		f.Type, f.V = protowire.Fixed32Type, uint64(x)
	}
	return true
}

// Message is the data of the field read when it is message (or string or bytes) field num.
func (f *Fields) Message(num uint32) ([]byte, bool) {
	return f.Data, f.Num == num && f.Type == protowire.BytesType
}

// skipGroup is the slow path of reading a field, taken when easyproto's NextField fails on src:
// it returns what follows a deprecated group (easyproto reads none) of a valid number; any other
// failure is returned as it was.
func skipGroup(src []byte, err error) ([]byte, error) {
	num, typ, n := protowire.ConsumeTag(src)
	if n < 0 || typ != protowire.StartGroupType {
		return src, err
	}
	if num > protowire.MaxValidNumber {
		return src, fmt.Errorf("invalid field number %d", num)
	}
	m := protowire.ConsumeFieldValue(num, typ, src[n:])
	if m < 0 {
		return src, fmt.Errorf("group field #%d: %w", num, protowire.ParseError(m))
	}
	return src[n+m:], nil
}
