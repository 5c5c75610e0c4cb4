package spans_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/stormwatch/stormwatch/spans"
)

// nestedAny is a string inside n arrays, or n maps, built without recursion (n may be 10,000).
func nestedAny(n int, kv bool) *commonpb.AnyValue {
	v := &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "leaf"}}
	for range n {
		if kv {
			v = &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{
				Values: []*commonpb.KeyValue{{Key: "k", Value: v}}}}}
		} else {
			v = &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{
				Values: []*commonpb.AnyValue{v}}}}
		}
	}
	return v
}

// nestedAnyJSON is nestedAny in OTLP/JSON.
func nestedAnyJSON(n int, kv bool) string {
	var b strings.Builder
	for range n {
		if kv {
			b.WriteString(`{"kvlistValue":{"values":[{"key":"k","value":`)
		} else {
			b.WriteString(`{"arrayValue":{"values":[`)
		}
	}
	b.WriteString(`{"stringValue":"leaf"}`)
	for range n {
		if kv {
			b.WriteString(`}]}}`)
		} else {
			b.WriteString(`]}}`)
		}
	}
	return b.String()
}

// deepRequest is one span with the attribute key=value at where - the resource, the scope, the
// span, an event or a link - in protobuf and in OTLP/JSON.
func deepRequest(t testing.TB, where, key string, n int, kv bool) (pb, js []byte) {
	t.Helper()
	attr := []*commonpb.KeyValue{{Key: key, Value: nestedAny(n, kv)}}
	tid, sid := make([]byte, 16), make([]byte, 8)
	tid[0], sid[0] = 1, 2
	span := &tracepb.Span{TraceId: tid, SpanId: sid, Name: "n",
		Events: []*tracepb.Span_Event{{Name: "e"}}, Links: []*tracepb.Span_Link{{TraceId: tid, SpanId: sid}}}
	rs := &tracepb.ResourceSpans{Resource: &resourcepb.Resource{},
		ScopeSpans: []*tracepb.ScopeSpans{{Scope: &commonpb.InstrumentationScope{Name: "s"}, Spans: []*tracepb.Span{span}}}}
	attrJSON := fmt.Sprintf(`{"key":%q,"value":%s}`, key, nestedAnyJSON(n, kv))
	slots := map[string]string{"resource": "", "scope": "", "span": "", "event": "", "link": ""}
	slots[where] = attrJSON
	switch where {
	case "resource":
		rs.Resource.Attributes = attr
	case "scope":
		rs.ScopeSpans[0].Scope.Attributes = attr
	case "span":
		span.Attributes = attr
	case "event":
		span.Events[0].Attributes = attr
	case "link":
		span.Links[0].Attributes = attr
	}
	pb = marshal(t, &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{rs}})
	js = fmt.Appendf(nil, `{"resourceSpans":[{"resource":{"attributes":[%s]},"scopeSpans":[{"scope":{"name":"s","attributes":[%s]},`+
		`"spans":[{"traceId":"01000000000000000000000000000000","spanId":"0200000000000000","name":"n","attributes":[%s],`+
		`"events":[{"name":"e","attributes":[%s]}],"links":[{"traceId":"01000000000000000000000000000000","spanId":"0200000000000000","attributes":[%s]}]}]}]}]}`,
		slots["resource"], slots["scope"], slots["span"], slots["event"], slots["link"])
	return pb, js
}

// TestOneNestingLimitForBothDecoders: an attribute value whose arrays or maps nest MaxValueDepth
// deep is read by both decoders, wherever it is and whether the attribute is kept or dropped; one
// level more, or 10,000, is ErrTooDeep - permanent bad input - from both. So whatever the
// collector acknowledges in one encoding, the reader reads back from a recording in the other.
func TestOneNestingLimitForBothDecoders(t *testing.T) {
	for _, where := range []string{"resource", "scope", "span", "event", "link"} {
		for _, key := range []string{spans.AttrOpName, "custom.unread", spans.AttrServiceName} {
			if key == spans.AttrServiceName && where != "resource" {
				continue
			}
			for _, kv := range []bool{false, true} {
				for _, n := range []int{1, spans.MaxValueDepth, spans.MaxValueDepth + 1, 10_000} {
					pb, js := deepRequest(t, where, key, n, kv)
					for _, o := range bothOptions {
						name := fmt.Sprintf("%s/%s/kvlist=%v/depth=%d/%s", where, key, kv, n, o.name)
						bp, perr := spans.DecodeProto(pb, o.opt)
						bj, jerr := spans.DecodeJSON(js, o.opt)
						if n <= spans.MaxValueDepth {
							if perr != nil || jerr != nil {
								t.Errorf("%s: protobuf: %v; JSON: %v; want both read", name, perr, jerr)
							} else if len(bp.Spans) != 1 || len(bj.Spans) != 1 {
								t.Errorf("%s: %d and %d spans, want 1", name, len(bp.Spans), len(bj.Spans))
							}
							continue
						}
						for enc, err := range map[string]error{"protobuf": perr, "JSON": jerr} {
							if !errors.Is(err, spans.ErrTooDeep) || !errors.Is(err, spans.ErrMalformed) || !spans.IsPermanent(err) {
								t.Errorf("%s: %s: %v; want a permanent ErrTooDeep", name, enc, err)
							}
						}
					}
				}
			}
		}
	}
}
