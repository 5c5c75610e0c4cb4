package spans

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unsafe"

	"github.com/stormwatch/stormwatch/spans/protowalk"
)

// RejectInvalidID is the Batch.RejectReason for spans dropped because a trace or span id is
// missing, of the wrong length or all zeroes.
const RejectInvalidID = "invalid trace or span id"

// ErrMalformed is wrapped by every error the decoders return for input that is not a valid OTLP
// request. The errors are also marked with [NewPermanent]: sending the same bytes again cannot help.
var ErrMalformed = errors.New("malformed OTLP request")

// ErrTooDeep is wrapped (with [ErrMalformed]) when AnyValue arrays and key-value lists nest deeper
// than [MaxValueDepth].
var ErrTooDeep = errors.New("attribute value nested too deeply")

// MaxValueDepth is how deep arrays and key-value lists may nest inside one attribute value, in
// every attribute of a request (resource, scope, span, event and link attributes, kept or not),
// for both decoders. It is the one nesting limit of the project: a collector that acknowledged a
// request the file reader then refused would have lost it, so the protobuf decoder checks even the
// values it drops (they are recorded as sent), and the JSON decoder reads whatever is within it.
// Real telemetry nests one or two levels; the bound stops hostile input from recursing.
const MaxValueDepth = 64

// Field numbers of the OTLP trace protobuf (opentelemetry/proto/trace/v1/trace.proto and friends).
const (
	fReqResourceSpans = 1

	fRSResource   = 1
	fRSScopeSpans = 2

	fResAttributes = 1

	fSSScope = 1
	fSSSpans = 2

	fScopeName       = 1
	fScopeAttributes = 3

	fSpanTraceID    = 1
	fSpanSpanID     = 2
	fSpanTraceState = 3
	fSpanParentID   = 4
	fSpanName       = 5
	fSpanKind       = 6
	fSpanStart      = 7
	fSpanEnd        = 8
	fSpanAttributes = 9
	fSpanEvents     = 11
	fSpanLinks      = 13
	fSpanStatus     = 15

	fStatusMessage = 2
	fStatusCode    = 3

	fEventTime       = 1
	fEventName       = 2
	fEventAttributes = 3

	fLinkTraceID    = 1
	fLinkSpanID     = 2
	fLinkAttributes = 4

	fKVKey   = 1
	fKVValue = 2

	fAnyString = 1
	fAnyBool   = 2
	fAnyInt    = 3
	fAnyDouble = 4
	fAnyArray  = 5
	fAnyKVList = 6
	fAnyBytes  = 7

	fListValues = 1 // ArrayValue.values and KeyValueList.values
)

// DecodeProto decodes one OTLP ExportTraceServiceRequest protobuf body into a batch without building a
// protobuf object tree.
//
// Ownership: the caller hands buf over. The batch's strings (names, attribute values, keys outside
// the well-known set) alias buf, so buf must not be modified or reused for as long as any span of
// the batch is held; holding a span keeps the whole of buf alive. Well-known attribute keys are
// interned and do not alias buf.
//
// The rules are those of spanstest.FromProto, the reference: a span whose trace or span id is
// missing, of the wrong length or all zeroes is dropped and counted in Batch.Rejected while the rest
// of the request is kept; a parent id of the wrong length means no parent; links with ids of the
// wrong length are dropped; attributes outside [WellKnown] are dropped unless opt.AllAttributes.
// Repeated occurrences of a field follow protobuf's rules (the last scalar wins, messages merge)
// and fields with an unexpected wire type are skipped as unknown, so the result matches what the
// generated code would give.
//
// Malformed input returns an error that wraps [ErrMalformed] (and [ErrTooDeep] when array and map
// values nest deeper than [MaxValueDepth] in any attribute, kept or dropped, of the resource, the
// scope, a span, an event or a link), is marked with [NewPermanent], and says where in the request
// it was found. Parts the decoder does not read - fields it does not keep, the scalar values of
// dropped attributes - are not validated. Nothing panics on any input (fuzzed).
//
// Memory is allocated per request, not per span or attribute: the spans of a request live in one
// slice sized by a counting pass (bounded by what valid spans could fit in buf, so hostile input
// cannot reserve more), the attributes in one slab sized from the request length (grown in chunks
// when short, compacted when far over), links and events in one slice each when there are any,
// arrays, maps and bytes values in one text arena, and each resource once, when the first span
// that shares it is kept.
func DecodeProto(buf []byte, opt DecodeOptions) (*Batch, error) {
	b := &Batch{}
	if err := decodeProto(b, buf, opt, false); err != nil {
		return nil, err
	}
	return b, nil
}

// DecodeProtoInto is [DecodeProto] into b, a batch its producer decoded before and got back (its
// owner released it: see [Batch.Release]), or a new one. b is emptied first and its arrays - the
// spans' and the attributes' - are reused when large enough, so a producer that recycles its
// batches decodes a request without making them again. They are not trimmed to the request
// either: the batch is meant to come back. On error b holds nothing usable; it may be reused.
func DecodeProtoInto(b *Batch, buf []byte, opt DecodeOptions) error {
	return decodeProto(b, buf, opt, true)
}

func decodeProto(b *Batch, buf []byte, opt DecodeOptions, reuse bool) error {
	if opt.PackByTrace {
		return decodeProtoPacked(b, buf, opt, reuse)
	}
	var c protoCounts
	if err := c.request(buf); err != nil {
		return malformed("decode OTLP protobuf request", err)
	}
	if reuse {
		b.recycle()
	}
	d := protoDecoder{opt: opt, b: b, places: *b.places.ready()}
	if c.spans > 0 {
		// Bounded too: junk that only looks like spans must not reserve 184 bytes for each 30 of
		// input. Real spans are bigger; a request of tiny ones grows the slice instead.
		d.b.Spans = b.spansFor(min(c.spans, len(buf)/64+1))
	}
	// Attributes are not counted: that would mean walking every span twice. The slab starts from an
	// estimate - about one attribute per 56 bytes of request, what SDK spans with HTTP semconv
	// attributes take - and grows by chunks when short; compact gives back a large overestimate, so
	// held memory stays near what is used. Allocating (and zeroing) less than a generous guess is
	// a measurable part of the decode.
	d.attrs.initIn(b.attrBuf, len(buf)/56+8)
	err := d.request(buf)
	b.places = d.places
	finishDecode(b, &d.attrs, reuse)
	if err != nil {
		return malformed("decode OTLP protobuf request", err)
	}
	return nil
}

func malformed(what string, err error) error {
	return NewPermanent(fmt.Errorf("%s: %w: %w", what, ErrMalformed, err))
}

// eachMessage calls fn with each occurrence of the message field num in src, the walk from the
// request down to its spans that both passes make, and names a failing one in the error as
// name[i]. (Its indirect call is once per span at most; the loops inside a span keep theirs inline.)
func eachMessage(src []byte, num uint32, name string, fn func(data []byte) error) error {
	fc := protowalk.Fields{Src: src}
	for i := 0; fc.Next(); {
		data, ok := fc.Message(num)
		if !ok {
			continue
		}
		if err := fn(data); err != nil {
			return fmt.Errorf("%s[%d]: %w", name, i, err)
		}
		i++
	}
	return fc.Err
}

// protoCounts is the first pass: it walks the request down to the spans (not into them), so that
// the spans get exactly one allocation per request.
type protoCounts struct {
	spans int
}

func (c *protoCounts) request(src []byte) error {
	return eachMessage(src, fReqResourceSpans, "resource_spans", c.resourceSpans)
}

func (c *protoCounts) resourceSpans(src []byte) error {
	return eachMessage(src, fRSScopeSpans, "scope_spans", c.scopeSpans)
}

func (c *protoCounts) scopeSpans(src []byte) error {
	fc := protowalk.Fields{Src: src}
	for fc.Next() {
		// A span shorter than its two ids (28 bytes with their tags) cannot be kept: not counting
		// it keeps a body of empty span messages from reserving memory for each.
		if data, ok := fc.Message(fSSSpans); ok && len(data) >= 28 {
			c.spans++
		}
	}
	return fc.Err
}

// protoDecoder is the second pass. attrs holds resource and span attributes, xattrs those of links
// and events, so that each span's attributes stay contiguous whatever order its fields come in.
type protoDecoder struct {
	opt    DecodeOptions
	b      *Batch
	attrs  attrSlab
	xattrs attrSlab
	links  []Link
	events []Event
	// places is where the span being read has its attributes, links and events (see
	// wireSpan.read): the batch's, taken for the request and given back after it. A copy, not
	// a pointer to it: the span reader's loop is measurably faster appending to it.
	places wirePlaces
	// other holds the rendered form of array, map and bytes values. Strings alias it; when append
	// moves it to a bigger array the old one stays alive and is never written again.
	other []byte
}

// bstr aliases b as a string; the caller of DecodeProto promised not to modify the buffer.
func bstr(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func (d *protoDecoder) request(src []byte) error {
	return eachMessage(src, fReqResourceSpans, "resource_spans", d.resourceSpans)
}

func (d *protoDecoder) resourceSpans(src []byte) error {
	var res resHolder
	if err := d.resourceOf(&res.val, src); err != nil {
		return err
	}
	return eachMessage(src, fRSScopeSpans, "scope_spans", func(data []byte) error {
		return d.scopeSpans(&res, data)
	})
}

// resourceOf reads the resource of ResourceSpans src into res. The resource may follow the scope
// spans on the wire and may occur more than once (protobuf merges the occurrences), so it is read
// in a pass of its own before the spans that share it.
func (d *protoDecoder) resourceOf(res *Resource, src []byte) error {
	d.attrs.begin()
	// Not eachMessage: the resource is a singular field (its occurrences merge), named without an index.
	fc := protowalk.Fields{Src: src}
	for fc.Next() {
		if data, ok := fc.Message(fRSResource); ok {
			if err := d.resource(res, data); err != nil {
				return fmt.Errorf("resource: %w", err)
			}
		}
	}
	if fc.Err != nil {
		return fc.Err
	}
	res.Attrs = d.attrs.end()
	return nil
}

// resHolder is a ResourceSpans' resource while its spans are decoded. It goes to the heap only
// when the first span that uses it is kept, so a request of resources without valid spans
// allocates nothing for them; the spans of one ResourceSpans share it.
type resHolder struct {
	val Resource
	ptr *Resource
}

func (h *resHolder) get() *Resource {
	if h.ptr == nil {
		h.ptr = new(Resource)
		*h.ptr = h.val
	}
	return h.ptr
}

func (d *protoDecoder) resource(res *Resource, src []byte) error {
	fc := protowalk.Fields{Src: src}
	for i := 0; fc.Next(); {
		data, ok := fc.Message(fResAttributes)
		if !ok {
			continue
		}
		key, val, err := keyValue(data)
		if err != nil {
			return fmt.Errorf("attributes[%d]: %w", i, err)
		}
		switch bstr(key) {
		case AttrServiceName:
			a, err := d.value(Attr{}, val)
			if err != nil {
				return fmt.Errorf("attributes[%d] %q: %w", i, key, err)
			}
			res.ServiceName = d.display(a)
		case AttrServiceInstance:
			a, err := d.value(Attr{}, val)
			if err != nil {
				return fmt.Errorf("attributes[%d] %q: %w", i, key, err)
			}
			res.ServiceInstance = d.display(a)
		default:
			if err = d.keep(&d.attrs, key, val); err != nil {
				return fmt.Errorf("attributes[%d] %q: %w", i, key, err)
			}
		}
		i++
	}
	return fc.Err
}

func (d *protoDecoder) display(a Attr) string { return display(&d.other, a) }

// display renders a resource's service name or instance as the reference does: strings as they
// are, anything else in the display form of [ValueOther] (an absent value is "null"), which it
// appends to the decoder's arena other and aliases.
func display(other *[]byte, a Attr) string {
	switch a.Type {
	case ValueString, ValueOther:
		return a.Str
	case ValueEmpty:
		return "null"
	}
	start := len(*other)
	*other = appendScalar(*other, a)
	return bstr((*other)[start:])
}

// appendScalar writes an int, double or bool the way OtherString does (%d, %g, %t).
func appendScalar(dst []byte, a Attr) []byte {
	switch a.Type {
	case ValueInt:
		return strconv.AppendInt(dst, a.Num, 10)
	case ValueDouble:
		return strconv.AppendFloat(dst, a.Float(), 'g', -1, 64)
	case ValueBool:
		return strconv.AppendBool(dst, a.Num != 0)
	}
	return dst
}

func (d *protoDecoder) scopeSpans(res *resHolder, src []byte) error {
	scope, err := scopeOf(src)
	if err != nil {
		return err
	}
	return eachMessage(src, fSSSpans, "spans", func(data []byte) error {
		return d.span(res, scope, data)
	})
}

// scopeOf is the scope name of ScopeSpans src.
func scopeOf(src []byte) (string, error) {
	scope := ""
	// Not eachMessage: the scope is a singular field (the last name wins), named without an index.
	fc := protowalk.Fields{Src: src}
	for fc.Next() {
		data, ok := fc.Message(fSSScope)
		if !ok {
			continue
		}
		if name, ok, err := lastString(data, fScopeName); err != nil {
			return "", fmt.Errorf("scope: %w", err)
		} else if ok {
			scope = name
		}
		if err := scopeAttrsDepth(data); err != nil {
			return "", fmt.Errorf("scope: %w", err)
		}
	}
	if fc.Err != nil {
		return "", fc.Err
	}
	return scope, nil
}

// lastString returns the last occurrence of string field num in src.
func lastString(src []byte, num uint32) (string, bool, error) {
	s, found := "", false
	fc := protowalk.Fields{Src: src}
	for fc.Next() {
		if v, ok := fc.Message(num); ok {
			s, found = bstr(v), true
		}
	}
	if fc.Err != nil {
		return "", false, fc.Err
	}
	return s, found, nil
}

func (d *protoDecoder) span(res *resHolder, scope string, src []byte) error {
	// Filled in place rather than built and appended: saves copying the whole struct (and, while
	// the GC marks, the bulk write barrier that copy takes). The spare capacity is always zero (a
	// fresh array, and reject zeroes the slot it gives back), so taking the next slot needs no
	// clearing either - append(spans, Span{}) would write 184 bytes of zeroes through the barrier.
	if n := len(d.b.Spans); n < cap(d.b.Spans) {
		d.b.Spans = d.b.Spans[:n+1]
	} else {
		d.b.Spans = append(d.b.Spans, Span{})
	}
	sp := &d.b.Spans[len(d.b.Spans)-1]
	attrMark, xMark := d.attrs.mark(), d.xattrs.mark()
	linkStart, eventStart := len(d.links), len(d.events)
	ok, err := d.spanFields(sp, src)
	if err != nil {
		return err
	}
	if !ok {
		d.reject(attrMark, xMark, linkStart, eventStart)
		// Pop the span being filled; zero it so the spare capacity holds no stale pointers.
		last := len(d.b.Spans) - 1
		d.b.Spans[last] = Span{}
		d.b.Spans = d.b.Spans[:last]
		return nil
	}
	sp.Scope = scope
	sp.Resource = res.get()
	return nil
}

// spanFields decodes Span message src into sp, which is zero, its attributes, links and events
// into the decoder's slabs, and says whether its ids make it a span to keep (see DecodeProto).
// It sets neither the scope nor the resource. The span's own fields are read by wireSpan.read,
// the reader the packed writer (packSpan) writes from too; the attributes, links and events it
// places are then decoded in the order they came, so that a span with several faults fails on
// its first, as the generated code does.
func (d *protoDecoder) spanFields(sp *Span, src []byte) (bool, error) {
	var h wireSpan
	pl := &d.places
	pl.kvs, pl.links, pl.events = pl.kvs[:0], pl.links[:0], pl.events[:0]
	rerr := h.read(sp, src, pl)
	d.attrs.begin()
	linkStart, eventStart := len(d.links), len(d.events)
	if err := d.spanParts(src, pl); err != nil {
		return false, err
	}
	if rerr != nil {
		return false, rerr // after the parts placed: they come before the fault on the wire
	}
	if len(h.trace) != len(sp.TraceID) || len(h.span) != len(sp.SpanID) {
		return false, nil
	}
	sp.TraceID, sp.SpanID = TraceID(h.trace), SpanID(h.span)
	if sp.TraceID.IsZero() || sp.SpanID.IsZero() {
		return false, nil
	}
	if h.state != nil {
		// After the attributes, as the JSON decoder adds it.
		d.attrs.add(Attr{Key: AttrTraceState, Str: bstr(h.state), Type: ValueString})
	}
	sp.Attrs = d.attrs.end()
	if len(d.links) > linkStart {
		sp.Links = d.links[linkStart:len(d.links):len(d.links)]
	}
	if len(d.events) > eventStart {
		sp.Events = d.events[eventStart:len(d.events):len(d.events)]
	}
	return true, nil
}

// spanParts decodes the attributes, links and events pl places in Span message src, in the order
// they came: a place's offset is its high half, so the smallest place is the first on the wire.
func (d *protoDecoder) spanParts(src []byte, pl *wirePlaces) error {
	kvs, links, events := pl.kvs, pl.links, pl.events
	for i, j, k := 0, 0, 0; i < len(kvs) || j < len(links) || k < len(events); {
		kv, link, event := placeAt(kvs, i), placeAt(links, j), placeAt(events, k)
		switch {
		case kv < link && kv < event:
			// The run of attributes up to the next link or event: all of them, nearly always.
			n, next := i+1, min(link, event)
			for n < len(kvs) && kvs[n] < next {
				n++
			}
			if err := d.attributes(&d.attrs, src, kvs[i:n], i); err != nil {
				return err
			}
			i = n
		case link < event:
			if err := d.link(placed(src, link)); err != nil {
				return fmt.Errorf("links[%d]: %w", j, err)
			}
			j++
		default:
			if err := d.event(placed(src, event)); err != nil {
				return fmt.Errorf("events[%d]: %w", k, err)
			}
			k++
		}
	}
	return nil
}

// placeAt is places[i], or past every place when there is none.
func placeAt(places []uint64, i int) uint64 {
	if i < len(places) {
		return places[i]
	}
	return math.MaxUint64
}

// reject drops a span that failed the id checks: it gives back the slab space it used, and
// counts it.
func (d *protoDecoder) reject(attrMark, xMark slabMark, linkStart, eventStart int) {
	d.attrs.rollback(attrMark)
	d.xattrs.rollback(xMark)
	d.links = d.links[:linkStart]
	d.events = d.events[:eventStart]
	d.b.Rejected++
	d.b.RejectReason = RejectInvalidID
}

// wireSpan is what wireSpan.read reads of a Span message besides the span value: the ids and
// the trace state as sent.
type wireSpan struct {
	trace, span, state []byte
}

// wirePlaces is where a span's attributes (their KeyValue messages), links and events are in its
// bytes (see kvAt), and xkvs the attributes of one of its links or events, kept from span to span
// (and, packing, from request to request: protoPacked) with what they grew to.
type wirePlaces struct{ kvs, links, events, xkvs []uint64 }

// ready is pl for the next request: what one huge span made it grow to is let go, and a new one
// gets room for the attributes of a span as SDKs send them, in one allocation.
func (pl *wirePlaces) ready() *wirePlaces {
	if cap(pl.kvs)+cap(pl.links)+cap(pl.events)+cap(pl.xkvs) > maxPackerKeep/64 {
		*pl = wirePlaces{}
	}
	if pl.kvs == nil {
		pl.kvs = make([]uint64, 0, 32)
	}
	return pl
}

// kvAt is where data, a part of message src, is in it, as wirePlaces holds it: its offset and
// length in one word.
func kvAt(src, data []byte) uint64 { return uint64(offsetIn(src, data))<<32 | uint64(len(data)) }

// placed is the part of src at place (see kvAt).
func placed(src []byte, place uint64) []byte { return src[place>>32 : place>>32+place&0xffffffff] }

// read is the one reader of a Span message's own fields, by protobuf's rules (the last
// occurrence of a field wins; a field of an unexpected wire type is skipped as unknown): it reads
// the fields a span value holds into sp (not the ids, which it leaves in h as sent, nor the
// attributes, links or events), and appends the places of the attributes, links and events to
// pl. On a fault pl places what came before it.
func (h *wireSpan) read(sp *Span, src []byte, pl *wirePlaces) error {
	var fc protowalk.Fields
	for all := len(src); len(src) > 0; {
		// The span's own fields are the hottest loop of the decoders. Fields with a one-byte tag
		// and, for bytes, a one-byte length - nearly all of them - are read here without a call;
		// the rest go through protowalk.Fields, and so does field number 0, which it refuses:
		// short is a one-byte tag of field 1 to 15 (t-8 wraps below 8).
		var (
			num  uint32
			typ  byte
			data []byte
			v    uint64
		)
		t := src[0]
		short := t-8 < 0x80-8
		if short && t&7 == 2 && len(src) >= 2 && src[1] < 0x80 && 2+int(src[1]) <= len(src) {
			num, typ, data, src = uint32(t>>3), 2, src[2:2+int(src[1])], src[2+int(src[1]):]
		} else if short && t&7 == 1 && len(src) >= 9 {
			num, typ, v, src = uint32(t>>3), 1, load64(src[1:9]), src[9:]
		} else if short && t&7 == 0 && len(src) >= 2 && src[1] < 0x80 {
			num, typ, v, src = uint32(t>>3), 0, uint64(src[1]), src[2:]
		} else if t == 0x85 && len(src) >= 6 && src[1] == 0x01 {
			src = src[6:] // field 16 (flags, a fixed32 every SDK sends, its tag two bytes): not kept
			continue
		} else {
			if fc.Src = src; !fc.Next() {
				return fc.Err
			}
			num, typ, data, v, src = fc.Num, byte(fc.Type), fc.Data, fc.V, fc.Src
		}
		switch typ {
		case 0:
			if num == fSpanKind {
				sp.Kind = Kind(v)
			}
		case 1:
			switch num {
			case fSpanStart:
				sp.StartUnixNano = int64(v)
			case fSpanEnd:
				sp.EndUnixNano = int64(v)
			}
		case 2:
			switch num {
			case fSpanTraceID:
				h.trace = data
			case fSpanSpanID:
				h.span = data
			case fSpanParentID:
				sp.ParentID = SpanID{}
				if len(data) == len(sp.ParentID) {
					sp.ParentID = SpanID(data)
				}
			case fSpanTraceState:
				if samplingState(data) {
					h.state = data
				}
			case fSpanName:
				sp.Name = bstr(data)
			case fSpanAttributes:
				pl.kvs = append(pl.kvs, uint64(all-len(src)-len(data))<<32|uint64(len(data)))
				// The attributes that follow (every SDK sends them in one run), in a loop of
				// their own.
				for len(src) >= 2 && src[0] == fSpanAttributes<<3|2 && src[1] < 0x80 && 2+int(src[1]) <= len(src) {
					pl.kvs = append(pl.kvs, uint64(all-len(src)+2)<<32|uint64(src[1]))
					src = src[2+int(src[1]):]
				}
			case fSpanLinks:
				pl.links = append(pl.links, uint64(all-len(src)-len(data))<<32|uint64(len(data)))
			case fSpanEvents:
				pl.events = append(pl.events, uint64(all-len(src)-len(data))<<32|uint64(len(data)))
			case fSpanStatus:
				if err := status(&sp.StatusMessage, &sp.Status, data); err != nil {
					return fmt.Errorf("status: %w", err)
				}
			}
		}
	}
	return nil
}

// status reads a Status message into msg and code: a later occurrence of a field wins.
func status(msg *string, code *StatusCode, src []byte) error {
	fc := protowalk.Fields{Src: src}
	for fc.Next() {
		switch {
		case fc.Num == fStatusMessage && fc.Type == 2:
			*msg = bstr(fc.Data)
		case fc.Num == fStatusCode && fc.Type == 0:
			*code = StatusCode(fc.V)
		}
	}
	return fc.Err
}

// eventFields reads Event message src: its time and name, and the places of its attributes
// (see kvAt), appended to kvs. On a fault kvs places the attributes before it.
func eventFields(src []byte, kvs []uint64) (t int64, name string, _ []uint64, err error) {
	fc := protowalk.Fields{Src: src}
	for fc.Next() {
		switch {
		case fc.Num == fEventTime && fc.Type == 1:
			t = int64(fc.V)
		case fc.Num == fEventName && fc.Type == 2:
			name = bstr(fc.Data)
		case fc.Num == fEventAttributes && fc.Type == 2:
			kvs = append(kvs, kvAt(src, fc.Data))
		}
	}
	return t, name, kvs, fc.Err
}

// linkFields reads Link message src as eventFields reads an event: its ids as sent.
func linkFields(src []byte, kvs []uint64) (trace, span []byte, _ []uint64, err error) {
	fc := protowalk.Fields{Src: src}
	for fc.Next() {
		if fc.Type != 2 {
			continue
		}
		switch fc.Num {
		case fLinkTraceID:
			trace = fc.Data
		case fLinkSpanID:
			span = fc.Data
		case fLinkAttributes:
			kvs = append(kvs, kvAt(src, fc.Data))
		}
	}
	return trace, span, kvs, fc.Err
}

func (d *protoDecoder) event(src []byte) error {
	t, name, kvs, err := eventFields(src, d.places.xkvs[:0])
	d.places.xkvs = kvs
	d.xattrs.begin()
	if aerr := d.attributes(&d.xattrs, src, kvs, 0); aerr != nil {
		return aerr
	}
	if err != nil {
		return err
	}
	d.events = append(d.events, Event{TimeUnixNano: t, Name: name, Attrs: d.xattrs.end()})
	return nil
}

func (d *protoDecoder) link(src []byte) error {
	trace, span, kvs, err := linkFields(src, d.places.xkvs[:0])
	d.places.xkvs = kvs
	d.xattrs.begin()
	mark := d.xattrs.mark()
	if aerr := d.attributes(&d.xattrs, src, kvs, 0); aerr != nil {
		return aerr
	}
	if err != nil {
		return err
	}
	if len(trace) != len(TraceID{}) || len(span) != len(SpanID{}) {
		// The reference drops such a link; its attributes go with it.
		d.xattrs.rollback(mark)
		return nil
	}
	d.links = append(d.links, Link{TraceID: TraceID(trace), SpanID: SpanID(span), Attrs: d.xattrs.end()})
	return nil
}

// attributes keeps in slab the attributes that kvs places in message src (see kvAt), the
// elements from on of an attributes field, failing on the first that is malformed.
func (d *protoDecoder) attributes(slab *attrSlab, src []byte, kvs []uint64, from int) error {
	for i, place := range kvs {
		key, val, err := keyValue(placed(src, place))
		if err != nil {
			return fmt.Errorf("attributes[%d]: %w", from+i, err)
		}
		if err = d.keep(slab, key, val); err != nil {
			return fmt.Errorf("attributes[%d] %q: %w", from+i, key, err)
		}
	}
	return nil
}

// keyValue splits a KeyValue message. The last key wins; several value occurrences merge, which
// for protobuf is the same as decoding their concatenation (only hostile input does this, so the
// copy it costs does not matter).
func keyValue(src []byte) (key, val []byte, err error) {
	// Fast path for what every SDK writes: key (field 1) then value (field 2), each shorter than
	// 128 bytes, nothing else. Anything unusual takes the general loop below.
	if len(src) >= 4 && src[0] == fKVKey<<3|2 && src[1] < 0x80 {
		n := 2 + int(src[1])
		if len(src) >= n+2 && src[n] == fKVValue<<3|2 && src[n+1] < 0x80 && n+2+int(src[n+1]) == len(src) {
			return src[2:n], src[n+2:], nil
		}
	}
	merged := false
	fc := protowalk.Fields{Src: src}
	for fc.Next() {
		if fc.Type != 2 {
			continue
		}
		switch fc.Num {
		case fKVKey:
			key = fc.Data
		case fKVValue:
			switch v := fc.Data; {
			case val == nil:
				val = v
			case !merged:
				val = append(append([]byte{}, val...), v...)
				merged = true
			default:
				val = append(val, v...)
			}
		}
	}
	if fc.Err != nil {
		return nil, nil, fc.Err
	}
	return key, val, nil
}

// keep appends the attribute to slab when its key is kept. val is the AnyValue message, nil when
// the KeyValue had none.
func (d *protoDecoder) keep(slab *attrSlab, key, val []byte) error {
	var a Attr
	if e := internLookup(key); e != nil {
		a.Key = e.key
	} else if d.opt.AllAttributes {
		a.Key = bstr(key)
	} else {
		return dropped(val)
	}
	// A value that is one short string or one int - nearly every attribute - is stored from here,
	// without the call to value and the Attr it passes back. The varint is read as protowalk
	// reads it; anything else (other members, several fields, a long string) goes to value.
	if len(val) >= 2 && val[1] < 0x80 {
		switch val[0] {
		case fAnyString<<3 | 2:
			if 2+int(val[1]) == len(val) {
				slab.add(Attr{Key: a.Key, Str: bstr(val[2:]), Type: ValueString})
				return nil
			}
		case fAnyInt << 3:
			if len(val) == 2 {
				slab.add(Attr{Key: a.Key, Num: int64(val[1]), Type: ValueInt})
				return nil
			}
		}
	}
	if len(val) > 2 && val[0] == fAnyInt<<3 {
		if n, size := binary.Uvarint(val[1:]); size > 0 && 1+size == len(val) {
			slab.add(Attr{Key: a.Key, Num: int64(n), Type: ValueInt})
			return nil
		}
	}
	a, err := d.value(a, val)
	if err != nil {
		return err
	}
	slab.add(a)
	return nil
}

// dropped checks the AnyValue val of an attribute the decoder drops: not kept, but recorded and
// replayed as sent, so within the nesting every reader takes. A lone short string, what nearly
// every dropped attribute is, cannot nest.
func dropped(val []byte) error {
	if len(val) >= 2 && val[0] == fAnyString<<3|2 && val[1] < 0x80 && 2+int(val[1]) == len(val) {
		return nil
	}
	return checkDepth(val)
}

// value decodes an AnyValue into a. The oneof follows protobuf: the last member on the wire wins,
// and repeated occurrences of the same array or map member merge.
func (d *protoDecoder) value(a Attr, src []byte) (Attr, error) {
	if src == nil {
		return a, nil
	}
	member, data, num, nested, err := anyValue(src)
	if err != nil {
		return a, err
	}
	if nested {
		// Every occurrence of an array or map member, not only the one kept: see checkDepth.
		if err := valueDepth(src, 0); err != nil {
			return a, err
		}
	}
	switch member {
	case 0:
		a.Type = ValueEmpty
	case fAnyString:
		a.Type, a.Str = ValueString, bstr(data)
	case fAnyInt:
		a.Type, a.Num = ValueInt, int64(num)
	case fAnyDouble:
		a.Type, a.Num = ValueDouble, int64(num)
	case fAnyBool:
		a.Type, a.Num = ValueBool, 0
		if num != 0 {
			a.Num = 1
		}
	default:
		start := len(d.other)
		d.other, err = appendOther(d.other, member, data, num, 1)
		if err != nil {
			return a, err
		}
		a.Type, a.Str = ValueOther, bstr(d.other[start:])
	}
	return a, nil
}

// anyValue finds which member of an AnyValue is set (0 for none) and its payload: data for the
// length-delimited members, num for the others (the raw varint or the double's bits). nested says
// whether an array or map member occurs at all, kept or not.
func anyValue(src []byte) (member uint32, data []byte, num uint64, nested bool, err error) {
	// Fast paths for a value that is a lone short string or a lone small varint.
	if len(src) >= 2 && src[1] < 0x80 {
		switch src[0] {
		case fAnyString<<3 | 2:
			if 2+int(src[1]) == len(src) {
				return fAnyString, src[2:], 0, false, nil
			}
		case fAnyInt << 3, fAnyBool << 3:
			if len(src) == 2 {
				return uint32(src[0] >> 3), nil, uint64(src[1]), false, nil
			}
		}
	}
	merged := false
	fc := protowalk.Fields{Src: src}
	for fc.Next() {
		switch f, v := fc.Num, fc.Data; {
		case (f == fAnyString || f == fAnyBytes) && fc.Type == 2:
			member, data, merged = f, v, false
		case (f == fAnyArray || f == fAnyKVList) && fc.Type == 2:
			nested = true
			switch {
			case member != f:
				member, data, merged = f, v, false
			case !merged:
				data = append(append([]byte{}, data...), v...)
				merged = true
			default:
				data = append(data, v...)
			}
		case (f == fAnyBool || f == fAnyInt) && fc.Type == 0, f == fAnyDouble && fc.Type == 1:
			member, num, data, merged = f, fc.V, nil, false
		}
	}
	if fc.Err != nil {
		return 0, nil, 0, false, fc.Err
	}
	return member, data, num, nested, nil
}

// checkDepth fails with ErrTooDeep when arrays and key-value lists nest deeper than MaxValueDepth
// anywhere in the AnyValue val - in every occurrence of a member, not only the one protobuf keeps:
// the recording holds them all. A value that is one scalar member, what nearly every attribute
// is, returns without a walk.
func checkDepth(val []byte) error {
	if len(val) < 2 {
		return nil
	}
	switch val[0] {
	case fAnyString<<3 | 2, fAnyBytes<<3 | 2:
		if val[1] < 0x80 {
			if 2+int(val[1]) == len(val) {
				return nil
			}
		} else if n, size := binary.Uvarint(val[1:]); size > 0 && n == uint64(len(val)-1-size) {
			return nil
		}
	case fAnyInt << 3, fAnyBool << 3:
		if _, size := binary.Uvarint(val[1:]); size > 0 && 1+size == len(val) {
			return nil
		}
	case fAnyDouble<<3 | 1:
		if len(val) == 9 {
			return nil
		}
	}
	return valueDepth(val, 0)
}

// valueDepth walks the AnyValue src, inside depth arrays and maps, for checkDepth.
func valueDepth(src []byte, depth int) error {
	fc := protowalk.Fields{Src: src}
	for fc.Next() {
		if (fc.Num != fAnyArray && fc.Num != fAnyKVList) || fc.Type != 2 {
			continue
		}
		if depth+1 > MaxValueDepth {
			return ErrTooDeep
		}
		kv := fc.Num == fAnyKVList
		lc := protowalk.Fields{Src: fc.Data}
		for lc.Next() {
			elem, ok := lc.Message(fListValues)
			if !ok {
				continue
			}
			var err error
			if kv {
				if _, elem, err = keyValue(elem); err != nil {
					return err
				}
			}
			if err := valueDepth(elem, depth+1); err != nil {
				return err
			}
		}
		if lc.Err != nil {
			return lc.Err
		}
	}
	return fc.Err
}

// scopeAttrsDepth applies checkDepth to the attributes of an InstrumentationScope message, which
// the decoder does not otherwise read.
func scopeAttrsDepth(src []byte) error {
	fc := protowalk.Fields{Src: src}
	for i := 0; fc.Next(); {
		data, ok := fc.Message(fScopeAttributes)
		if !ok {
			continue
		}
		key, val, err := keyValue(data)
		if err == nil {
			err = checkDepth(val)
		}
		if err != nil {
			return fmt.Errorf("attributes[%d] %q: %w", i, key, err)
		}
		i++
	}
	return fc.Err
}

// appendOther renders a value the way spanstest.OtherString does: strings quoted, bytes in hex,
// arrays as [a,b], maps as {"k":v}, an absent value as null.
func appendOther(dst []byte, member uint32, data []byte, num uint64, depth int) ([]byte, error) {
	switch member {
	case 0:
		return append(dst, "null"...), nil
	case fAnyString:
		return strconv.AppendQuote(dst, bstr(data)), nil
	case fAnyInt:
		return strconv.AppendInt(dst, int64(num), 10), nil
	case fAnyDouble:
		return strconv.AppendFloat(dst, math.Float64frombits(num), 'g', -1, 64), nil
	case fAnyBool:
		return strconv.AppendBool(dst, num != 0), nil
	case fAnyBytes:
		return hex.AppendEncode(dst, data), nil
	}
	if depth > MaxValueDepth {
		return dst, ErrTooDeep
	}
	open, close := byte('['), byte(']')
	if member == fAnyKVList {
		open, close = '{', '}'
	}
	dst = append(dst, open)
	fc := protowalk.Fields{Src: data}
	for i := 0; fc.Next(); {
		elem, ok := fc.Message(fListValues)
		if !ok {
			continue
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		i++
		if member == fAnyKVList {
			key, val, err := keyValue(elem)
			if err != nil {
				return dst, err
			}
			dst = strconv.AppendQuote(dst, bstr(key))
			dst = append(dst, ':')
			if val == nil {
				dst = append(dst, "null"...)
				continue
			}
			elem = val
		}
		m, d, n, _, err := anyValue(elem)
		if err != nil {
			return dst, err
		}
		if dst, err = appendOther(dst, m, d, n, depth+1); err != nil {
			return dst, err
		}
	}
	if fc.Err != nil {
		return dst, fc.Err
	}
	return append(dst, close), nil
}
