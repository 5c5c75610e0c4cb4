package tracefile

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/stormwatch/stormwatch/spans/jsonlex"
)

// OTLP/JSON is protobuf's JSON mapping with three differences: trace and span ids are hex (not
// base64), enums are integers, and field names are lowerCamelCase. protojson gets the last two
// right with options but not the ids, and its output is deliberately unstable (it inserts random
// spaces), so the encoder is written out by hand, once, over the wire format (otlpjson_wire.go):
// it is deterministic, writes ids as hex natively and builds no object tree, which matters when
// the collector records a .jsonl file under load. Decoding goes through a transcoder of its own
// (jsonwire.go) and protojson for the rest (lenient, complete: int64 as strings or numbers, enums
// as numbers or names, unknown fields ignored) after rewriting the ids - see hexIDsToBase64.

// ProtoToJSON transcodes one ExportTraceServiceRequest from protobuf to one line of OTLP/JSON
// (without the trailing newline).
func ProtoToJSON(body []byte) ([]byte, error) { return appendProtoAsJSON(nil, body) }

func appendProtoAsJSON(dst, body []byte) ([]byte, error) {
	out, err := appendResourceSpansJSON(append(dst, `{"resourceSpans":[`...), body)
	if err != nil {
		return nil, err
	}
	return append(out, "]}"...), nil
}

// appendResourceSpansJSON writes the resource spans of the protobuf request body as the elements of
// a JSON array, comma-separated (the single-document writer merges several requests into one
// array). The wire encoder takes the request as it is when it is in canonical form, what every SDK
// sends; anything else is first put in that form by the generated types, which also give malformed
// input its error.
func appendResourceSpansJSON(dst, body []byte) ([]byte, error) {
	if out, err := appendResourceSpansWire(dst, body); err == nil {
		return out, nil
	}
	canon, err := canonicalProto(body)
	if err != nil {
		return nil, err
	}
	return appendResourceSpansWire(dst, canon)
}

// canonicalProto re-encodes a request through the generated types: singular messages once, one
// member per oneof, unknown fields (and known ones of the wrong wire type) dropped.
func canonicalProto(body []byte) ([]byte, error) {
	req := &coltracepb.ExportTraceServiceRequest{}
	if err := (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, req); err != nil {
		return nil, fmt.Errorf("decode OTLP/protobuf: %w", err)
	}
	return marshalRequest(req)
}

func marshalRequest(req *coltracepb.ExportTraceServiceRequest) ([]byte, error) {
	out, err := proto.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode OTLP/protobuf: %w", err)
	}
	return out, nil
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
	return marshalRequest(req)
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
		sc := jsonlex.Scanner{Buf: body, Pos: end + 1}
		if sc.Peek() != ':' {
			continue
		}
		if sc.Pos++; sc.Peek() != '"' {
			continue
		}
		j := sc.Pos
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
