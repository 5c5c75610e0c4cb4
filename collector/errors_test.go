package collector

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// readStatus reads an OTLP/HTTP error body: a google.rpc.Status in the given encoding, or text.
func readStatus(t *testing.T, resp *http.Response, enc encoding) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusOK {
		return ""
	}
	var st rpcstatus.Status
	switch enc {
	case encProto:
		if ct := resp.Header.Get("Content-Type"); ct != contentTypeProto {
			t.Errorf("error Content-Type %q, want %s", ct, contentTypeProto)
		}
		if err := proto.Unmarshal(b, &st); err != nil {
			t.Fatalf("error body is not a protobuf Status: %v (%q)", err, b)
		}
		return st.GetMessage()
	case encJSON:
		if ct := resp.Header.Get("Content-Type"); ct != contentTypeJSON {
			t.Errorf("error Content-Type %q, want %s", ct, contentTypeJSON)
		}
		if err := protojson.Unmarshal(b, &st); err != nil {
			t.Fatalf("error body is not a JSON Status: %v (%q)", err, b)
		}
		return st.GetMessage()
	}
	return string(b)
}

func TestHTTPErrorMapping(t *testing.T) {
	const limit = 64 << 10
	s := &sink{}
	c := start(t, Config{MaxRequestBytes: limit}, s)
	// Spans accepted before the bad requests must survive them.
	good := protoBody(t, request(0, 5, 0))
	if resp := post(t, c, good, map[string]string{"Content-Type": contentTypeProto}); resp.StatusCode != 200 {
		t.Fatalf("good request: %d", resp.StatusCode)
	}

	big := protoBody(t, request(0, 600, 0)) // over 64 KiB
	if len(big) <= limit {
		t.Fatalf("test body of %d bytes is not over the limit", len(big))
	}
	bomb := gzipped(t, make([]byte, 4*limit)) // a few hundred bytes that expand past the limit

	tests := []struct {
		name     string
		method   string
		path     string
		headers  map[string]string
		body     []byte
		chunked  bool // hide the length so only the reader can catch the size
		code     int
		enc      encoding // how the error body is encoded
		contains string
		header   [2]string
	}{
		{name: "GET", method: "GET", code: 405, contains: "use POST", header: [2]string{"Allow", "POST"}},
		{name: "PUT", method: "PUT", headers: map[string]string{"Content-Type": contentTypeProto}, body: good, enc: encProto, code: 405, contains: "PUT"},
		{name: "unknown path", path: "/v1/profiles", headers: map[string]string{"Content-Type": contentTypeProto}, body: good, enc: encProto, code: 404, contains: "/v1/traces"},
		{name: "text/plain", headers: map[string]string{"Content-Type": "text/plain"}, body: good, code: 415, contains: "application/x-protobuf"},
		{name: "no content type", body: good, code: 415, contains: "Content-Type"},
		{name: "brotli", headers: map[string]string{"Content-Type": contentTypeProto, "Content-Encoding": "br"}, body: good, enc: encProto, code: 415, contains: `Content-Encoding "br"`},
		{name: "malformed protobuf", headers: map[string]string{"Content-Type": contentTypeProto}, body: []byte{0x0a, 0xff, 0xff, 0x01}, enc: encProto, code: 400, contains: "malformed OTLP request"},
		{name: "malformed JSON", headers: map[string]string{"Content-Type": contentTypeJSON}, body: []byte(`{"resourceSpans": [`), enc: encJSON, code: 400, contains: "malformed OTLP request"},
		{name: "protobuf sent as JSON", headers: map[string]string{"Content-Type": contentTypeJSON}, body: good, enc: encJSON, code: 400, contains: "OTLP/JSON"},
		{name: "not gzip", headers: map[string]string{"Content-Type": contentTypeProto, "Content-Encoding": "gzip"}, body: good, enc: encProto, code: 400, contains: "gzip"},
		{name: "truncated gzip", headers: map[string]string{"Content-Type": contentTypeProto, "Content-Encoding": "gzip"}, body: gzipped(t, good)[:40], enc: encProto, code: 400, contains: "gzip"},
		{name: "over the limit", headers: map[string]string{"Content-Type": contentTypeProto}, body: big, enc: encProto, code: 413, contains: "--max-request-bytes"},
		{name: "over the limit, chunked", headers: map[string]string{"Content-Type": contentTypeProto}, body: big, chunked: true, enc: encProto, code: 413, contains: "exceeds"},
		{name: "gzip bomb", headers: map[string]string{"Content-Type": contentTypeProto, "Content-Encoding": "gzip"}, body: bomb, enc: encProto, code: 413, contains: "decompressed body exceeds"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			method, path := tc.method, tc.path
			if method == "" {
				method = http.MethodPost
			}
			if path == "" {
				path = tracesPath
			}
			var body io.Reader = bytes.NewReader(tc.body)
			if tc.chunked {
				body = io.MultiReader(body) // not a *bytes.Reader: no Content-Length
			}
			req, err := http.NewRequest(method, "http://"+c.HTTPAddr()+path, body)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			msg := readStatus(t, resp, tc.enc)
			if resp.StatusCode != tc.code {
				t.Errorf("status %d, want %d (%q)", resp.StatusCode, tc.code, msg)
			}
			if !strings.Contains(msg, tc.contains) {
				t.Errorf("message %q does not contain %q", msg, tc.contains)
			}
			if tc.header[0] != "" && resp.Header.Get(tc.header[0]) != tc.header[1] {
				t.Errorf("%s: %q, want %q", tc.header[0], resp.Header.Get(tc.header[0]), tc.header[1])
			}
		})
	}
	waitFor(t, "the good spans", func() bool { return s.count() >= 5 })
	if n := s.count(); n != 5 {
		t.Errorf("%d spans stored, want exactly the 5 accepted before the bad requests", n)
	}
	m := scrape(t, c)
	for _, want := range []string{
		`stormwatch_collector_requests_total{outcome="accepted",transport="http"} 1`,
		`stormwatch_collector_requests_total{outcome="malformed",transport="http"} 5`,
		`stormwatch_collector_requests_total{outcome="too_large",transport="http"} 3`,
		`stormwatch_collector_requests_total{outcome="unsupported_media_type",transport="http"} 3`,
		`stormwatch_collector_requests_total{outcome="method_not_allowed",transport="http"} 2`,
		`stormwatch_collector_requests_total{outcome="not_found",transport="http"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(m, "requests_total"))
		}
	}
}

// rawBytesCodec sends a []byte as the message, so a test can put anything on the wire.
type rawBytesCodec struct{}

func (rawBytesCodec) Name() string { return "proto" }
func (rawBytesCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}
func (rawBytesCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

func TestGRPCErrorMapping(t *testing.T) {
	const limit = 64 << 10
	s := &sink{}
	c := start(t, Config{MaxRequestBytes: limit}, s)
	conn := dialGRPC(t, c)
	var resp coltracepb.ExportTraceServiceResponse
	if err := conn.Invoke(context.Background(), coltracepb.TraceService_Export_FullMethodName, request(0, 5, 0), &resp); err != nil {
		t.Fatal(err)
	}
	zeros := make([]byte, 4*limit)
	tests := []struct {
		name     string
		body     []byte
		opts     []grpc.CallOption
		code     codes.Code
		contains string
	}{
		{"malformed protobuf", []byte{0x0a, 0xff, 0xff, 0x01}, nil, codes.InvalidArgument, "malformed OTLP request"},
		{"over the limit", protoBody(t, request(0, 600, 0)), nil, codes.ResourceExhausted, "larger than max"},
		{"gzip bomb", zeros, []grpc.CallOption{grpc.UseCompressor(gzip.Name)}, codes.ResourceExhausted, "decompressed body exceeds the limit"},
		{"malformed under gzip", []byte{0x0a, 0xff, 0xff, 0x01}, []grpc.CallOption{grpc.UseCompressor(gzip.Name)}, codes.InvalidArgument, "malformed OTLP request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body
			var out []byte
			opts := append([]grpc.CallOption{grpc.ForceCodecV2(rawBytesCodec{})}, tc.opts...)
			err := conn.Invoke(context.Background(), coltracepb.TraceService_Export_FullMethodName, &body, &out, opts...)
			st := status.Convert(err)
			if st.Code() != tc.code || !strings.Contains(st.Message(), tc.contains) {
				t.Errorf("got %v %q, want %v containing %q", st.Code(), st.Message(), tc.code, tc.contains)
			}
			// Only overload may carry RetryInfo: the exporters would retry these forever otherwise.
			if len(st.Details()) != 0 {
				t.Errorf("details %v on a non-retryable error", st.Details())
			}
		})
	}
	// gzip compression of a good request still arrives whole.
	var resp2 coltracepb.ExportTraceServiceResponse
	if err := conn.Invoke(context.Background(), coltracepb.TraceService_Export_FullMethodName, request(5, 5, 0), &resp2, grpc.UseCompressor(gzip.Name)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the good spans", func() bool { return s.count() >= 10 })
	if n := s.count(); n != 10 {
		t.Errorf("%d spans stored, want exactly the 10 accepted", n)
	}
	// Counted as answered: the outcome is the error table's for the code the client got.
	m := scrape(t, c)
	for _, want := range []string{
		`stormwatch_collector_requests_total{outcome="malformed",transport="grpc"} 2`,
		`stormwatch_collector_requests_total{outcome="too_large",transport="grpc"} 2`,
		`stormwatch_collector_requests_total{outcome="accepted",transport="grpc"} 2`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(m, "requests_total"))
		}
	}
}

func TestPartialSuccessKeepsTheValidSpans(t *testing.T) {
	req := request(0, 3, 2)
	t.Run("grpc", func(t *testing.T) {
		s := &sink{}
		c := start(t, Config{}, s)
		var resp coltracepb.ExportTraceServiceResponse
		if err := dialGRPC(t, c).Invoke(context.Background(), coltracepb.TraceService_Export_FullMethodName, req, &resp); err != nil {
			t.Fatal(err)
		}
		checkPartial(t, c, s, &resp)
	})
	for _, enc := range []encoding{encProto, encJSON} {
		t.Run("http/"+enc.String(), func(t *testing.T) {
			s := &sink{}
			c := start(t, Config{}, s)
			body := protoBody(t, req)
			ct := contentTypeProto
			if enc == encJSON {
				body = otlpJSON(t, req)
				ct = contentTypeJSON
			}
			r := post(t, c, body, map[string]string{"Content-Type": ct})
			defer r.Body.Close()
			b, _ := io.ReadAll(r.Body)
			if r.StatusCode != 200 || r.Header.Get("Content-Type") != ct {
				t.Fatalf("status %d content type %q: %s", r.StatusCode, r.Header.Get("Content-Type"), b)
			}
			var resp coltracepb.ExportTraceServiceResponse
			var err error
			if enc == encJSON {
				err = protojson.Unmarshal(b, &resp)
			} else {
				err = proto.Unmarshal(b, &resp)
			}
			if err != nil {
				t.Fatalf("response %q: %v", b, err)
			}
			checkPartial(t, c, s, &resp)
		})
	}
}

func checkPartial(t *testing.T, c *Collector, s *sink, resp *coltracepb.ExportTraceServiceResponse) {
	t.Helper()
	ps := resp.GetPartialSuccess()
	if ps.GetRejectedSpans() != 2 || !strings.Contains(ps.GetErrorMessage(), "2 spans rejected") ||
		!strings.Contains(ps.GetErrorMessage(), "id") {
		t.Errorf("partial success %v, want 2 rejected with a reason", ps)
	}
	waitFor(t, "the valid spans", func() bool { return s.count() >= 3 })
	if n := s.count(); n != 3 {
		t.Errorf("%d spans kept, want the 3 valid ones", n)
	}
	if st := c.Stats(); st.AcceptedSpans != 3 || st.RejectedSpans != 2 || st.RefusedRequests != 0 {
		t.Errorf("stats %+v", st)
	}
	m := scrape(t, c)
	if !strings.Contains(m, `stormwatch_collector_rejected_spans_total{reason="invalid"} 2`) ||
		!strings.Contains(m, `outcome="partial"`) {
		t.Errorf("metrics:\n%s", grepLines(m, "rejected_spans"))
	}
}
