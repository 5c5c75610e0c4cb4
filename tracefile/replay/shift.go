package replay

import (
	"encoding/binary"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/stormwatch/stormwatch/spans"
)

// Shift is what one pass of a replay changes in every span it plays. One Shift serves a whole pass,
// so the spans of a trace - and the traces of a recording - keep their relative times to the
// nanosecond, whatever the speed and however late each request is sent.
type Shift struct {
	// Delta moves every instant by this many nanoseconds: span start and end, event times, and the
	// attributes whose value is an instant (timeAttrs). The player makes it a whole number of
	// seconds, so that instants written with second resolution (an HTTP-date) move exactly too.
	Delta int64
	// Salt is XORed into the second half of every trace id, the spans' and their links' alike: the
	// pass's traces are new ones that merge with no other pass (or with the recording, were both
	// sent to one collector), links inside the recording still point at the right trace, and the
	// first 16 hex digits of a replayed trace id are the recorded one's. Span ids are kept: they
	// need only be unique within a trace. Invalid (all-zero) ids stay invalid.
	Salt uint64
}

// IsZero reports whether s changes nothing.
func (s Shift) IsZero() bool { return s == Shift{} }

// wholeSeconds rounds d down to a whole number of seconds (toward minus infinity).
func wholeSeconds(d int64) int64 {
	r := d % int64(time.Second)
	if r < 0 {
		r += int64(time.Second)
	}
	return d - r
}

// recordTime is when a batch was (about) sent: the latest end time of its spans, since SDKs export a
// span when it ends. 0 when the batch has no spans with times.
func recordTime(b *spans.Batch) int64 {
	var t int64
	for i := range b.Spans {
		t = max(t, b.Spans[i].EndUnixNano)
	}
	return t
}

// traceID applies the salt to a 16-byte trace id in place.
func (s Shift) traceID(id []byte) {
	if s.Salt == 0 || len(id) != 16 || [16]byte(id) == [16]byte{} {
		return
	}
	v := binary.BigEndian.Uint64(id[8:]) ^ s.Salt
	binary.BigEndian.PutUint64(id[8:], v)
}

// instant moves a time of the OTLP wire; 0 means "not set" and stays 0.
func (s Shift) instant(t int64) int64 {
	if t == 0 {
		return 0
	}
	return t + s.Delta
}

// Batch applies s to every span of b in place.
func (s Shift) Batch(b *spans.Batch) {
	for i := range b.Spans {
		sp := &b.Spans[i]
		sp.StartUnixNano = s.instant(sp.StartUnixNano)
		sp.EndUnixNano = s.instant(sp.EndUnixNano)
		for j := range sp.Events {
			sp.Events[j].TimeUnixNano = s.instant(sp.Events[j].TimeUnixNano)
		}
		s.traceID(sp.TraceID[:])
		for j := range sp.Links {
			s.traceID(sp.Links[j].TraceID[:])
		}
		if s.Delta != 0 {
			for j := range sp.Attrs {
				s.attr(&sp.Attrs[j])
			}
		}
	}
}

// timeKind is how a time-valued attribute writes its instant.
type timeKind uint8

const (
	// unixNanos: an integer of Unix nanoseconds (as an int, a double or a decimal string).
	unixNanos timeKind = iota + 1
	// deadlineHeader: the Request-Deadline header, RFC 3339 or integer Unix milliseconds.
	deadlineHeader
	// retryAfterHeader: the Retry-After header; only its HTTP-date form is an instant (its
	// delay-seconds form is a duration and stays).
	retryAfterHeader
)

// timeAttrs are the attributes of the span conventions (docs/attributes.md) whose value is an
// instant rather than a duration: a replay must move them with the span times, or a replayed
// deadline lies in the past of every call made under it.
var timeAttrs = map[string]timeKind{
	spans.AttrDeadline:            unixNanos,
	spans.AttrReqHeaderDeadline:   deadlineHeader,
	spans.AttrResHeaderRetryAfter: retryAfterHeader,
}

// attr moves a's value when its key is one of timeAttrs.
func (s Shift) attr(a *spans.Attr) {
	kind, ok := timeAttrs[a.Key]
	if !ok {
		return
	}
	switch a.Type {
	case spans.ValueInt:
		if kind == unixNanos && a.Num > 0 {
			a.Num += s.Delta
		}
	case spans.ValueDouble:
		if kind == unixNanos && a.Float() > 0 {
			*a = spans.DoubleAttr(a.Key, a.Float()+float64(s.Delta))
		}
	case spans.ValueString:
		if v, ok := shiftText(kind, a.Str, s.Delta); ok {
			a.Str = v
		}
	case spans.ValueOther:
		// A captured header is an array of strings, kept in its display form (["..."]): shift
		// the one value inside it.
		inner := strings.Trim(a.Str, `[]" `)
		if i := strings.Index(a.Str, inner); inner != "" && i >= 0 {
			if v, ok := shiftText(kind, inner, s.Delta); ok {
				a.Str = a.Str[:i] + v + a.Str[i+len(inner):]
			}
		}
	}
}

// shiftText moves an instant written as text, in the form it was written in; false when v is not
// an instant of that kind (nothing to move).
func shiftText(kind timeKind, v string, delta int64) (string, bool) {
	v0 := v
	v = strings.TrimSpace(v)
	if v == "" {
		return "", false
	}
	var out string
	switch kind {
	case unixNanos:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return "", false
		}
		out = strconv.FormatInt(n+delta, 10)
	case deadlineHeader:
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			if n <= 0 {
				return "", false
			}
			out = strconv.FormatInt(n+delta/int64(time.Millisecond), 10)
			break
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return "", false
		}
		out = t.Add(time.Duration(delta)).Format(rfc3339Like(v))
	case retryAfterHeader:
		t, err := http.ParseTime(v)
		if err != nil {
			return "", false
		}
		out = t.Add(time.Duration(delta)).UTC().Format(http.TimeFormat)
	default:
		return "", false
	}
	// Keep whatever surrounded the value.
	if i := strings.Index(v0, v); i >= 0 {
		out = v0[:i] + out + v0[i+len(v):]
	}
	return out, true
}

// rfc3339Like is the layout that writes a time as v was written: the same number of fractional
// digits, and "Z" or a numeric offset as v had.
func rfc3339Like(v string) string {
	layout := "2006-01-02T15:04:05"
	if i := strings.IndexByte(v, '.'); i >= 0 {
		n := 0
		for _, c := range v[i+1:] {
			if c < '0' || c > '9' {
				break
			}
			n++
		}
		layout += "." + strings.Repeat("0", n)
	}
	if strings.HasSuffix(v, "Z") || strings.HasSuffix(v, "z") {
		return layout + "Z"
	}
	return layout + "Z07:00"
}

// Request is Batch for a protobuf export request: it returns a shifted copy. Times are fixed64 and
// trace ids fixed-length bytes, so the copy is patched where they lie (see plan) - no decode and
// re-encode, which would cost more than the replay's sending - as are the time-valued attributes
// whose new value is as long as the old (a Unix-nanosecond varint is 9 bytes from 1972 to 2262).
// The generated types are the fallback for anything else: input the wire walk cannot read, a value
// that changes length.
func (s Shift) Request(raw []byte) ([]byte, error) { return s.request(raw, nil) }

// request is Request with raw's plan when it was made already (Blast's later passes).
func (s Shift) request(raw []byte, p plan) ([]byte, error) {
	if s.IsZero() {
		return append([]byte(nil), raw...), nil
	}
	if p == nil {
		p = planProto(raw)
	}
	if p != nil {
		if out, ok := p.apply(raw, s); ok {
			return out, nil
		}
	}
	return s.generated(raw)
}

// generated is Request through the generated types.
func (s Shift) generated(raw []byte) ([]byte, error) {
	req := &coltracepb.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(raw, req); err != nil {
		return nil, fmt.Errorf("decode request to shift its times: %w", err)
	}
	shift := func(t uint64) uint64 { return uint64(s.instant(int64(t))) }
	var value func(kind timeKind, v *commonpb.AnyValue)
	value = func(kind timeKind, v *commonpb.AnyValue) {
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_IntValue:
			if kind == unixNanos && x.IntValue > 0 {
				x.IntValue += s.Delta
			}
		case *commonpb.AnyValue_DoubleValue:
			if kind == unixNanos && x.DoubleValue > 0 {
				x.DoubleValue += float64(s.Delta)
			}
		case *commonpb.AnyValue_StringValue:
			if w, ok := shiftText(kind, x.StringValue, s.Delta); ok {
				x.StringValue = w
			}
		case *commonpb.AnyValue_ArrayValue:
			for _, e := range x.ArrayValue.GetValues() {
				value(kind, e)
			}
		}
	}
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				sp.StartTimeUnixNano = shift(sp.StartTimeUnixNano)
				sp.EndTimeUnixNano = shift(sp.EndTimeUnixNano)
				for _, e := range sp.GetEvents() {
					e.TimeUnixNano = shift(e.TimeUnixNano)
				}
				s.traceID(sp.TraceId)
				for _, l := range sp.GetLinks() {
					s.traceID(l.TraceId)
				}
				if s.Delta == 0 {
					continue
				}
				for _, kv := range sp.GetAttributes() {
					if kind := timeAttrs[kv.GetKey()]; kind != 0 {
						value(kind, kv.GetValue())
					}
				}
			}
		}
	}
	out, err := proto.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode shifted request: %w", err)
	}
	return out, nil
}
