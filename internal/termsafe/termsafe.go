package termsafe

import (
	"io"
	"strconv"
	"unicode/utf8"
)

// unsafeRune reports whether r must not reach a terminal as it is: C0 and C1 controls, DEL, the
// bidi embeddings, overrides, isolates and marks, the zero-width characters and the line and
// paragraph separators.
func unsafeRune(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r >= 0x200b && r <= 0x200f, r >= 0x2028 && r <= 0x202e,
		r >= 0x2060 && r <= 0x2069, r == 0xfeff:
		return true
	}
	return false
}

// appendEscaped appends the visible escape of rune r (size bytes of s at i, r == RuneError with
// size 1 for a byte that is not UTF-8).
func appendEscaped(dst []byte, s string, i int, r rune, size int) []byte {
	switch {
	case r == utf8.RuneError && size == 1:
		return append(append(dst, `\x`...), hex2(s[i])...)
	case r == '\n':
		return append(dst, `\n`...)
	case r == '\t':
		return append(dst, `\t`...)
	case r == '\r':
		return append(dst, `\r`...)
	case r < 0x80:
		return append(append(dst, `\x`...), hex2(byte(r))...)
	}
	dst = append(dst, `\u`...)
	h := strconv.FormatInt(int64(r), 16)
	for range 4 - len(h) {
		dst = append(dst, '0')
	}
	return append(dst, h...)
}

func hex2(b byte) []byte {
	const digits = "0123456789abcdef"
	return []byte{digits[b>>4], digits[b&15]}
}

// needs reports the index of the first byte of s that starts something to escape (keep says
// which of '\n' and '\t' may stay), -1 for none: the common case costs one pass and no allocation.
func needs(s string, keep bool) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 || c == 0x7f) && !(keep && (c == '\n' || c == '\t')) {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || unsafeRune(r) {
			return i
		}
		i += size
	}
	return -1
}

// appendSafe appends s to dst with every unsafe character escaped (keep: but newlines and tabs).
func appendSafe(dst []byte, s string, keep bool) []byte {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || unsafeRune(r) && !(keep && (r == '\n' || r == '\t')) {
			dst = appendEscaped(dst, s, i, r, size)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return dst
}

// String is s with every control, escape, bidi and zero-width character (newlines and tabs too)
// shown as a visible escape. s itself when there is none.
func String(s string) string {
	k := needs(s, false)
	if k < 0 {
		return s
	}
	return string(appendSafe(append(make([]byte, 0, len(s)+16), s[:k]...), s[k:], false))
}

// Writer escapes what is written through it as String does, but keeps newlines and tabs.
type Writer struct {
	w     io.Writer
	carry []byte // the start of a UTF-8 sequence that the last write cut
	buf   []byte
}

// NewWriter returns a Writer over w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write escapes p and writes it; it reports len(p) written when the escaped bytes were.
func (w *Writer) Write(p []byte) (int, error) {
	s := string(append(w.carry, p...))
	w.carry = w.carry[:0]
	// A UTF-8 sequence cut at the end is kept for the next write.
	if n := cutRune(s); n > 0 {
		w.carry = append(w.carry, s[len(s)-n:]...)
		s = s[:len(s)-n]
	}
	w.buf = appendSafe(w.buf[:0], s, true)
	if _, err := w.w.Write(w.buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes a cut UTF-8 sequence left at the end, escaped.
func (w *Writer) Flush() error {
	if len(w.carry) == 0 {
		return nil
	}
	s := string(w.carry)
	w.carry = w.carry[:0]
	_, err := w.w.Write(appendSafe(nil, s, true))
	return err
}

// cutRune is the length of an incomplete UTF-8 sequence at the end of s (0 for none).
func cutRune(s string) int {
	for n := 1; n <= 3 && n <= len(s); n++ {
		c := s[len(s)-n]
		if c < utf8.RuneSelf {
			return 0
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRuneInString(s[len(s)-n:]) {
				return n
			}
			return 0
		}
	}
	return 0
}

// Frame escapes a rendered frame as the Writer does, keeping the colour and style sequences
// (SGR: ESC [ digits and semicolons m) that the dashboard's own styles make. Any other escape
// sequence in it came from the data.
func Frame(s string) string { return styled(s, true) }

// Cell is Frame for one cell of a table or one line: a newline is escaped too.
func Cell(s string) string { return styled(s, false) }

// styled escapes s but its SGR sequences (and its newlines, with lines).
func styled(s string, lines bool) string {
	k := frameNeeds(s, lines)
	if k < 0 {
		return s
	}
	out := append(make([]byte, 0, len(s)+32), s[:k]...)
	for i := k; i < len(s); {
		if n := sgrLen(s[i:]); n > 0 {
			out = append(out, s[i:i+n]...)
			i += n
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || unsafeRune(r) && !(lines && r == '\n') {
			out = appendEscaped(out, s, i, r, size)
		} else {
			out = append(out, s[i:i+size]...)
		}
		i += size
	}
	return string(out)
}

// frameNeeds is needs for a frame (lines: newlines may stay): the index of the first unsafe character that is not part of an
// SGR sequence, -1 for none.
func frameNeeds(s string, lines bool) int {
	for i := 0; i < len(s); {
		if n := sgrLen(s[i:]); n > 0 {
			i += n
			continue
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 || c == 0x7f) && !(lines && c == '\n') {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || unsafeRune(r) {
			return i
		}
		i += size
	}
	return -1
}

// sgrLen is the length of the SGR sequence s starts with, 0 when it starts with none.
func sgrLen(s string) int {
	if len(s) < 3 || s[0] != 0x1b || s[1] != '[' {
		return 0
	}
	for i := 2; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9', c == ';', c == ':':
		case c == 'm':
			return i + 1
		default:
			return 0
		}
	}
	return 0
}
