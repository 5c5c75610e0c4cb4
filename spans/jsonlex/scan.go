package jsonlex

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"unsafe"
)

// Scanner reads the tokens of one JSON text, Buf, from offset Pos. It validates what it reads and
// its errors give the byte offset of the problem. Callers with a fast path of their own read Buf
// at Pos directly and move Pos past what they consumed.
type Scanner struct {
	Buf []byte
	Pos int
	// MaxDepth bounds how deep Skip goes into the values it steps over, so hostile input cannot
	// recurse without limit; TooDeep is wrapped in the error when they nest deeper.
	MaxDepth int
	TooDeep  error
	// Strict makes Skip refuse a string holding a lone UTF-16 surrogate, as protojson does.
	Strict bool
	// Numbers makes Number (and so Skip) accept only JSON's number grammar, as encoding/json
	// does: no leading zeroes, digits on both sides of a point, at most one exponent.
	Numbers bool
}

// Errorf reports a problem with the token at Pos.
func (s *Scanner) Errorf(format string, args ...any) error {
	return s.ErrorAt(s.Pos, format, args...)
}

// ErrorAt reports a problem with the token that starts at offset pos.
func (s *Scanner) ErrorAt(pos int, format string, args ...any) error {
	return fmt.Errorf("at offset %d: %s", pos, fmt.Sprintf(format, args...))
}

// Space skips white space.
func (s *Scanner) Space() {
	buf, i := s.Buf, s.Pos
	// Compact JSON has no space between tokens: one compare settles it.
	if i < len(buf) && buf[i] > ' ' {
		return
	}
	for i < len(buf) && (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\t' || buf[i] == '\r') {
		i++
	}
	s.Pos = i
}

// TokenStart skips space and returns the offset of the next token, for error messages.
func (s *Scanner) TokenStart() int {
	s.Space()
	return s.Pos
}

// Peek returns the next non-space byte, or 0 at the end of input.
func (s *Scanner) Peek() byte {
	s.Space()
	if s.Pos < len(s.Buf) {
		return s.Buf[s.Pos]
	}
	return 0
}

// Describe names the byte at Pos for an error message.
func (s *Scanner) Describe() string {
	if s.Pos >= len(s.Buf) {
		return "end of input"
	}
	return strconv.QuoteRune(rune(s.Buf[s.Pos]))
}

// Expect consumes c, the next non-space byte, or fails.
func (s *Scanner) Expect(c byte) error {
	if s.Peek() != c {
		return s.Errorf("expected %q, found %s", c, s.Describe())
	}
	s.Pos++
	return nil
}

// Null consumes a null literal if one is next.
func (s *Scanner) Null() bool {
	if s.Peek() == 'n' && bytes.HasPrefix(s.Buf[s.Pos:], []byte("null")) {
		s.Pos += 4
		return true
	}
	return false
}

// More steps through the members of an object or the elements of an array after its opening
// bracket: it consumes the separating comma, or the closing bracket and reports false.
func (s *Scanner) More(close byte, first *bool) (bool, error) {
	c := s.Peek()
	if c == close {
		s.Pos++
		return false, nil
	}
	if !*first {
		if c != ',' {
			return false, s.Errorf("expected ',' or %q, found %s", close, s.Describe())
		}
		s.Pos++
	}
	*first = false
	return true, nil
}

// Key reads an object member's name and the colon after it. Names with escapes are unescaped
// into scratch so they still match.
func (s *Scanner) Key(scratch *[]byte) ([]byte, error) {
	// Compact JSON: a plain name and the colon right after it.
	if i := s.Pos; i < len(s.Buf) && s.Buf[i] == '"' {
		j := SkipPlain(s.Buf, i+1)
		if j+1 < len(s.Buf) && s.Buf[j] == '"' && s.Buf[j+1] == ':' {
			s.Pos = j + 2
			return s.Buf[i+1 : j], nil
		}
	}
	raw, esc, err := s.RawString()
	if err != nil {
		return nil, err
	}
	if esc {
		*scratch, _ = AppendUnescaped((*scratch)[:0], raw)
		raw = *scratch
	}
	if err := s.Expect(':'); err != nil {
		return nil, err
	}
	return raw, nil
}

// RawString reads a string token and returns its bytes between the quotes and whether it holds
// escapes.
func (s *Scanner) RawString() ([]byte, bool, error) {
	if s.Peek() != '"' {
		return nil, false, s.Errorf("expected a string, found %s", s.Describe())
	}
	s.Pos++
	start := s.Pos
	esc := false
	for s.Pos < len(s.Buf) {
		s.Pos = SkipPlain(s.Buf, s.Pos)
		if s.Pos >= len(s.Buf) {
			break
		}
		switch c := s.Buf[s.Pos]; {
		case c == '"':
			s.Pos++
			return s.Buf[start : s.Pos-1], esc, nil
		case c == '\\':
			if err := s.escape(); err != nil {
				return nil, false, err
			}
			esc = true
		default:
			return nil, false, s.Errorf("control character %#x in string", c)
		}
	}
	return nil, false, s.Errorf("unterminated string")
}

// escape steps over the escape sequence at pos, or says what is wrong with it.
func (s *Scanner) escape() error {
	if n := EscapeLen(s.Buf[s.Pos:]); n > 0 {
		s.Pos += n
		return nil
	}
	switch {
	case s.Pos+1 >= len(s.Buf):
		return s.Errorf("unterminated escape")
	case s.Buf[s.Pos+1] != 'u':
		if c := s.Buf[s.Pos+1]; c >= 0x20 && c < 0x7f {
			return s.Errorf("bad escape \\%c", c)
		}
		// A control byte (ESC) or a byte past ASCII, named rather than written: the message may
		// reach a terminal.
		return s.Errorf("bad escape \\ and byte 0x%02x", s.Buf[s.Pos+1])
	case s.Pos+6 > len(s.Buf):
		return s.Errorf("short \\u escape")
	}
	return s.Errorf("bad \\u escape")
}

// Skip steps over one value of any kind, validating it.
func (s *Scanner) Skip(depth int) error {
	if depth > s.MaxDepth {
		return fmt.Errorf("%w: %w", s.TooDeep, s.Errorf("JSON nested more than %d deep", s.MaxDepth))
	}
	switch c := s.Peek(); c {
	case '{':
		s.Pos++
		for first := true; ; {
			ok, err := s.More('}', &first)
			if err != nil || !ok {
				return err
			}
			if err := s.skipString(); err != nil {
				return err
			}
			if err := s.Expect(':'); err != nil {
				return err
			}
			if err := s.Skip(depth + 1); err != nil {
				return err
			}
		}
	case '[':
		s.Pos++
		for first := true; ; {
			ok, err := s.More(']', &first)
			if err != nil || !ok {
				return err
			}
			if err := s.Skip(depth + 1); err != nil {
				return err
			}
		}
	case '"':
		return s.skipString()
	case 't', 'f', 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if bytes.HasPrefix(s.Buf[s.Pos:], []byte(lit)) {
				s.Pos += len(lit)
				return nil
			}
		}
		return s.Errorf("invalid literal")
	default:
		_, err := s.Number()
		return err
	}
}

// skipString steps over a string; with Strict, one holding a lone UTF-16 surrogate is an error.
func (s *Scanner) skipString() error {
	raw, esc, err := s.RawString()
	if err == nil && esc && s.Strict {
		if _, ok := AppendUnescaped(nil, raw); !ok {
			return s.Errorf("lone UTF-16 surrogate in string")
		}
	}
	return err
}

// Number reads a JSON number token and returns its text.
func (s *Scanner) Number() ([]byte, error) {
	s.Space()
	start := s.Pos
	if s.Pos < len(s.Buf) && s.Buf[s.Pos] == '-' {
		s.Pos++
	}
	digits := 0
	for s.Pos < len(s.Buf) {
		c := s.Buf[s.Pos]
		if c >= '0' && c <= '9' {
			digits++
		} else if c != '.' && c != 'e' && c != 'E' && c != '+' && c != '-' {
			break
		}
		s.Pos++
	}
	if digits == 0 {
		s.Pos = start
		return nil, s.Errorf("expected a value, found %s", s.Describe())
	}
	if s.Numbers && !ValidNumber(s.Buf[start:s.Pos]) {
		return nil, s.ErrorAt(start, "invalid number %q", s.Buf[start:s.Pos])
	}
	return s.Buf[start:s.Pos], nil
}

// ValidNumber says whether b is a number in JSON's grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func ValidNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() int {
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i - j
	}
	switch n := digits(); {
	case n == 0, n > 1 && b[i-n] == '0':
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(b)
}

// NumberText reads a number given as a JSON number or as a string holding one (the protobuf JSON
// mapping writes 64-bit integers as strings).
func (s *Scanner) NumberText() ([]byte, error) {
	if s.Peek() == '"' {
		raw, esc, err := s.RawString()
		if err != nil {
			return nil, err
		}
		if esc {
			return nil, s.Errorf("escapes in a number string")
		}
		return raw, nil
	}
	return s.Number()
}

// PlainInt reads, at the start of a token, an integer in the forms exporters write - a number of
// plain digits, or a string of them - and consumes it. Anything else (exponents, fractions,
// escapes) returns false without consuming input, for the general path to parse or reject.
func (s *Scanner) PlainInt() (int64, bool) {
	buf, i := s.Buf, s.Pos
	quoted := i < len(buf) && buf[i] == '"'
	if quoted {
		i++
	}
	n, j, ok := ParseInt(buf, i)
	if !ok || !s.plainEnd(j, quoted) {
		return 0, false
	}
	return n, true
}

// PlainUint is PlainInt for the unsigned timestamps.
func (s *Scanner) PlainUint() (uint64, bool) {
	buf, i := s.Buf, s.Pos
	quoted := i < len(buf) && buf[i] == '"'
	if quoted {
		i++
	}
	n, j, ok := ParseUint(buf, i)
	if !ok || !s.plainEnd(j, quoted) {
		return 0, false
	}
	return n, true
}

// plainEnd checks that the digits of a plain integer end at j - at the closing quote of a string,
// or, for a number, before anything but more of a number - and consumes the token.
func (s *Scanner) plainEnd(j int, quoted bool) bool {
	buf := s.Buf
	if quoted {
		if j >= len(buf) || buf[j] != '"' {
			return false
		}
		s.Pos = j + 1
		return true
	}
	if j < len(buf) {
		switch buf[j] {
		case '.', 'e', 'E', '+', '-':
			return false
		}
	}
	s.Pos = j
	return true
}

// Int64 parses an integer field. Integral numbers in exponent form are accepted, as protojson
// does.
func (s *Scanner) Int64() (int64, error) {
	start := s.TokenStart()
	if n, ok := s.PlainInt(); ok {
		return n, nil
	}
	txt, err := s.NumberText()
	if err != nil {
		return 0, err
	}
	if n, err := strconv.ParseInt(bstr(txt), 10, 64); err == nil {
		return n, nil
	}
	f, err := strconv.ParseFloat(bstr(txt), 64)
	if err != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, s.ErrorAt(start, "invalid int64 %q", txt)
	}
	return int64(f), nil
}

// Uint64 parses a fixed64 timestamp; values above MaxInt64 wrap as they do from protobuf.
func (s *Scanner) Uint64() (int64, error) {
	start := s.TokenStart()
	if n, ok := s.PlainUint(); ok {
		return int64(n), nil
	}
	txt, err := s.NumberText()
	if err != nil {
		return 0, err
	}
	if n, err := strconv.ParseUint(bstr(txt), 10, 64); err == nil {
		return int64(n), nil
	}
	f, err := strconv.ParseFloat(bstr(txt), 64)
	if err != nil || f != math.Trunc(f) || f < 0 || f >= math.MaxUint64 {
		return 0, s.ErrorAt(start, "invalid uint64 %q", txt)
	}
	return int64(uint64(f)), nil
}

// Float64 parses a double: a number, or a string holding one or NaN, Infinity or -Infinity.
func (s *Scanner) Float64() (float64, error) {
	start := s.TokenStart()
	if s.Peek() == '"' {
		raw, _, err := s.RawString()
		if err != nil {
			return 0, err
		}
		if f, ok := NonFinite(raw); ok {
			return f, nil
		}
		f, err := strconv.ParseFloat(bstr(raw), 64)
		if err != nil {
			return 0, s.ErrorAt(start, "invalid double %q", raw)
		}
		return f, nil
	}
	txt, err := s.Number()
	if err != nil {
		return 0, err
	}
	f, err := strconv.ParseFloat(bstr(txt), 64)
	if err != nil {
		return 0, s.ErrorAt(start, "invalid double %q", txt)
	}
	return f, nil
}

// Bool parses true or false.
func (s *Scanner) Bool() (bool, error) {
	s.Space()
	switch {
	case bytes.HasPrefix(s.Buf[s.Pos:], []byte("true")):
		s.Pos += 4
		return true, nil
	case bytes.HasPrefix(s.Buf[s.Pos:], []byte("false")):
		s.Pos += 5
		return false, nil
	}
	return false, s.Errorf("expected true or false, found %s", s.Describe())
}

// Enum reads an enum as its number or its name.
func (s *Scanner) Enum(names []string) (uint64, error) {
	start := s.TokenStart()
	if s.Peek() == '"' {
		raw, _, err := s.RawString()
		if err != nil {
			return 0, err
		}
		for i, n := range names {
			if string(raw) == n {
				return uint64(i), nil
			}
		}
		return 0, s.ErrorAt(start, "unknown enum value %q", raw)
	}
	n, err := s.Int64()
	return uint64(n), err
}

// ParseInt reads an optional minus and decimal digits at i, the integer forms OTLP/JSON writes,
// and returns the value and the offset after them: ParseUint reads the digits, and the sign
// decides which magnitudes fit in an int64.
func ParseInt(buf []byte, i int) (int64, int, bool) {
	j := i
	neg := j < len(buf) && buf[j] == '-'
	if neg {
		j++
	}
	n, end, ok := ParseUint(buf, j)
	switch {
	case !ok:
		return 0, 0, false
	case neg && n <= 1<<63:
		return int64(-n), end, true // -(1<<63) wraps to itself: math.MinInt64
	case !neg && n <= math.MaxInt64:
		return int64(n), end, true
	}
	return 0, 0, false
}

// ParseUint reads decimal digits at i, the form of OTLP/JSON's fixed64 timestamps, like ParseInt:
// up to 19 digits are summed as read, longer runs go through strconv. A timestamp has 19 digits,
// two per span: they are read eight to a word (see eightDigits), the few left one by one - a
// digit at a time they are a chain of 19 dependent multiply-adds.
func ParseUint(buf []byte, i int) (uint64, int, bool) {
	j := i
	var n uint64
	for k := 0; k < 2 && j+8 <= len(buf); k++ {
		v, ok := eightDigits(binary.LittleEndian.Uint64(buf[j : j+8]))
		if !ok {
			break
		}
		n, j = n*100_000_000+v, j+8
	}
	for ; j < len(buf); j++ {
		c := buf[j] - '0'
		if c > 9 {
			break
		}
		n = n*10 + uint64(c)
	}
	switch {
	case j == i:
		return 0, 0, false
	case j-i > 19:
		v, err := strconv.ParseUint(bstr(buf[i:j]), 10, 64)
		return v, j, err == nil
	}
	return n, j, true
}

// eightDigits reads the eight ASCII digits of the little-endian word x (its first byte the most
// significant digit), or false when a byte is not a digit.
func eightDigits(x uint64) (uint64, bool) {
	const (
		ones = 0x0101010101010101
		high = 0xF0F0F0F0F0F0F0F0
	)
	// Each byte is 0x3_ with a low nibble of at most 9 (adding 6 leaves it 0x3_).
	if (x&high)|((x+6*ones)&high)>>4 != 0x33*ones {
		return 0, false
	}
	x -= '0' * ones
	// Each byte ten times itself plus the next: bytes 0, 2, 4 and 6 hold the pairs' values.
	x = x*10 + x>>8
	// The pairs weighted 1,000,000, 10,000, 100 and 1 by two multiplications, each of two pairs
	// (bytes 0 and 4, then 2 and 6), the sum landing in the high word.
	x = ((x&0x000000FF000000FF)*(100+1_000_000<<32) + (x>>16&0x000000FF000000FF)*(1+10_000<<32)) >> 32
	return x, true
}

// bstr aliases b as a string for the strconv parsers, which do not keep it.
func bstr(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
