package spans_test

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/spans/spanstest"
)

var bothOptions = []struct {
	name string
	opt  spans.DecodeOptions
}{
	{"wellknown", spans.DecodeOptions{}},
	{"all", spans.DecodeOptions{AllAttributes: true}},
}

// checkProto decodes body with DecodeProto and compares with the reference conversion of the
// generated code's unmarshal of the same bytes.
func checkProto(t *testing.T, body []byte, opt spans.DecodeOptions) *spans.Batch {
	t.Helper()
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		t.Fatalf("reference unmarshal: %v", err)
	}
	want := spanstest.FromProto(&req, opt)
	got, err := spans.DecodeProto(body, opt)
	if err != nil {
		t.Fatalf("DecodeProto: %v", err)
	}
	if d := spanstest.Diff(want, got); d != "" {
		t.Fatalf("DecodeProto differs from FromProto:\n%s", d)
	}
	return got
}

func marshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeProtoMatchesReferenceOnSDKSpans(t *testing.T) {
	body := marshal(t, sdkRequest(t))
	for _, o := range bothOptions {
		t.Run(o.name, func(t *testing.T) {
			b := checkProto(t, body, o.opt)
			if len(b.Spans) != 9 {
				t.Fatalf("got %d spans, want 9", len(b.Spans))
			}
			hostName := false
			for _, s := range b.Spans {
				for _, a := range s.Resource.Attrs {
					hostName = hostName || a.Key == "host.name"
				}
			}
			if hostName != o.opt.AllAttributes {
				t.Fatalf("resource attribute host.name kept = %v with AllAttributes = %v", hostName, o.opt.AllAttributes)
			}
		})
	}
}

func TestDecodeProtoInternsWellKnownKeys(t *testing.T) {
	body := marshal(t, sdkRequest(t))
	b, err := spans.DecodeProto(body, spans.DecodeOptions{AllAttributes: true})
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := uintptr(unsafePointer(body)), uintptr(unsafePointer(body))+uintptr(len(body))
	aliased, interned := 0, 0
	for _, s := range b.Spans {
		for _, a := range s.Attrs {
			p := uintptr(unsafeStringPointer(a.Key))
			inBuf := p >= lo && p < hi
			if spans.IsWellKnown(a.Key) {
				if inBuf {
					t.Errorf("well-known key %q aliases the request buffer instead of being interned", a.Key)
				}
				interned++
			} else if inBuf {
				aliased++
			}
		}
	}
	if interned == 0 || aliased == 0 {
		t.Fatalf("interned %d, aliased %d: the fixture should exercise both", interned, aliased)
	}
}

// Helpers to build requests by hand.
func id16(b byte) []byte { x := make([]byte, 16); x[15] = b; return x }
func id8(b byte) []byte  { x := make([]byte, 8); x[7] = b; return x }

func okSpan(n byte) *tracepb.Span {
	return &tracepb.Span{TraceId: id16(1), SpanId: id8(n), Name: "s"}
}

func kv(k string, v *commonpb.AnyValue) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: v}
}
func str(s string) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
}
func arr(vs ...*commonpb.AnyValue) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}}
}
func kvlist(kvs ...*commonpb.KeyValue) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: kvs}}}
}

func request(rs ...*tracepb.ResourceSpans) *coltracepb.ExportTraceServiceRequest {
	return &coltracepb.ExportTraceServiceRequest{ResourceSpans: rs}
}

func scope(name string, ss ...*tracepb.Span) *tracepb.ScopeSpans {
	return &tracepb.ScopeSpans{Scope: &commonpb.InstrumentationScope{Name: name}, Spans: ss}
}

type edgeCase struct {
	name     string
	req      *coltracepb.ExportTraceServiceRequest
	spans    int
	rejected int
}

// edgeCases are hand-built requests at the edges of the format, shared by the protobuf and JSON
// tests and seeded into the fuzz corpora.
func edgeCases() []edgeCase {
	allValues := []*commonpb.KeyValue{
		kv(spans.AttrHTTPMethod, str("GET")),
		kv(spans.AttrHTTPStatus, &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: -503}}),
		kv(spans.AttrBackoff, &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: math.Inf(-1)}}),
		kv(spans.AttrTerminal, &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: true}}),
		kv(spans.AttrOutcome, &commonpb.AnyValue{}),
		kv(spans.AttrDecision, nil),
		kv(spans.AttrOpID, &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte{0, 0xff}}}),
		kv(spans.AttrOpName, arr(str("a\n\"b"), arr(), kvlist(), &commonpb.AnyValue{}, arr(arr(arr(str("deep")))))),
		kv(spans.AttrOwner, kvlist(kv("k", nil), kv("", str("")), kv("m", kvlist(kv("x",
			&commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 1e-7}}))))),
		kv(spans.AttrFanoutWidth, &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: math.NaN()}}),
		kv("custom.key", str("kept only with AllAttributes")),
		kv("", str("empty key")),
	}
	huge := make([]*tracepb.Span, 5000)
	for i := range huge {
		huge[i] = &tracepb.Span{TraceId: append([]byte{1}, id16(byte(i))[1:]...), SpanId: id8(byte(i>>8) | 1), Attributes: allValues[:3]}
	}
	// Mostly attributes that are dropped by default: the attribute slab's estimate overshoots and
	// the decoders compact it; with AllAttributes it is outgrown instead.
	dropped := make([]*tracepb.Span, 300)
	for i := range dropped {
		sp := &tracepb.Span{TraceId: id16(7), SpanId: id8(byte(i%250 + 1)), Name: "d"}
		for j := 0; j < 12; j++ {
			sp.Attributes = append(sp.Attributes, kv("custom.attribute.number."+strconv.Itoa(j), str("some value that is long enough")))
		}
		sp.Attributes = append(sp.Attributes, kv(spans.AttrOpID, str(strconv.Itoa(i))))
		dropped[i] = sp
	}
	// The W3C trace state is kept (as the attribute AttrTraceState) only when it says how the
	// trace was sampled: OpenTelemetry's "ot" entry.
	sampled := []*tracepb.Span{okSpan(1), okSpan(2), okSpan(3), okSpan(4)}
	sampled[0].TraceState = "ot=th:e668"
	sampled[0].Attributes = allValues[:2]
	sampled[1].TraceState = "congo=t61rcWkgMzE, ot=rv:0123456789abcd;th:8"
	sampled[2].TraceState = "congo=t61rcWkgMzE,notot=th:8"
	// A list member starts only after a comma (and optional blanks), so an "ot=" after a blank
	// inside another member's value is not the entry.
	sampled[3].TraceState = "congo=t61rcWkgMzE ot=th:8"
	// Lists longer than a one-byte count (127 and more) of attributes, links and events, values
	// repeated within the span and in the next one: the packed form's counts take two bytes.
	long := func(sid byte) *tracepb.Span {
		sp := &tracepb.Span{TraceId: id16(3), SpanId: id8(sid), Name: "long"}
		for i := range 200 {
			v := str("value " + strconv.Itoa(i%7))
			if i%3 == 0 {
				v = str("distinct value " + strconv.Itoa(i) + " of span " + strconv.Itoa(int(sid)))
			}
			sp.Attributes = append(sp.Attributes, kv(spans.AttrOpName, v))
		}
		for i := range 130 {
			sp.Links = append(sp.Links, &tracepb.Span_Link{TraceId: id16(4), SpanId: id8(byte(i + 1)),
				Attributes: []*commonpb.KeyValue{kv(spans.AttrAttemptKind, str("kind "+strconv.Itoa(i%3)))}})
			sp.Events = append(sp.Events, &tracepb.Span_Event{TimeUnixNano: uint64(i), Name: "event " + strconv.Itoa(i%5),
				Attributes: []*commonpb.KeyValue{kv(spans.AttrOutcome, str("outcome "+strconv.Itoa(i)))}})
		}
		return sp
	}
	return []edgeCase{
		{"long lists", request(&tracepb.ResourceSpans{ScopeSpans: []*tracepb.ScopeSpans{scope("s", long(1), long(2))}}), 2, 0},
		{"trace state", request(&tracepb.ResourceSpans{ScopeSpans: []*tracepb.ScopeSpans{scope("s", sampled...)}}), 4, 0},
		{"mostly dropped attributes", request(&tracepb.ResourceSpans{ScopeSpans: []*tracepb.ScopeSpans{scope("s", dropped...)}}), 300, 0},
		{"empty request", request(), 0, 0},
		{"empty resource spans", request(&tracepb.ResourceSpans{}), 0, 0},
		{"missing resource and scope", request(&tracepb.ResourceSpans{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{okSpan(1)}}}}), 1, 0},
		{"all value types", request(&tracepb.ResourceSpans{
			Resource: &resourcepb.Resource{Attributes: append([]*commonpb.KeyValue{
				kv(spans.AttrServiceName, &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 7}}),
				kv(spans.AttrServiceInstance, nil),
			}, allValues...)},
			ScopeSpans: []*tracepb.ScopeSpans{scope("sc", &tracepb.Span{
				TraceId: id16(1), SpanId: id8(1), Attributes: allValues,
				Events: []*tracepb.Span_Event{{TimeUnixNano: 5, Name: "e", Attributes: allValues}, {}},
				Links: []*tracepb.Span_Link{
					{TraceId: id16(2), SpanId: id8(2), Attributes: allValues},
					{TraceId: id16(2), SpanId: id8(2)[:7], Attributes: allValues}, // dropped: bad span id
				},
				Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "boom"},
				Kind:   tracepb.Span_SPAN_KIND_CONSUMER, StartTimeUnixNano: math.MaxUint64, EndTimeUnixNano: 1,
			})},
		}), 1, 0},
		{"service name as array", request(&tracepb.ResourceSpans{
			Resource:   &resourcepb.Resource{Attributes: []*commonpb.KeyValue{kv(spans.AttrServiceName, arr(str("a")))}},
			ScopeSpans: []*tracepb.ScopeSpans{scope("", okSpan(1))},
		}), 1, 0},
		{"invalid ids rejected, others kept", request(&tracepb.ResourceSpans{ScopeSpans: []*tracepb.ScopeSpans{scope("s",
			okSpan(1),
			&tracepb.Span{SpanId: id8(2), Attributes: allValues},                                             // no trace id
			&tracepb.Span{TraceId: id16(1)},                                                                  // no span id
			&tracepb.Span{TraceId: id16(1)[:15], SpanId: id8(3)},                                             // short trace id
			&tracepb.Span{TraceId: id16(1), SpanId: append(id8(3), 0)},                                       // long span id
			&tracepb.Span{TraceId: make([]byte, 16), SpanId: id8(3)},                                         // zero trace id
			&tracepb.Span{TraceId: id16(1), SpanId: make([]byte, 8)},                                         // zero span id
			&tracepb.Span{TraceId: id16(1), SpanId: id8(4), ParentSpanId: id8(9)[:5], Attributes: allValues}, // parent of wrong length: no parent
			okSpan(5),
		)}}), 3, 6},
		{"huge counts", request(&tracepb.ResourceSpans{ScopeSpans: []*tracepb.ScopeSpans{scope("s", huge...)}}), 5000, 0},
	}
}

func TestDecodeProtoEdgeCases(t *testing.T) {
	tests := edgeCases()
	for _, tt := range tests {
		for _, o := range bothOptions {
			t.Run(tt.name+"/"+o.name, func(t *testing.T) {
				b := checkProto(t, marshal(t, tt.req), o.opt)
				if len(b.Spans) != tt.spans || b.Rejected != tt.rejected {
					t.Fatalf("got %d spans, %d rejected; want %d, %d", len(b.Spans), b.Rejected, tt.spans, tt.rejected)
				}
			})
		}
	}
}

// TestDecodeProtoRenderedValues pins the display form of non-scalar values, not only agreement.
func TestDecodeProtoRenderedValues(t *testing.T) {
	req := request(&tracepb.ResourceSpans{ScopeSpans: []*tracepb.ScopeSpans{scope("", &tracepb.Span{
		TraceId: id16(1), SpanId: id8(1), Attributes: []*commonpb.KeyValue{
			kv(spans.AttrOpName, arr(str("a\"b"), &commonpb.AnyValue{}, arr(&commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: -1}}))),
			kv(spans.AttrOwner, kvlist(kv("k", nil), kv("d", &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 1e21}}))),
			kv(spans.AttrOpID, &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte{0xca, 0xfe}}}),
		}})}})
	b := checkProto(t, marshal(t, req), spans.DecodeOptions{})
	want := map[string]string{spans.AttrOpName: `["a\"b",null,[-1]]`, spans.AttrOwner: `{"k":null,"d":1e+21}`, spans.AttrOpID: "cafe"}
	for k, v := range want {
		if a, _ := b.Spans[0].Attr(k); a.Type != spans.ValueOther || a.Str != v {
			t.Errorf("%s = %+v, want ValueOther %s", k, a, v)
		}
	}
}

// Raw wire builders, for what the generated code cannot produce: repeated singular fields, wrong
// wire types, groups, truncation.
func field(num protowire.Number, msg []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), msg)
}
func cat(parts ...[]byte) []byte { return []byte(strings.Join(bytesToStrings(parts), "")) }
func bytesToStrings(p [][]byte) []string {
	s := make([]string, len(p))
	for i := range p {
		s[i] = string(p[i])
	}
	return s
}
func varintField(num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
}

// wrapSpan puts raw span bytes into a request.
func wrapSpan(span []byte) []byte { return field(1, field(2, field(2, span))) }

// wireRuleBodies are raw protobuf bodies exercising the merge and unknown-field rules; they are
// also fuzz seeds.
func wireRuleBodies() map[string][]byte {
	ids := cat(field(1, id16(1)), field(2, id8(1)))
	strVal := func(s string) []byte { return field(1, []byte(s)) }
	attr := func(k string, val []byte) []byte { return field(9, cat(field(1, []byte(k)), field(2, val))) }
	group := cat(protowire.AppendTag(nil, 99, protowire.StartGroupType), varintField(1, 5),
		protowire.AppendTag(nil, 99, protowire.EndGroupType))
	tests := map[string][]byte{
		"repeated name: last wins":             wrapSpan(cat(ids, field(5, []byte("a")), field(5, []byte("b")))),
		"status messages merge":                wrapSpan(cat(ids, field(15, varintField(3, 2)), field(15, field(2, []byte("m"))))),
		"kind with wrong wire type is unknown": wrapSpan(cat(ids, field(6, []byte("x")), varintField(6, 3))),
		"name with wrong wire type is unknown": wrapSpan(cat(ids, field(5, []byte("n")), varintField(5, 1))),
		"trace id with wrong wire type":        wrapSpan(cat(ids, varintField(1, 1))),
		"huge enum values truncate":            wrapSpan(cat(ids, varintField(6, 1<<40|3), field(15, varintField(3, 258)))),
		"bool any non-zero is true":            wrapSpan(cat(ids, attr(spans.AttrTerminal, varintField(2, 7)))),
		"oneof: last member wins":              wrapSpan(cat(ids, attr(spans.AttrOpName, cat(strVal("s"), varintField(3, 9))))),
		"oneof: arrays merge": wrapSpan(cat(ids, attr(spans.AttrOpName, cat(
			field(5, field(1, strVal("a"))), field(5, field(1, strVal("b"))))))),
		"oneof: array after string after array": wrapSpan(cat(ids, attr(spans.AttrOpName, cat(
			field(5, field(1, strVal("a"))), strVal("x"), field(5, field(1, strVal("b"))))))),
		"key value: values merge": wrapSpan(cat(ids, field(9, cat(field(1, []byte(spans.AttrOpName)),
			field(2, field(6, field(1, field(1, []byte("k"))))), field(2, field(6, field(1, field(1, []byte("j"))))))))),
		"key value: key after value, last key wins": wrapSpan(cat(ids, field(9, cat(field(2, strVal("v")),
			field(1, []byte("nope")), field(1, []byte(spans.AttrOwner)))))),
		"resource after scope spans, twice": cat(field(1, cat(field(2, field(2, ids)),
			field(1, field(1, cat(field(1, []byte(spans.AttrServiceName)), field(2, strVal("one"))))),
			field(1, field(1, cat(field(1, []byte(spans.AttrURLScheme)), field(2, strVal("h"))))),
		))),
		"scope after spans":               field(1, field(2, cat(field(2, ids), field(1, field(1, []byte("late")))))),
		"groups are unknown fields":       cat(group, field(1, cat(group, field(2, cat(group, field(2, cat(ids, group))))))),
		"parent id: last occurrence wins": wrapSpan(cat(ids, field(4, id8(7)), field(4, id8(7)[:3]))),
		"event and link attributes interleaved with span attributes": wrapSpan(cat(ids,
			attr(spans.AttrOpID, strVal("1")),
			field(11, cat(field(2, []byte("ev")), field(3, cat(field(1, []byte("exception.type")), field(2, strVal("E")))))),
			attr(spans.AttrOpName, strVal("2")),
			field(13, cat(field(1, id16(3)), field(2, id8(3)), field(4, cat(field(1, []byte(spans.AttrAttemptKind)), field(2, strVal("retry")))))),
			attr(spans.AttrOwner, strVal("3")))),
	}
	return tests
}

func TestDecodeProtoWireRules(t *testing.T) {
	for name, body := range wireRuleBodies() {
		for _, o := range bothOptions {
			t.Run(name+"/"+o.name, func(t *testing.T) { checkProto(t, body, o.opt) })
		}
	}
}

func TestDecodeProtoBadInput(t *testing.T) {
	ids := cat(field(1, id16(1)), field(2, id8(1)))
	deep := field(1, []byte("x"))
	for i := 0; i < spans.MaxValueDepth+2; i++ {
		deep = field(5, field(1, deep))
	}
	tests := []struct {
		name string
		body []byte
		want string // substring of the error
	}{
		{"truncated length", []byte{0x0a, 0x05, 0x01}, "decode OTLP protobuf request"},
		{"truncated varint", []byte{0x08, 0xff}, "cannot read varint"},
		{"unknown wire type", []byte{0x0f}, "unknown wireType"},
		{"truncated span", field(1, field(2, cat(field(2, ids[:10])))), "resource_spans[0]: scope_spans[0]: spans[0]"},
		{"truncated attribute", wrapSpan(cat(ids, field(9, []byte{0x0a, 0x09}))), "spans[0]: attributes[0]"},
		{"truncated value", wrapSpan(cat(ids, field(9, cat(field(1, []byte(spans.AttrOpID)), field(2, []byte{0x0a, 0x03}))))), `attributes[0] "resilience.operation.id"`},
		{"broken array element", wrapSpan(cat(ids, field(9, cat(field(1, []byte(spans.AttrOpID)), field(2, field(5, field(1, []byte{0x1a}))))))), "attributes[0]"},
		{"too deep", wrapSpan(cat(ids, field(9, cat(field(1, []byte(spans.AttrOpID)), field(2, deep))))), "nested too deeply"},
		{"end group without start", []byte{0x0c}, "decode OTLP protobuf request"},
		{"truncated event", wrapSpan(cat(ids, field(11, []byte{0x12, 0x04}))), "events[0]"},
		{"truncated link", wrapSpan(cat(ids, field(13, []byte{0x0a, 0x14}))), "links[0]"},
		{"truncated resource", field(1, field(1, []byte{0x0a, 0x02, 0x0a})), "resource_spans[0]: resource"},
		// A span with several faults fails on the first on the wire, whichever part holds it.
		{"event before an attribute", wrapSpan(cat(ids, field(11, []byte{0x12, 0x04}), field(9, []byte{0x0a, 0x09}))), "spans[0]: events[0]"},
		{"attribute before the status", wrapSpan(cat(ids, field(9, []byte{0x0a, 0x09}), field(15, []byte{0x12, 0x05}))), "spans[0]: attributes[0]"},
		{"attribute before a broken field", wrapSpan(cat(ids, field(9, []byte{0x0a, 0x09}), []byte{0x08, 0xff})), "spans[0]: attributes[0]"},
		{"ids not first, attribute before a broken field", wrapSpan(cat(field(2, id8(1)), field(1, id16(1)), field(9, []byte{0x0a, 0x09}), []byte{0x08, 0xff})), "spans[0]: attributes[0]"},
		// Several bad spans: the first in the request is named, whichever trace it is of (packed by
		// trace, the second trace's spans are written after the first's).
		{"the first bad span of the request, not of its first trace", field(1, field(2, cat(
			field(2, cat(field(1, id16(2)), field(2, id8(1)))),
			field(2, cat(field(1, id16(1)), field(2, id8(2)), field(9, []byte{0x0a, 0x09}))),
			field(2, cat(field(1, id16(2)), field(2, id8(3)), field(9, []byte{0x0a, 0x09})))))),
			"scope_spans[0]: spans[1]: attributes[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := spans.DecodeProto(tt.body, spans.DecodeOptions{})
			if err == nil {
				t.Fatalf("no error; batch %+v", b)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
			if !errors.Is(err, spans.ErrMalformed) || !spans.IsPermanent(err) {
				t.Errorf("error %q is not ErrMalformed and permanent", err)
			}
			// Packed straight from the wire, the request is refused in the same words.
			if _, perr := spans.DecodeProto(tt.body, spans.DecodeOptions{PackByTrace: true}); fmt.Sprint(perr) != err.Error() {
				t.Errorf("with PackByTrace: %v; want %q", perr, err)
			}
		})
	}
}

// Protobuf's field numbers are 1 to 2^29-1, and the generated code refuses a request with any
// other; so does DecodeProto, packed or not, wherever it reads one (a span's fields here), and
// it keeps the span around an unknown field of the highest valid number.
func TestDecodeProtoFieldNumbers(t *testing.T) {
	ids := cat(field(1, id16(1)), field(2, id8(1)))
	unknown := func(num uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, protowire.Number(num), protowire.VarintType), 1)
	}
	// A group numbered past 2^29-1 too: it is skipped whole, but not whatever its number.
	group := protowire.AppendTag(protowire.AppendTag(nil, 1<<29, protowire.StartGroupType), 1<<29, protowire.EndGroupType)
	for _, c := range []struct {
		num   uint64
		field []byte
	}{{0, unknown(0)}, {1 << 29, unknown(1 << 29)}, {1<<31 - 1, unknown(1<<31 - 1)}, {1 << 29, group}} {
		num := c.num
		t.Run(strconv.FormatUint(num, 10), func(t *testing.T) {
			body := wrapSpan(cat(ids, c.field))
			if err := proto.Unmarshal(body, &coltracepb.ExportTraceServiceRequest{}); err == nil {
				t.Fatal("the generated code accepts the request: not a case of this test")
			}
			for _, opt := range []spans.DecodeOptions{{}, {PackByTrace: true}} {
				_, err := spans.DecodeProto(body, opt)
				if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("invalid field number %d", num)) ||
					!errors.Is(err, spans.ErrMalformed) || !spans.IsPermanent(err) {
					t.Errorf("packed %v: err = %v, want a permanent ErrMalformed naming field number %d", opt.PackByTrace, err, num)
				}
			}
		})
	}
	body := wrapSpan(cat(ids, unknown(1<<29-1), field(5, []byte("kept"))))
	if err := proto.Unmarshal(body, &coltracepb.ExportTraceServiceRequest{}); err != nil {
		t.Fatalf("the generated code refuses the highest field number: %v", err)
	}
	b, err := spans.DecodeProto(body, spans.DecodeOptions{})
	if err != nil || len(b.Spans) != 1 || b.Spans[0].Name != "kept" {
		t.Fatalf("the highest field number: err %v, batch %+v; want the span kept", err, b)
	}
}

func TestIntern(t *testing.T) {
	for _, k := range spans.WellKnown {
		got, ok := spans.Intern([]byte(k))
		if !ok || got != k || !spans.IsWellKnown(k) {
			t.Errorf("Intern(%q) = %q, %v", k, got, ok)
		}
		if unsafeStringPointer(got) != unsafeStringPointer(k) {
			t.Errorf("Intern(%q) is not the canonical string", k)
		}
		for _, near := range []string{k + "x", k[:len(k)-1], "x" + k[1:], ""} {
			if spans.IsWellKnown(near) {
				t.Errorf("IsWellKnown(%q) = true", near)
			}
			if _, ok := spans.Intern([]byte(near)); ok {
				t.Errorf("Intern(%q) found it", near)
			}
		}
	}
}

// TestDecodeBoundsMemoryOnHostileInput: bodies of empty messages - nothing valid, a few bytes
// each - must not make the decoders reserve a span or resource for every message.
func TestDecodeBoundsMemoryOnHostileInput(t *testing.T) {
	const size = 1 << 20
	emptySpans := make([]byte, 0, size)
	for len(emptySpans) < size-8 {
		emptySpans = append(emptySpans, 0x12, 0x00) // ScopeSpans.spans: an empty span
	}
	emptySpans = field(1, field(2, emptySpans))
	emptyResourceSpans := make([]byte, 0, size)
	for len(emptyResourceSpans) < size-8 {
		emptyResourceSpans = append(emptyResourceSpans, 0x0a, 0x04, 0x12, 0x02, 0x12, 0x00) // one empty span each
	}
	capitalIs := []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[],"scope":{"name":"` + strings.Repeat("I", size) + `"}}]}]}`)
	emptyJSONSpans := []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[` + strings.Repeat(`{},`, size/3) + `{}]}]}]}`)
	tests := []struct {
		name   string
		body   []byte
		decode func([]byte, spans.DecodeOptions) (*spans.Batch, error)
	}{
		{"protobuf empty spans", emptySpans, spans.DecodeProto},
		{"protobuf resource spans with an empty span each", emptyResourceSpans, spans.DecodeProto},
		{"JSON capital I's", capitalIs, spans.DecodeJSON},
		{"JSON empty spans", emptyJSONSpans, spans.DecodeJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// TotalAlloc is the whole process's: the least of three decodes leaves out what the
			// runtime or the test framework happened to allocate meanwhile.
			got := uint64(math.MaxUint64)
			for range 3 {
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				b, err := tt.decode(tt.body, spans.DecodeOptions{})
				runtime.ReadMemStats(&after)
				if err != nil {
					t.Fatal(err)
				}
				if len(b.Spans) != 0 {
					t.Fatalf("kept %d spans", len(b.Spans))
				}
				got = min(got, after.TotalAlloc-before.TotalAlloc)
			}
			// A valid span needs tens of bytes, so a fair reservation is well under the body's size.
			if got > uint64(2*len(tt.body)) {
				t.Errorf("decoding %d bytes allocated %d bytes", len(tt.body), got)
			}
		})
	}
}

// Both decoders keep the trace state that carries OpenTelemetry's sampling threshold, and only it.
func TestDecodersKeepTheSamplingTraceState(t *testing.T) {
	var sampled *tracepb.Span
	for _, c := range edgeCases() {
		if c.name == "trace state" {
			sampled = c.req.ResourceSpans[0].ScopeSpans[0].Spans[0]
			req := c.req
			pb, err := proto.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			fromProto, err := spans.DecodeProto(pb, spans.DecodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			fromJSON, err := spans.DecodeJSON(toJSON(t, req), spans.DecodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range []*spans.Batch{fromProto, fromJSON} {
				want := []string{"ot=th:e668", "congo=t61rcWkgMzE, ot=rv:0123456789abcd;th:8", "", ""}
				for i, s := range b.Spans {
					if got := s.Str(spans.AttrTraceState); got != want[i] {
						t.Errorf("span %d: trace state %q, want %q", i, got, want[i])
					}
				}
			}
		}
	}
	if sampled == nil {
		t.Fatal("no trace state case")
	}
}
