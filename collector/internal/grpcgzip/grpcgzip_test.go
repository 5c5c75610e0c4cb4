package grpcgzip

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc/encoding"
	"google.golang.org/protobuf/proto"

	"github.com/stormwatch/stormwatch/collector"
	"github.com/stormwatch/stormwatch/spans"
)

type sink struct {
	mu    sync.Mutex
	names []string
}

func (s *sink) ConsumeBatch(_ context.Context, b *spans.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range b.Spans {
		s.names = append(s.names, b.Spans[i].Name)
	}
	return nil
}

func (s *sink) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.names...)
}

// TestCollectorRegistersGzip: the registration is the collector's, not a neighbour's.
func TestCollectorRegistersGzip(t *testing.T) {
	if encoding.GetCompressor("gzip") == nil {
		t.Fatal("gzip is not registered with grpc-go in a binary that imports only the collector: " +
			"OTLP/gRPC exporters configured with compression: gzip would be refused")
	}
}

// TestGzipExportOverGRPC sends one gzip-compressed Export call, framed by hand, and expects the
// spans to reach the consumer and the call to end with grpc-status 0.
func TestGzipExportOverGRPC(t *testing.T) {
	var s sink
	c, err := collector.New(collector.Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: collector.Disabled}, &s)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})

	req := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{
			{TraceId: bytes.Repeat([]byte{1}, 16), SpanId: bytes.Repeat([]byte{2}, 8), Name: "compressed-1"},
			{TraceId: bytes.Repeat([]byte{1}, 16), SpanId: bytes.Repeat([]byte{3}, 8), Name: "compressed-2"},
		}}},
	}}}
	msg, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	if _, err := zw.Write(msg); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	// A gRPC length-prefixed message: compressed flag 1, big-endian length, the gzip bytes.
	frame := make([]byte, 5, 5+zipped.Len())
	frame[0] = 1
	binary.BigEndian.PutUint32(frame[1:], uint32(zipped.Len()))
	frame = append(frame, zipped.Bytes()...)

	// gRPC without TLS is HTTP/2 with prior knowledge (h2c).
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true) // gRPC without TLS: HTTP/2 with prior knowledge
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost,
		"http://"+c.GRPCAddr()+"/opentelemetry.proto.collector.trace.v1.TraceService/Export", bytes.NewReader(frame))
	if err != nil {
		t.Fatal(err)
	}
	hreq.Header.Set("Content-Type", "application/grpc")
	hreq.Header.Set("TE", "trailers")
	hreq.Header.Set("grpc-encoding", "gzip")
	hreq.Header.Set("grpc-accept-encoding", "gzip")
	resp, err := tr.RoundTrip(hreq)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil { // trailers arrive after the body
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP status %d, want 200", resp.StatusCode)
	}
	status := resp.Trailer.Get("grpc-status")
	if status == "" {
		status = resp.Header.Get("grpc-status") // a trailers-only answer
	}
	if status != "0" {
		t.Fatalf("grpc-status %q (%s), want 0: the compressed request was refused",
			status, resp.Trailer.Get("grpc-message")+resp.Header.Get("grpc-message"))
	}

	deadline := time.Now().Add(10 * time.Second)
	for len(s.got()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the consumer got %q, want both spans of the compressed request", s.got())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := s.got(); got[0] != "compressed-1" || got[1] != "compressed-2" || len(got) != 2 {
		t.Fatalf("the consumer got %q, want [compressed-1 compressed-2]", got)
	}
}
