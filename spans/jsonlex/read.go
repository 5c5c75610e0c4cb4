package jsonlex

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// SkipPlain returns the offset of the first byte at or after i that ends plain string content -
// a quote, a backslash or a control character JSON forbids in strings - or len(buf). Strings are
// most of an OTLP/JSON body, so it tests words, not bytes (see special), and the lowest flagged
// byte of a word is the answer: the end of a string costs no byte-by-byte walk.
func SkipPlain(buf []byte, i int) int {
	for ; i+8 <= len(buf); i += 8 {
		// buf[i:i+8], not buf[i:]: the compiler then needs no bounds check of its own.
		if m := special(binary.LittleEndian.Uint64(buf[i : i+8])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for i < len(buf) && !strSpecial[buf[i]] {
		i++
	}
	return i
}

// special flags the bytes of the little-endian word x that end plain string content: the high bit
// of a byte is set when the byte is '"', '\\' or below 0x20. The classic (v - ones*c) & ^v & highs
// test flags a zero byte (or, with ^x, a byte below c); a borrow can also flag bytes above a true
// hit, never one below it, so the lowest flag is exact.
func special(x uint64) uint64 {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	q := x ^ (ones * '"')
	b := x ^ (ones * '\\')
	return ((q-ones)&^q | (b-ones)&^b | (x-ones*0x20)&^x) & highs
}

// strSpecial marks the bytes that end a run of plain string content.
var strSpecial = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// EscapeLen returns the length of the valid escape sequence that b starts with (b[0] is the
// backslash): 2, or 6 for \uXXXX; 0 when the escape is invalid or cut short.
func EscapeLen(b []byte) int {
	if len(b) < 2 {
		return 0
	}
	switch b[1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		if len(b) < 6 {
			return 0
		}
		for _, h := range b[2:6] {
			if Unhex(h) < 0 {
				return 0
			}
		}
		return 6
	}
	return 0
}

// Unhex returns the value of c as a hex digit, or -1.
func Unhex(c byte) int { return int(hexValue[c]) }

var hexValue = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = int8(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = int8(c-'a') + 10
		t[c-'a'+'A'] = int8(c-'a') + 10
	}
	return t
}()

// AppendUnescaped appends the content of a string's raw bytes (between its quotes, every escape
// already checked with EscapeLen) with the escapes decoded. A lone UTF-16 surrogate becomes
// U+FFFD, as in encoding/json, and makes ok false for a caller that must refuse it instead (as
// protojson does).
func AppendUnescaped(dst, raw []byte) (out []byte, ok bool) {
	ok = true
	for i := 0; i < len(raw); {
		// Copy the run up to the next escape in one go: escapes are rare within a string
		// (Go's encoding/json escapes only & < > and the like).
		j := bytes.IndexByte(raw[i:], '\\')
		if j < 0 {
			return append(dst, raw[i:]...), ok
		}
		dst = append(dst, raw[i:i+j]...)
		i += j
		switch raw[i+1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hex4(raw[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					if r2 := utf16.DecodeRune(r, hex4(raw[i+2:])); r2 != utf8.RuneError {
						dst = utf8.AppendRune(dst, r2)
						i += 6
						continue
					}
				}
				r, ok = utf8.RuneError, false
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, raw[i+1])
		}
		i += 2
	}
	return dst, ok
}

func hex4(b []byte) rune {
	return rune(Unhex(b[0])<<12 | Unhex(b[1])<<8 | Unhex(b[2])<<4 | Unhex(b[3]))
}

// NonFinite reads the strings the protobuf JSON mapping writes for the doubles JSON has no
// number for: "NaN", "Infinity" and "-Infinity" (the content between the quotes).
func NonFinite(s []byte) (float64, bool) {
	switch string(s) {
	case "NaN":
		return math.NaN(), true
	case "Infinity":
		return math.Inf(1), true
	case "-Infinity":
		return math.Inf(-1), true
	}
	return 0, false
}
