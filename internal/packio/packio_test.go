package packio_test

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/stormwatch/stormwatch/internal/packio"
)

var errBad = errors.New("bad form")

// TestRoundTrip: what the writers and the string table write, Reader reads back, nil and empty
// lists apart, strings once inline then by reference.
func TestRoundTrip(t *testing.T) {
	var b []byte
	for _, v := range []int64{0, -1, 1, math.MinInt64, math.MaxInt64} {
		b = packio.AppendZZ(b, v)
	}
	b = packio.AppendCount(b, 0, true)
	b = packio.AppendCount(b, 0, false)
	b = packio.AppendCount(b, 300, false)
	b = append(b, 6, 'a', 'b', 'c', 1, 0) // "abc" inline, then a reference to it, then ""
	b = append(b, 150, 1)                 // an inline string of 75 bytes: a two-byte length
	for range 75 {
		b = append(b, 'x')
	}
	end := len(b)
	for range 300 { // room for the list of 300: a count is bounded by what is left to read
		b = append(b, 0)
	}
	r := packio.Reader{S: string(b), Corrupt: errBad, NStrs: 2}
	for _, want := range []int64{0, -1, 1, math.MinInt64, math.MaxInt64} {
		if got := r.ZZ(); got != want {
			t.Fatalf("ZZ = %d, want %d", got, want)
		}
	}
	if n, ok := r.Count(); ok || n != 0 {
		t.Fatalf("nil list: %d, %v", n, ok)
	}
	if n, ok := r.Count(); !ok || n != 0 {
		t.Fatalf("empty list: %d, %v", n, ok)
	}
	if n, ok := r.Count(); !ok || n != 300 {
		t.Fatalf("list of 300: %d, %v", n, ok)
	}
	for _, want := range []string{"abc", "abc", ""} {
		if got := r.Str(); got != want {
			t.Fatalf("Str = %q, want %q", got, want)
		}
	}
	if got := r.Str(); len(got) != 75 || r.Err != nil || r.Off != end {
		t.Fatalf("long string: %d bytes, err %v, at %d, want %d", len(got), r.Err, r.Off, end)
	}
}

// TestUVEveryLength: a varint of each length from one byte to ten reads back the same, with more
// than ten bytes after it or none, and one beyond 64 bits is refused either way.
func TestUVEveryLength(t *testing.T) {
	for _, tail := range []int{0, 16} {
		for n := 1; n <= binary.MaxVarintLen64; n++ {
			want := uint64(1)<<(7*(n-1)) | 5 // the smallest n-byte numbers, and a few bits below
			if n == binary.MaxVarintLen64 {
				want = math.MaxUint64
			}
			b := binary.AppendUvarint(nil, want)
			if len(b) != n {
				t.Fatalf("%d is %d bytes, want %d", want, len(b), n)
			}
			r := packio.Reader{S: string(append(b, make([]byte, tail)...)), Corrupt: errBad}
			if got := r.UV(); got != want || r.Off != n || r.Err != nil {
				t.Errorf("%d bytes, %d after: UV = %d at %d (err %v), want %d at %d", n, tail, got, r.Off, r.Err, want, n)
			}
		}
		r := packio.Reader{S: "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02" + string(make([]byte, tail)), Corrupt: errBad}
		if r.UV(); !errors.Is(r.Err, errBad) {
			t.Errorf("%d after: a varint beyond 64 bits read without an error", tail)
		}
	}
}

// TestCorruptInputFailsAndSticks: each bad input gives an error wrapping the form's sentinel, and
// the first error stays whatever is read after it.
func TestCorruptInputFailsAndSticks(t *testing.T) {
	for name, c := range map[string]struct {
		s     string
		nStrs int
		read  func(r *packio.Reader)
	}{
		"truncated byte":          {"", 0, func(r *packio.Reader) { r.Byte() }},
		"truncated fixed":         {"abc", 0, func(r *packio.Reader) { r.Fixed(8) }},
		"varint cut":              {"\x80", 0, func(r *packio.Reader) { r.UV() }},
		"varint beyond 64 bits":   {"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 0, func(r *packio.Reader) { r.UV() }},
		"list longer than input":  {"\x7f", 0, func(r *packio.Reader) { r.Count() }},
		"reference beyond table":  {"\x01", 0, func(r *packio.Reader) { r.Str() }},
		"string beyond input":     {"\x08ab", 1, func(r *packio.Reader) { r.Str() }},
		"more strings than count": {"\x02a\x02b", 1, func(r *packio.Reader) { r.Str(); r.Str() }},
	} {
		r := packio.Reader{S: c.s, Corrupt: errBad, NStrs: c.nStrs}
		c.read(&r)
		if !errors.Is(r.Err, errBad) {
			t.Errorf("%s: err %v, want one wrapping the form's sentinel", name, r.Err)
			continue
		}
		first := r.Err
		r.Fail("later")
		r.Str()
		r.Byte()
		r.UV()
		if r.Err != first {
			t.Errorf("%s: the first error did not stick: %v", name, r.Err)
		}
	}
}
