package spans

import (
	"encoding/hex"
	"math"
	"strconv"
)

// TraceID is the 16-byte OpenTelemetry trace id.
type TraceID [16]byte

// SpanID is the 8-byte OpenTelemetry span id.
type SpanID [8]byte

// IsZero reports whether the id is all zeroes, which OTLP defines as invalid.
func (t TraceID) IsZero() bool { return t == TraceID{} }

// String is the lowercase hex form used by OTLP/JSON and every report.
func (t TraceID) String() string { return hex.EncodeToString(t[:]) }

// IsZero reports whether the id is all zeroes: for a parent id, "no parent".
func (s SpanID) IsZero() bool { return s == SpanID{} }

// String is the lowercase hex form used by OTLP/JSON and every report.
func (s SpanID) String() string { return hex.EncodeToString(s[:]) }

// Kind is the OTLP span kind; the numbers are the wire enum's.
type Kind uint8

// Span kinds, numbered as in opentelemetry.proto.trace.v1.Span.SpanKind.
const (
	KindUnspecified Kind = 0
	KindInternal    Kind = 1
	KindServer      Kind = 2
	KindClient      Kind = 3
	KindProducer    Kind = 4
	KindConsumer    Kind = 5
)

var kindNames = [...]string{"UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "KIND(" + strconv.Itoa(int(k)) + ")"
}

// StatusCode is the OTLP span status code; the numbers are the wire enum's.
type StatusCode uint8

// Status codes, numbered as in opentelemetry.proto.trace.v1.Status.StatusCode.
const (
	StatusUnset StatusCode = 0
	StatusOK    StatusCode = 1
	StatusError StatusCode = 2
)

func (c StatusCode) String() string {
	switch c {
	case StatusUnset:
		return "UNSET"
	case StatusOK:
		return "OK"
	case StatusError:
		return "ERROR"
	}
	return "STATUS(" + strconv.Itoa(int(c)) + ")"
}

// ValueType says which field of an [Attr] holds its value.
type ValueType uint8

// Attribute value types. Arrays, maps and bytes are kept as a display string ([ValueOther]): the
// analyzer never reads them, the span detail only shows them.
const (
	ValueEmpty ValueType = iota
	ValueString
	ValueInt
	ValueDouble
	ValueBool
	ValueOther
)

// Attr is one attribute. It is flat on purpose: one allocation per span holds all of them.
type Attr struct {
	Key string
	// Str holds ValueString and the display form of ValueOther.
	Str string
	// Num holds ValueInt, ValueBool (0 or 1) and ValueDouble (math.Float64bits).
	Num  int64
	Type ValueType
}

// StringAttr, IntAttr, DoubleAttr and BoolAttr build attributes; tests and encoders use them.
func StringAttr(k, v string) Attr    { return Attr{Key: k, Str: v, Type: ValueString} }
func IntAttr(k string, v int64) Attr { return Attr{Key: k, Num: v, Type: ValueInt} }
func DoubleAttr(k string, v float64) Attr {
	return Attr{Key: k, Num: int64(math.Float64bits(v)), Type: ValueDouble}
}
func BoolAttr(k string, v bool) Attr {
	a := Attr{Key: k, Type: ValueBool}
	if v {
		a.Num = 1
	}
	return a
}

// Float returns a ValueDouble's number.
func (a Attr) Float() float64 { return math.Float64frombits(uint64(a.Num)) }

// AsInt returns the value as an integer when it is one, or a string or double that holds one
// (OTLP/JSON and some SDKs send numbers as strings).
func (a Attr) AsInt() (int64, bool) {
	switch a.Type {
	case ValueInt:
		return a.Num, true
	case ValueDouble:
		f := a.Float()
		if f == math.Trunc(f) && !math.IsInf(f, 0) {
			return int64(f), true
		}
	case ValueString:
		n, err := strconv.ParseInt(a.Str, 10, 64)
		return n, err == nil
	}
	return 0, false
}

// AsString renders the value for display and for string comparisons.
func (a Attr) AsString() string {
	switch a.Type {
	case ValueString, ValueOther:
		return a.Str
	case ValueInt:
		return strconv.FormatInt(a.Num, 10)
	case ValueDouble:
		return strconv.FormatFloat(a.Float(), 'g', -1, 64)
	case ValueBool:
		return strconv.FormatBool(a.Num != 0)
	}
	return ""
}

// Resource is the part of an OTLP resource stormwatch keeps. Spans of one ResourceSpans share one.
type Resource struct {
	ServiceName     string // service.name
	ServiceInstance string // service.instance.id
	// Attrs are the other resource attributes in the well-known set.
	Attrs []Attr
}

// Link points at another span, typically the previous attempt of one logical operation.
type Link struct {
	TraceID TraceID
	SpanID  SpanID
	Attrs   []Attr
}

// Event is a span event; only its time, name and well-known attributes are kept.
type Event struct {
	TimeUnixNano int64
	Name         string
	Attrs        []Attr
}

// Span is one span in compact form.
type Span struct {
	TraceID  TraceID
	SpanID   SpanID
	ParentID SpanID
	// StartUnixNano and EndUnixNano are as sent; EndUnixNano may precede StartUnixNano in bad data.
	StartUnixNano int64
	EndUnixNano   int64
	Kind          Kind
	Status        StatusCode
	Name          string
	StatusMessage string
	Resource      *Resource
	// Scope is the instrumentation scope name (e.g. "go.opentelemetry.io/contrib/.../otelhttp").
	Scope  string
	Attrs  []Attr
	Links  []Link
	Events []Event
}

// Service is the span's service.name, or "" when the resource has none.
func (s *Span) Service() string {
	if s.Resource == nil {
		return ""
	}
	return s.Resource.ServiceName
}

// Instance is the span's service.instance.id, or "".
func (s *Span) Instance() string {
	if s.Resource == nil {
		return ""
	}
	return s.Resource.ServiceInstance
}

// DurationNanos is the span's duration; negative when the end precedes the start.
func (s *Span) DurationNanos() int64 { return s.EndUnixNano - s.StartUnixNano }

// Attr finds an attribute by key. Spans carry few attributes, so a linear scan beats a map.
func (s *Span) Attr(key string) (Attr, bool) {
	for i := range s.Attrs {
		if s.Attrs[i].Key == key {
			return s.Attrs[i], true
		}
	}
	return Attr{}, false
}

// Str returns the attribute's display string, or "" when absent.
func (s *Span) Str(key string) string {
	a, ok := s.Attr(key)
	if !ok {
		return ""
	}
	return a.AsString()
}

// Int returns the attribute as an integer (see [Attr.AsInt]).
func (s *Span) Int(key string) (int64, bool) {
	a, ok := s.Attr(key)
	if !ok {
		return 0, false
	}
	return a.AsInt()
}

// Batch is what one OTLP export request (or one line of a trace file) decodes to.
type Batch struct {
	Spans []Span
	// Packed is the spans packed by trace, when the producer packed them (see Pack): a consumer
	// that holds spans packed takes these blocks instead of packing Spans itself. The decoders
	// with DecodeOptions.PackByTrace leave Spans empty then: Len counts the spans either way.
	Packed []PackedTrace
	// Rejected counts spans dropped for cause while decoding (invalid ids); RejectReason says why,
	// for OTLP partial success.
	Rejected     int
	RejectReason string
	// release is the producer's hook (SetRelease), called once by Release.
	release func()
	// attrBuf is the decoder's attribute array, kept for the next request a producer decodes
	// into this batch (DecodeProtoInto, DecodeJSONInto); decoded is its spans array as far as it
	// filled it, whatever the owner did with Spans since.
	attrBuf []Attr
	decoded []Span
	pk      *Packing
	// places is the protobuf decoder's memory for where a span's parts are (see wireSpan.read),
	// kept for the next request as attrBuf is.
	places wirePlaces
}

// recycle empties b for another request, keeping its arrays. The spans are cleared as far as the
// last decode filled them - the proto decoder fills each next slot in place and relies on it
// being zero - even if the owner shortened or replaced Spans before releasing the batch.
func (b *Batch) recycle() {
	if b.decoded != nil {
		b.Spans, b.decoded = b.decoded, nil
	}
	clear(b.Spans)
	b.Spans = b.Spans[:0]
	b.resetPacked()
	b.Rejected, b.RejectReason, b.release = 0, "", nil
}

// spansFor is b's spans array, empty, with room for n spans: b's own when it has it.
func (b *Batch) spansFor(n int) []Span {
	if cap(b.Spans) >= n {
		return b.Spans[:0]
	}
	return make([]Span, 0, n)
}

// SetRelease is for producers: f is called when the batch's owner releases it (Release), after
// which the producer may reuse the memory its spans, attributes and strings live in - the
// request body the decoder's strings alias, above all. A batch without it is left to the garbage
// collector, as before.
func (b *Batch) SetRelease(f func()) { b.release = f }

// Release tells the producer that the batch's owner keeps nothing of it: no span, attribute or
// string, and no slice of them. Only the owner calls it (see [Consumer]), at most once, and never
// reads the batch again: its memory may already hold another request. A consumer that keeps
// spans simply does not call it. Without a producer's hook it does nothing.
func (b *Batch) Release() {
	if f := b.release; f != nil {
		b.release = nil
		f()
	}
}

// DecodeOptions tunes the decoders. The zero value keeps only the well-known attributes.
type DecodeOptions struct {
	// AllAttributes keeps attributes outside [WellKnown] too (the TUI's span detail shows them), at a
	// memory cost on every held span.
	AllAttributes bool
	// PackByTrace hands the batch's spans over packed by trace (Batch.Packed) instead of as span
	// values, for a consumer that holds them packed (the analyzer): the protobuf decoder packs
	// them straight from the wire, the JSON decoder packs what it decoded (Batch.Pack). Spans
	// is left empty.
	PackByTrace bool
}

// ByTrace groups spans into one batch per trace, in the order each trace first appears, each
// trace's spans in the order they came: the shape a reader of whole-document formats (Jaeger,
// Zipkin) hands on, one trace at a time. The grouping is the packer's (batchPacker.group); the
// batches' spans are copies, in one array.
func ByTrace(all []Span) []*Batch {
	if len(all) == 0 {
		return nil
	}
	var bp batchPacker
	traces, idx, ends := bp.group(len(all), func(i int) TraceID { return all[i].TraceID })
	grouped := make([]Span, len(all))
	for k, i := range idx {
		grouped[k] = all[i]
	}
	out := make([]*Batch, len(traces))
	batches := make([]Batch, len(traces))
	from := int32(0)
	for k, end := range ends {
		batches[k].Spans = grouped[from:end:end]
		out[k], from = &batches[k], end
	}
	return out
}
