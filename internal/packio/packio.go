package packio

import (
	"encoding/binary"
	"fmt"
)

// AppendZZ appends v as a zigzag varint: small magnitudes of either sign take one byte.
func AppendZZ(b []byte, v int64) []byte {
	return binary.AppendUvarint(b, uint64(v<<1)^uint64(v>>63))
}

// AppendCount appends a list's length: 0 for a nil list, else the length + 1, so that nil and
// empty lists survive the trip.
func AppendCount(b []byte, n int, isNil bool) []byte {
	if isNil {
		return append(b, 0)
	}
	return binary.AppendUvarint(b, uint64(n)+1)
}

// StrRef is where a string of a form's table is in its bytes. Not the string itself: an entry is
// written once per string and read on every reference, and as a string (a pointer) each write
// would cost a write barrier while the garbage collector marks.
type StrRef struct{ Off, N uint32 }

// Reader reads one packed form from S; what it reads aliases S (a string read keeps all of S
// alive). The first error sticks and wraps Corrupt; what is read after it means nothing, but stays
// within S, so callers check Err once per element rather than after every read.
type Reader struct {
	S       string
	Off     int
	Err     error
	Corrupt error // the form's own sentinel, for errors.Is
	// Strs is the table of the strings written inline so far. It holds at most NStrs (the
	// form's header says how many), which bounds what a corrupt form can make it grow to.
	Strs  []StrRef
	NStrs int
}

// Fail records the first error, at the current offset.
func (r *Reader) Fail(format string, args ...any) {
	if r.Err == nil {
		r.Err = fmt.Errorf("at byte %d: %s: %w", r.Off, fmt.Sprintf(format, args...), r.Corrupt)
	}
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if r.Off >= len(r.S) {
		r.Fail("truncated")
		return 0
	}
	c := r.S[r.Off]
	r.Off++
	return c
}

// Fixed reads n bytes as they are (ids, fixed-width numbers).
func (r *Reader) Fixed(n int) string {
	if len(r.S)-r.Off < n {
		r.Fail("truncated")
		r.Off = len(r.S)
		return ""
	}
	v := r.S[r.Off : r.Off+n]
	r.Off += n
	return v
}

// UV reads an unsigned varint.
func (r *Reader) UV() uint64 {
	if off := r.Off; off >= 0 && len(r.S)-off >= binary.MaxVarintLen64 {
		// Ten bytes or more to read: a number of nine bytes or fewer cannot run past them, so
		// the loop tests nothing but the end of the number (every span's times are read here),
		// and the shifts, masked, need no test for 64 bits or more. A tenth byte is left to the
		// checked loop below, which refuses a number beyond 64 bits.
		b := r.S[off : off+binary.MaxVarintLen64]
		var v uint64
		for i, shift := 0, uint(0); i < binary.MaxVarintLen64-1; i, shift = i+1, shift+7 {
			c := b[i]
			if c < 0x80 {
				r.Off = off + i + 1
				return v | uint64(c)<<(shift&63)
			}
			v |= uint64(c&0x7f) << (shift & 63)
		}
	}
	var v uint64
	for shift := uint(0); ; shift += 7 {
		if r.Off >= len(r.S) || shift > 63 {
			r.Fail("bad varint")
			return 0
		}
		c := r.S[r.Off]
		r.Off++
		if shift == 63 && c > 1 {
			r.Fail("varint overflows 64 bits")
			return 0
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v
		}
	}
}

// ZZ reads a zigzag varint.
func (r *Reader) ZZ() int64 {
	v := r.UV()
	return int64(v>>1) ^ -int64(v&1)
}

// Count reads a list's length (see AppendCount): ok is false for a nil list, and after an error.
func (r *Reader) Count() (int, bool) {
	var v uint64
	if off := r.Off; off < len(r.S) && r.S[off] < 0x80 {
		v, r.Off = uint64(r.S[off]), off+1 // one byte, as nearly every count: UV is not inlined
	} else {
		v = r.UV()
	}
	if v == 0 || r.Err != nil {
		return 0, false
	}
	if v-1 > uint64(len(r.S)) {
		r.Fail("list of %d", v-1)
		return 0, false
	}
	return int(v - 1), true
}

// Str reads a string: uv n, n even an inline string of n/2 bytes (added to the table unless
// empty), n odd the (n-1)/2-th string of the table.
func (r *Reader) Str() string {
	var v uint64
	if off := r.Off; off < len(r.S) && r.S[off] < 0x80 {
		v, r.Off = uint64(r.S[off]), off+1 // one byte, as nearly every length and reference
	} else {
		v = r.UV()
	}
	if v&1 != 0 {
		if k := v >> 1; k < uint64(len(r.Strs)) {
			s := r.Strs[k]
			return r.S[s.Off : s.Off+s.N]
		}
		r.Fail("string %d of %d", v>>1, len(r.Strs))
		return ""
	}
	n := v >> 1
	if n == 0 {
		return ""
	}
	if n > uint64(len(r.S)-r.Off) {
		r.Fail("string of %d bytes, %d left", n, len(r.S)-r.Off)
		return ""
	}
	if len(r.Strs) >= r.NStrs {
		r.Fail("more strings than the %d counted", r.NStrs)
		return ""
	}
	at := r.Off
	r.Off += int(n)
	r.Strs = append(r.Strs, StrRef{uint32(at), uint32(n)})
	return r.S[at:r.Off]
}
