package grpcgzip

import (
	"bytes"
	"compress/gzip"
	"context"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc/encoding"
	"google.golang.org/protobuf/proto"

	"github.com/stormwatch/stormwatch/collector"
	"github.com/stormwatch/stormwatch/collector/collectortest"
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
	if code, msg := collectortest.RawGRPC(t, c.GRPCAddr(), true, "gzip", zipped.Bytes()); code != "0" {
		t.Fatalf("grpc-status %q (%s), want 0: the compressed request was refused", code, msg)
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
