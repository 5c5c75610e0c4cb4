package spans_test

import (
	"encoding/json"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/spans/spanstest"
	"github.com/stormwatch/stormwatch/tracefile"
)

// exported is what a batch should read back as after AppendProto: the same, except that the
// display form of arrays, maps and bytes comes back as a plain string.
func exported(b *spans.Batch) *spans.Batch {
	conv := func(as []spans.Attr) []spans.Attr {
		out := append([]spans.Attr(nil), as...)
		for i := range out {
			if out[i].Type == spans.ValueOther {
				out[i].Type = spans.ValueString
			}
		}
		return out
	}
	c := &spans.Batch{}
	for _, s := range b.Spans {
		r := *s.Resource
		r.Attrs = conv(r.Attrs)
		s.Resource = &r
		s.Attrs = conv(s.Attrs)
		links := append([]spans.Link(nil), s.Links...)
		for i := range links {
			links[i].Attrs = conv(links[i].Attrs)
		}
		events := append([]spans.Event(nil), s.Events...)
		for i := range events {
			events[i].Attrs = conv(events[i].Attrs)
		}
		s.Links, s.Events = links, events
		c.Spans = append(c.Spans, s)
	}
	return c
}

// encodeJSON writes a batch as OTLP/JSON the one way there is: as protobuf, then through the
// recorder's protobuf-to-JSON writer.
func encodeJSON(t testing.TB, b *spans.Batch) []byte {
	t.Helper()
	js, err := tracefile.ProtoToJSON(spans.AppendProto(nil, b))
	if err != nil {
		t.Fatalf("ProtoToJSON of AppendProto output: %v", err)
	}
	return js
}

func checkRoundTrip(t *testing.T, body []byte, opt spans.DecodeOptions) {
	t.Helper()
	b, err := spans.DecodeProto(body, opt)
	if err != nil {
		t.Fatal(err)
	}
	pb := spans.AppendProto(nil, b)
	// The generated code must read it: replay sends it to other collectors.
	if err := proto.Unmarshal(pb, &coltracepb.ExportTraceServiceRequest{}); err != nil {
		t.Fatalf("AppendProto wrote what the generated code refuses: %v", err)
	}
	back, err := spans.DecodeProto(pb, opt)
	if err != nil {
		t.Fatalf("DecodeProto of AppendProto output: %v", err)
	}
	if d := spanstest.Diff(exported(b), back); d != "" {
		t.Fatalf("protobuf round trip changed spans:\n%s", d)
	}
	js := encodeJSON(t, b)
	if !json.Valid(js) {
		t.Fatalf("invalid JSON:\n%s", js)
	}
	if back, err = spans.DecodeJSON(js, opt); err != nil {
		t.Fatalf("DecodeJSON of the batch as OTLP/JSON: %v\n%s", err, js)
	}
	if d := spanstest.Diff(exported(b), back); d != "" {
		t.Fatalf("JSON round trip changed spans:\n%s\n%s", d, js)
	}
	// A second tool must read it too: the OpenTelemetry Collector's own OTLP/JSON unmarshaler.
	td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(js)
	if err != nil {
		t.Fatalf("pdata cannot read the batch as OTLP/JSON: %v\n%s", err, js)
	}
	if td.SpanCount() != len(b.Spans) {
		t.Fatalf("pdata reads %d spans, want %d", td.SpanCount(), len(b.Spans))
	}
}

func TestAppendProtoRoundTrip(t *testing.T) {
	cases := map[string][]byte{"sdk": marshal(t, sdkRequest(t))}
	for _, ec := range edgeCases() {
		cases[ec.name] = marshal(t, ec.req)
	}
	for name, body := range cases {
		for _, o := range bothOptions {
			t.Run(name+"/"+o.name, func(t *testing.T) { checkRoundTrip(t, body, o.opt) })
		}
	}
}

func TestAppendProtoShape(t *testing.T) {
	res := &spans.Resource{ServiceName: "svc", ServiceInstance: "i-1", Attrs: []spans.Attr{spans.StringAttr(spans.AttrURLScheme, "http")}}
	other := &spans.Resource{ServiceName: "other"}
	mk := func(n byte, r *spans.Resource, scope string) spans.Span {
		return spans.Span{TraceID: spans.TraceID{15: 1}, SpanID: spans.SpanID{7: n}, Resource: r, Scope: scope, Name: "s\"\x01\xff",
			StartUnixNano: 1, EndUnixNano: 2, Kind: spans.KindServer, Status: spans.StatusError}
	}
	b := &spans.Batch{Spans: []spans.Span{mk(1, res, "a"), mk(2, other, "a"), mk(3, res, "b"), mk(4, res, "a")}}
	js := string(encodeJSON(t, b))
	for _, want := range []string{
		`{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}},{"key":"service.instance.id","value":{"stringValue":"i-1"}},{"key":"url.scheme","value":{"stringValue":"http"}}]},"scopeSpans":[{"scope":{"name":"a"},"spans":[{"traceId":"00000000000000000000000000000001","spanId":"0000000000000001",`,
		// The invalid byte is written as U+FFFD, a valid string for protobuf and JSON alike.
		`"name":"s\"\u0001` + "\ufffd" + `","kind":2,"startTimeUnixNano":"1","endTimeUnixNano":"2","status":{"code":2}}`,
	} {
		if !strings.Contains(js, want) {
			t.Errorf("output lacks %s\n%s", want, js)
		}
	}
	if n := strings.Count(js, `"resource":`); n != 2 {
		t.Errorf("%d resources, want 2 (one per distinct *Resource)", n)
	}
	if n := strings.Count(js, `"scope":`); n != 3 {
		t.Errorf("%d scopes, want 3 (a and b for svc, a for other)", n)
	}
	if got := string(encodeJSON(t, &spans.Batch{})); got != `{"resourceSpans":[]}` {
		t.Errorf("empty batch encodes as %s", got)
	}
}
