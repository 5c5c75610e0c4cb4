package spans_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/stormwatch/stormwatch/internal/cputime"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/spans/jsonlex"
)

const benchSpans = 100

// benchRequest is the realistic payload of the performance goal: 100 spans per request, HTTP
// semconv client and server spans of a retrying caller, 10 attributes each (a few resilience.*),
// about 580 bytes per span on the wire.
func benchRequest() *coltracepb.ExportTraceServiceRequest {
	sv := func(k, v string) *commonpb.KeyValue { return kv(k, str(v)) }
	iv := func(k string, v int64) *commonpb.KeyValue {
		return kv(k, &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}})
	}
	ss := &tracepb.ScopeSpans{Scope: &commonpb.InstrumentationScope{
		Name: "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp", Version: "0.63.0"}}
	base := uint64(1_764_496_800_000_000_000)
	for i := 0; i < benchSpans; i++ {
		tid := make([]byte, 16)
		sid := make([]byte, 8)
		pid := make([]byte, 8)
		for j := range tid {
			tid[j] = byte(i/10*7 + j + 1)
		}
		for j := range sid {
			sid[j] = byte(i*3 + j + 1)
			pid[j] = byte(i*5 + j + 2)
		}
		opID := fmt.Sprintf("%08x-7d3c-4b1a-9e2f-%012x", i/10*7919, i/10*104729)
		s := &tracepb.Span{
			TraceId: tid, SpanId: sid, ParentSpanId: pid, Flags: 0x301,
			StartTimeUnixNano: base + uint64(i)*1_000_000, EndTimeUnixNano: base + uint64(i)*1_000_000 + 43_210_987,
		}
		if i%2 == 0 {
			s.Name, s.Kind = "GET inventory", tracepb.Span_SPAN_KIND_CLIENT
			s.Attributes = []*commonpb.KeyValue{
				sv(spans.AttrHTTPMethod, "GET"),
				sv(spans.AttrServerAddress, "inventory.shop.svc.cluster.local"),
				iv(spans.AttrServerPort, 8080),
				sv(spans.AttrURLFull, fmt.Sprintf("http://inventory.shop.svc.cluster.local:8080/api/v1/inventory/items/%06d?fields=price,stock,warehouse&currency=EUR", i*7919%1000000)),
				iv(spans.AttrHTTPStatus, 503),
				sv(spans.AttrErrorType, "503"),
				sv(spans.AttrOpID, opID),
				iv(spans.AttrAttempt, int64(i%3+1)),
				sv(spans.AttrAttemptKind, "retry"),
				sv(spans.AttrOutcome, "retryable"),
			}
			s.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "503 Service Unavailable"}
		} else {
			s.Name, s.Kind = "GET /api/v1/inventory/items/{id}", tracepb.Span_SPAN_KIND_SERVER
			s.Attributes = []*commonpb.KeyValue{
				sv(spans.AttrHTTPMethod, "GET"),
				sv(spans.AttrHTTPRoute, "/api/v1/inventory/items/{id}"),
				sv(spans.AttrURLPath, fmt.Sprintf("/api/v1/inventory/items/%06d", i*7919%1000000)),
				sv(spans.AttrURLScheme, "http"),
				iv(spans.AttrHTTPStatus, 200),
				sv(spans.AttrServerAddress, "inventory.shop.svc.cluster.local"),
				iv(spans.AttrServerPort, 8080),
				sv(spans.AttrNetworkPeerAddress, "10.42.17.203"),
				sv("user_agent.original", "Go-http-client/1.1 (stormwatch-reference/0.1; checkout-7d9f8b6c5-x2x4q)"),
				sv(spans.AttrOpID, opID),
			}
		}
		ss.Spans = append(ss.Spans, s)
	}
	return request(&tracepb.ResourceSpans{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
			sv(spans.AttrServiceName, "checkout"), sv(spans.AttrServiceInstance, "checkout-7d9f8b6c5-x2x4q"),
			sv("telemetry.sdk.language", "go"), sv("telemetry.sdk.name", "opentelemetry"), sv("telemetry.sdk.version", "1.47.0"),
			sv("host.name", "node-17"),
		}},
		ScopeSpans: []*tracepb.ScopeSpans{ss},
		SchemaUrl:  "https://opentelemetry.io/schemas/1.26.0",
	})
}

// richRequest is benchRequest with, on every span, an event carrying a double, a link, and a
// string value and a key-value list of 128 bytes or more.
func richRequest() *coltracepb.ExportTraceServiceRequest {
	req := benchRequest()
	long := strings.Repeat("retry budget exhausted; ", 6)
	for _, s := range req.ResourceSpans[0].ScopeSpans[0].Spans {
		s.Events = append(s.Events, &tracepb.Span_Event{
			TimeUnixNano: s.StartTimeUnixNano + 1000, Name: "retry",
			Attributes: []*commonpb.KeyValue{
				kv(spans.AttrAttempt, &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 2}}),
				kv(spans.AttrErrorType, &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 0.25}}),
			},
		})
		s.Links = append(s.Links, &tracepb.Span_Link{TraceId: s.TraceId, SpanId: s.ParentSpanId,
			Attributes: []*commonpb.KeyValue{kv(spans.AttrOpID, str("linked"))}})
		s.Attributes = append(s.Attributes, kv(spans.AttrOutcome, str(long)),
			kv(spans.AttrAttemptKind, &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{
				Values: []*commonpb.KeyValue{kv("reason", str(long)), kv("count", str("3"))}}}}))
	}
	return req
}

// idsLast is req encoded with every span's trace and span ids after its other fields: a sender
// that does not write a span's fields in the order of their numbers, as the SDKs do.
func idsLast(t testing.TB, req *coltracepb.ExportTraceServiceRequest) []byte {
	var body []byte
	for _, rs := range req.ResourceSpans {
		rsb := field(1, marshal(t, rs.Resource))
		for _, ss := range rs.ScopeSpans {
			ssb := field(1, marshal(t, ss.Scope))
			for _, sp := range ss.Spans {
				var rest, ids []byte
				for src := marshal(t, sp); len(src) > 0; {
					num, typ, n := protowire.ConsumeTag(src)
					if n < 0 {
						t.Fatal(protowire.ParseError(n))
					}
					m := protowire.ConsumeFieldValue(num, typ, src[n:])
					if m < 0 {
						t.Fatal(protowire.ParseError(m))
					}
					if num == 1 || num == 2 {
						ids = append(ids, src[:n+m]...)
					} else {
						rest = append(rest, src[:n+m]...)
					}
					src = src[n+m:]
				}
				ssb = append(ssb, field(2, append(rest, ids...))...)
			}
			rsb = append(rsb, field(2, ssb)...)
		}
		body = append(body, field(1, rsb)...)
	}
	return body
}

// benchBodies returns the payload as protobuf, as OTLP/JSON (hex ids) and as the plain protobuf
// JSON mapping (base64 ids), which is what protojson can read.
func benchBodies(b testing.TB) (pb, otlpJSON, pbJSON []byte) {
	req := benchRequest()
	pb = marshal(b, req)
	otlpJSON = toJSON(b, req)
	pbJSON, err := protojson.Marshal(req)
	if err != nil {
		b.Fatal(err)
	}
	return pb, otlpJSON, pbJSON
}

// runPerSpan runs decode b.N times and reports ns and allocations per span, the figures the
// performance goal is stated in.
func runPerSpan(b *testing.B, body []byte, decode func([]byte) error) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu0 := int64(cputime.Process())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := decode(body); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu1 := int64(cputime.Process())
	runtime.ReadMemStats(&after)
	n := float64(b.N) * benchSpans
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/span")
	// CPU time of the whole process (GC workers included) per span: on a shared machine wall time
	// swings with the neighbours' load, CPU time much less.
	b.ReportMetric(float64(cpu1-cpu0)/n, "cpu-ns/span")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/n, "allocs/span")
}

// BenchmarkDecode compares, on the same payload in one run, our decoders with pdata's (what the
// OpenTelemetry Collector uses) and with golang/protobuf's generated code / protojson. Only the
// library encoding/json variant exists to show why the JSON decoder is a hand-written scanner.
func BenchmarkDecode(b *testing.B) {
	pb, otlpJSON, pbJSON := benchBodies(b)
	b.Logf("payload: %d spans, %d B protobuf (%d B/span), %d B OTLP/JSON", benchSpans, len(pb), len(pb)/benchSpans, len(otlpJSON))
	b.Run("proto/stormwatch", func(b *testing.B) {
		runPerSpan(b, pb, func(body []byte) error {
			_, err := spans.DecodeProto(body, spans.DecodeOptions{})
			return err
		})
	})
	b.Run("proto/stormwatch-into", func(b *testing.B) {
		// Into one batch, recycled request after request, as the collector decodes once its
		// consumer releases the batches.
		batch := &spans.Batch{}
		runPerSpan(b, pb, func(body []byte) error {
			return spans.DecodeProtoInto(batch, body, spans.DecodeOptions{})
		})
	})
	b.Run("proto/stormwatch-into-pack", func(b *testing.B) {
		// What the analyzer holds made from what was decoded: span values, then packed by trace.
		batch := &spans.Batch{}
		runPerSpan(b, pb, func(body []byte) error {
			err := spans.DecodeProtoInto(batch, body, spans.DecodeOptions{})
			batch.Pack()
			return err
		})
	})
	b.Run("proto/stormwatch-packed", func(b *testing.B) {
		// The same straight from the wire, as the collector decodes for the analyzer.
		batch := &spans.Batch{}
		runPerSpan(b, pb, func(body []byte) error {
			return spans.DecodeProtoInto(batch, body, spans.DecodeOptions{PackByTrace: true})
		})
	})
	b.Run("proto/stormwatch-packed-ids-last", func(b *testing.B) {
		// The same with every span's ids after its other fields: its trace is not where the first
		// pass reads it from a span as the SDKs write it.
		batch := &spans.Batch{}
		runPerSpan(b, idsLast(b, benchRequest()), func(body []byte) error {
			return spans.DecodeProtoInto(batch, body, spans.DecodeOptions{PackByTrace: true})
		})
	})
	b.Run("proto/stormwatch-rich", func(b *testing.B) {
		// Events, links, a double and values of 128 bytes or more: the fields SDK spans rarely
		// carry, which the decoder reads through its general field walk.
		batch := &spans.Batch{}
		runPerSpan(b, marshal(b, richRequest()), func(body []byte) error {
			return spans.DecodeProtoInto(batch, body, spans.DecodeOptions{})
		})
	})
	b.Run("proto/stormwatch-rich-packed", func(b *testing.B) {
		// The same packed by trace, as the collector decodes for the analyzer.
		batch := &spans.Batch{}
		runPerSpan(b, marshal(b, richRequest()), func(body []byte) error {
			return spans.DecodeProtoInto(batch, body, spans.DecodeOptions{PackByTrace: true})
		})
	})
	b.Run("proto/stormwatch-all-attrs", func(b *testing.B) {
		runPerSpan(b, pb, func(body []byte) error {
			_, err := spans.DecodeProto(body, spans.DecodeOptions{AllAttributes: true})
			return err
		})
	})
	b.Run("proto/pdata", func(b *testing.B) {
		var u ptrace.ProtoUnmarshaler
		runPerSpan(b, pb, func(body []byte) error {
			_, err := u.UnmarshalTraces(body)
			return err
		})
	})
	b.Run("proto/golang-protobuf", func(b *testing.B) {
		runPerSpan(b, pb, func(body []byte) error {
			var req coltracepb.ExportTraceServiceRequest
			return proto.Unmarshal(body, &req)
		})
	})
	b.Run("json/stormwatch", func(b *testing.B) {
		runPerSpan(b, otlpJSON, func(body []byte) error {
			_, err := spans.DecodeJSON(body, spans.DecodeOptions{})
			return err
		})
	})
	b.Run("json/stormwatch-into", func(b *testing.B) {
		batch := &spans.Batch{}
		runPerSpan(b, otlpJSON, func(body []byte) error {
			return spans.DecodeJSONInto(batch, body, spans.DecodeOptions{})
		})
	})
	b.Run("json/stormwatch-into-pack", func(b *testing.B) {
		// What the analyzer holds made from what was decoded, as analyze reads a recording: span
		// values, then packed by trace.
		batch := &spans.Batch{}
		runPerSpan(b, otlpJSON, func(body []byte) error {
			err := spans.DecodeJSONInto(batch, body, spans.DecodeOptions{})
			batch.Pack()
			return err
		})
	})
	b.Run("json/stormwatch-packed", func(b *testing.B) {
		// Packed by trace by the decoder, as the collector decodes HTTP JSON for the analyzer.
		batch := &spans.Batch{}
		runPerSpan(b, otlpJSON, func(body []byte) error {
			return spans.DecodeJSONInto(batch, body, spans.DecodeOptions{PackByTrace: true})
		})
	})
	b.Run("json/structure-only", func(b *testing.B) {
		// Not a decoder: the least a first pass over OTLP/JSON costs - each span's extent found
		// by stepping over strings and counting brackets - which packing straight from the wire
		// would add, as the protobuf decoder's first pass does (see skimJSON).
		runPerSpan(b, otlpJSON, func(body []byte) error {
			if n := skimJSON(body); n != benchSpans {
				return fmt.Errorf("%d spans found, want %d", n, benchSpans)
			}
			return nil
		})
	})
	b.Run("json/pdata", func(b *testing.B) {
		var u ptrace.JSONUnmarshaler
		runPerSpan(b, otlpJSON, func(body []byte) error {
			_, err := u.UnmarshalTraces(body)
			return err
		})
	})
	b.Run("json/protojson-base64-ids", func(b *testing.B) {
		runPerSpan(b, pbJSON, func(body []byte) error {
			var req coltracepb.ExportTraceServiceRequest
			return protojson.Unmarshal(body, &req)
		})
	})
	b.Run("json/encoding-json-structs", func(b *testing.B) {
		runPerSpan(b, otlpJSON, func(body []byte) error {
			var req jsonRequest
			return json.Unmarshal(body, &req)
		})
	})
}

// skimJSON counts the span objects of an OTLP/JSON request - the objects of an array named
// "spans" three arrays deep - finding each one's end by stepping over strings a word at a time
// (jsonlex.SkipPlain) and counting brackets: no validation, no member name read but the last
// string before an array.
func skimJSON(buf []byte) int {
	depth, spans, inSpans := 0, 0, false
	var last []byte // the last string, the name of the array that follows it
	for i := 0; i < len(buf); i++ {
		switch buf[i] {
		case '"':
			from := i + 1
			for i = jsonlex.SkipPlain(buf, from); i < len(buf) && buf[i] == '\\'; {
				i = jsonlex.SkipPlain(buf, i+2)
			}
			last = buf[from:min(i, len(buf))]
		case '[':
			if depth++; depth == 6 {
				inSpans = string(last) == "spans"
			}
		case '{':
			if depth++; depth == 7 && inSpans {
				spans++
			}
		case '}', ']':
			depth--
		}
	}
	return spans
}

// jsonRequest is the least a library-based OTLP/JSON decoder would unmarshal into before
// converting to spans: it bounds what encoding/json can do, conversion not included.
type jsonRequest struct {
	ResourceSpans []struct {
		Resource struct {
			Attributes []jsonKV `json:"attributes"`
		} `json:"resource"`
		ScopeSpans []struct {
			Scope struct {
				Name string `json:"name"`
			} `json:"scope"`
			Spans []struct {
				TraceID      string          `json:"traceId"`
				SpanID       string          `json:"spanId"`
				ParentSpanID string          `json:"parentSpanId"`
				Name         string          `json:"name"`
				Kind         int             `json:"kind"`
				Start        json.Number     `json:"startTimeUnixNano"`
				End          json.Number     `json:"endTimeUnixNano"`
				Attributes   []jsonKV        `json:"attributes"`
				Status       json.RawMessage `json:"status"`
			} `json:"spans"`
		} `json:"scopeSpans"`
	} `json:"resourceSpans"`
}

type jsonKV struct {
	Key   string `json:"key"`
	Value struct {
		StringValue *string `json:"stringValue"`
		IntValue    *string `json:"intValue"`
	} `json:"value"`
}

// BenchmarkHeld measures the memory a stored span costs: it decodes many requests, keeps the
// batches, and reports live heap per span with and without the request buffers the strings alias.
func BenchmarkHeld(b *testing.B) {
	pb, _, _ := benchBodies(b)
	const requests = 200
	measure := func(b *testing.B, decode func(buf []byte) any) {
		for i := 0; i < b.N; i++ {
			bufs := make([][]byte, requests)
			for j := range bufs {
				bufs[j] = append([]byte(nil), pb...)
			}
			kept := make([]any, requests)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			for j := range kept {
				kept[j] = decode(bufs[j])
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			runtime.KeepAlive(kept)
			runtime.KeepAlive(bufs)
			n := float64(requests * benchSpans)
			held := float64(after.HeapAlloc) - float64(before.HeapAlloc)
			b.ReportMetric(held/n, "held-B/span")
			b.ReportMetric((held+float64(requests*len(pb)))/n, "held-with-buffer-B/span")
		}
	}
	b.Run("stormwatch", func(b *testing.B) {
		measure(b, func(buf []byte) any {
			bt, err := spans.DecodeProto(buf, spans.DecodeOptions{})
			if err != nil {
				b.Fatal(err)
			}
			return bt
		})
	})
	b.Run("pdata", func(b *testing.B) {
		var u ptrace.ProtoUnmarshaler
		measure(b, func(buf []byte) any {
			td, err := u.UnmarshalTraces(buf)
			if err != nil {
				b.Fatal(err)
			}
			return td
		})
	})
}

// TestDecodeAllocationsPerRequest pins the allocation behaviour (not speed): allocations do not
// grow with the number of spans or attributes in a request.
func TestDecodeAllocationsPerRequest(t *testing.T) {
	small := benchRequest()
	small.ResourceSpans[0].ScopeSpans[0].Spans = small.ResourceSpans[0].ScopeSpans[0].Spans[:10]
	bodies := []*coltracepb.ExportTraceServiceRequest{small, benchRequest()}
	for name, dec := range map[string]func([]byte) (*spans.Batch, error){
		"proto": func(b []byte) (*spans.Batch, error) { return spans.DecodeProto(b, spans.DecodeOptions{}) },
		"json":  func(b []byte) (*spans.Batch, error) { return spans.DecodeJSON(b, spans.DecodeOptions{}) },
	} {
		var allocs []float64
		for _, req := range bodies {
			body := marshal(t, req)
			if name == "json" {
				body = toJSON(t, req)
			}
			allocs = append(allocs, testing.AllocsPerRun(20, func() {
				if _, err := dec(body); err != nil {
					t.Fatal(err)
				}
			}))
		}
		if allocs[0] != allocs[1] || allocs[1] > 8 {
			t.Errorf("%s: %v allocations for 10 and 100 spans; want the same small number per request", name, allocs)
		}
	}
}

// TestDecodePackedIntoARecycledBatchAllocatesNothing: the collector decodes every request packed by
// trace into a batch its consumer gave back; once the batch has held a request of the shape, the
// next allocates nothing - its structure, the attributes' places and the blocks reuse its memory.
// (Values rendered into text, arrays and maps, go into an arena of each request's own.)
func TestDecodePackedIntoARecycledBatchAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own account")
	}
	opt := spans.DecodeOptions{PackByTrace: true}
	body := marshal(t, benchRequest())
	b := &spans.Batch{}
	if err := spans.DecodeProtoInto(b, body, opt); err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(20, func() {
		if err := spans.DecodeProtoInto(b, body, opt); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("%v allocations a request into a recycled batch, want 0", allocs)
	}
}

// TestDecodeJSONIntoARecycledBatchAllocatesLittle: analyze and the collector decode every
// OTLP/JSON request into a batch given back; once the batch has held a request of the shape, the
// next allocates only the resource its spans point to - span values or packed by trace - when none
// of its strings needs unescaping and none of its values is rendered into text (those go into an
// arena of each request's own, a sixteenth of the request's size).
func TestDecodeJSONIntoARecycledBatchAllocatesLittle(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own account")
	}
	body := toJSON(t, benchRequest())
	body = []byte(strings.ReplaceAll(string(body), `\u0026`, `+`)) // Go's encoding/json escapes the URLs' &
	if strings.Contains(string(body), `\`) {
		t.Fatalf("the request still has escapes: %s", body)
	}
	for _, opt := range []spans.DecodeOptions{{}, {PackByTrace: true}} {
		b := &spans.Batch{}
		if err := spans.DecodeJSONInto(b, body, opt); err != nil {
			t.Fatal(err)
		}
		const runs = 100
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range runs {
			if err := spans.DecodeJSONInto(b, body, opt); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		allocs, bytes := (after.Mallocs-before.Mallocs)/runs, (after.TotalAlloc-before.TotalAlloc)/runs
		// Not none: the runtime allocates now and then on its own account, a few KB in all.
		if allocs > 1 || bytes > uint64(len(body)/64) {
			t.Errorf("PackByTrace %v: %d allocations, %d bytes a request of %d bytes into a recycled batch; want the resource alone",
				opt.PackByTrace, allocs, bytes, len(body))
		}
	}
}
