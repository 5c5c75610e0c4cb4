package spanstest

import (
	"encoding/hex"
	"fmt"
	"strings"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"

	"github.com/stormwatch/stormwatch/spans"
)

// FromProto converts a generated OTLP request to a batch by the same rules as the fast decoders:
// spans with a missing or wrong-length trace or span id are rejected and counted; a parent id of the
// wrong length is treated as none. It is the reference the decoders are tested and fuzzed against.
func FromProto(req *coltracepb.ExportTraceServiceRequest, opt spans.DecodeOptions) *spans.Batch {
	b := &spans.Batch{}
	for _, rs := range req.GetResourceSpans() {
		res := &spans.Resource{}
		for _, kv := range rs.GetResource().GetAttributes() {
			switch kv.GetKey() {
			case spans.AttrServiceName:
				res.ServiceName = anyString(kv.GetValue())
			case spans.AttrServiceInstance:
				res.ServiceInstance = anyString(kv.GetValue())
			default:
				if a, ok := convAttr(kv, opt); ok {
					res.Attrs = append(res.Attrs, a)
				}
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, ps := range ss.GetSpans() {
				var s spans.Span
				if len(ps.GetTraceId()) != 16 || len(ps.GetSpanId()) != 8 {
					b.Rejected++
					b.RejectReason = "invalid trace or span id"
					continue
				}
				copy(s.TraceID[:], ps.GetTraceId())
				copy(s.SpanID[:], ps.GetSpanId())
				if s.TraceID.IsZero() || s.SpanID.IsZero() {
					b.Rejected++
					b.RejectReason = "invalid trace or span id"
					continue
				}
				if len(ps.GetParentSpanId()) == 8 {
					copy(s.ParentID[:], ps.GetParentSpanId())
				}
				s.StartUnixNano = int64(ps.GetStartTimeUnixNano())
				s.EndUnixNano = int64(ps.GetEndTimeUnixNano())
				s.Kind = spans.Kind(ps.GetKind())
				s.Status = spans.StatusCode(ps.GetStatus().GetCode())
				s.StatusMessage = ps.GetStatus().GetMessage()
				s.Name = ps.GetName()
				s.Resource = res
				s.Scope = ss.GetScope().GetName()
				s.Attrs = convAttrs(ps.GetAttributes(), opt)
				if ts := ps.GetTraceState(); otEntry(ts) {
					s.Attrs = append(s.Attrs, spans.StringAttr(spans.AttrTraceState, ts))
				}
				for _, l := range ps.GetLinks() {
					var link spans.Link
					if len(l.GetTraceId()) != 16 || len(l.GetSpanId()) != 8 {
						continue
					}
					copy(link.TraceID[:], l.GetTraceId())
					copy(link.SpanID[:], l.GetSpanId())
					link.Attrs = convAttrs(l.GetAttributes(), opt)
					s.Links = append(s.Links, link)
				}
				for _, e := range ps.GetEvents() {
					s.Events = append(s.Events, spans.Event{
						TimeUnixNano: int64(e.GetTimeUnixNano()),
						Name:         e.GetName(),
						Attrs:        convAttrs(e.GetAttributes(), opt),
					})
				}
				b.Spans = append(b.Spans, s)
			}
		}
	}
	return b
}

func convAttrs(kvs []*commonpb.KeyValue, opt spans.DecodeOptions) []spans.Attr {
	var out []spans.Attr
	for _, kv := range kvs {
		if a, ok := convAttr(kv, opt); ok {
			out = append(out, a)
		}
	}
	return out
}

func convAttr(kv *commonpb.KeyValue, opt spans.DecodeOptions) (spans.Attr, bool) {
	if !opt.AllAttributes && !spans.IsWellKnown(kv.GetKey()) {
		return spans.Attr{}, false
	}
	v := kv.GetValue()
	a := spans.Attr{Key: kv.GetKey()}
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		a.Type, a.Str = spans.ValueString, x.StringValue
	case *commonpb.AnyValue_IntValue:
		a.Type, a.Num = spans.ValueInt, x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		a = spans.DoubleAttr(a.Key, x.DoubleValue)
	case *commonpb.AnyValue_BoolValue:
		a = spans.BoolAttr(a.Key, x.BoolValue)
	case nil:
		a.Type = spans.ValueEmpty
	default:
		a.Type, a.Str = spans.ValueOther, OtherString(v)
	}
	return a, true
}

func anyString(v *commonpb.AnyValue) string {
	if s, ok := v.GetValue().(*commonpb.AnyValue_StringValue); ok {
		return s.StringValue
	}
	return OtherString(v)
}

// OtherString is the display form of arrays, maps and bytes: JSON-like, bytes in hex. The fast
// decoders must render ValueOther the same way.
func OtherString(v *commonpb.AnyValue) string {
	var sb strings.Builder
	writeAny(&sb, v)
	return sb.String()
}

func writeAny(sb *strings.Builder, v *commonpb.AnyValue) {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		fmt.Fprintf(sb, "%q", x.StringValue)
	case *commonpb.AnyValue_IntValue:
		fmt.Fprintf(sb, "%d", x.IntValue)
	case *commonpb.AnyValue_DoubleValue:
		fmt.Fprintf(sb, "%g", x.DoubleValue)
	case *commonpb.AnyValue_BoolValue:
		fmt.Fprintf(sb, "%t", x.BoolValue)
	case *commonpb.AnyValue_BytesValue:
		sb.WriteString(hex.EncodeToString(x.BytesValue))
	case *commonpb.AnyValue_ArrayValue:
		sb.WriteByte('[')
		for i, e := range x.ArrayValue.GetValues() {
			if i > 0 {
				sb.WriteByte(',')
			}
			writeAny(sb, e)
		}
		sb.WriteByte(']')
	case *commonpb.AnyValue_KvlistValue:
		sb.WriteByte('{')
		for i, kv := range x.KvlistValue.GetValues() {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(sb, "%q:", kv.GetKey())
			writeAny(sb, kv.GetValue())
		}
		sb.WriteByte('}')
	default:
		sb.WriteString("null")
	}
}

// otEntry reports whether a W3C trace state has an "ot" entry (the decoders keep only such).
func otEntry(ts string) bool {
	for _, e := range strings.Split(ts, ",") {
		if strings.HasPrefix(strings.TrimLeft(e, " \t"), "ot=") {
			return true
		}
	}
	return false
}
