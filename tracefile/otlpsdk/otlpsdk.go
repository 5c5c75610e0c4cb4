package otlpsdk

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// Request converts SDK spans to one export request, grouped by resource and then by
// instrumentation scope in order of first appearance, as the OTLP exporters group them.
func Request(ss []sdktrace.ReadOnlySpan) *coltracepb.ExportTraceServiceRequest {
	type scopeKey struct {
		res   attribute.Distinct
		scope instrumentation.Scope
	}
	// attribute.Set is comparable, so the scope value is a usable map key.
	req := &coltracepb.ExportTraceServiceRequest{}
	byRes := map[attribute.Distinct]*tracepb.ResourceSpans{}
	byScope := map[scopeKey]*tracepb.ScopeSpans{}
	for _, s := range ss {
		if s == nil {
			continue
		}
		res := s.Resource()
		rk := res.Equivalent()
		rs, ok := byRes[rk]
		if !ok {
			rs = &tracepb.ResourceSpans{Resource: resourceToProto(res), SchemaUrl: res.SchemaURL()}
			byRes[rk] = rs
			req.ResourceSpans = append(req.ResourceSpans, rs)
		}
		k := scopeKey{res: rk, scope: s.InstrumentationScope()}
		sc, ok := byScope[k]
		if !ok {
			sc = &tracepb.ScopeSpans{
				Scope: &commonpb.InstrumentationScope{
					Name:       k.scope.Name,
					Version:    k.scope.Version,
					Attributes: attrsToProto(k.scope.Attributes.ToSlice()),
				},
				SchemaUrl: k.scope.SchemaURL,
			}
			byScope[k] = sc
			rs.ScopeSpans = append(rs.ScopeSpans, sc)
		}
		sc.Spans = append(sc.Spans, spanToProto(s))
	}
	return req
}

func resourceToProto(r *resource.Resource) *resourcepb.Resource {
	if r == nil {
		return &resourcepb.Resource{}
	}
	return &resourcepb.Resource{Attributes: attrsToProto(r.Attributes())}
}

func spanToProto(s sdktrace.ReadOnlySpan) *tracepb.Span {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	ps := &tracepb.Span{
		TraceId:                tid[:],
		SpanId:                 sid[:],
		TraceState:             sc.TraceState().String(),
		Flags:                  spanFlags(sc.TraceFlags(), s.Parent().IsRemote()),
		Name:                   s.Name(),
		Kind:                   kindToProto(s.SpanKind()),
		StartTimeUnixNano:      unixNano(s.StartTime().UnixNano()),
		EndTimeUnixNano:        unixNano(s.EndTime().UnixNano()),
		Attributes:             attrsToProto(s.Attributes()),
		DroppedAttributesCount: uint32(s.DroppedAttributes()),
		DroppedEventsCount:     uint32(s.DroppedEvents()),
		DroppedLinksCount:      uint32(s.DroppedLinks()),
		Status:                 statusToProto(s.Status()),
	}
	if p := s.Parent(); p.SpanID().IsValid() {
		pid := p.SpanID()
		ps.ParentSpanId = pid[:]
	}
	for _, e := range s.Events() {
		ps.Events = append(ps.Events, &tracepb.Span_Event{
			TimeUnixNano:           unixNano(e.Time.UnixNano()),
			Name:                   e.Name,
			Attributes:             attrsToProto(e.Attributes),
			DroppedAttributesCount: uint32(e.DroppedAttributeCount),
		})
	}
	for _, l := range s.Links() {
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		ps.Links = append(ps.Links, &tracepb.Span_Link{
			TraceId:                ltid[:],
			SpanId:                 lsid[:],
			TraceState:             l.SpanContext.TraceState().String(),
			Attributes:             attrsToProto(l.Attributes),
			DroppedAttributesCount: uint32(l.DroppedAttributeCount),
			Flags:                  spanFlags(l.SpanContext.TraceFlags(), l.SpanContext.IsRemote()),
		})
	}
	return ps
}

// The flags field carries the W3C trace flags in its low byte, plus (since OTLP 1.1) whether the
// parent - or the linked span - is remote: bit 8 says the remote bit is known, bit 9 that it is set.
const (
	flagContextHasIsRemote = 0x100
	flagContextIsRemote    = 0x200
)

func spanFlags(tf trace.TraceFlags, remote bool) uint32 {
	f := uint32(tf) | flagContextHasIsRemote
	if remote {
		f |= flagContextIsRemote
	}
	return f
}

func unixNano(n int64) uint64 {
	if n < 0 {
		return 0
	}
	return uint64(n)
}

func kindToProto(k trace.SpanKind) tracepb.Span_SpanKind {
	switch k {
	case trace.SpanKindInternal:
		return tracepb.Span_SPAN_KIND_INTERNAL
	case trace.SpanKindServer:
		return tracepb.Span_SPAN_KIND_SERVER
	case trace.SpanKindClient:
		return tracepb.Span_SPAN_KIND_CLIENT
	case trace.SpanKindProducer:
		return tracepb.Span_SPAN_KIND_PRODUCER
	case trace.SpanKindConsumer:
		return tracepb.Span_SPAN_KIND_CONSUMER
	}
	return tracepb.Span_SPAN_KIND_UNSPECIFIED
}

func statusToProto(s sdktrace.Status) *tracepb.Status {
	st := &tracepb.Status{}
	switch s.Code {
	case codes.Ok:
		st.Code = tracepb.Status_STATUS_CODE_OK
	case codes.Error:
		st.Code = tracepb.Status_STATUS_CODE_ERROR
		// The SDK keeps a description only for errors, and so does OTLP.
		st.Message = s.Description
	}
	return st
}

func attrsToProto(kvs []attribute.KeyValue) []*commonpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]*commonpb.KeyValue, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, &commonpb.KeyValue{Key: string(kv.Key), Value: valueToProto(kv.Value)})
	}
	return out
}

func valueToProto(v attribute.Value) *commonpb.AnyValue {
	switch v.Type() {
	case attribute.BOOL:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v.AsBool()}}
	case attribute.INT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v.AsInt64()}}
	case attribute.FLOAT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}}
	case attribute.STRING:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v.AsString()}}
	case attribute.BYTESLICE:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: v.AsByteSlice()}}
	case attribute.BOOLSLICE:
		return arrayOf(v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return arrayOf(v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return arrayOf(v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return arrayOf(v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		return arrayOf(v.AsSlice(), func(v attribute.Value) attribute.Value { return v })
	case attribute.MAP:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{
			KvlistValue: &commonpb.KeyValueList{Values: attrsToProto(v.AsMap())},
		}}
	}
	// EMPTY (and any type a later SDK adds): an AnyValue with nothing set.
	return &commonpb.AnyValue{}
}

// arrayOf is an array value of xs, each made a value by conv and then an AnyValue as any value is.
func arrayOf[T any](xs []T, conv func(T) attribute.Value) *commonpb.AnyValue {
	vals := make([]*commonpb.AnyValue, len(xs))
	for i, x := range xs {
		vals[i] = valueToProto(conv(x))
	}
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vals}}}
}
