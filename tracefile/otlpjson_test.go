package tracefile

import (
	"bytes"
	"strings"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

func TestWireTranscoderMatchesGeneratedPath(t *testing.T) {
	for i, body := range [][]byte{
		mustMarshal(t, fullRequest(1)),
		mustMarshal(t, realisticRequest(2, 50)),
		mustMarshal(t, merge(fullRequest(3), realisticRequest(4, 3))),
		{},
	} {
		fast, err := appendResourceSpansWire(nil, body)
		if err != nil {
			t.Fatalf("request %d: the wire transcoder gave up on a canonical request: %v", i, err)
		}
		slow, err := viaGenerated(body)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fast, slow) {
			t.Fatalf("request %d:\nwire:      %s\ngenerated: %s", i, fast, slow)
		}
	}
	// Non-canonical forms go the generated way and still come out right: a status sent twice
	// (protobuf merges the two), and a negative kind.
	span := []byte{0x0a, 16, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
		0x7a, 2, 0x18, 2, // status {code: 2}
		0x7a, 4, 0x12, 2, 'h', 'i', // status {message: "hi"}
		0x30, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, // kind: -1
	}
	ss := append([]byte{0x12, byte(len(span))}, span...)
	rs := append([]byte{0x12, byte(len(ss))}, ss...)
	body := append([]byte{0x0a, byte(len(rs))}, rs...)
	if _, err := appendResourceSpansWire(nil, body); err == nil {
		t.Fatal("a repeated singular message must send the wire transcoder to the generated path")
	}
	js, err := ProtoToJSON(body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(js, []byte(`"kind":-1`)) || !bytes.Contains(js, []byte(`"status":{"message":"hi","code":2}`)) {
		t.Fatalf("got %s", js)
	}
	// inSpan is a request of one span of field 1 (its trace id) and then extra.
	inSpan := func(extra ...byte) []byte {
		span := append([]byte{0x0a, 16, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, extra...)
		ss := append([]byte{0x12, byte(len(span))}, span...)
		rs := append([]byte{0x12, byte(len(ss))}, ss...)
		return append([]byte{0x0a, byte(len(rs))}, rs...)
	}
	// A deprecated group, which the generated code keeps as an unknown field, is left out as it
	// leaves it out, without the detour; here numbered as the span's start time and holding it.
	body = inSpan(0x3b, 0x39, 1, 2, 3, 4, 5, 6, 7, 8, 0x3c)
	fast, err := appendResourceSpansWire(nil, body)
	if err != nil {
		t.Fatalf("the wire transcoder gave up on a group: %v", err)
	}
	if slow, err := viaGenerated(body); err != nil || !bytes.Equal(fast, slow) {
		t.Fatalf("a group:\nwire:      %s\ngenerated: %s (%v)", fast, slow, err)
	}
	// A field number protobuf does not allow: the generated decoder refuses the request, so does
	// ProtoToJSON.
	for _, num := range []uint64{0, 1 << 29} {
		body = inSpan(protowire.AppendVarint(protowire.AppendVarint(nil, num<<3), 1)...)
		if js, err := ProtoToJSON(body); err == nil {
			t.Fatalf("field number %d: written as %s", num, js)
		}
	}
}

// The members proto3 JSON writes even at their zero value - every member of an AnyValue, a
// KeyValue's key, a span's status - and the ones it leaves out, byte for byte as the file exporter
// writes them.
func TestProtoToJSONZeroValues(t *testing.T) {
	kv := func(v *commonpb.AnyValue) *commonpb.KeyValue { return &commonpb.KeyValue{Key: "k", Value: v} }
	req := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{
			TraceId: []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, Kind: -2,
			Attributes: []*commonpb.KeyValue{
				{KeyStrindex: 5, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValueStrindex{StringValueStrindex: -3}}},
				kv(&commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{}}),
				kv(&commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{}}),
				kv(&commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{}}),
				kv(&commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{}}),
				kv(&commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{}}),
				kv(&commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{}}}),
				kv(&commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{}}}),
				{},
			},
			Events: []*tracepb.Span_Event{{}}, Links: []*tracepb.Span_Link{{}},
		}}}},
	}, {}}}
	js, err := ProtoToJSON(mustMarshal(t, req))
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","kind":-2,"attributes":[{"key":"","keyStrindex":5,"value":{"stringValueStrindex":-3}},{"key":"k","value":{"stringValue":""}},{"key":"k","value":{"boolValue":false}},{"key":"k","value":{"intValue":"0"}},{"key":"k","value":{"doubleValue":0}},{"key":"k","value":{"bytesValue":""}},{"key":"k","value":{"arrayValue":{}}},{"key":"k","value":{"kvlistValue":{}}},{"key":""}],"events":[{}],"links":[{}],"status":{}}]}]},{}]}`
	if string(js) != want {
		t.Fatalf("got  %s\nwant %s", js, want)
	}
}

// viaGenerated is the fallback of appendResourceSpansJSON on its own: the request re-encoded
// through the generated types, then written.
func viaGenerated(body []byte) ([]byte, error) {
	canon, err := canonicalProto(body)
	if err != nil {
		return nil, err
	}
	return appendResourceSpansWire(nil, canon)
}

// FuzzProtoToJSON holds the wire transcoder to protobuf's rules: whenever it takes a request as it
// is, the request re-encoded by the generated types must give the same bytes (the last of a
// repeated scalar wins, unknown fields are left out, what the generated decoder rejects is
// refused - but for a string that is not UTF-8, written repaired), and every request the
// generated decoder accepts must be written.
func FuzzProtoToJSON(f *testing.F) {
	f.Add(mustMarshal(f, fullRequest(1)))
	f.Add(mustMarshal(f, realisticRequest(0, 2)))
	f.Fuzz(func(t *testing.T, body []byte) {
		fast, err := appendResourceSpansWire(nil, body)
		if err != nil {
			if _, err := canonicalProto(body); err == nil {
				if _, err := appendResourceSpansJSON(nil, body); err != nil {
					t.Fatalf("a request the generated decoder accepts was not written: %v", err)
				}
			}
			return
		}
		slow, err := viaGenerated(body)
		if err != nil {
			// The one refusal of the generated decoder the wire writer does not share: a string
			// that is not UTF-8, written with U+FFFD instead (see errSlowPath).
			if !strings.Contains(err.Error(), "invalid UTF-8") {
				t.Fatalf("wire transcoder accepted what the generated decoder rejects (%v):\n%s", err, fast)
			}
			if _, err := JSONToProto(append(append([]byte(`{"resourceSpans":[`), fast...), "]}"...)); err != nil {
				t.Fatalf("a request with a string that is not UTF-8 was written as JSON that does not read back (%v):\n%s", err, fast)
			}
			return
		}
		if !bytes.Equal(fast, slow) {
			t.Fatalf("wire:      %s\ngenerated: %s", fast, slow)
		}
	})
}

func mustEqualRequests(t testing.TB, a, b []byte) {
	t.Helper()
	x, y := &coltracepb.ExportTraceServiceRequest{}, &coltracepb.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(a, x); err != nil {
		t.Fatalf("fast output does not decode: %v", err)
	}
	if err := proto.Unmarshal(b, y); err != nil {
		t.Fatal(err)
	}
	if d := protoDiff(y, x); d != "" {
		t.Fatalf("fast JSON transcoder differs from protojson (-protojson +fast):\n%s", d)
	}
}

func TestJSONTranscoderMatchesProtojson(t *testing.T) {
	pretty := []byte(`{ "resource_spans": [ { "scopeSpans": [ { "spans": [ {
		"traceId": "0AF7651916CD43DD8448EB211C80319C", "spanId": "b7ad6b7169203331", "parentSpanId": "",
		"name": "caf\u00e9 \ud83d\ude00 \"q\" \\ \/", "kind": "SPAN_KIND_SERVER", "flags": 257,
		"startTimeUnixNano": 1700000000000000000, "endTimeUnixNano": "1700000000000000001",
		"droppedAttributesCount": "3", "unknown": {"a": [1, "x", null, true, {"b": false}]},
		"attributes": [ {"key": "i", "value": {"intValue": 0}}, {"key": "d", "value": {"doubleValue": "-Infinity"}},
			{"key": "s", "value": {"stringValue": ""}}, {"key": "b", "value": {"bool_value": false}},
			{"key": "n", "value": null}, {"key": "e", "value": {}},
			{"key": "a", "value": {"arrayValue": {"values": [{"intValue": "-5"}, {}]}}},
			{"key": "m", "value": {"kvlistValue": {"values": [{"key": "x", "value": {"bytesValue": "AAH+/w=="}}]}}} ],
		"status": {"code": 2, "message": "boom"}, "events": [], "links": [{}]
	} ] } ] } ] }`)
	for i, body := range [][]byte{
		requestJSON(fullRequest(1)),
		requestJSON(realisticRequest(2, 20)),
		// Over 16 KiB: the resource's and the scope's messages take a three-byte length.
		requestJSON(realisticRequest(3, 100)),
		pretty,
		[]byte(`{}`),
		[]byte(`{"resourceSpans":[]}`),
	} {
		fast, err := appendJSONAsProto(nil, body)
		if err != nil {
			t.Fatalf("body %d: the fast transcoder gave up: %v", i, err)
		}
		slow, err := jsonToProtoSlow(body)
		if err != nil {
			t.Fatal(err)
		}
		mustEqualRequests(t, fast, slow)
	}
	// What protojson decides goes to protojson: the error is its own.
	if _, err := JSONToProto([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"startTimeUnixNano":true}]}]}]}`)); err == nil || !strings.Contains(err.Error(), "decode OTLP/JSON request") {
		t.Fatalf("a boolean time: err = %v", err)
	}
}

// FuzzJSONToProto holds the fast OTLP/JSON transcoder to protojson: wherever both succeed they must
// give the same request.
func FuzzJSONToProto(f *testing.F) {
	f.Add(requestJSON(fullRequest(1)))
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0af7651916cd43dd8448eb211c80319c","kind":"SPAN_KIND_CLIENT","attributes":[{"key":"k","value":{"arrayValue":{"values":[{"doubleValue":"NaN"}]}}}]}]}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		fast, err := appendJSONAsProto(nil, body)
		if err != nil {
			return
		}
		slow, err := jsonToProtoSlow(body)
		if err != nil {
			return // the fast path is more lenient (duplicate keys, leading zeros): fine
		}
		mustEqualRequests(t, fast, slow)
	})
}

// TestProtoToJSONWritesStringsThatAreNotUTF8 is the request the collector acknowledges (its
// decoder, like the OpenTelemetry Collector's, takes any bytes in a string) and the generated
// decoder refuses: a span name and an attribute value that are not UTF-8. Its .jsonl recording and
// the dashboard's export write it with U+FFFD in place of each bad byte, and the line reads back.
func TestProtoToJSONWritesStringsThatAreNotUTF8(t *testing.T) {
	req := realisticRequest(0, 1)
	sp := req.ResourceSpans[0].ScopeSpans[0].Spans[0]
	// The generated code would not marshal the bad bytes: they are put in after, as a client
	// that does not check them sends them.
	sp.Name = "GET /cafX"
	sp.Attributes = append(sp.Attributes, &commonpb.KeyValue{Key: "note", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "YZ ok"}}})
	body := mustMarshal(t, req)
	body = bytes.Replace(body, []byte("GET /cafX"), []byte("GET /caf\xe9"), 1)
	body = bytes.Replace(body, []byte("YZ ok"), []byte("\xff\xfe ok"), 1)
	if _, err := canonicalProto(body); err == nil || !strings.Contains(err.Error(), "invalid UTF-8") {
		t.Fatalf("the generated decoder gives %v for the request: not the case of this test", err)
	}
	js, err := ProtoToJSON(body)
	if err != nil {
		t.Fatalf("ProtoToJSON: %v", err)
	}
	for _, want := range []string{`"name":"GET /caf\ufffd"`, `"stringValue":"\ufffd\ufffd ok"`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("the JSON lacks %s:\n%s", want, js)
		}
	}
	back, err := JSONToProto(js)
	if err != nil {
		t.Fatalf("the written line does not read back: %v", err)
	}
	got := &coltracepb.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(back, got); err != nil {
		t.Fatal(err)
	}
	if name := got.ResourceSpans[0].ScopeSpans[0].Spans[0].Name; name != "GET /caf\uFFFD" {
		t.Errorf("read back the name %q", name)
	}
}
