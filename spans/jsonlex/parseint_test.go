package jsonlex

import (
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
