package collector

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stormwatch/stormwatch/spans"
)

// withNested is request(first, n, 0) with, on its first span, an attribute the analyzer does not
// read whose value is a string inside depth maps.
func withNested(first, n, depth int) *coltracepb.ExportTraceServiceRequest {
	req := request(first, n, 0)
	v := &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "leaf"}}
	for range depth {
		v = &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{
			Values: []*commonpb.KeyValue{{Key: "k", Value: v}}}}}
	}
	sp := req.ResourceSpans[0].ScopeSpans[0].Spans[0]
	sp.Attributes = append(sp.Attributes, &commonpb.KeyValue{Key: "app.payload", Value: v})
	return req
}

// TestNestingLimitAtTheDoor: a request whose attribute value nests deeper than the one limit of
// the decoders is refused at the door - 400 / INVALID_ARGUMENT, counted malformed - in protobuf
// over both transports and in JSON; requests within it are acknowledged, recorded to .jsonl and
// read back from the recording, every span of them, with no record skipped.
func TestNestingLimitAtTheDoor(t *testing.T) {
	w, path := newRecording(t, "jsonl")
	s := &sink{}
	c := start(t, Config{}, s, WithRecorder(w))
	conn := dialGRPC(t, c)
	export := func(req *coltracepb.ExportTraceServiceRequest) error {
		var resp coltracepb.ExportTraceServiceResponse
		return conn.Invoke(context.Background(), coltracepb.TraceService_Export_FullMethodName, req, &resp)
	}

	accepted := 0
	for i, req := range []*coltracepb.ExportTraceServiceRequest{request(0, 3, 0), withNested(3, 2, spans.MaxValueDepth)} {
		if err := export(req); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		accepted += len(req.ResourceSpans[0].ScopeSpans[0].Spans)
	}
	r := post(t, c, otlpJSON(t, withNested(5, 2, spans.MaxValueDepth)), map[string]string{"Content-Type": contentTypeJSON})
	r.Body.Close()
	if r.StatusCode != 200 {
		t.Fatalf("JSON at the limit: %d", r.StatusCode)
	}
	accepted += 2

	for _, depth := range []int{spans.MaxValueDepth + 1, 10_000} {
		deep := withNested(100, 2, depth)
		if st := status.Convert(export(deep)); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "nested too deeply") {
			t.Errorf("gRPC, %d deep: %v %q; want INVALID_ARGUMENT saying nested too deeply", depth, st.Code(), st.Message())
		}
		for _, b := range []struct {
			ct   string
			body []byte
		}{{contentTypeProto, protoBody(t, deep)}, {contentTypeJSON, otlpJSON(t, withNested(100, 2, min(depth, 1000)))}} {
			r := post(t, c, b.body, map[string]string{"Content-Type": b.ct})
			msg, _ := io.ReadAll(r.Body)
			r.Body.Close()
			if r.StatusCode != 400 || !strings.Contains(string(msg), "nested too deeply") {
				t.Errorf("HTTP %s, %d deep: %d %s; want 400 saying nested too deeply", b.ct, depth, r.StatusCode, msg)
			}
		}
	}
	waitFor(t, "the accepted spans", func() bool { return s.count() >= accepted })
	if m := scrape(t, c); !strings.Contains(m, `outcome="malformed",transport="grpc"} 2`) || !strings.Contains(m, `outcome="malformed",transport="http"} 4`) {
		t.Errorf("metrics:\n%s", grepLines(m, "malformed"))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Shutdown(ctx); err != nil { // flushes and closes the recording
		t.Fatal(err)
	}
	records, names := recording(t, path)
	read := len(names)
	if records != 3 || read != accepted || s.count() != accepted {
		t.Errorf("recording: %d records, %d spans; consumer %d spans; want 3 records and the %d spans acknowledged", records, read, s.count(), accepted)
	}
}
