package otlpsdk

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// Request converts SDK spans to one export request, grouped by resource and then by
// instrumentation scope in order of first appearance.
//
// The conversion is the OTLP exporters' own: an otlptrace exporter hands what it would send to a
// client that keeps it. That exporter puts a batch's resources in the order a map iterates them,
// so each resource's spans are handed to it apart, and a request - a recording - is the same
// whenever it is made. Within a resource it keeps scopes and spans in order.
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
		req.ResourceSpans = append(req.ResourceSpans, c.rs...)
	}
	return req
}

// kept is an otlptrace client that keeps the last upload instead of sending it.
type kept struct{ rs []*tracepb.ResourceSpans }

func (*kept) Start(context.Context) error { return nil }
func (*kept) Stop(context.Context) error  { return nil }

func (c *kept) UploadTraces(_ context.Context, rs []*tracepb.ResourceSpans) error {
	c.rs = rs
	return nil
}
