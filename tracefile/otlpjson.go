package tracefile

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/stormwatch/stormwatch/spans/jsonlex"
)

// OTLP/JSON is protobuf's JSON mapping with three differences: trace and span ids are hex (not
// base64), enums are integers, and field names are lowerCamelCase. protojson gets the last two
// right with options but not the ids, and its output is deliberately unstable (it inserts random
// spaces), so the encoder below is written out by hand from the generated types: it is
// deterministic, writes ids as hex natively and avoids protojson's reflection, which matters when the
// collector records a .jsonl file under load. Decoding goes through protojson (lenient, complete:
// int64 as strings or numbers, enums as numbers or names, unknown fields ignored) after rewriting the
// ids - see hexIDsToBase64.

// ProtoToJSON transcodes one ExportTraceServiceRequest from protobuf to one line of OTLP/JSON
// (without the trailing newline).
func ProtoToJSON(body []byte) ([]byte, error) { return appendProtoAsJSON(nil, body) }

// appendProtoAsJSON transcodes straight from the wire when the request is in canonical form (what
// every SDK sends), else through the generated types, which also give malformed input its error.
func appendProtoAsJSON(dst, body []byte) ([]byte, error) {
	if out, err := appendRequestJSONWire(dst, body); err == nil {
		return out, nil
	}
	return appendProtoAsJSONSlow(dst, body)
}

func appendProtoAsJSONSlow(dst, body []byte) ([]byte, error) {
	req := &coltracepb.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(body, req); err != nil {
		return nil, fmt.Errorf("decode OTLP/protobuf: %w", err)
	}
	return AppendRequestJSON(dst, req), nil
}

// JSONToProto transcodes one OTLP/JSON ExportTraceServiceRequest to protobuf: straight from the
// text for what SDKs and collectors write, through protojson for the rest (and for the error).
func JSONToProto(body []byte) ([]byte, error) { return appendJSONToProto(nil, body) }

func appendJSONToProto(dst, body []byte) ([]byte, error) {
	out, err := appendJSONAsProto(dst, body)
	if err != nil {
		var pb []byte
		if pb, err = jsonToProtoSlow(body); err != nil {
			return nil, err
		}
		out = append(dst, pb...)
	}
	if out == nil {
		out = []byte{} // an empty request is zero bytes of protobuf, not "none"
	}
	return out, nil
}

func jsonToProtoSlow(body []byte) ([]byte, error) {
	req, err := UnmarshalJSON(body)
	if err != nil {
		return nil, err
	}
	out, err := proto.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode OTLP/protobuf: %w", err)
	}
	return out, nil
}

var jsonUnmarshal = protojson.UnmarshalOptions{DiscardUnknown: true}

// UnmarshalJSON decodes one OTLP/JSON request into the generated type.
func UnmarshalJSON(body []byte) (*coltracepb.ExportTraceServiceRequest, error) {
	req := &coltracepb.ExportTraceServiceRequest{}
	if err := jsonUnmarshal.Unmarshal(hexIDsToBase64(body), req); err != nil {
		return nil, fmt.Errorf("decode OTLP/JSON request: %w", err)
	}
	return req, nil
}

// hexIDsToBase64 rewrites the values of "traceId", "spanId" and "parentSpanId" from OTLP/JSON's hex
// to the base64 protojson expects. A value that is not hex becomes "": an invalid id, as the fast
// JSON decoder treats it (the span is rejected; a parent id that is not one means no parent), instead
// of failing the whole request. It scans the text once, tracking strings, and copies only when it
// finds an id.
func hexIDsToBase64(body []byte) []byte {
	var out []byte // nil until the first rewrite
	last := 0      // body[last:] has not been copied to out yet
	for i := 0; i < len(body); i++ {
		if body[i] != '"' {
			continue
		}
		end := stringEnd(body, i)
		if end < 0 {
			break // unterminated string: let protojson report it
		}
		key := body[i+1 : end]
		i = end
		if !isIDKey(key) {
			continue
		}
		// A key is followed by a colon; a string value that happens to read "spanId" is not.
		j := skipSpace(body, end+1)
		if j >= len(body) || body[j] != ':' {
			continue
		}
		j = skipSpace(body, j+1)
		if j >= len(body) || body[j] != '"' {
			continue
		}
		vend := stringEnd(body, j)
		if vend < 0 {
			break
		}
		val := body[j+1 : vend]
		out = append(out, body[last:j+1]...)
		if raw, err := hex.DecodeString(string(val)); err == nil {
			out = base64.StdEncoding.AppendEncode(out, raw)
		}
		out = append(out, '"')
		last = vend + 1
		i = vend
	}
	if out == nil {
		return body
	}
	return append(out, body[last:]...)
}

func isIDKey(k []byte) bool {
	switch string(k) {
	case "traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id":
		return true
	}
	return false
}

// stringEnd returns the index of the quote closing the JSON string that opens at body[start], or -1.
func stringEnd(body []byte, start int) int {
	for i := start + 1; i < len(body); i++ {
		switch body[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

func skipSpace(body []byte, i int) int {
	for i < len(body) && (body[i] == ' ' || body[i] == '\t' || body[i] == '\n' || body[i] == '\r') {
		i++
	}
	return i
}

// AppendRequestJSON appends req as one line of OTLP/JSON (no newline) to dst.
func AppendRequestJSON(dst []byte, req *coltracepb.ExportTraceServiceRequest) []byte {
	dst = append(dst, `{"resourceSpans":[`...)
	dst = appendResourceSpansList(dst, req.GetResourceSpans())
	return append(dst, "]}"...)
}

// appendResourceSpansList writes the elements of the resourceSpans array, comma-separated; the
// single-request writer uses it to merge several requests into one document.
func appendResourceSpansList(dst []byte, rss []*tracepb.ResourceSpans) []byte {
	return appendList(dst, rss, appendResourceSpans)
}

// appendList writes the elements of v comma-separated, each by elem: the inside of a JSON array.
func appendList[T any](dst []byte, v []T, elem func([]byte, T) []byte) []byte {
	for i, x := range v {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = elem(dst, x)
	}
	return dst
}

// listMember writes v as the array member k, unless it is empty (proto3 JSON leaves empty lists out).
func listMember[T any](o *jsonObj, k string, v []T, elem func([]byte, T) []byte) {
	if len(v) != 0 {
		o.key(k)
		o.dst = append(appendList(append(o.dst, '['), v, elem), ']')
	}
}

// jsonObj writes the commas of one JSON object whose fields are all optional.
type jsonObj struct {
	dst  []byte
	more bool
}

func (o *jsonObj) key(k string) {
	if o.more {
		o.dst = append(o.dst, ',')
	}
	o.more = true
	o.dst = append(o.dst, '"')
	o.dst = append(o.dst, k...)
	o.dst = append(o.dst, '"', ':')
}

func (o *jsonObj) str(k, v string) {
	if v != "" {
		o.key(k)
		o.dst = jsonlex.AppendString(o.dst, v)
	}
}

// i32 writes a signed enum: kinds and codes are int32 on the wire, and a negative one must stay
// negative.
func (o *jsonObj) i32(k string, v int32) {
	if v != 0 {
		o.key(k)
		o.dst = strconv.AppendInt(o.dst, int64(v), 10)
	}
}

func (o *jsonObj) u32(k string, v uint32) {
	if v != 0 {
		o.key(k)
		o.dst = strconv.AppendUint(o.dst, uint64(v), 10)
	}
}

// u64 writes a 64-bit integer as a string, as protobuf's JSON mapping (and the file exporter) do:
// JSON numbers lose precision beyond 2^53 in many readers.
func (o *jsonObj) u64(k string, v uint64) {
	if v != 0 {
		o.key(k)
		o.dst = append(o.dst, '"')
		o.dst = strconv.AppendUint(o.dst, v, 10)
		o.dst = append(o.dst, '"')
	}
}

func (o *jsonObj) id(k string, v []byte) {
	if len(v) != 0 {
		o.key(k)
		o.dst = append(o.dst, '"')
		o.dst = hex.AppendEncode(o.dst, v)
		o.dst = append(o.dst, '"')
	}
}

func (o *jsonObj) attrs(k string, kvs []*commonpb.KeyValue) {
	if len(kvs) != 0 {
		o.key(k)
		o.dst = appendKeyValues(o.dst, kvs)
	}
}

func appendResourceSpans(dst []byte, rs *tracepb.ResourceSpans) []byte {
	o := jsonObj{dst: append(dst, '{')}
	if r := rs.GetResource(); r != nil {
		o.key("resource")
		o.dst = appendResource(o.dst, r)
	}
	listMember(&o, "scopeSpans", rs.GetScopeSpans(), appendScopeSpans)
	o.str("schemaUrl", rs.GetSchemaUrl())
	return append(o.dst, '}')
}

func appendResource(dst []byte, r *resourcepb.Resource) []byte {
	o := jsonObj{dst: append(dst, '{')}
	o.attrs("attributes", r.GetAttributes())
	o.u32("droppedAttributesCount", r.GetDroppedAttributesCount())
	listMember(&o, "entityRefs", r.GetEntityRefs(), appendEntityRef)
	return append(o.dst, '}')
}

func appendEntityRef(dst []byte, ref *commonpb.EntityRef) []byte {
	e := jsonObj{dst: append(dst, '{')}
	e.str("schemaUrl", ref.GetSchemaUrl())
	e.str("type", ref.GetType())
	listMember(&e, "idKeys", ref.GetIdKeys(), jsonlex.AppendString)
	listMember(&e, "descriptionKeys", ref.GetDescriptionKeys(), jsonlex.AppendString)
	return append(e.dst, '}')
}

func appendScopeSpans(dst []byte, ss *tracepb.ScopeSpans) []byte {
	o := jsonObj{dst: append(dst, '{')}
	if sc := ss.GetScope(); sc != nil {
		o.key("scope")
		s := jsonObj{dst: append(o.dst, '{')}
		s.str("name", sc.GetName())
		s.str("version", sc.GetVersion())
		s.attrs("attributes", sc.GetAttributes())
		s.u32("droppedAttributesCount", sc.GetDroppedAttributesCount())
		o.dst = append(s.dst, '}')
	}
	listMember(&o, "spans", ss.GetSpans(), appendSpan)
	o.str("schemaUrl", ss.GetSchemaUrl())
	return append(o.dst, '}')
}

func appendSpan(dst []byte, s *tracepb.Span) []byte {
	o := jsonObj{dst: append(dst, '{')}
	o.id("traceId", s.GetTraceId())
	o.id("spanId", s.GetSpanId())
	o.str("traceState", s.GetTraceState())
	o.id("parentSpanId", s.GetParentSpanId())
	o.u32("flags", s.GetFlags())
	o.str("name", s.GetName())
	o.i32("kind", int32(s.GetKind()))
	o.u64("startTimeUnixNano", s.GetStartTimeUnixNano())
	o.u64("endTimeUnixNano", s.GetEndTimeUnixNano())
	o.attrs("attributes", s.GetAttributes())
	o.u32("droppedAttributesCount", s.GetDroppedAttributesCount())
	listMember(&o, "events", s.GetEvents(), appendEvent)
	o.u32("droppedEventsCount", s.GetDroppedEventsCount())
	listMember(&o, "links", s.GetLinks(), appendLink)
	o.u32("droppedLinksCount", s.GetDroppedLinksCount())
	// The file exporter always writes a status object; doing the same keeps files comparable.
	o.key("status")
	st := jsonObj{dst: append(o.dst, '{')}
	st.str("message", s.GetStatus().GetMessage())
	st.i32("code", int32(s.GetStatus().GetCode()))
	o.dst = append(st.dst, '}')
	return append(o.dst, '}')
}

func appendEvent(dst []byte, e *tracepb.Span_Event) []byte {
	o := jsonObj{dst: append(dst, '{')}
	o.u64("timeUnixNano", e.GetTimeUnixNano())
	o.str("name", e.GetName())
	o.attrs("attributes", e.GetAttributes())
	o.u32("droppedAttributesCount", e.GetDroppedAttributesCount())
	return append(o.dst, '}')
}

func appendLink(dst []byte, l *tracepb.Span_Link) []byte {
	o := jsonObj{dst: append(dst, '{')}
	o.id("traceId", l.GetTraceId())
	o.id("spanId", l.GetSpanId())
	o.str("traceState", l.GetTraceState())
	o.attrs("attributes", l.GetAttributes())
	o.u32("droppedAttributesCount", l.GetDroppedAttributesCount())
	o.u32("flags", l.GetFlags())
	return append(o.dst, '}')
}

func appendKeyValues(dst []byte, kvs []*commonpb.KeyValue) []byte {
	return append(appendList(append(dst, '['), kvs, appendKeyValue), ']')
}

func appendKeyValue(dst []byte, kv *commonpb.KeyValue) []byte {
	o := jsonObj{dst: append(dst, '{')}
	o.key("key")
	o.dst = jsonlex.AppendString(o.dst, kv.GetKey())
	if kv.GetKeyStrindex() != 0 {
		o.key("keyStrindex")
		o.dst = strconv.AppendInt(o.dst, int64(kv.GetKeyStrindex()), 10)
	}
	if v := kv.GetValue(); v != nil {
		o.key("value")
		o.dst = appendAnyValue(o.dst, v)
	}
	return append(o.dst, '}')
}

func appendAnyValue(dst []byte, v *commonpb.AnyValue) []byte {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		dst = append(dst, `{"stringValue":`...)
		dst = jsonlex.AppendString(dst, x.StringValue)
	case *commonpb.AnyValue_BoolValue:
		dst = append(dst, `{"boolValue":`...)
		dst = strconv.AppendBool(dst, x.BoolValue)
	case *commonpb.AnyValue_IntValue:
		dst = append(dst, `{"intValue":"`...)
		dst = strconv.AppendInt(dst, x.IntValue, 10)
		dst = append(dst, '"')
	case *commonpb.AnyValue_DoubleValue:
		dst = append(dst, `{"doubleValue":`...)
		dst = jsonlex.AppendFloat(dst, x.DoubleValue)
	case *commonpb.AnyValue_BytesValue:
		dst = append(dst, `{"bytesValue":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, x.BytesValue)
		dst = append(dst, '"')
	case *commonpb.AnyValue_ArrayValue:
		dst = append(dst, `{"arrayValue":{`...)
		if vals := x.ArrayValue.GetValues(); len(vals) != 0 {
			dst = append(appendList(append(dst, `"values":[`...), vals, appendAnyValue), ']')
		}
		dst = append(dst, '}')
	case *commonpb.AnyValue_KvlistValue:
		dst = append(dst, `{"kvlistValue":{`...)
		if vals := x.KvlistValue.GetValues(); len(vals) != 0 {
			dst = append(dst, `"values":`...)
			dst = appendKeyValues(dst, vals)
		}
		dst = append(dst, '}')
	case *commonpb.AnyValue_StringValueStrindex:
		dst = append(dst, `{"stringValueStrindex":`...)
		dst = strconv.AppendInt(dst, int64(x.StringValueStrindex), 10)
	default:
		// An AnyValue with nothing set is the empty value.
		return append(dst, "{}"...)
	}
	return append(dst, '}')
}
