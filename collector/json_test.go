package collector

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/stormwatch/stormwatch/spans"
)

// otlpJSON encodes req as OTLP/JSON: protojson, with the ids in hex as the OTLP spec wants rather
// than protojson's base64.
func otlpJSON(t testing.TB, req *coltracepb.ExportTraceServiceRequest) []byte {
	t.Helper()
	b, err := protojson.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, rs := range doc["resourceSpans"].([]any) {
		for _, ss := range rs.(map[string]any)["scopeSpans"].([]any) {
			for _, sp := range ss.(map[string]any)["spans"].([]any) {
				m := sp.(map[string]any)
				for _, k := range []string{"traceId", "spanId", "parentSpanId"} {
					if v, ok := m[k].(string); ok {
						raw, err := base64.StdEncoding.DecodeString(v)
						if err != nil {
							t.Fatal(err)
						}
						m[k] = hex.EncodeToString(raw)
					}
				}
			}
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// handJSON is OTLP/JSON as other SDKs write it: integer enums, int64 as a string in one place
// and a number in another, fields this collector has never heard of.
const handJSON = `{
  "resourceSpans": [{
    "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "cart"}}], "futureField": 1},
    "scopeSpans": [{
      "scope": {"name": "manual"},
      "spans": [
        {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174", "parentSpanId": "eee19b7ec3c1b173",
         "name": "GET", "kind": 3, "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": 1700000000100000000,
         "attributes": [{"key": "http.response.status_code", "value": {"intValue": "503"}},
                        {"key": "resilience.attempt", "value": {"intValue": 2}}],
         "status": {"code": 2, "message": "upstream"}, "somethingNew": {"x": [1, 2]}},
        {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b175", "name": "GET", "kind": 3,
         "startTimeUnixNano": "1700000000200000000", "endTimeUnixNano": "1700000000300000000"}
      ]
    }]
  }]
}`

func TestHTTPJSON(t *testing.T) {
	for _, gz := range []bool{false, true} {
		name := "plain"
		if gz {
			name = "gzip"
		}
		t.Run(name, func(t *testing.T) {
			s := &sink{}
			c := start(t, Config{}, s)
			body := []byte(handJSON)
			headers := map[string]string{"Content-Type": "application/json; charset=utf-8"}
			if gz {
				body = gzipped(t, body)
				headers["Content-Encoding"] = "gzip"
			}
			resp := post(t, c, body, headers)
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != contentTypeJSON || string(b) != "{}" {
				t.Fatalf("status %d, content type %q, body %q: want 200, JSON, {}", resp.StatusCode, resp.Header.Get("Content-Type"), b)
			}
			waitFor(t, "JSON spans", func() bool { return s.count() >= 2 })
			got := s.spans()
			if len(got) != 2 {
				t.Fatalf("%d spans", len(got))
			}
			sp := got[0]
			if sp.TraceID.String() != "5b8efff798038103d269b633813fc60c" || sp.SpanID.String() != "eee19b7ec3c1b174" ||
				sp.ParentID.String() != "eee19b7ec3c1b173" {
				t.Errorf("ids %s %s %s", sp.TraceID, sp.SpanID, sp.ParentID)
			}
			if sp.Kind != spans.KindClient || sp.Status != spans.StatusError || sp.StatusMessage != "upstream" {
				t.Errorf("kind %s status %s %q", sp.Kind, sp.Status, sp.StatusMessage)
			}
			if sp.StartUnixNano != 1700000000000000000 || sp.EndUnixNano != 1700000000100000000 {
				t.Errorf("times %d %d", sp.StartUnixNano, sp.EndUnixNano)
			}
			if code, _ := sp.Int(spans.AttrHTTPStatus); code != 503 {
				t.Errorf("status code %d", code)
			}
			if n, _ := sp.Int(spans.AttrAttempt); n != 2 {
				t.Errorf("attempt %d", n)
			}
			if sp.Service() != "cart" || sp.Scope != "manual" {
				t.Errorf("service %q scope %q", sp.Service(), sp.Scope)
			}
		})
	}
}

func TestHTTPJSONInvalidIDIsAPartialSuccess(t *testing.T) {
	s := &sink{}
	c := start(t, Config{}, s)
	body := `{"resourceSpans":[{"scopeSpans":[{"spans":[
		{"traceId":"zz","spanId":"0102030405060708","name":"bad"},
		{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"0102030405060708","name":"good"}]}]}]}`
	resp := post(t, c, []byte(body), map[string]string{"Content-Type": contentTypeJSON})
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out coltracepb.ExportTraceServiceResponse
	if err := protojson.Unmarshal(b, &out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d body %q: %v", resp.StatusCode, b, err)
	}
	if out.GetPartialSuccess().GetRejectedSpans() != 1 || out.GetPartialSuccess().GetErrorMessage() == "" {
		t.Errorf("partial success %v, want 1 rejected with a message", out.GetPartialSuccess())
	}
	waitFor(t, "the good span", func() bool { return s.count() == 1 })
	if got := s.spans()[0].Name; got != "good" {
		t.Errorf("kept %q", got)
	}
}
