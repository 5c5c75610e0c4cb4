package spans

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"strconv"

	"github.com/stormwatch/stormwatch/spans/jsonlex"
)

// maxJSONDepth bounds the nesting of JSON values the decoder skips (unknown fields), so hostile
// input cannot recurse without limit.
const maxJSONDepth = 256

// DecodeJSON decodes one OTLP/JSON ExportTraceServiceRequest into a batch, with a hand-written
// scanner that allocates per request, not per span or attribute.
//
// It reads OTLP/JSON as the OTLP specification defines it: lowerCamelCase field names (the proto
// snake_case names are accepted too), trace and span ids as hex strings, enums as integers or
// their names ("SPAN_KIND_SERVER"), 64-bit integers as strings or numbers, bytes values in base64,
// unknown fields ignored and null treated as absent. A repeated field name replaces the earlier
// value. The span rules are those of [DecodeProto]: a span whose trace or span id is missing, not
// hex, of the wrong length or all zeroes is rejected and counted while the rest are kept.
//
// Ownership is as for [DecodeProto]: strings without escapes alias buf, so the caller hands buf over
// and must not modify it while the batch's spans are held. Errors wrap [ErrMalformed], are marked
// permanent, and give the path and byte offset of the problem. Attribute values are held to
// [MaxValueDepth] as in [DecodeProto], kept or dropped, so the two decoders accept the same
// requests; other unknown fields may nest 256 JSON levels.
func DecodeJSON(buf []byte, opt DecodeOptions) (*Batch, error) {
	b := &Batch{}
	if err := decodeJSON(b, buf, opt, false); err != nil {
		return nil, err
	}
	return b, nil
}

// DecodeJSONInto is [DecodeJSON] into b, reusing its arrays as [DecodeProtoInto] does.
func DecodeJSONInto(b *Batch, buf []byte, opt DecodeOptions) error {
	return decodeJSON(b, buf, opt, true)
}

func decodeJSON(b *Batch, buf []byte, opt DecodeOptions, reuse bool) error {
	if reuse {
		b.recycle()
	}
	d := jsonDecoder{s: jsonlex.Scanner{Buf: buf, MaxDepth: maxJSONDepth, TooDeep: ErrTooDeep}, opt: opt, b: b}
	// Sizes are estimates, not bounds; the slices grow, then get trimmed or compacted when the guess
	// was far off. Attributes are guessed from the body length: about 100 bytes each in compact
	// OTLP/JSON.
	// Bounded by the body length too (real spans take more than 256 bytes of JSON; a request of
	// smaller ones grows the slice), so that a body of capital I's cannot reserve a span for every
	// three bytes.
	d.b.Spans = b.spansFor(min(estimateSpans(buf), len(buf)/256+1))
	d.attrs.initIn(b.attrBuf, len(buf)/96+8)
	err := d.request()
	finishDecode(b, &d.attrs, reuse)
	if err != nil {
		return malformed("decode OTLP/JSON request", err)
	}
	if opt.PackByTrace {
		// The spans go with the packed traces only, as from the protobuf decoder (which packs
		// straight from the wire); a batch decoded into again clears them from b.decoded.
		b.Pack()
		b.Spans = nil
	}
	return nil
}

// estimateSpans guesses the number of spans in an OTLP/JSON body from its capital I's: every span
// has a "traceId" and a "spanId", most a "parentSpanId", and little else in OTLP/JSON is spelled
// with one. Counting one byte is a single vectorised pass; looking for the member names themselves
// would stop at every quote.
func estimateSpans(buf []byte) int {
	if n := bytes.Count(buf, []byte{'I'}); n > 0 {
		return n/3 + 1
	}
	return bytes.Count(buf, []byte(`"span_id"`)) + 1
}

var (
	spanKindNames   = []string{"SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER", "SPAN_KIND_CLIENT", "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER"}
	statusCodeNames = []string{"STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"}
)

type jsonDecoder struct {
	s      jsonlex.Scanner
	opt    DecodeOptions
	b      *Batch
	attrs  attrSlab // resource and span attributes
	xattrs attrSlab // link and event attributes
	links  []Link
	events []Event
	// other holds unescaped strings and the display form of arrays, maps and bytes; see
	// protoDecoder.other for why aliasing it is safe.
	other   []byte
	scratch []byte // unescaped member names, reused
	// keys caches the attribute keys met so far, by the 24 bytes from the start of the key (its
	// text and, for short keys, what follows it, `","value":{"` and the value's kind, which
	// repeat with the key). A hit is checked against those bytes, kept in the slot (three words
	// compared, not the key's bytes by a call), and the key's text past them, so it saves the
	// scan of the key and its look-up in the well-known table, nothing else. Keys outside the
	// well-known set alias buf, which the batch holds anyway.
	keys [1 << jsonKeyBits]jsonKey
}

const jsonKeyBits = 6

type jsonKey struct {
	w    [3]uint64 // the 24 bytes from the key's start, its closing quote among them when it is shorter
	key  string
	keep bool
}

func (d *jsonDecoder) request() error {
	s := &d.s
	if s.Peek() == 0 {
		return s.Errorf("empty body")
	}
	if err := s.Expect('{'); err != nil {
		return err
	}
	for first := true; ; {
		ok, err := s.More('}', &first)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		key, err := s.Key(&d.scratch)
		if err != nil {
			return err
		}
		switch bstr(key) {
		case "resourceSpans", "resource_spans":
			if err := d.array("resourceSpans", d.resourceSpans); err != nil {
				return err
			}
		default:
			if err := s.Skip(0); err != nil {
				return err
			}
		}
	}
	// Not Peek() != 0: Peek reads a NUL byte as the end of input, and what follows one would be
	// ignored.
	if s.Space(); s.Pos != len(s.Buf) {
		return s.Errorf("data after the request object")
	}
	return nil
}

// array calls elem for each element of an array (null counts as empty), naming the element in errors.
func (d *jsonDecoder) array(name string, elem func() error) error {
	s := &d.s
	if s.Null() {
		return nil
	}
	if err := s.Expect('['); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	for i, first := 0, true; ; i++ {
		ok, err := s.More(']', &first)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if !ok {
			return nil
		}
		if err := elem(); err != nil {
			return fmt.Errorf("%s[%d]: %w", name, i, err)
		}
	}
}

// object calls member for each member of an object; null counts as empty.
func (d *jsonDecoder) object(member func(key []byte) error) error {
	s := &d.s
	if s.Null() {
		return nil
	}
	if err := s.Expect('{'); err != nil {
		return err
	}
	for first := true; ; {
		ok, err := s.More('}', &first)
		if err != nil || !ok {
			return err
		}
		key, err := s.Key(&d.scratch)
		if err != nil {
			return err
		}
		if err := member(key); err != nil {
			return err
		}
	}
}

// reserveArena sizes the arena on first use, so a request whose strings need unescaping (Go's
// encoding/json writes & < > as \u escapes) costs one allocation for them, not one per doubling.
// Only what writes into the arena reserves it: a request with nothing to unescape or render
// allocates none (a sixteenth of its size, for every request).
func (d *jsonDecoder) reserveArena() {
	if d.other == nil {
		d.other = make([]byte, 0, max(len(d.s.Buf)/16, 256))
	}
}

// str reads a string value: aliasing buf when it has no escapes, unescaped into the arena
// otherwise.
func (d *jsonDecoder) str() (string, error) {
	raw, esc, err := d.s.RawString()
	if err != nil {
		return "", err
	}
	if !esc {
		return bstr(raw), nil
	}
	d.reserveArena()
	start := len(d.other)
	d.other, _ = jsonlex.AppendUnescaped(d.other, raw)
	return bstr(d.other[start:]), nil
}

// optStr reads a string that may be null.
func (d *jsonDecoder) optStr() (string, error) {
	if d.s.Null() {
		return "", nil
	}
	return d.str()
}

func (d *jsonDecoder) resourceSpans() error {
	// The resource may come after the spans that share it, so spans point at it before it is filled.
	res := &Resource{}
	return d.object(func(key []byte) error {
		switch bstr(key) {
		case "resource":
			if err := d.resource(res); err != nil {
				return fmt.Errorf("resource: %w", err)
			}
			return nil
		case "scopeSpans", "scope_spans":
			return d.array("scopeSpans", func() error { return d.scopeSpans(res) })
		}
		return d.s.Skip(0)
	})
}

func (d *jsonDecoder) resource(res *Resource) error {
	return d.object(func(key []byte) error {
		switch bstr(key) {
		case "attributes":
			d.attrs.begin()
			err := d.array("attributes", func() error {
				k, a, keep, err := d.keyValue()
				if err != nil || !keep {
					return err
				}
				switch k {
				case AttrServiceName:
					res.ServiceName = d.display(a)
				case AttrServiceInstance:
					res.ServiceInstance = d.display(a)
				default:
					d.attrs.add(a)
				}
				return nil
			})
			res.Attrs = d.attrs.end()
			return err
		}
		return d.s.Skip(0)
	})
}

// display renders a resource's service name or instance as the protobuf decoder does.
func (d *jsonDecoder) display(a Attr) string {
	switch a.Type {
	case ValueInt, ValueDouble, ValueBool: // written out; a string is itself
		d.reserveArena()
	}
	return display(&d.other, a)
}

func (d *jsonDecoder) scopeSpans(res *Resource) error {
	first := len(d.b.Spans)
	scope := ""
	err := d.object(func(key []byte) error {
		switch bstr(key) {
		case "scope":
			return d.object(func(key []byte) error {
				switch bstr(key) {
				case "name":
					name, err := d.optStr()
					if err != nil {
						return fmt.Errorf("scope.name: %w", err)
					}
					scope = name
					return nil
				case "attributes":
					// Not kept, but recorded as sent: within the nesting every reader takes.
					if err := d.array("attributes", d.skipKeyValue); err != nil {
						return fmt.Errorf("scope.attributes: %w", err)
					}
					return nil
				}
				return d.s.Skip(0)
			})
		case "spans":
			return d.array("spans", func() error { return d.span(res) })
		}
		return d.s.Skip(0)
	})
	// The scope may come after its spans.
	for i := first; i < len(d.b.Spans); i++ {
		d.b.Spans[i].Scope = scope
	}
	return err
}

// hexID decodes a hex id into dst (8 or 16 bytes: a multiple of 4); false when it is not
// len(dst) bytes of hex. Ids are three of every span's strings, so it reads eight digits a word:
// each byte checked against the digits' and (lowered) the letters' range without a branch, the
// letters given 9 more than their low nibble, the nibbles' pairs gathered into four bytes.
func hexID(dst []byte, src []byte) bool {
	if len(src) != 2*len(dst) || len(dst)%4 != 0 {
		return false
	}
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	// For a byte below 0x80 (no carry leaves it), the high bit of it plus 0x80-lo says it is at
	// least lo, of it plus 0x7f-hi that it is above hi; bytes of 0x80 and up are bad in themselves.
	var bad uint64
	for i := 0; i < len(dst); i += 4 {
		x := load64(src[2*i : 2*i+8])
		digit := (x + ones*(0x80-'0')) &^ (x + ones*(0x7f-'9'))
		lower := x | 0x20*ones // 'A'-'F' to 'a'-'f'; nothing else lands there
		letter := (lower + ones*(0x80-'a')) &^ (lower + ones*(0x7f-'f'))
		bad |= x&highs | ((digit|letter)&highs ^ highs)
		v := x&(0x0f*ones) + (letter&highs)>>7*9
		w := (v<<4 | v>>8) & 0x00ff00ff00ff00ff // each pair's byte, in the pair's first byte
		w = (w | w>>8) & 0x0000ffff0000ffff
		w |= w >> 16
		binary.LittleEndian.PutUint32(dst[i:i+4], uint32(w))
	}
	return bad == 0
}

// hexInto reads a hex id string into dst and says whether it was valid: len(dst) bytes of hex.
// The usual case - a string of exactly that many hex digits - is decoded where it lies; anything
// else (null, escapes, another length) takes the general path.
func (d *jsonDecoder) hexInto(dst []byte) (bool, error) {
	s := &d.s
	s.Space()
	buf, i, n := s.Buf, s.Pos, 2*len(dst)
	if i+n+2 <= len(buf) && buf[i] == '"' && buf[i+n+1] == '"' && hexID(dst, buf[i+1:i+1+n]) {
		s.Pos = i + n + 2
		return true, nil
	}
	raw, err := d.id()
	if err != nil {
		return false, err
	}
	return hexID(dst, raw), nil
}

// id reads a hex id string (null or absent is the empty id).
func (d *jsonDecoder) id() ([]byte, error) {
	if d.s.Null() {
		return nil, nil
	}
	return d.scratchStr()
}

// scratchStr reads a string value, unescaped into scratch when it has escapes: valid until scratch
// is used again.
func (d *jsonDecoder) scratchStr() ([]byte, error) {
	raw, esc, err := d.s.RawString()
	if err == nil && esc {
		d.scratch, _ = jsonlex.AppendUnescaped(d.scratch[:0], raw)
		raw = d.scratch
	}
	return raw, err
}

func (d *jsonDecoder) span(res *Resource) error {
	sp := Span{Resource: res}
	traceOK, spanOK := false, false
	linkStart, eventStart := len(d.links), len(d.events)
	var traceState string
	err := d.object(func(key []byte) error {
		s := &d.s
		var err error
		k := bstr(key)
		switch k {
		case "traceState", "trace_state":
			traceState, err = d.optStr()
		case "traceId", "trace_id":
			traceOK, err = d.hexInto(sp.TraceID[:])
		case "spanId", "span_id":
			spanOK, err = d.hexInto(sp.SpanID[:])
		case "parentSpanId", "parent_span_id":
			var ok bool
			if ok, err = d.hexInto(sp.ParentID[:]); err == nil && !ok {
				sp.ParentID = SpanID{}
			}
		case "name":
			sp.Name, err = d.optStr()
		case "kind":
			var v uint64
			if !s.Null() {
				v, err = s.Enum(spanKindNames)
				sp.Kind = Kind(v)
			}
		case "startTimeUnixNano", "start_time_unix_nano":
			if !s.Null() {
				sp.StartUnixNano, err = s.Uint64()
			}
		case "endTimeUnixNano", "end_time_unix_nano":
			if !s.Null() {
				sp.EndUnixNano, err = s.Uint64()
			}
		case "attributes":
			sp.Attrs, err = d.attrList(&d.attrs)
			return err
		case "events":
			d.events = d.events[:eventStart]
			return d.array("events", d.event)
		case "links":
			d.links = d.links[:linkStart]
			return d.array("links", d.link)
		case "status":
			err = d.object(func(key []byte) error {
				switch bstr(key) {
				case "message":
					msg, err := d.optStr()
					if err != nil {
						return fmt.Errorf("message: %w", err)
					}
					sp.StatusMessage = msg
					return nil
				case "code":
					if s.Null() {
						return nil
					}
					v, err := s.Enum(statusCodeNames)
					if err != nil {
						return fmt.Errorf("code: %w", err)
					}
					sp.Status = StatusCode(v)
					return nil
				}
				return s.Skip(0)
			})
		default:
			return s.Skip(0)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !traceOK || !spanOK || sp.TraceID.IsZero() || sp.SpanID.IsZero() {
		d.links, d.events = d.links[:linkStart], d.events[:eventStart]
		d.b.Rejected++
		d.b.RejectReason = RejectInvalidID
		return nil
	}
	if len(d.links) > linkStart {
		sp.Links = d.links[linkStart:len(d.links):len(d.links)]
	}
	if len(d.events) > eventStart {
		sp.Events = d.events[eventStart:len(d.events):len(d.events)]
	}
	if traceState != "" && samplingState(traceState) {
		// The attributes may come before or after the trace state: they are copied into a run
		// of their own with it, rarely (only a sampled trace's spans carry it).
		d.attrs.begin()
		for _, a := range sp.Attrs {
			d.attrs.add(a)
		}
		d.attrs.add(Attr{Key: AttrTraceState, Str: traceState, Type: ValueString})
		sp.Attrs = d.attrs.end()
	}
	d.b.Spans = append(d.b.Spans, sp)
	return nil
}

func (d *jsonDecoder) event() error {
	var e Event
	err := d.object(func(key []byte) error {
		var err error
		k := bstr(key)
		switch k {
		case "timeUnixNano", "time_unix_nano":
			if !d.s.Null() {
				e.TimeUnixNano, err = d.s.Uint64()
			}
		case "name":
			e.Name, err = d.optStr()
		case "attributes":
			e.Attrs, err = d.attrList(&d.xattrs)
			return err
		default:
			return d.s.Skip(0)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		return nil
	})
	d.events = append(d.events, e)
	return err
}

func (d *jsonDecoder) link() error {
	var l Link
	traceOK, spanOK := false, false
	err := d.object(func(key []byte) error {
		var err error
		k := bstr(key)
		switch k {
		case "traceId", "trace_id":
			traceOK, err = d.hexInto(l.TraceID[:])
		case "spanId", "span_id":
			spanOK, err = d.hexInto(l.SpanID[:])
		case "attributes":
			l.Attrs, err = d.attrList(&d.xattrs)
			return err
		default:
			return d.s.Skip(0)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		return nil
	})
	// As in the protobuf decoder, a link whose ids are not the right length is dropped.
	if traceOK && spanOK {
		d.links = append(d.links, l)
	}
	return err
}

// attrList reads an attributes array into slab and returns what it kept: a span's, an event's or a
// link's.
func (d *jsonDecoder) attrList(slab *attrSlab) ([]Attr, error) {
	slab.begin()
	if d.attrsCompact(slab) {
		return slab.end(), nil
	}
	err := d.array("attributes", func() error { return d.attr(slab) })
	return slab.end(), err
}

// attrsCompact reads a whole attributes array written compactly - '[', attributes in the layout
// attrFast reads separated by bare commas, ']' - in one loop, without the general array walk and
// its callbacks. On anything else it undoes what it added and returns false with the input where
// it was, for the general walk to read the array from its start (and report what is wrong, with
// the attribute's index).
func (d *jsonDecoder) attrsCompact(slab *attrSlab) bool {
	s := &d.s
	s.Space()
	start := s.Pos
	if start >= len(s.Buf) || s.Buf[start] != '[' {
		return false
	}
	mark, arena := slab.mark(), len(d.other)
	s.Pos++
	if s.Pos < len(s.Buf) && s.Buf[s.Pos] == ']' {
		s.Pos++
		return true
	}
	for d.attrFast(slab) {
		if s.Pos >= len(s.Buf) {
			break
		}
		if c := s.Buf[s.Pos]; c == ',' {
			s.Pos++
			continue
		} else if c == ']' {
			s.Pos++
			return true
		}
		break
	}
	// When the slab moved meanwhile, rollback cannot give the space back; begin then starts the
	// run after what was added, which nothing refers to.
	slab.rollback(mark)
	slab.begin()
	d.other = d.other[:arena]
	s.Pos = start
	return false
}

// attr decodes one KeyValue into slab when its key is kept.
func (d *jsonDecoder) attr(slab *attrSlab) error {
	if d.attrFast(slab) {
		return nil
	}
	_, a, keep, err := d.keyValue()
	if err == nil && keep {
		slab.add(a)
	}
	return err
}

// attrFast reads the layout that exporters write for almost every attribute - compact, key first,
// a string, integer or bool value: {"key":"k","value":{"stringValue":"v"}} - without the general
// object walk. Anything else (whitespace, escapes in the key, other members or order, a bad
// escape) makes it return false without consuming input, and the general path decodes the
// attribute (and reports what is wrong with it).
func (d *jsonDecoder) attrFast(slab *attrSlab) bool {
	buf, i := d.s.Buf, d.s.Pos
	if !at(buf, i, `{"key":"`) {
		return false
	}
	i += len(`{"key":"`)
	// The key decides whether a string value is worth unescaping, so it is looked up first: in
	// the cache of recent keys, else by scanning it and looking it up in the well-known table.
	var a Attr
	keep, arena := true, len(d.other)
	var slot *jsonKey
	var w [3]uint64
	if i+24 <= len(buf) {
		w = [3]uint64{load64(buf[i : i+8]), load64(buf[i+8 : i+16]), load64(buf[i+16 : i+24])}
		h := w[0] ^ bits.RotateLeft64(w[1], 21) ^ bits.RotateLeft64(w[2], 42)
		slot = &d.keys[h*0x9E3779B97F4A7C15>>(64-jsonKeyBits)]
		if n := len(slot.key); n > 0 && slot.w == w && (n < 24 || i+n < len(buf) && buf[i+n] == '"' && string(buf[i+24:i+n]) == slot.key[24:]) {
			a.Key, keep, i = slot.key, slot.keep, i+n+1
			slot = nil
		}
	}
	if a.Key == "" {
		j := jsonlex.SkipPlain(buf, i)
		if j >= len(buf) || buf[j] != '"' {
			return false
		}
		key := buf[i:j]
		i = j + 1
		if k, ok := Intern(key); ok {
			a.Key = k
		} else {
			a.Key, keep = bstr(key), d.opt.AllAttributes
		}
		if slot != nil && len(key) > 0 {
			*slot = jsonKey{w: w, key: a.Key, keep: keep}
		}
	}
	if !at(buf, i, `,"value"`) || !at(buf, i+8, `:{"`) {
		return false
	}
	i += len(`,"value":{"`)
	switch {
	case at(buf, i, `stringVa`) && at(buf, i+8, `lue":"`):
		i += len(`stringValue":"`)
		j := jsonlex.SkipPlain(buf, i)
		switch {
		case j >= len(buf):
			return false
		case buf[j] == '"':
			a.Str, i = bstr(buf[i:j]), j+1
		case buf[j] == '\\':
			// Go's encoding/json escapes & < > (URLs with a query); other exporters escape less.
			end, ok := skipEscaped(buf, j)
			if !ok {
				return false
			}
			if keep {
				d.reserveArena()
				start := len(d.other)
				d.other, _ = jsonlex.AppendUnescaped(d.other, buf[i:end-1])
				a.Str = bstr(d.other[start:])
			}
			i = end
		default:
			return false
		}
		a.Type = ValueString
	case at(buf, i, `intValue`) && at(buf, i+8, `":`):
		i += len(`intValue":`)
		quoted := i < len(buf) && buf[i] == '"'
		if quoted {
			i++
		}
		n, j, ok := jsonlex.ParseInt(buf, i)
		if !ok {
			return false
		}
		if quoted {
			if j >= len(buf) || buf[j] != '"' {
				return false
			}
			j++
		}
		a.Type, a.Num, i = ValueInt, n, j
	case at(buf, i, `boolValu`) && at(buf, i+8, `e":true`):
		a.Type, a.Num, i = ValueBool, 1, i+len(`boolValue":true`)
	case at(buf, i, `boolValu`) && at(buf, i+8, `e":false`):
		a.Type, i = ValueBool, i+len(`boolValue":false`)
	default:
		return false
	}
	if !at(buf, i, `}}`) {
		d.other = d.other[:arena] // an unescaped value, if any, is decoded again by the general path
		return false
	}
	d.s.Pos = i + 2
	if keep {
		slab.add(a)
	}
	return true
}

// at reports whether buf holds lit at offset i. With a constant lit of up to eight bytes the
// compiler turns the comparison into one load and compare, which bytes.HasPrefix (a call to
// memequal) is not.
func at(buf []byte, i int, lit string) bool {
	return len(buf)-i >= len(lit) && string(buf[i:i+len(lit)]) == lit
}

// skipEscaped continues a string whose content has an escape at j: it returns the offset after
// the closing quote, or false when an escape is invalid, a control character appears or the
// input ends first.
func skipEscaped(buf []byte, j int) (int, bool) {
	for j < len(buf) {
		switch buf[j] {
		case '"':
			return j + 1, true
		case '\\':
			n := jsonlex.EscapeLen(buf[j:])
			if n == 0 {
				return 0, false
			}
			j += n
		default:
			return 0, false
		}
		j = jsonlex.SkipPlain(buf, j)
	}
	return 0, false
}

// keyValue decodes a KeyValue object. keep says whether the key is well-known or all attributes
// are kept; k is the interned key (or "" when not well-known). The value of a key known to be
// dropped is skipped, not decoded.
func (d *jsonDecoder) keyValue() (k string, a Attr, keep bool, err error) {
	haveKey, haveValue := false, false
	err = d.object(func(key []byte) error {
		switch bstr(key) {
		case "key":
			raw, err := d.str()
			if err != nil {
				return fmt.Errorf("key: %w", err)
			}
			haveKey = true
			if k, keep = Intern(raw); keep {
				a.Key = k
			} else {
				a.Key, keep = raw, d.opt.AllAttributes
			}
			return nil
		case "value":
			if haveKey && !keep {
				return d.skipAnyValue()
			}
			v, err := d.anyValue()
			if err != nil {
				return fmt.Errorf("value: %w", err)
			}
			a.Type, a.Str, a.Num, haveValue = v.Type, v.Str, v.Num, true
			return nil
		}
		return d.s.Skip(0)
	})
	if err != nil {
		return "", Attr{}, false, err
	}
	if !haveKey {
		// protojson reads a missing key as "": kept only with AllAttributes.
		keep = d.opt.AllAttributes
	}
	if !haveValue {
		a.Type, a.Str, a.Num = ValueEmpty, "", 0
	}
	return k, a, keep, nil
}

// skipValueJSONDepth is how deep the JSON of a skipped AnyValue may nest for skipAnyValue to pass
// it over without looking at its structure: each array or map level takes at least three JSON
// levels (the AnyValue object, the array or map object, its values array), so a value that nests no
// deeper than this is within MaxValueDepth.
const skipValueJSONDepth = 3 * MaxValueDepth

// skipAnyValue steps over the AnyValue of a dropped attribute, validating it, and fails with
// ErrTooDeep when its arrays and maps nest deeper than MaxValueDepth, as the protobuf decoder
// does: what one decoder accepts, the other reads back from a recording. Nearly every value is
// passed over as any JSON value; only one whose JSON nests deep is walked as an AnyValue.
func (d *jsonDecoder) skipAnyValue() error {
	start := d.s.Pos
	err := d.s.Skip(maxJSONDepth - skipValueJSONDepth)
	if !errors.Is(err, ErrTooDeep) {
		return err
	}
	d.s.Pos = start
	return d.anyValueDepth(0)
}

// anyValueDepth walks an AnyValue object inside depth arrays and maps, for skipAnyValue.
func (d *jsonDecoder) anyValueDepth(depth int) error {
	return d.object(func(key []byte) error {
		k := bstr(key)
		kv := k == "kvlistValue" || k == "kvlist_value"
		if !kv && k != "arrayValue" && k != "array_value" {
			return d.s.Skip(0)
		}
		if depth+1 > MaxValueDepth {
			return ErrTooDeep
		}
		return d.object(func(key []byte) error {
			if bstr(key) != "values" {
				return d.s.Skip(0)
			}
			return d.array("values", func() error {
				if !kv {
					return d.anyValueDepth(depth + 1)
				}
				return d.object(func(key []byte) error {
					if bstr(key) != "value" {
						return d.s.Skip(0)
					}
					return d.anyValueDepth(depth + 1)
				})
			})
		})
	})
}

// skipKeyValue steps over a KeyValue object of attributes the decoder does not keep (a scope's).
func (d *jsonDecoder) skipKeyValue() error {
	return d.object(func(key []byte) error {
		if bstr(key) == "value" {
			return d.skipAnyValue()
		}
		return d.s.Skip(0)
	})
}

var errOneofTwice = errors.New("more than one of stringValue, boolValue, intValue, doubleValue, arrayValue, kvlistValue, bytesValue")

// errUnknownMember is how an anyValueMember callback says it does not know a member's name.
var errUnknownMember = errors.New("unknown AnyValue member")

// anyValueMember walks an AnyValue object for anyValue and renderAny: it calls member with the name
// of the one member that is set - a null member counts as absent, one member too many is an error
// (as in protojson), a member it does not know (errUnknownMember) is skipped - and names the member
// in member's error. set says whether a member was set.
func (d *jsonDecoder) anyValueMember(member func(k string) error) (set bool, err error) {
	err = d.object(func(key []byte) error {
		if d.s.Null() {
			return nil
		}
		if set {
			return errOneofTwice
		}
		k := bstr(key)
		switch err := member(k); err {
		case nil:
			set = true
			return nil
		case errUnknownMember:
			return d.s.Skip(0)
		default:
			set = true
			return fmt.Errorf("%s: %w", k, err)
		}
	})
	return set, err
}

// anyValue decodes an AnyValue object; arrays, maps and bytes are rendered into the arena.
func (d *jsonDecoder) anyValue() (Attr, error) {
	var a Attr
	_, err := d.anyValueMember(func(k string) (err error) {
		switch k {
		case "stringValue", "string_value":
			a.Type = ValueString
			a.Str, err = d.str()
		case "intValue", "int_value":
			a.Type = ValueInt
			a.Num, err = d.s.Int64()
		case "doubleValue", "double_value":
			var f float64
			f, err = d.s.Float64()
			a = DoubleAttr("", f)
		case "boolValue", "bool_value":
			var v bool
			v, err = d.s.Bool()
			a = BoolAttr("", v)
		case "arrayValue", "array_value", "kvlistValue", "kvlist_value", "bytesValue", "bytes_value":
			a.Type = ValueOther
			d.reserveArena()
			start := len(d.other)
			err = d.renderMember(k, 1)
			a.Str = bstr(d.other[start:])
		default:
			return errUnknownMember
		}
		return err
	})
	return a, err
}

// renderAny appends the display form of an AnyValue object (see spanstest.OtherString).
func (d *jsonDecoder) renderAny(depth int) error {
	set, err := d.anyValueMember(func(k string) (err error) {
		switch k {
		case "stringValue", "string_value":
			// Unescaped into scratch, not the arena: the arena holds the rendering being built.
			var raw []byte
			if raw, err = d.scratchStr(); err == nil {
				d.other = strconv.AppendQuote(d.other, bstr(raw))
			}
		case "intValue", "int_value":
			var n int64
			if n, err = d.s.Int64(); err == nil {
				d.other = strconv.AppendInt(d.other, n, 10)
			}
		case "doubleValue", "double_value":
			var f float64
			if f, err = d.s.Float64(); err == nil {
				d.other = strconv.AppendFloat(d.other, f, 'g', -1, 64)
			}
		case "boolValue", "bool_value":
			var v bool
			if v, err = d.s.Bool(); err == nil {
				d.other = strconv.AppendBool(d.other, v)
			}
		case "arrayValue", "array_value", "kvlistValue", "kvlist_value", "bytesValue", "bytes_value":
			err = d.renderMember(k, depth)
		default:
			return errUnknownMember
		}
		return err
	})
	if err == nil && !set {
		d.other = append(d.other, "null"...)
	}
	return err
}

// renderMember appends an array, map or bytes member of an AnyValue.
func (d *jsonDecoder) renderMember(k string, depth int) error {
	switch k {
	case "bytesValue", "bytes_value":
		raw, err := d.scratchStr()
		if err != nil {
			return err
		}
		return d.appendBase64Hex(raw)
	}
	if depth > MaxValueDepth {
		return ErrTooDeep
	}
	kv := k == "kvlistValue" || k == "kvlist_value"
	open, close := byte('['), byte(']')
	if kv {
		open, close = '{', '}'
	}
	d.other = append(d.other, open)
	n := 0
	err := d.object(func(key []byte) error {
		if bstr(key) != "values" {
			return d.s.Skip(0)
		}
		return d.array("values", func() error {
			if n > 0 {
				d.other = append(d.other, ',')
			}
			n++
			if !kv {
				return d.renderAny(depth + 1)
			}
			return d.renderKeyValue(depth + 1)
		})
	})
	d.other = append(d.other, close)
	return err
}

// renderKeyValue appends `"key":value` for a member of a kvlist. The key may follow the value, so
// the value is rendered first and moved behind the key when needed.
func (d *jsonDecoder) renderKeyValue(depth int) error {
	start := len(d.other)
	var key string
	valStart, valEnd := -1, -1
	err := d.object(func(k []byte) error {
		switch bstr(k) {
		case "key":
			v, err := d.str()
			if err != nil {
				return fmt.Errorf("key: %w", err)
			}
			key = v
			return nil
		case "value":
			valStart = len(d.other)
			if err := d.renderAny(depth); err != nil {
				return fmt.Errorf("value: %w", err)
			}
			valEnd = len(d.other)
			return nil
		}
		return d.s.Skip(0)
	})
	if err != nil {
		return err
	}
	// Assemble `"key":value` after whatever the members left in the arena, then move it down.
	tail := len(d.other)
	d.other = strconv.AppendQuote(d.other, key)
	d.other = append(d.other, ':')
	if valStart < 0 {
		d.other = append(d.other, "null"...)
	} else {
		d.other = append(d.other, d.other[valStart:valEnd]...)
	}
	n := copy(d.other[start:], d.other[tail:])
	d.other = d.other[:start+n]
	return nil
}

// appendBase64Hex decodes a protobuf JSON bytes value (standard or URL base64, padded or not) and
// appends it in hex.
func (d *jsonDecoder) appendBase64Hex(raw []byte) error {
	enc := base64.StdEncoding
	if bytes.ContainsAny(raw, "-_") {
		enc = base64.URLEncoding
	}
	if len(raw)%4 != 0 {
		enc = enc.WithPadding(base64.NoPadding)
	}
	need := enc.DecodedLen(len(raw))
	start := len(d.other)
	d.other = append(d.other, make([]byte, need*3)...)
	bin := d.other[start+2*need:]
	n, err := enc.Decode(bin, raw)
	if err != nil {
		d.other = d.other[:start]
		return fmt.Errorf("invalid base64: %w", err)
	}
	hexed := hex.AppendEncode(d.other[:start], bin[:n])
	d.other = hexed
	return nil
}
