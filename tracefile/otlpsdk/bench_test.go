package otlpsdk_test

import (
	"context"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/stormwatch/stormwatch/internal/cputime"
	"github.com/stormwatch/stormwatch/tracefile/otlpsdk"
)

// BenchmarkRequest converts a batch of 512 SDK spans of one resource, as the batch span processor
// hands them to tracefile's exporter: what recording SDK spans to a file costs per span.
func BenchmarkRequest(b *testing.B) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "checkout"))))
	tr := tp.Tracer("stormwatch/bench")
	ctx, root := tr.Start(context.Background(), "GET /checkout", trace.WithSpanKind(trace.SpanKindServer))
	for i := range 511 {
		_, s := tr.Start(ctx, "GET", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			attribute.String("http.request.method", "GET"), attribute.Int("http.response.status_code", 503),
			attribute.String("url.full", fmt.Sprintf("http://inventory:8080/items/%d", i)),
			attribute.Int("http.request.resend_count", i%3), attribute.String("server.address", "inventory")))
		s.AddEvent("retry", trace.WithAttributes(attribute.Int("attempt", i%3)))
		s.SetStatus(codes.Error, "503")
		s.End()
	}
	root.End()
	ss := rec.Ended()
	b.ReportAllocs()
	cpu0 := cputime.Process()
	for b.Loop() {
		otlpsdk.Request(ss)
	}
	b.ReportMetric(float64(cputime.Process()-cpu0)/float64(b.N*len(ss)), "cpu-ns/span")
}
