package collector

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	sdklog "go.opentelemetry.io/otel/sdk/log"
)

// rawGRPC sends one Export call framed by hand over HTTP/2 - the message's compressed flag and
// grpc-encoding as given, whatever the payload - and returns the grpc-status and grpc-message.
// A stock client cannot send a body that claims gzip and is not.
func rawGRPC(t *testing.T, addr string, compressed bool, encoding string, payload []byte) (code, msg string) {
	t.Helper()
	frame := make([]byte, 5, 5+len(payload))
	if compressed {
		frame[0] = 1
	}
	binary.BigEndian.PutUint32(frame[1:], uint32(len(payload)))
	frame = append(frame, payload...)
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true) // gRPC without TLS: HTTP/2 with prior knowledge
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		"http://"+addr+"/opentelemetry.proto.collector.trace.v1.TraceService/Export", bytes.NewReader(frame))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	if encoding != "" {
		req.Header.Set("grpc-encoding", encoding)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body) // trailers arrive after the body
	code, msg = resp.Trailer.Get("grpc-status"), resp.Trailer.Get("grpc-message")
	if code == "" { // a trailers-only answer
		code, msg = resp.Header.Get("grpc-status"), resp.Header.Get("grpc-message")
	}
	return code, msg
}

// TestGRPCBodyThatClaimsGzipAndIsNot: a message flagged gzip-compressed that is not gzip (or is
// cut short) is bad input - INVALID_ARGUMENT, counted malformed - as over HTTP, not INTERNAL; a
// genuine one is still read; an uncompressed message under grpc-encoding gzip is read as plain;
// the spans accepted before are kept.
func TestGRPCBodyThatClaimsGzipAndIsNot(t *testing.T) {
	s := &sink{}
	c := start(t, Config{}, s)
	good := protoBody(t, request(0, 4, 0))
	zipped := gzipped(t, good)
	for _, tc := range []struct {
		name       string
		compressed bool
		payload    []byte
		code, msg  string
	}{
		{"genuine gzip", true, zipped, "0", ""},
		{"plain protobuf flagged gzip", true, good, "3", "gzip"},
		{"gzip cut short", true, zipped[:len(zipped)/2], "3", "gzip"},
		{"unflagged under grpc-encoding gzip", false, good, "0", ""},
	} {
		code, msg := rawGRPC(t, c.GRPCAddr(), tc.compressed, "gzip", tc.payload)
		if code != tc.code || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s: grpc-status %s %q, want %s containing %q", tc.name, code, msg, tc.code, tc.msg)
		}
	}
	waitFor(t, "the good spans", func() bool { return s.count() >= 8 })
	if n := s.count(); n != 8 {
		t.Errorf("%d spans stored, want the 8 of the two good requests", n)
	}
	m := scrape(t, c)
	for _, want := range []string{
		`stormwatch_collector_requests_total{outcome="malformed",transport="grpc"} 2`,
		`stormwatch_collector_requests_total{outcome="accepted",transport="grpc"} 2`,
		`stormwatch_collector_requests_total{outcome="internal",transport="grpc"} 0`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(m, "requests_total"))
		}
	}
}

// TestGzipLogsOverGRPCAreIgnored: a compressed request of another signal passes through the same
// decompressor as traces, and is answered and counted as ignored, its body never decompressed.
func TestGzipLogsOverGRPCAreIgnored(t *testing.T) {
	s := &sink{}
	c := start(t, Config{}, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	exp, err := otlploggrpc.New(ctx, otlploggrpc.WithEndpoint(c.GRPCAddr()), otlploggrpc.WithInsecure(),
		otlploggrpc.WithCompressor("gzip"), otlploggrpc.WithRetry(otlploggrpc.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Shutdown(ctx)
	var rec sdklog.Record
	rec.SetBody(attribute.StringValue("order placed"))
	if err := exp.Export(ctx, []sdklog.Record{rec}); err != nil {
		t.Fatalf("compressed logs: %v", err)
	}
	if st := c.Stats(); st.IgnoredLogsRequests != 1 || s.count() != 0 {
		t.Errorf("ignored logs %d, spans %d; want 1 and 0", st.IgnoredLogsRequests, s.count())
	}
}
