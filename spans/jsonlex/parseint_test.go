package jsonlex

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestParseIntMatchesStrconv: the scanner's integer reader agrees with strconv on the value,
// on where the number ends, and on what does not fit in an int64 (OTLP/JSON's intValue and the
// 64-bit fields written as numbers).
func TestParseIntMatchesStrconv(t *testing.T) {
	for _, in := range []string{
		"0", "-0", "7", "-7", "42,", "123456789012345678", "-123456789012345678",
		"9223372036854775807", "-9223372036854775808", // the int64 limits
		"9223372036854775808", "-9223372036854775809", // one past them
		"18446744073709551615", "18446744073709551616", "99999999999999999999999",
		"0000000000000000000000042", "-0000000000000000000000042",
		"-", "", "x", "-x", "12a", "1e5",
	} {
		digits := 0
		if len(in) > 0 && in[0] == '-' {
			digits = 1
		}
		for digits < len(in) && in[digits] >= '0' && in[digits] <= '9' {
			digits++
		}
		want, err := strconv.ParseInt(in[:digits], 10, 64)
		got, end, ok := ParseInt([]byte(in), 0)
		if ok != (err == nil) || (ok && (got != want || end != digits)) {
			t.Errorf("ParseInt(%q) = %d, %d, %v; strconv says %d (err %v), end %d", in, got, end, ok, want, err, digits)
		}
	}
}

// TestParseUintMatchesStrconv: the timestamp reader, which reads digits eight at a time, agrees
// with strconv on the value and on where the digits end, whatever their number and whichever byte
// ends them - the bytes either side of '0' and '9' included.
func TestParseUintMatchesStrconv(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n <= 26; n++ {
		for _, stop := range []byte{'/', ':', '"', ',', '}', 'e', '.', 0x00, 0x2f + 0x80, 0x39 + 0x80, 0xff} {
			for at := 0; at <= n; at++ {
				digits := make([]byte, n, n+8)
				for k := range digits {
					digits[k] = '0' + byte(rng.IntN(10))
				}
				if n > 0 && rng.IntN(3) == 0 {
					digits[rng.IntN(n)] = '9' // the edges of the digits' range, often
				}
				in := append(digits[:at:at], stop)
				in = append(in, digits[at:]...) // digits after the stop must not count
				want, err := strconv.ParseUint(string(in[:at]), 10, 64)
				got, end, ok := ParseUint(in, 0)
				if ok != (err == nil) || (ok && (got != want || end != at)) {
					t.Fatalf("ParseUint(%q) = %d, %d, %v; strconv says %d (err %v), end %d", in, got, end, ok, want, err, at)
				}
			}
		}
	}
	for _, in := range []string{"1768471200005852000", "18446744073709551615", "18446744073709551616", "99999999999999999999", "00000000000000000001"} {
		want, err := strconv.ParseUint(in, 10, 64)
		got, end, ok := ParseUint([]byte(in), 0)
		if ok != (err == nil) || (ok && (got != want || end != len(in))) {
			t.Errorf("ParseUint(%q) = %d, %d, %v; strconv says %d (err %v)", in, got, end, ok, want, err)
		}
	}
}
