package workload

import (
	"encoding/binary"
	"fmt"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// CollectorRequests builds n distinct OTLP/protobuf ExportTraceServiceRequests of 100 spans that
// look like real HTTP client attempt spans - the payload of the end-to-end ingest benchmark: about 580 bytes each on the wire, 10 attributes, 10 spans per trace. The spans are
// numbered from first: a span's number makes its ids and its request's URL and operation id; its
// times depend only on its place in the list, ending up to a few ms before now (Unix ns). It
// returns the requests and their mean bytes per span.
func CollectorRequests(n int, first, now uint64) ([][]byte, float64) {
	out := make([][]byte, n)
	var total, spansN int
	for i := range out {
		ss := &tracepb.ScopeSpans{Scope: &commonpb.InstrumentationScope{Name: "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp", Version: "0.61.0"}}
		for j := 0; j < 100; j++ {
			at := uint64(i*100 + j)
			k := first + at
			tid, sid, pid := make([]byte, 16), make([]byte, 8), make([]byte, 8)
			binary.BigEndian.PutUint64(tid[:8], 0x5157_0000_0000_0000|k/10)
			binary.BigEndian.PutUint64(tid[8:], k/10*0x9e3779b97f4a7c15|1)
			binary.BigEndian.PutUint64(sid, k*0x9e3779b97f4a7c15|1)
			binary.BigEndian.PutUint64(pid, (k/10)*0xbf58476d1ce4e5b9|1)
			ss.Spans = append(ss.Spans, &tracepb.Span{
				TraceId: tid, SpanId: sid, ParentSpanId: pid, Flags: 0x101,
				Name: "GET /api/v1/catalog/items/{id}", Kind: tracepb.Span_SPAN_KIND_CLIENT,
				StartTimeUnixNano: now - 30e6 + at*1000, EndTimeUnixNano: now - 18e6 + at*1000,
				Attributes: []*commonpb.KeyValue{
					kvStr("http.request.method", "GET"), kvInt("http.response.status_code", 503),
					kvStr("server.address", "catalog.internal.example.com"), kvInt("server.port", 8080),
					kvStr("url.full", fmt.Sprintf("http://catalog.internal.example.com:8080/api/v1/catalog/items/%d?include=price,stock", k)),
					kvStr("network.peer.address", "10.12.3.45"), kvInt("http.request.resend_count", int64(k%3)),
					kvStr("user_agent.original", "checkout/2.14.1 (linux; amd64) Go-http-client/1.1"),
					kvStr("resilience.operation.id", fmt.Sprintf("op-%016x", k/3)), kvStr("error.type", "503"),
				},
				Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "Service Unavailable"},
			})
		}
		req := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
			Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
				kvStr("service.name", "checkout"), kvStr("service.instance.id", fmt.Sprintf("checkout-7d9f-%05d", i%7)),
				kvStr("telemetry.sdk.language", "go"), kvStr("telemetry.sdk.version", "1.47.0"),
			}},
			ScopeSpans: []*tracepb.ScopeSpans{ss},
		}}}
		b, err := proto.Marshal(req)
		if err != nil {
			panic(err)
		}
		out[i] = b
		total += len(b)
		spansN += 100
	}
	return out, float64(total) / float64(spansN)
}

func kvStr(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

func kvInt(k string, v int64) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}}
}
