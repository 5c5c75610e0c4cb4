package spans_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"

	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/spans/spanstest"
)

// sdkRequest records spans with the real OpenTelemetry Go SDK - two services, two scopes each,
// parents, links, events, every attribute type, statuses - and converts them to the request an
// OTLP exporter would send.
func sdkRequest(t testing.TB) *coltracepb.ExportTraceServiceRequest {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	base := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	newTP := func(service, instance string, extra ...attribute.KeyValue) *sdktrace.TracerProvider {
		attrs := append([]attribute.KeyValue{
			attribute.String(spans.AttrServiceName, service),
			attribute.String(spans.AttrServiceInstance, instance),
		}, extra...)
		return sdktrace.NewTracerProvider(
			sdktrace.WithSpanProcessor(rec),
			sdktrace.WithResource(resource.NewSchemaless(attrs...)),
		)
	}
	edge := newTP("edge", "edge-1", attribute.String("host.name", "laptop"), attribute.String(spans.AttrURLScheme, "https"))
	api := newTP("api", "api-7")
	ctx := context.Background()
	at := func(ms int) trace.SpanStartEventOption {
		return trace.WithTimestamp(base.Add(time.Duration(ms) * time.Millisecond))
	}

	ctx, root := edge.Tracer("edge/http").Start(ctx, "GET /catalog", trace.WithSpanKind(trace.SpanKindServer), at(0),
		trace.WithAttributes(
			attribute.String(spans.AttrHTTPMethod, "GET"),
			attribute.String(spans.AttrHTTPRoute, "/catalog"),
			attribute.Int(spans.AttrHTTPStatus, 200),
			attribute.String("user_agent.original", "curl/8"),
		))
	opCtx, op := edge.Tracer("edge/resilience").Start(ctx, "catalog.read", at(1), trace.WithAttributes(
		attribute.String(spans.AttrOpID, "op-1"),
		attribute.String(spans.AttrOpName, "catalog.read"),
		attribute.String(spans.AttrOwner, "edge"),
		attribute.Int64(spans.AttrDeadline, base.Add(time.Second).UnixNano()),
	))
	var prev trace.SpanContext
	for attempt := 1; attempt <= 3; attempt++ {
		opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), at(2 + attempt*10), trace.WithAttributes(
			attribute.String(spans.AttrHTTPMethod, "GET"),
			attribute.String(spans.AttrServerAddress, "api"),
			attribute.Int(spans.AttrServerPort, 8080),
			attribute.String(spans.AttrURLFull, "http://api:8080/items?x=1"),
			attribute.Int(spans.AttrAttempt, attempt),
			attribute.Float64(spans.AttrBackoff, 12.5*float64(attempt-1)),
			attribute.Bool(spans.AttrTerminal, attempt == 3),
			attribute.StringSlice("tags", []string{"a", "b\"c"}),
			attribute.IntSlice(spans.AttrFanoutWidth, []int{1, 2}),
			attribute.Float64Slice("weights", []float64{0.5, 1e21}),
			attribute.BoolSlice("flags", []bool{true, false}),
		)}
		if prev.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: prev, Attributes: []attribute.KeyValue{
				attribute.String(spans.AttrAttemptKind, "retry"), attribute.String("link.note", "prev"),
			}}))
		}
		actx, att := edge.Tracer("edge/http").Start(opCtx, "GET", opts...)
		prev = att.SpanContext()
		_, srv := api.Tracer("api/http").Start(actx, "GET /items", trace.WithSpanKind(trace.SpanKindServer), at(3+attempt*10))
		if attempt < 3 {
			srv.SetStatus(codes.Error, "upstream unavailable")
			srv.AddEvent("exception", trace.WithTimestamp(base.Add(time.Duration(4+attempt*10)*time.Millisecond)),
				trace.WithAttributes(attribute.String("exception.type", "Unavailable"), attribute.Int("retry.hint", 3)))
			att.SetAttributes(attribute.Int(spans.AttrHTTPStatus, 503), attribute.String(spans.AttrErrorType, "503"))
			att.SetStatus(codes.Error, "")
		} else {
			srv.SetStatus(codes.Ok, "")
		}
		srv.End(trace.WithTimestamp(base.Add(time.Duration(8+attempt*10) * time.Millisecond)))
		att.End(trace.WithTimestamp(base.Add(time.Duration(9+attempt*10) * time.Millisecond)))
	}
	_, internal := api.Tracer("api/db").Start(ctx, "query", at(50), trace.WithAttributes(
		attribute.Slice("nested", attribute.SliceValue(attribute.StringValue("x"), attribute.Int64Value(-3))),
		attribute.Map("obj", attribute.String("k", "v"), attribute.Bool("b", true)),
		attribute.ByteSlice("raw", []byte{0xde, 0xad}),
		attribute.String(spans.AttrRPCSystem, "grpc"),
		attribute.Map(spans.AttrRPCService, attribute.Slice("inner", attribute.SliceValue(attribute.BoolValue(false)))),
		attribute.ByteSlice(spans.AttrRPCMethod, []byte{1, 2, 3}),
	))
	internal.End(trace.WithTimestamp(base.Add(60 * time.Millisecond)))
	op.End(trace.WithTimestamp(base.Add(70 * time.Millisecond)))
	root.End(trace.WithTimestamp(base.Add(80 * time.Millisecond)))
	for _, tp := range []*sdktrace.TracerProvider{edge, api} {
		if err := tp.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	req := spanstest.RequestFromSDK(rec.Ended())
	if len(req.ResourceSpans) != 2 {
		t.Fatalf("SDK request has %d resources, want 2", len(req.ResourceSpans))
	}
	return req
}

func TestRequestFromSDK(t *testing.T) {
	req := sdkRequest(t)
	b := spanstest.FromProto(req, spans.DecodeOptions{})
	if len(b.Spans) != 9 || b.Rejected != 0 {
		t.Fatalf("got %d spans, %d rejected; want 9, 0", len(b.Spans), b.Rejected)
	}
	byName := map[string]*spans.Span{}
	for i := range b.Spans {
		byName[b.Spans[i].Name+"/"+b.Spans[i].Service()] = &b.Spans[i]
	}
	root, att := byName["GET /catalog/edge"], byName["GET/edge"]
	if root == nil || att == nil || !root.ParentID.IsZero() || att.Kind != spans.KindClient {
		t.Fatalf("unexpected spans: %+v", byName)
	}
	if got := root.Resource.Attrs; len(got) != 1 || got[0] != spans.StringAttr(spans.AttrURLScheme, "https") {
		t.Errorf("resource attrs = %+v (host.name is not well-known and must be dropped)", got)
	}
	if got := byName["query/api"].Str(spans.AttrRPCService); got != `{"inner":[[false]]}` {
		t.Errorf("map value rendered %q", got)
	}
	if errs := byName["GET /items/api"]; errs.Status != spans.StatusOK || errs.Instance() != "api-7" {
		t.Errorf("last server span: %+v", errs)
	}
}
