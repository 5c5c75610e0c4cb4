package spanstest

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// RequestFromSDK converts spans recorded by the real OpenTelemetry Go SDK (tracetest.SpanRecorder,
// tracetest.InMemoryExporter's stubs via Snapshots) into the export request an OTLP exporter would
// send: one ResourceSpans per distinct resource, one ScopeSpans per instrumentation scope, in the
// order the spans were recorded. The SDK's OTLP exporter does this conversion in an internal
// package, so tests that want the protobuf request without a socket use this one.
func RequestFromSDK(recorded []sdktrace.ReadOnlySpan) *coltracepb.ExportTraceServiceRequest {
	req := &coltracepb.ExportTraceServiceRequest{}
	type scopeKey struct {
		res   attribute.Distinct
		scope instrumentation.Scope
	}
	resources := map[attribute.Distinct]*tracepb.ResourceSpans{}
	scopes := map[scopeKey]*tracepb.ScopeSpans{}
	for _, s := range recorded {
		rk := s.Resource().Equivalent()
		rs, ok := resources[rk]
		if !ok {
			rs = &tracepb.ResourceSpans{Resource: resourceProto(s.Resource()), SchemaUrl: s.Resource().SchemaURL()}
			resources[rk] = rs
			req.ResourceSpans = append(req.ResourceSpans, rs)
		}
		sk := scopeKey{res: rk, scope: s.InstrumentationScope()}
		ss, ok := scopes[sk]
		if !ok {
			sc := s.InstrumentationScope()
			ss = &tracepb.ScopeSpans{
				Scope:     &commonpb.InstrumentationScope{Name: sc.Name, Version: sc.Version},
				SchemaUrl: sc.SchemaURL,
			}
			scopes[sk] = ss
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
		ss.Spans = append(ss.Spans, SpanToProto(s))
	}
	return req
}

func resourceProto(r *resource.Resource) *resourcepb.Resource {
	if r == nil {
		return nil
	}
	return &resourcepb.Resource{Attributes: KeyValuesToProto(r.Attributes())}
}

// SpanToProto converts one SDK span to its OTLP protobuf form.
func SpanToProto(s sdktrace.ReadOnlySpan) *tracepb.Span {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	p := &tracepb.Span{
		TraceId:                tid[:],
		SpanId:                 sid[:],
		TraceState:             sc.TraceState().String(),
		Name:                   s.Name(),
		Kind:                   tracepb.Span_SpanKind(s.SpanKind()),
		StartTimeUnixNano:      uint64(s.StartTime().UnixNano()),
		EndTimeUnixNano:        uint64(s.EndTime().UnixNano()),
		Attributes:             KeyValuesToProto(s.Attributes()),
		DroppedAttributesCount: uint32(s.DroppedAttributes()),
		DroppedEventsCount:     uint32(s.DroppedEvents()),
		DroppedLinksCount:      uint32(s.DroppedLinks()),
		Flags:                  uint32(sc.TraceFlags()),
	}
	if psc := s.Parent(); psc.SpanID().IsValid() {
		pid := psc.SpanID()
		p.ParentSpanId = pid[:]
	}
	switch st := s.Status(); st.Code {
	case codes.Ok:
		p.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK, Message: st.Description}
	case codes.Error:
		p.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: st.Description}
	}
	for _, e := range s.Events() {
		p.Events = append(p.Events, &tracepb.Span_Event{
			TimeUnixNano:           uint64(e.Time.UnixNano()),
			Name:                   e.Name,
			Attributes:             KeyValuesToProto(e.Attributes),
			DroppedAttributesCount: uint32(e.DroppedAttributeCount),
		})
	}
	for _, l := range s.Links() {
		tid, sid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		p.Links = append(p.Links, &tracepb.Span_Link{
			TraceId:                tid[:],
			SpanId:                 sid[:],
			TraceState:             l.SpanContext.TraceState().String(),
			Attributes:             KeyValuesToProto(l.Attributes),
			DroppedAttributesCount: uint32(l.DroppedAttributeCount),
			Flags:                  uint32(l.SpanContext.TraceFlags()),
		})
	}
	return p
}

// KeyValuesToProto converts SDK attributes, every value type included, to OTLP key-values.
func KeyValuesToProto(kvs []attribute.KeyValue) []*commonpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]*commonpb.KeyValue, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, &commonpb.KeyValue{Key: string(kv.Key), Value: ValueToProto(kv.Value)})
	}
	return out
}

// ValueToProto converts one SDK attribute value to an OTLP AnyValue.
func ValueToProto(v attribute.Value) *commonpb.AnyValue {
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
		return array(v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return array(v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return array(v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return array(v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		return array(v.AsSlice(), func(e attribute.Value) attribute.Value { return e })
	case attribute.MAP:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{
			KvlistValue: &commonpb.KeyValueList{Values: KeyValuesToProto(v.AsMap())},
		}}
	}
	return &commonpb.AnyValue{}
}

func array[T any](elems []T, conv func(T) attribute.Value) *commonpb.AnyValue {
	vals := make([]*commonpb.AnyValue, len(elems))
	for i, e := range elems {
		vals[i] = ValueToProto(conv(e))
	}
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vals}}}
}
