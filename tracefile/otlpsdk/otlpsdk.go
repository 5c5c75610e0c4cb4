package otlpsdk

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// Request converts SDK spans to one export request, grouped by resource and then by
// instrumentation scope in order of first appearance.
//
// The conversion is the OTLP exporters' own: an otlptrace exporter hands what it would send to a
// client that keeps it. That exporter puts a batch's resources in the order a map iterates them,
// so each resource's spans are handed to it apart, and a request - a recording - is the same
// whenever it is made. Within a resource it keeps scopes and spans in order. What that conversion
// leaves out of the OTLP fields, a link's trace state, is put back (linkTraceStates).
func Request(ss []sdktrace.ReadOnlySpan) *coltracepb.ExportTraceServiceRequest {
	var order []attribute.Distinct
	byRes := map[attribute.Distinct][]sdktrace.ReadOnlySpan{}
	for _, s := range ss {
		if s == nil {
			continue
		}
		k := s.Resource().Equivalent()
		if _, ok := byRes[k]; !ok {
			order = append(order, k)
		}
		byRes[k] = append(byRes[k], s)
	}
	var c kept
	exp := otlptrace.NewUnstarted(&c)
	req := &coltracepb.ExportTraceServiceRequest{}
	for _, k := range order {
		// The exporter converts and uploads in the call, and the client refuses nothing.
		_ = exp.ExportSpans(context.Background(), byRes[k])
		linkTraceStates(c.rs, byRes[k])
		req.ResourceSpans = append(req.ResourceSpans, c.rs...)
	}
	return req
}

// linkTraceStates sets the trace state of each link of rs's spans from ss, the spans they were
// converted from: the exporters' conversion leaves it out, and a recording keeps what the SDK
// had (a link's trace state can carry its sampling threshold). A span's links are converted in
// order; the spans are matched by id, in order among spans of the same id.
func linkTraceStates(rs []*tracepb.ResourceSpans, ss []sdktrace.ReadOnlySpan) {
	type spanKey struct {
		trace trace.TraceID
		span  trace.SpanID
	}
	keyOf := func(s sdktrace.ReadOnlySpan) spanKey {
		return spanKey{s.SpanContext().TraceID(), s.SpanContext().SpanID()}
	}
	byID := map[spanKey][]sdktrace.ReadOnlySpan{}
	for _, s := range ss {
		for _, l := range s.Links() {
			if l.SpanContext.TraceState().Len() > 0 {
				byID[keyOf(s)] = nil
				break
			}
		}
	}
	if len(byID) == 0 {
		return // what nearly every batch is: no link carries a trace state
	}
	for _, s := range ss {
		if q, ok := byID[keyOf(s)]; ok {
			byID[keyOf(s)] = append(q, s)
		}
	}
	for _, r := range rs {
		for _, sc := range r.ScopeSpans {
			for _, p := range sc.Spans {
				var k spanKey
				copy(k.trace[:], p.TraceId)
				copy(k.span[:], p.SpanId)
				q := byID[k]
				if len(q) == 0 {
					continue
				}
				byID[k] = q[1:]
				for i, l := range q[0].Links() {
					if i < len(p.Links) {
						p.Links[i].TraceState = l.SpanContext.TraceState().String()
					}
				}
			}
		}
	}
}

// kept is an otlptrace client that keeps the last upload instead of sending it.
type kept struct{ rs []*tracepb.ResourceSpans }

func (*kept) Start(context.Context) error { return nil }
func (*kept) Stop(context.Context) error  { return nil }

func (c *kept) UploadTraces(_ context.Context, rs []*tracepb.ResourceSpans) error {
	c.rs = rs
	return nil
}
