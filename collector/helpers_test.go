package collector

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/stormwatch/stormwatch/spans"
)

// sink is a test consumer that keeps every batch it is given.
type sink struct {
	mu      sync.Mutex
	batches []*spans.Batch
	// gate, when not nil, blocks each ConsumeBatch until a value arrives or it is closed: a
	// consumer as slow as the test wants.
	gate chan struct{}
	// err, when set, is returned after keeping nothing.
	err error
}

func (s *sink) ConsumeBatch(ctx context.Context, b *spans.Batch) error {
	if s.gate != nil {
		<-s.gate
	}
	if s.err != nil {
		return s.err
	}
	s.mu.Lock()
	s.batches = append(s.batches, b)
	s.mu.Unlock()
	return nil
}

func (s *sink) spans() []spans.Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []spans.Span
	for _, b := range s.batches {
		out = append(out, b.Spans...)
	}
	return out
}

func (s *sink) count() int { return len(s.spans()) }

// waitFor polls cond until it holds or the deadline passes; delivery to the consumer is
// asynchronous, so tests wait for the outcome rather than sleep a guessed time.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// start runs a collector on loopback port 0 for the test and shuts it down at cleanup.
func start(t *testing.T, cfg Config, next spans.Consumer, opts ...Option) *Collector {
	t.Helper()
	if cfg.GRPCAddr == "" {
		cfg.GRPCAddr = "127.0.0.1:0"
	}
	if cfg.HTTPAddr == "" {
		cfg.HTTPAddr = "127.0.0.1:0"
	}
	c, err := New(cfg, next, opts...)
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
	return c
}

// traceID and spanID build distinct, valid ids from small numbers.
func traceID(n int) []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b[8:], uint64(n)+1)
	b[0] = 0xab
	return b
}

func spanID(n int) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, uint64(n)+1)
	return b
}

// request builds an OTLP request with n valid spans (ids from first on) and bad spans with
// invalid ids, as a misbehaving exporter might send them.
func request(first, n, bad int) *coltracepb.ExportTraceServiceRequest {
	var ps []*tracepb.Span
	for i := first; i < first+n; i++ {
		ps = append(ps, &tracepb.Span{
			TraceId:           traceID(i / 4),
			SpanId:            spanID(i),
			Name:              fmt.Sprintf("GET /item/%d", i),
			Kind:              tracepb.Span_SPAN_KIND_CLIENT,
			StartTimeUnixNano: 1_700_000_000_000_000_000 + uint64(i),
			EndTimeUnixNano:   1_700_000_000_100_000_000 + uint64(i),
			Attributes: []*commonpb.KeyValue{
				{Key: spans.AttrHTTPMethod, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "GET"}}},
				{Key: spans.AttrAttempt, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: int64(i)}}},
			},
		})
	}
	for i := range bad {
		ps = append(ps, &tracepb.Span{TraceId: []byte{1, 2, 3}, SpanId: spanID(1000 + i), Name: "bad"})
	}
	return &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
			{Key: spans.AttrServiceName, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "checkout"}}},
		}},
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: ps}},
	}}}
}

func protoBody(t testing.TB, req *coltracepb.ExportTraceServiceRequest) []byte {
	t.Helper()
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// post sends body to the collector's OTLP/HTTP endpoint with the given headers.
func post(t *testing.T, c *Collector, body []byte, headers map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+c.HTTPAddr()+tracesPath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// fakeRecorder keeps what the collector records.
type fakeRecorder struct {
	mu      sync.Mutex
	bodies  [][]byte
	json    []bool
	flushes int
	closed  bool
	// gate, when not nil, blocks each WriteRequest like a slow disk.
	gate chan struct{}
}

func (r *fakeRecorder) WriteRequest(body []byte, isJSON bool) error {
	if r.gate != nil {
		<-r.gate
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return fmt.Errorf("write after close")
	}
	r.bodies = append(r.bodies, bytes.Clone(body))
	r.json = append(r.json, isJSON)
	return nil
}

func (r *fakeRecorder) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushes++
	return nil
}

func (r *fakeRecorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return nil
}

func (r *fakeRecorder) snapshot() (bodies int, flushes int, closed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.bodies), r.flushes, r.closed
}
