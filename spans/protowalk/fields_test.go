package protowalk_test

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/stormwatch/stormwatch/spans/protowalk"
)

// walk is every field of msg as Fields reads it, and its error.
func walk(msg []byte) ([]protowalk.Field, error) {
	var got []protowalk.Field
	f := protowalk.Fields{Src: msg}
	for f.Next() {
		got = append(got, f.Field)
	}
	return got, f.Err
}

// reference is every field of msg as protowire reads it, with the field numbers the generated
// code refuses refused, and a group read as field 0.
func reference(msg []byte) ([]protowalk.Field, bool) {
	var want []protowalk.Field
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 || num > protowire.MaxValidNumber {
			return want, false
		}
		m := protowire.ConsumeFieldValue(num, typ, msg[n:])
		if m < 0 {
			return want, false
		}
		f := protowalk.Field{Num: uint32(num), Type: typ}
		switch v := msg[n : n+m]; typ {
		case protowire.VarintType:
			f.V, _ = protowire.ConsumeVarint(v)
		case protowire.Fixed64Type:
			f.V, _ = protowire.ConsumeFixed64(v)
		case protowire.Fixed32Type:
			x, _ := protowire.ConsumeFixed32(v)
			f.V = uint64(x)
		case protowire.BytesType:
			f.Data, _ = protowire.ConsumeBytes(v)
		case protowire.StartGroupType:
			f.Num = 0
		default:
			return want, false
		}
		want = append(want, f)
		msg = msg[n+m:]
	}
	return want, true
}

// same compares what the fields hold: Data for BytesType, nothing for a group, V for the others.
func same(a, b []protowalk.Field) bool {
	if len(a) != len(b) {
		return false
	}
	for i, x := range a {
		y := b[i]
		switch {
		case x.Num != y.Num || x.Type != y.Type:
			return false
		case x.Type == protowire.BytesType:
			if !bytes.Equal(x.Data, y.Data) {
				return false
			}
		case x.Type != protowire.StartGroupType && x.V != y.V:
			return false
		}
	}
	return true
}

func tag(num protowire.Number, typ protowire.Type) []byte { return protowire.AppendTag(nil, num, typ) }

// seeds are messages of every path Next takes: the one-byte tags it reads itself, the rest.
func seeds() map[string][]byte {
	long := bytes.Repeat([]byte("x"), 200)
	huge := bytes.Repeat([]byte("y"), 20000)
	group := append(tag(5, protowire.StartGroupType), protowire.AppendVarint(tag(1, protowire.VarintType), 7)...)
	group = append(group, tag(5, protowire.EndGroupType)...)
	return map[string][]byte{
		"small varint":        protowire.AppendVarint(tag(3, protowire.VarintType), 5),
		"wide varint":         protowire.AppendVarint(tag(3, protowire.VarintType), 1<<40),
		"fixed64":             protowire.AppendFixed64(tag(7, protowire.Fixed64Type), 0x0102030405060708),
		"fixed32":             protowire.AppendFixed32(tag(16, protowire.Fixed32Type), 0xdeadbeef),
		"short bytes":         protowire.AppendBytes(tag(5, protowire.BytesType), []byte("name")),
		"two-byte length":     protowire.AppendBytes(tag(9, protowire.BytesType), long),
		"three-byte length":   protowire.AppendBytes(tag(9, protowire.BytesType), huge),
		"two-byte tag":        protowire.AppendBytes(tag(1000, protowire.BytesType), []byte("a")),
		"highest number":      protowire.AppendVarint(tag(protowire.MaxValidNumber, protowire.VarintType), 1),
		"group, then a field": append(group, protowire.AppendVarint(tag(2, protowire.VarintType), 1)...),
		"field 0":             protowire.AppendVarint([]byte{0}, 1),
		"field 0 as bytes":    {0x02, 0x00},
		"field 2^29":          protowire.AppendVarint(protowire.AppendVarint(nil, 1<<29<<3), 1),
		"group 2^29":          append(tag(1<<29, protowire.StartGroupType), tag(1<<29, protowire.EndGroupType)...),
		"truncated length":    {0x0a, 0x05, 0x01},
		"truncated varint":    {0x08, 0xff},
		"truncated fixed64":   {0x09, 1, 2, 3},
		"unterminated group":  tag(5, protowire.StartGroupType),
		"end group alone":     tag(5, protowire.EndGroupType),
		"unknown wire type":   {0x0f},
	}
}

// Next reads what protobuf's own wire reader reads, and fails where it fails or where the
// generated code refuses a field number.
func TestFieldsReadsWhatProtowireReads(t *testing.T) {
	for name, msg := range seeds() {
		got, err := walk(msg)
		want, ok := reference(msg)
		if (err == nil) != ok || !same(got, want) {
			t.Errorf("%s: got %+v, %v; want %+v, ok %v", name, got, err, want, ok)
		}
	}
}

func FuzzFields(f *testing.F) {
	for _, msg := range seeds() {
		f.Add(msg)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		got, err := walk(msg)
		want, ok := reference(msg)
		if (err == nil) != ok || !same(got, want) {
			t.Fatalf("got %+v, %v; want %+v, ok %v", got, err, want, ok)
		}
	})
}

// The errors say what is wrong; the decoders put them in theirs.
func TestFieldsErrors(t *testing.T) {
	for name, want := range map[string]string{
		"field 0":            "invalid field number 0",
		"field 2^29":         "invalid field number 536870912",
		"group 2^29":         "invalid field number 536870912",
		"unterminated group": "group field #5",
		"truncated varint":   "cannot read varint",
		"unknown wire type":  "unknown wireType",
	} {
		if _, err := walk(seeds()[name]); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one saying %q", name, err, want)
		}
	}
}
