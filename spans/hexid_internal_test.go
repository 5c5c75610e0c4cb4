package spans

import (
	"encoding/hex"
	"testing"
)

// TestHexIDAgreesWithEncodingHex: a JSON id is read as encoding/hex reads it - every byte value at
// every place of a span id and a trace id, upper and lower case - and refused when it is not hex,
// of another length, or cut short.
func TestHexIDAgreesWithEncodingHex(t *testing.T) {
	const digits = "0123456789abcdefABCDEF0123456789fedcba9876543210FEDCBA"
	for _, n := range []int{8, 16} {
		for pos := 0; pos < 2*n; pos++ {
			for c := 0; c < 256; c++ {
				src := []byte(digits[:2*n])
				src[pos] = byte(c)
				want, err := hex.DecodeString(string(src))
				got := make([]byte, n)
				ok := hexID(got, src)
				if ok != (err == nil) || (ok && string(got) != string(want)) {
					t.Fatalf("hexID(%q) = %x, %v; encoding/hex says %x, %v", src, got, ok, want, err)
				}
			}
		}
		src := []byte(digits[:2*n])
		if hexID(make([]byte, n), src[:2*n-1]) || hexID(make([]byte, n), append(src, '0')) {
			t.Errorf("%d-byte id: a digit short or over is read as an id", n)
		}
	}
}
