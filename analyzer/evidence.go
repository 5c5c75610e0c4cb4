package analyzer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/stormwatch/stormwatch/spans/jsonlex"
)

// Evidence is a finding's proof, by key: the figures its summary quotes and what a reader needs
// to check them. Keys are snake_case and part of the report contract (docs/detectors.md).
type Evidence map[string]Value

// Kind says what a Value holds.
type Kind uint8

// Kinds of value. KindNone is the zero Value, which JSON writes as null.
const (
	KindNone Kind = iota
	KindInt
	KindFloat
	KindText
	KindBool
	KindTexts
	KindInts
	KindFloats
	KindRecord
	KindRecords
)

var kindNames = [...]string{"none", "int", "float", "text", "bool", "texts", "ints", "floats", "record", "records"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Value is one evidence value, made by the constructors (Int, Text, Records...), so that a
// reader learns its kind without a type switch over whatever a detector might have put there.
// Numbers and texts are held without an allocation; the fields are plain Go values, so that
// reflect.DeepEqual compares two reports by what they say.
type Value struct {
	kind Kind
	n    uint64 // an Int's or Float's bits, a Bool
	s    string // a Text
	list any    // []string, []int, []float64, Evidence (a Record) or []Evidence
}

// Int is an integer value.
func Int(v int) Value { return Value{n: uint64(int64(v)), kind: KindInt} }

// Float is a number with a fraction; NaN and infinities have no JSON form and fail the report.
func Float(v float64) Value { return Value{n: math.Float64bits(v), kind: KindFloat} }

// Text is a string value.
func Text(s string) Value { return Value{s: s, kind: KindText} }

// Bool is a yes or no.
func Bool(v bool) Value {
	var n uint64
	if v {
		n = 1
	}
	return Value{n: n, kind: KindBool}
}

// Texts is a list of strings. The value shares s: the finding's copy (Finding.Clone) does not.
// A nil list is written as null, an empty one as [].
func Texts(s []string) Value { return Value{list: s, kind: KindTexts} }

// Ints is a list of integers, shared like Texts.
func Ints(s []int) Value { return Value{list: s, kind: KindInts} }

// Floats is a list of numbers, shared like Texts.
func Floats(s []float64) Value { return Value{list: s, kind: KindFloats} }

// Record is evidence within evidence: a JSON object.
func Record(e Evidence) Value { return Value{list: e, kind: KindRecord} }

// Counts is a record of counts by name, such as answers by status ("200": 60, "503": 2).
func Counts(m map[string]int) Value {
	if m == nil {
		return Record(nil)
	}
	e := make(Evidence, len(m))
	for k, n := range m {
		e[k] = Int(n)
	}
	return Record(e)
}

// Records is a list of records, such as the layers of a chain of retries.
func Records(s []Evidence) Value { return Value{list: s, kind: KindRecords} }

// Kind says what v holds.
func (v Value) Kind() Kind { return v.kind }

// Int is v's integer, if v is one.
func (v Value) Int() (int, bool) {
	if v.kind != KindInt {
		return 0, false
	}
	return int(int64(v.n)), true
}

// Float is v's number, if v is a Float.
func (v Value) Float() (float64, bool) {
	if v.kind != KindFloat {
		return 0, false
	}
	return math.Float64frombits(v.n), true
}

// Number is v as a float64 whether it is an Int or a Float: a report read back from JSON has an
// Int wherever a Float had no fraction.
func (v Value) Number() (float64, bool) {
	switch v.kind {
	case KindInt:
		return float64(int64(v.n)), true
	case KindFloat:
		return math.Float64frombits(v.n), true
	}
	return 0, false
}

// Text is v's string, if v is one.
func (v Value) Text() (string, bool) {
	if v.kind != KindText {
		return "", false
	}
	return v.s, true
}

// Bool is v's truth, if v is a Bool.
func (v Value) Bool() (bool, bool) { return v.kind == KindBool && v.n == 1, v.kind == KindBool }

// Texts is v's list of strings, if v is one; it is v's own memory, not to be changed.
func (v Value) Texts() ([]string, bool) {
	if v.kind != KindTexts {
		return nil, false
	}
	return v.texts(), true
}

// Ints is v's list of integers, if v is one; not to be changed.
func (v Value) Ints() ([]int, bool) {
	if v.kind != KindInts {
		return nil, false
	}
	return v.ints(), true
}

// Floats is v's list of numbers, if v is one; not to be changed.
func (v Value) Floats() ([]float64, bool) {
	if v.kind != KindFloats {
		return nil, false
	}
	return v.floats(), true
}

// Record is v's record, if v is one; not to be changed.
func (v Value) Record() (Evidence, bool) {
	if v.kind != KindRecord {
		return nil, false
	}
	return v.record(), true
}

// Records is v's list of records, if v is one; not to be changed.
func (v Value) Records() ([]Evidence, bool) {
	if v.kind != KindRecords {
		return nil, false
	}
	return v.records(), true
}

// The list of a Value of the kind: its constructor put it there (nil for any other kind).
func (v Value) texts() []string     { s, _ := v.list.([]string); return s }
func (v Value) ints() []int         { s, _ := v.list.([]int); return s }
func (v Value) floats() []float64   { s, _ := v.list.([]float64); return s }
func (v Value) record() Evidence    { e, _ := v.list.(Evidence); return e }
func (v Value) records() []Evidence { s, _ := v.list.([]Evidence); return s }

// Equal reports whether v and w hold the same kind and the same contents.
func (v Value) Equal(w Value) bool {
	if v.kind != w.kind {
		return false
	}
	switch v.kind {
	case KindText:
		return v.s == w.s
	case KindTexts:
		a, b := v.texts(), w.texts()
		return slices.Equal(a, b) && (a == nil) == (b == nil)
	case KindInts:
		a, b := v.ints(), w.ints()
		return slices.Equal(a, b) && (a == nil) == (b == nil)
	case KindFloats:
		a, b := v.floats(), w.floats()
		return slices.Equal(a, b) && (a == nil) == (b == nil)
	case KindRecord:
		a, b := v.record(), w.record()
		return a.Equal(b) && (a == nil) == (b == nil)
	case KindRecords:
		a, b := v.records(), w.records()
		return slices.EqualFunc(a, b, Evidence.Equal) && (a == nil) == (b == nil)
	}
	return v.n == w.n
}

// Equal reports whether e and o have the same keys with equal values.
func (e Evidence) Equal(o Evidence) bool {
	return maps.EqualFunc(e, o, Value.Equal)
}

// String is v as a report's text shows it: lists joined by ", ", counts by name most frequent
// first ("503 x54, 200 x2"), layers of retries as "edge x3 -> api x3", other records as
// "k: v" pairs and the zero Value as "-".
func (v Value) String() string {
	switch v.kind {
	case KindNone:
		return "-"
	case KindInt:
		return strconv.FormatInt(int64(v.n), 10)
	case KindFloat:
		return strconv.FormatFloat(math.Float64frombits(v.n), 'f', -1, 64)
	case KindText:
		return v.s
	case KindBool:
		return strconv.FormatBool(v.n == 1)
	case KindTexts:
		return strings.Join(v.texts(), ", ")
	case KindInts:
		parts := make([]string, len(v.ints()))
		for i, x := range v.ints() {
			parts[i] = strconv.Itoa(x)
		}
		return strings.Join(parts, ", ")
	case KindFloats:
		parts := make([]string, len(v.floats()))
		for i, x := range v.floats() {
			parts[i] = strconv.FormatFloat(x, 'f', -1, 64)
		}
		return strings.Join(parts, ", ")
	case KindRecord:
		return countsOrPairs(v.record())
	case KindRecords:
		rs := v.records()
		parts := make([]string, len(rs))
		for i, r := range rs {
			if s, ok := r["service"]; ok {
				parts[i] = s.String() + " x" + r["attempts"].String()
			} else {
				parts[i] = "(" + r.String() + ")"
			}
		}
		return strings.Join(parts, " -> ")
	}
	return v.kind.String()
}

// String renders e as "key=value" pairs in key order, two spaces apart.
func (e Evidence) String() string {
	keys := slices.Sorted(maps.Keys(e))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + e[k].String()
	}
	return strings.Join(parts, "  ")
}

// countsOrPairs renders a record of whole numbers as counts, most frequent first ("503 x54,
// 200 x2"), and any other as "k: v" pairs in key order.
func countsOrPairs(e Evidence) string {
	keys := slices.Sorted(maps.Keys(e))
	counts := make(map[string]int, len(e))
	for k, x := range e {
		f, ok := x.Number()
		if !ok || f != math.Trunc(f) {
			counts = nil
			break
		}
		counts[k] = int(f)
	}
	parts := make([]string, len(keys))
	if counts != nil {
		slices.SortStableFunc(keys, func(a, b string) int { return counts[b] - counts[a] })
		for i, k := range keys {
			parts[i] = k + " x" + strconv.Itoa(counts[k])
		}
		return strings.Join(parts, ", ")
	}
	for i, k := range keys {
		parts[i] = k + ": " + e[k].String()
	}
	return strings.Join(parts, ", ")
}

// Clone is a copy of e owning all its memory: its strings, lists and records are copies.
func (e Evidence) Clone() Evidence {
	var c cloner
	c.size(e)
	c.alloc()
	return c.evidence(e)
}

// cloner copies a finding with all its strings and lists of numbers in one block of memory, sized
// by a first walk: one allocation for every string and number of the finding, whatever their
// number. The block holds no pointers, so the collector never scans it; its numbers come first,
// where a word's alignment is the block's own.
type cloner struct {
	n    int    // bytes the strings need (first walk)
	nums int    // bytes the lists of numbers need (first walk), whole words
	mem  []byte // the block (second walk): numbers from 0, strings from nums, never grown
	at   int    // where the next list of numbers goes
	buf  []byte // the strings' part of mem, appended to
}

// alloc makes the block the first walk sized.
func (c *cloner) alloc() {
	if c.n+c.nums == 0 {
		return
	}
	words := make([]uint64, (c.nums+c.n+7)/8)
	c.mem = unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)
	c.buf = c.mem[c.nums:c.nums:len(c.mem)]
}

func (c *cloner) str(s string) string {
	if len(s) == 0 {
		return ""
	}
	at := len(c.buf)
	c.buf = append(c.buf, s...)
	return unsafe.String(&c.buf[at], len(s))
}

// numbers copies a list of ints or float64s (both a word here) into the block: nil stays nil,
// an empty list stays empty.
func numbers[T int | float64](c *cloner, s []T) []T {
	if s == nil {
		return nil
	}
	if len(s) == 0 {
		return []T{}
	}
	out := unsafe.Slice((*T)(unsafe.Pointer(&c.mem[c.at])), len(s))
	c.at += wordsOf(len(s), unsafe.Sizeof(s[0]))
	copy(out, s)
	return out
}

// wordsOf is the room a list of n numbers of the given size takes in the block: whole words, so
// that the next list stays aligned.
func wordsOf(n int, size uintptr) int { return (n*int(size) + 7) &^ 7 }

func (c *cloner) size(e Evidence) {
	for k, v := range e {
		c.n += len(k)
		switch v.kind {
		case KindText:
			c.n += len(v.s)
		case KindTexts:
			for _, s := range v.texts() {
				c.n += len(s)
			}
		case KindInts:
			c.nums += wordsOf(len(v.ints()), unsafe.Sizeof(int(0)))
		case KindFloats:
			c.nums += wordsOf(len(v.floats()), unsafe.Sizeof(float64(0)))
		case KindRecord:
			c.size(v.record())
		case KindRecords:
			for _, r := range v.records() {
				c.size(r)
			}
		}
	}
}

func (c *cloner) evidence(e Evidence) Evidence {
	if e == nil {
		return nil
	}
	out := make(Evidence, len(e))
	for k, v := range e {
		out[c.str(k)] = c.value(v)
	}
	return out
}

func (c *cloner) value(v Value) Value {
	switch v.kind {
	case KindText:
		return Text(c.str(v.s))
	case KindTexts:
		s := slices.Clone(v.texts())
		for i := range s {
			s[i] = c.str(s[i])
		}
		return Texts(s)
	case KindInts:
		return Ints(numbers(c, v.ints()))
	case KindFloats:
		return Floats(numbers(c, v.floats()))
	case KindRecord:
		return Record(c.evidence(v.record()))
	case KindRecords:
		if v.records() == nil {
			return v
		}
		rs := make([]Evidence, len(v.records()))
		for i, r := range v.records() {
			rs[i] = c.evidence(r)
		}
		return Records(rs)
	}
	return v
}

// Clone is a copy of f owning all its memory - strings, span ids, evidence - so that it may be
// kept after the pass that reported it, whose trace and operations the next analysis reuses.
func (f Finding) Clone() Finding {
	var c cloner
	c.n = len(f.Detector) + len(f.TraceID) + len(f.Service) + len(f.Dependency) + len(f.Summary) + len(f.Action)
	for _, id := range f.SpanIDs {
		c.n += len(id)
	}
	c.size(f.Evidence)
	c.alloc()
	f.Detector = c.str(f.Detector)
	f.TraceID = c.str(f.TraceID)
	f.Service = c.str(f.Service)
	f.Dependency = c.str(f.Dependency)
	f.Summary = c.str(f.Summary)
	f.Action = c.str(f.Action)
	if f.SpanIDs != nil {
		ids := make([]string, len(f.SpanIDs))
		for i, id := range f.SpanIDs {
			ids[i] = c.str(id)
		}
		f.SpanIDs = ids
	}
	f.Evidence = c.evidence(f.Evidence)
	return f
}

// MarshalJSON writes e as encoding/json writes a map: keys sorted, so reports are the same bytes
// whatever order the detector filled it in.
func (e Evidence) MarshalJSON() ([]byte, error) {
	if e == nil {
		return []byte("null"), nil
	}
	return e.appendJSON(nil)
}

func (e Evidence) appendJSON(b []byte) ([]byte, error) {
	keys := slices.Sorted(maps.Keys(e))
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonlex.AppendString(b, k)
		b = append(b, ':')
		var err error
		if b, err = e[k].appendJSON(b); err != nil {
			return nil, fmt.Errorf("evidence %s: %w", k, err)
		}
	}
	return append(b, '}'), nil
}

// MarshalJSON writes v as encoding/json writes the Go value it stands for (an int, a float64, a
// string, a []string, a map...), so the report's bytes do not depend on the evidence being typed.
func (v Value) MarshalJSON() ([]byte, error) { return v.appendJSON(nil) }

func (v Value) appendJSON(b []byte) ([]byte, error) {
	var err error
	switch v.kind {
	case KindInt:
		return strconv.AppendInt(b, int64(v.n), 10), nil
	case KindFloat:
		return appendFloat(b, math.Float64frombits(v.n))
	case KindText:
		return jsonlex.AppendString(b, v.s), nil
	case KindBool:
		return strconv.AppendBool(b, v.n == 1), nil
	case KindTexts:
		if v.texts() == nil {
			break
		}
		b = append(b, '[')
		for i, s := range v.texts() {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonlex.AppendString(b, s)
		}
		return append(b, ']'), nil
	case KindInts:
		if v.ints() == nil {
			break
		}
		b = append(b, '[')
		for i, x := range v.ints() {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(x), 10)
		}
		return append(b, ']'), nil
	case KindFloats:
		if v.floats() == nil {
			break
		}
		b = append(b, '[')
		for i, x := range v.floats() {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendFloat(b, x); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case KindRecord:
		if v.record() == nil {
			break
		}
		return v.record().appendJSON(b)
	case KindRecords:
		if v.records() == nil {
			break
		}
		b = append(b, '[')
		for i, r := range v.records() {
			if i > 0 {
				b = append(b, ',')
			}
			if r == nil {
				b = append(b, "null"...)
			} else if b, err = r.appendJSON(b); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	return append(b, "null"...), nil
}

// appendFloat formats f as encoding/json formats a float64: the shortest decimal that reads back
// as f, in exponent form below 1e-6 and from 1e21 up.
func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("unsupported value: %s", strconv.FormatFloat(f, 'g', -1, 64))
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

// UnmarshalJSON reads a value of a report: a whole number as an Int (JSON does not say whether
// it was a Float without a fraction), any other number as a Float, a string, a bool, an array of
// strings, of numbers or of objects, an object, or null.
func (v *Value) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return err
	}
	got, err := fromJSON(x)
	if err != nil {
		return err
	}
	*v = got
	return nil
}

var errEvidenceShape = errors.New("evidence holds numbers, strings, bools, lists of numbers, strings or objects, and objects")

func fromJSON(x any) (Value, error) {
	switch t := x.(type) {
	case nil:
		return Value{}, nil
	case bool:
		return Bool(t), nil
	case string:
		return Text(t), nil
	case json.Number:
		return jsonNumber(t)
	case map[string]any:
		e, err := recordFromJSON(t)
		return Record(e), err
	case []any:
		return listFromJSON(t)
	}
	return Value{}, fmt.Errorf("%T: %w", x, errEvidenceShape)
}

func jsonNumber(n json.Number) (Value, error) {
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil && int64(int(i)) == i {
		return Int(int(i)), nil
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return Value{}, err
	}
	return Float(f), nil
}

func recordFromJSON(m map[string]any) (Evidence, error) {
	e := make(Evidence, len(m))
	for k, x := range m {
		v, err := fromJSON(x)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		e[k] = v
	}
	return e, nil
}

// listFromJSON reads an array by its elements: strings, numbers (Ints when all are whole, else
// Floats) or objects, which may be null. An empty array is an empty Texts, which writes the
// same [].
func listFromJSON(xs []any) (Value, error) {
	if len(xs) == 0 {
		return Texts([]string{}), nil
	}
	first := xs[0]
	for _, x := range xs {
		if x != nil {
			first = x
			break
		}
	}
	switch first.(type) {
	case nil:
		// Only records can be null in a list: Records with nil entries, as it was written.
		return Records(make([]Evidence, len(xs))), nil
	case string:
		s := make([]string, len(xs))
		for i, x := range xs {
			t, ok := x.(string)
			if !ok {
				return Value{}, fmt.Errorf("a list of strings and %T: %w", x, errEvidenceShape)
			}
			s[i] = t
		}
		return Texts(s), nil
	case json.Number:
		ints := make([]int, len(xs))
		var floats []float64
		for i, x := range xs {
			n, ok := x.(json.Number)
			if !ok {
				return Value{}, fmt.Errorf("a list of numbers and %T: %w", x, errEvidenceShape)
			}
			v, err := jsonNumber(n)
			if err != nil {
				return Value{}, err
			}
			if k, ok := v.Int(); ok && floats == nil {
				ints[i] = k
				continue
			}
			if floats == nil {
				floats = make([]float64, len(xs))
				for j := range i {
					floats[j] = float64(ints[j])
				}
			}
			floats[i], _ = v.Number()
		}
		if floats != nil {
			return Floats(floats), nil
		}
		return Ints(ints), nil
	case map[string]any:
		rs := make([]Evidence, len(xs))
		for i, x := range xs {
			if x == nil {
				continue
			}
			m, ok := x.(map[string]any)
			if !ok {
				return Value{}, fmt.Errorf("a list of objects and %T: %w", x, errEvidenceShape)
			}
			r, err := recordFromJSON(m)
			if err != nil {
				return Value{}, err
			}
			rs[i] = r
		}
		return Records(rs), nil
	}
	return Value{}, fmt.Errorf("a list of %T: %w", first, errEvidenceShape)
}
