package jsonlex

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSkipPlainFindsEverySpecialByte(t *testing.T) {
	for special := 0; special < 256; special++ {
		if !strSpecial[special] {
			continue
		}
		for pos := 0; pos < 20; pos++ {
			for _, fill := range []byte{'a', 0x7f, 0x80, 0xff, 0x21, 0x5b, 0x5d} {
				buf := make([]byte, 20)
				for i := range buf {
					buf[i] = fill
				}
				buf[pos] = byte(special)
				for start := 0; start <= pos; start++ {
					if got := SkipPlain(buf, start); got != pos {
						t.Fatalf("special %#x at %d, fill %#x, from %d: got %d", special, pos, fill, start, got)
					}
				}
			}
		}
	}
	if got := SkipPlain([]byte("plain text without specials"), 3); got != 27 {
		t.Fatalf("no special: got %d, want the length", got)
	}
}

// TestSkipPlainMatchesByteLoop compares the word-at-a-time scan with a plain byte loop on buffers
// that mix specials with the bytes next to them in value (where a borrow could flag the wrong byte).
func TestSkipPlainMatchesByteLoop(t *testing.T) {
	alphabet := []byte{'"', '\\', 0x00, 0x1f, 0x20, 0x21, '#', ']', '[', 'a', 0x7f, 0x80, 0xff}
	state := uint32(1)
	next := func() uint32 { // xorshift: deterministic, no global source
		state ^= state << 13
		state ^= state >> 17
		state ^= state << 5
		return state
	}
	for n := 0; n < 20000; n++ {
		buf := make([]byte, next()%40)
		for i := range buf {
			if next()%4 == 0 {
				buf[i] = alphabet[next()%uint32(len(alphabet))]
			} else {
				buf[i] = 'x'
			}
		}
		start := 0
		if len(buf) > 0 {
			start = int(next() % uint32(len(buf)))
		}
		want := start
		for want < len(buf) && !strSpecial[buf[want]] {
			want++
		}
		if got := SkipPlain(buf, start); got != want {
			t.Fatalf("SkipPlain(%q, %d) = %d, want %d", buf, start, got, want)
		}
	}
}

func TestEscapeLen(t *testing.T) {
	for in, want := range map[string]int{
		`\"`: 2, `\\`: 2, `\/`: 2, `\b`: 2, `\f`: 2, `\n`: 2, `\r`: 2, `\t`: 2,
		`\u00e9`: 6, `\uD83Dx`: 6, `\uABCDEF`: 6,
		`\`: 0, `\q`: 0, `\u12`: 0, `\u12g4`: 0, `\x41`: 0,
	} {
		if got := EscapeLen([]byte(in)); got != want {
			t.Errorf("EscapeLen(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestAppendUnescaped(t *testing.T) {
	for _, c := range []struct {
		raw, want string
		ok        bool
	}{
		{`plain`, "plain", true},
		{`a\"b\\c\/d`, `a"b\c/d`, true},
		{`\b\f\n\r\t`, "\b\f\n\r\t", true},
		{`caf\u00e9`, "café", true},
		{`\ud83d\ude00!`, "\U0001F600!", true},
		// A lone half of a surrogate pair: U+FFFD, and ok false for callers that refuse it.
		{`x\ud83dy`, "x\uFFFDy", false},
		{`\ude00`, "\uFFFD", false},
		{`\ud83d\u0041`, "\uFFFDA", false},
	} {
		got, ok := AppendUnescaped([]byte(">"), []byte(c.raw))
		if string(got) != ">"+c.want || ok != c.ok {
			t.Errorf("AppendUnescaped(%q) = %q, %v; want %q, %v", c.raw, got, ok, ">"+c.want, c.ok)
		}
	}
}

func TestNonFiniteAndAppendFloatRoundTrip(t *testing.T) {
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		out := AppendFloat(nil, f)
		got, ok := NonFinite(out[1 : len(out)-1])
		if !ok || (got != f && !(math.IsNaN(f) && math.IsNaN(got))) {
			t.Errorf("%v written as %s read back as %v, %v", f, out, got, ok)
		}
	}
	if got := string(AppendFloat(nil, 1.5e-7)); got != "1.5e-07" {
		t.Errorf("AppendFloat(1.5e-7) = %s", got)
	}
	for _, s := range []string{"nan", "Inf", "+Infinity", "1", ""} {
		if _, ok := NonFinite([]byte(s)); ok {
			t.Errorf("NonFinite(%q) accepted", s)
		}
	}
}

func TestAppendStringEscapesAndRepairs(t *testing.T) {
	in := "a\"b\\c\n\r\t\x01\x7f é\xff\xc3z"
	want := `"a\"b\\c\n\r\t\u0001` + "\x7f é" + `\ufffd\ufffdz"`
	if got := string(AppendString(nil, in)); got != want {
		t.Errorf("AppendString(%q) = %s, want %s", in, got, want)
	}
	if got := AppendString(nil, "\xff"); !utf8.Valid(got) {
		t.Errorf("invalid UTF-8 out: %q", got)
	}
}

// AppendString writes what encoding/json writes with HTML escaping off, which the analyzer's
// report evidence relies on: control bytes, quotes, invalid UTF-8, U+2028 and U+2029.
func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "a\"b\\c", "\b\f\n\r\t\x00\x1f\x7f", "é\xff\xc3z", "x\u2028y\u2029z", "<&>"} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		want := strings.TrimSuffix(buf.String(), "\n")
		if got := string(AppendString(nil, s)); got != want {
			t.Errorf("AppendString(%q) = %s, encoding/json writes %s", s, got, want)
		}
	}
}
