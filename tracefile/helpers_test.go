package tracefile

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/stormwatch/stormwatch/spans"
)

func str(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

func num(k string, v int64) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}}
}

func id(n, size int, salt byte) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint64(b[size-8:], uint64(n)+1)
	b[0] = salt | 1
	return b
}

// fullRequest uses every field and every attribute value type the OTLP trace schema has, with
// strings that need escaping, so transcoding tests cover all of it. i varies ids and names.
func fullRequest(i int) *coltracepb.ExportTraceServiceRequest {
	any := func(v *commonpb.AnyValue) *commonpb.KeyValue { return &commonpb.KeyValue{Key: "any", Value: v} }
	attrs := []*commonpb.KeyValue{
		str("http.request.method", "GET"),
		num("http.response.status_code", 503),
		str("quote\"back\\slash\nnewline\ttab\x01ctl", "unicode ✓ é \u2028"),
		{Key: "double", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 1.5}}},
		{Key: "nan", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: math.Inf(-1)}}},
		{Key: "bool", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: true}}},
		{Key: "bytes", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte{0, 1, 254, 255}}}},
		any(&commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: []*commonpb.AnyValue{
			{Value: &commonpb.AnyValue_IntValue{IntValue: math.MinInt64}},
			{Value: &commonpb.AnyValue_StringValue{StringValue: "x"}},
			{},
		}}}}),
		{Key: "map", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{
			Values: []*commonpb.KeyValue{str("inner", "v"), num("n", -1)},
		}}}},
		{Key: "empty"},
		{Key: "emptyvalue", Value: &commonpb.AnyValue{}},
		num("resilience.attempt", 2),
	}
	return &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{
			Attributes:             []*commonpb.KeyValue{str("service.name", fmt.Sprintf("svc-%d", i)), str("service.instance.id", "i-1"), str("deployment.environment", "test")},
			DroppedAttributesCount: 1,
			EntityRefs:             []*commonpb.EntityRef{{SchemaUrl: "s", Type: "service", IdKeys: []string{"service.name"}, DescriptionKeys: []string{"d"}}},
		},
		SchemaUrl: "https://opentelemetry.io/schemas/1.26.0",
		ScopeSpans: []*tracepb.ScopeSpans{{
			Scope:     &commonpb.InstrumentationScope{Name: "scope", Version: "1.0", Attributes: []*commonpb.KeyValue{str("a", "b")}, DroppedAttributesCount: 2},
			SchemaUrl: "scope-schema",
			Spans: []*tracepb.Span{{
				TraceId: id(i, 16, 0xa0), SpanId: id(i, 8, 0xb0), ParentSpanId: id(i+1000, 8, 0xc0),
				TraceState: "k=v", Flags: 0x301, Name: fmt.Sprintf("GET /%d", i),
				Kind:              tracepb.Span_SPAN_KIND_CLIENT,
				StartTimeUnixNano: 1_700_000_000_000_000_000 + uint64(i)*1000, EndTimeUnixNano: 1_700_000_000_500_000_000 + uint64(i)*1000,
				Attributes: attrs, DroppedAttributesCount: 3,
				Events: []*tracepb.Span_Event{{TimeUnixNano: 1_700_000_000_100_000_000, Name: "exception",
					Attributes: []*commonpb.KeyValue{str("exception.type", "io.EOF")}, DroppedAttributesCount: 4}},
				DroppedEventsCount: 5,
				Links: []*tracepb.Span_Link{{TraceId: id(i, 16, 0xd0), SpanId: id(i, 8, 0xe0), TraceState: "l=1",
					Attributes: []*commonpb.KeyValue{str("link", "prev")}, DroppedAttributesCount: 6, Flags: 0x101}},
				DroppedLinksCount: 7,
				Status:            &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "upstream 503"},
			}, {
				// A second, minimal span: root, no attributes, unset status.
				TraceId: id(i, 16, 0xa0), SpanId: id(i+1000, 8, 0xc0), Name: "root", Kind: tracepb.Span_SPAN_KIND_SERVER,
				StartTimeUnixNano: 1_700_000_000_000_000_000, EndTimeUnixNano: 1_700_000_001_000_000_000,
				Status: &tracepb.Status{},
			}},
		}},
	}}}
}

// realisticSpans is the spans of requests realisticRequest(0..requests-1, n), every attribute
// kept: what the foreign formats' documents are made of in the tests and benchmarks.
func realisticSpans(t testing.TB, requests, n int) []spans.Span {
	t.Helper()
	var all []spans.Span
	for i := 0; i < requests; i++ {
		b, err := spans.DecodeProto(mustMarshal(t, realisticRequest(i, n)), spans.DecodeOptions{AllAttributes: true})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b.Spans...)
	}
	return all
}

// realisticRequest is the end-to-end benchmark's payload: n spans of about 580 bytes on the wire, 10
// attributes each.
func realisticRequest(i, n int) *coltracepb.ExportTraceServiceRequest {
	ss := &tracepb.ScopeSpans{Scope: &commonpb.InstrumentationScope{Name: "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp", Version: "0.60.0"}}
	for j := 0; j < n; j++ {
		k := i*n + j
		ss.Spans = append(ss.Spans, &tracepb.Span{
			TraceId: id(k/10, 16, 0x40), SpanId: id(k, 8, 0x50), ParentSpanId: id(k/10, 8, 0x60),
			Name: "HTTP GET /api/v1/catalog/items", Kind: tracepb.Span_SPAN_KIND_CLIENT,
			StartTimeUnixNano: 1_700_000_000_000_000_000 + uint64(k)*1_000_000, EndTimeUnixNano: 1_700_000_000_012_000_000 + uint64(k)*1_000_000,
			Attributes: []*commonpb.KeyValue{
				str("http.request.method", "GET"), num("http.response.status_code", 503),
				str("server.address", "catalog.internal.example.com"), num("server.port", 8080),
				str("url.full", "http://catalog.internal.example.com:8080/api/v1/catalog/items?page=3&limit=50"),
				str("network.peer.address", "10.12.3.45"), num("http.request.resend_count", int64(j%3)),
				str("user_agent.original", "stormwatch-bench/1.0 (linux; amd64) Go-http-client/1.1"),
				str("resilience.operation.id", fmt.Sprintf("op-%016x", k/3)), str("error.type", "503"),
			},
			Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "Service Unavailable"},
		})
	}
	return &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource:   &resourcepb.Resource{Attributes: []*commonpb.KeyValue{str("service.name", "checkout"), str("service.instance.id", "checkout-7d9f-abc12")}},
		ScopeSpans: []*tracepb.ScopeSpans{ss},
	}}}
}

func mustMarshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// protoDiff is "" when the messages are equal, else both in text form (go-cmp is not a dependency).
func protoDiff(a, b proto.Message) string {
	if proto.Equal(a, b) {
		return ""
	}
	o := prototext.MarshalOptions{Multiline: true}
	return "-" + o.Format(a) + "\n+" + o.Format(b)
}

// requestJSON is req as one line of OTLP/JSON, as the recorder writes it.
func requestJSON(req *coltracepb.ExportTraceServiceRequest) []byte {
	body, err := proto.Marshal(req)
	if err != nil {
		panic(err)
	}
	js, err := ProtoToJSON(body)
	if err != nil {
		panic(err)
	}
	return js
}
