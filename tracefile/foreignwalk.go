package tracefile

import (
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/spans/jsonlex"
)

// What the Jaeger and Zipkin walks (walkJaeger, walkZipkin) share: stepping through a document on
// the jsonlex scanner and reading its values as encoding/json would into the document's structs,
// or giving up where encoding/json might read them otherwise.

// errWalk is the scanner's error past the nesting bound; the walk only gives up on it.
var errWalk = errors.New("read through encoding/json")

type foreignWalk struct {
	sc    jsonlex.Scanner
	esc   []byte // scratch for member names with escapes
	unesc []byte // scratch for string values with escapes
	// kept holds the strings the spans keep that are not well-known keys (attribute keys,
	// operation names), each allocated once a document.
	kept map[string]string
}

func newForeignWalk(body []byte) foreignWalk {
	// Skip(d) takes a value inside d arrays and objects, itself one more: one less than the
	// bound refuses all checkDepth refuses (and some values it takes, left to the slow way).
	return foreignWalk{sc: jsonlex.Scanner{Buf: body, MaxDepth: spans.MaxValueDepth - 1, TooDeep: errWalk, Numbers: true}}
}

// end says whether nothing but space follows the document.
func (w *foreignWalk) end() bool {
	w.sc.Space()
	return w.sc.Pos == len(w.sc.Buf)
}

// object steps through the members of the object next in the document, handing member each
// name (valid until member reads the value) with the scanner at the value.
func (w *foreignWalk) object(member func(key []byte) bool) bool {
	if w.sc.Expect('{') != nil {
		return false
	}
	for first := true; ; {
		more, err := w.sc.More('}', &first)
		if err != nil {
			return false
		}
		if !more {
			return true
		}
		key, err := w.sc.Key(&w.esc)
		if err != nil || !member(key) {
			return false
		}
	}
}

// array steps through the elements of the array next in the document, elem reading each.
func (w *foreignWalk) array(elem func() bool) bool {
	if w.sc.Expect('[') != nil {
		return false
	}
	for first := true; ; {
		more, err := w.sc.More(']', &first)
		if err != nil {
			return false
		}
		if !more {
			return true
		}
		if !elem() {
			return false
		}
	}
}

// unknown skips the value of a member the walk does not read, as encoding/json ignores it,
// unless encoding/json would take its name for one of known.
func (w *foreignWalk) unknown(key []byte, known []string, depth int) bool {
	for _, c := range key {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	for _, k := range known {
		if strings.EqualFold(k, alias(key)) {
			return false
		}
	}
	return w.sc.Skip(depth) == nil
}

// once records bit in *seen, and says whether it was not there already: encoding/json keeps a
// repeated member's last value, or merges them, which the walk does not follow.
func once(seen *uint32, bit uint32) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// str reads a string value (null leaves *dst as it is, as encoding/json does): its text in the
// document, or, when it has escapes, unescaped into scratch the next str call reuses.
func (w *foreignWalk) str() (raw []byte, esc, null, ok bool) {
	if w.sc.Null() {
		return nil, false, true, true
	}
	raw, esc, err := w.sc.RawString()
	// encoding/json replaces bytes that are not UTF-8.
	if err != nil || !utf8.Valid(raw) {
		return nil, false, false, false
	}
	if esc {
		w.unesc, _ = jsonlex.AppendUnescaped(w.unesc[:0], raw)
		raw = w.unesc
	}
	return raw, esc, false, true
}

// text reads a string the spans do not keep (ids, types): it may alias the document.
func (w *foreignWalk) text(dst *string) bool {
	raw, esc, null, ok := w.str()
	switch {
	case !ok || null:
	case esc:
		*dst = string(raw)
	default:
		*dst = alias(raw)
	}
	return ok
}

// keep reads a string the spans keep and that repeats (names, attribute keys): see intern.
func (w *foreignWalk) keep(dst *string) bool {
	raw, _, null, ok := w.str()
	if ok && !null {
		*dst = w.intern(raw)
	}
	return ok
}

// intern is raw as a string of its own: a well-known key's, else one allocated once a document.
func (w *foreignWalk) intern(raw []byte) string {
	if k, ok := spans.Intern(raw); ok {
		return k
	}
	k, ok := w.kept[string(raw)]
	if !ok {
		if w.kept == nil {
			w.kept = map[string]string{}
		}
		k = string(raw)
		w.kept[k] = k
	}
	return k
}

// own reads a string the spans may keep and that need not repeat (a tag's value), copied.
func (w *foreignWalk) own(dst *string) bool {
	raw, _, null, ok := w.str()
	if ok && !null {
		*dst = string(raw)
	}
	return ok
}

// number reads a number, or a string holding one, as json.Number does; its text aliases the
// document.
func (w *foreignWalk) number(dst *json.Number) bool {
	if w.sc.Null() {
		return true
	}
	var raw []byte
	if w.sc.Peek() == '"' {
		var esc bool
		var err error
		if raw, esc, err = w.sc.RawString(); err != nil || esc || !jsonlex.ValidNumber(raw) {
			return false
		}
	} else {
		var err error
		if raw, err = w.sc.Number(); err != nil {
			return false
		}
	}
	*dst = json.Number(alias(raw))
	return true
}

// alias is b as a string without a copy, for a string the spans do not keep: the document is
// not written to while it is read.
func alias(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// boolean reads true or false (null leaves *dst as it is).
func (w *foreignWalk) boolean(dst *bool) bool {
	if w.sc.Null() {
		return true
	}
	b, err := w.sc.Bool()
	*dst = b
	return err == nil
}
