package otlpsdk_test

import (
	"context"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/stormwatch/stormwatch/spans/spanstest"
	"github.com/stormwatch/stormwatch/tracefile/otlpsdk"
)

// TestRequestIsWhatTheOTLPExporterSends records each span twice from one tracer provider: with a
// span recorder, and with the SDK's own OTLP/HTTP exporter sending to a loopback server, one
// request per span. Request of each recorded span must equal, field for field, what the exporter
// sent for it: remote-parent and link flags, scope attributes, every attribute value type, events,
// links and status included.
func TestRequestIsWhatTheOTLPExporterSends(t *testing.T) {
	ctx := context.Background()
	url, received := spanstest.OTLPHTTPReceiver(t)
	otlp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(url),
		otlptracehttp.WithCompression(otlptracehttp.NoCompression))
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	res := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0",
		attribute.String("service.name", "edge"), attribute.String("service.instance.id", "edge-1"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSpanProcessor(rec),
		sdktrace.WithSyncer(otlp))
	tr := tp.Tracer("stormwatch/test", trace.WithInstrumentationVersion("1.2.3"),
		trace.WithInstrumentationAttributes(attribute.String("lib", "x")), trace.WithSchemaURL("https://example.com/s"))

	// The root continues a remote parent, so its flags carry "parent is remote".
	remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5},
		TraceFlags: trace.FlagsSampled, Remote: true})
	ctx, root := tr.Start(trace.ContextWithRemoteSpanContext(ctx, remote), "GET /checkout",
		trace.WithSpanKind(trace.SpanKindServer))
	_, s := tr.Start(ctx, "GET", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.Int("n", -3), attribute.Bool("b", true), attribute.Float64("f", 0.5),
		attribute.StringSlice("ss", []string{"a", "b"}), attribute.Int64Slice("is", []int64{1, 2}),
		attribute.BoolSlice("bs", []bool{true}), attribute.Float64Slice("fs", []float64{1.5}),
		attribute.ByteSlice("bytes", []byte{0, 0xff}),
		attribute.Slice("mixed", attribute.IntValue(1), attribute.StringValue("two")),
		attribute.Map("map", attribute.String("inner", "v")),
		attribute.KeyValue{Key: "empty"},
	), trace.WithLinks(trace.Link{SpanContext: remote, Attributes: []attribute.KeyValue{attribute.String("k", "v")}}))
	s.AddEvent("exception", trace.WithAttributes(attribute.String("exception.type", "timeout")))
	s.SetStatus(codes.Error, "503")
	s.End()
	root.SetStatus(codes.Ok, "")
	root.End()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	ended, sent := rec.Ended(), received()
	if len(ended) != 2 || len(sent) != 2 {
		t.Fatalf("recorded %d spans, exporter sent %d requests; want 2 and 2", len(ended), len(sent))
	}
	for i, span := range ended {
		got := otlpsdk.Request([]sdktrace.ReadOnlySpan{span})
		if !proto.Equal(got, sent[i]) {
			t.Errorf("span %q:\n got %v\nwant %v", span.Name(), got, sent[i])
		}
	}
}

// TestRequestGroupsByResourceAndScope: spans of two resources and two scopes, interleaved, come out
// as one ResourceSpans per resource and one ScopeSpans per scope within it, in order of first
// appearance, each keeping its spans' order.
func TestRequestGroupsByResourceAndScope(t *testing.T) {
	resA := resource.NewSchemaless(attribute.String("service.name", "a"))
	resB := resource.NewSchemaless(attribute.String("service.name", "b"))
	span := func(res *resource.Resource, scope, name string) sdktrace.ReadOnlySpan {
		return tracetest.SpanStub{
			Name:                 name,
			Resource:             res,
			InstrumentationScope: instrumentation.Scope{Name: scope},
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: trace.TraceID{1}, SpanID: trace.SpanID{byte(len(name))}}),
		}.Snapshot()
	}
	req := otlpsdk.Request([]sdktrace.ReadOnlySpan{
		span(resA, "x", "1"), span(resB, "x", "22"), span(resA, "y", "333"), span(resA, "x", "4444"), nil,
	})
	var got [][]string
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			names := []string{rs.Resource.Attributes[0].Value.GetStringValue(), ss.Scope.Name}
			for _, sp := range ss.Spans {
				names = append(names, sp.Name)
			}
			got = append(got, names)
		}
	}
	want := [][]string{{"a", "x", "1", "4444"}, {"a", "y", "333"}, {"b", "x", "22"}}
	if len(got) != len(want) {
		t.Fatalf("groups %v, want %v", got, want)
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("groups %v, want %v", got, want)
		}
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Fatalf("groups %v, want %v", got, want)
			}
		}
	}
}

// TestRequestKeepsALinksTraceState: the OTLP exporters' conversion leaves a link's trace state
// out, and a recording keeps it - on the link it belongs to, of the span it belongs to, with two
// scopes reordering the spans and a second span of the same id that has none.
func TestRequestKeepsALinksTraceState(t *testing.T) {
	res := resource.NewSchemaless(attribute.String("service.name", "a"))
	ts, err := trace.ParseTraceState("ot=th:8,vendor=x")
	if err != nil {
		t.Fatal(err)
	}
	linked := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{9}, SpanID: trace.SpanID{9}, TraceState: ts})
	plain := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{8}, SpanID: trace.SpanID{8}})
	span := func(scope string, id byte, links ...trace.SpanContext) sdktrace.ReadOnlySpan {
		stub := tracetest.SpanStub{Name: scope, Resource: res, InstrumentationScope: instrumentation.Scope{Name: scope},
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{id}})}
		for _, l := range links {
			stub.Links = append(stub.Links, sdktrace.Link{SpanContext: l})
		}
		return stub.Snapshot()
	}
	req := otlpsdk.Request([]sdktrace.ReadOnlySpan{
		span("x", 1, plain), span("y", 2, plain, linked), span("x", 3, linked, plain), span("y", 2),
	})
	var got []string
	for _, ss := range req.ResourceSpans[0].ScopeSpans {
		for _, sp := range ss.Spans {
			for _, l := range sp.Links {
				got = append(got, fmt.Sprintf("%s%d:%q", sp.Name, sp.SpanId[0], l.TraceState))
			}
		}
	}
	want := []string{`x1:""`, `x3:"ot=th:8,vendor=x"`, `x3:""`, `y2:""`, `y2:"ot=th:8,vendor=x"`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("links %v, want %v", got, want)
	}
}
