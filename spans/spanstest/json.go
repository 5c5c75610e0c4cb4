package spanstest

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// RequestToJSON encodes a request as OTLP/JSON the slow, obvious way: protojson (lowerCamelCase
// names, 64-bit integers as strings, enums as numbers), then the one place where OTLP/JSON departs
// from the protobuf JSON mapping fixed up - trace and span ids in hex instead of base64. It is the
// reference the JSON decoder is tested against.
func RequestToJSON(req *coltracepb.ExportTraceServiceRequest) ([]byte, error) {
	raw, err := protojson.MarshalOptions{UseEnumNumbers: true}.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("protojson marshal: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, fmt.Errorf("re-read protojson output: %w", err)
	}
	if err := hexIDs(tree, ""); err != nil {
		return nil, err
	}
	return json.Marshal(tree)
}

var idFields = map[string]bool{"traceId": true, "spanId": true, "parentSpanId": true}

// hexIDs rewrites the base64 id fields of spans and links (and only those: the parent key tells an
// id apart from, say, an attribute named "traceId" inside a kvlist, which has no such parent).
func hexIDs(v any, parent string) error {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && idFields[k] && (parent == "spans" || parent == "links") {
				b, err := base64.StdEncoding.DecodeString(s)
				if err != nil {
					return fmt.Errorf("%s %q is not base64: %w", k, s, err)
				}
				x[k] = hex.EncodeToString(b)
				continue
			}
			if err := hexIDs(e, k); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := hexIDs(e, parent); err != nil {
				return err
			}
		}
	}
	return nil
}
