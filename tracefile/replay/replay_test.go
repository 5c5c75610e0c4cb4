package replay

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/tracefile"
)

const t0 = int64(1_700_000_000_000_000_000)

func ids(n int) (trace, span []byte) {
	trace, span = make([]byte, 16), make([]byte, 8)
	trace[0], span[0] = 0xaa, 0xbb
	binary.BigEndian.PutUint64(trace[8:], uint64(n/2+1)) // two spans per trace
	binary.BigEndian.PutUint64(span[:], uint64(n+1)|0xbb<<56)
	return trace, span
}

// request holds spans n..n+k-1, each 100ms long, ending at end.
func request(n, k int, end int64) *coltracepb.ExportTraceServiceRequest {
	ss := &tracepb.ScopeSpans{}
	for i := n; i < n+k; i++ {
		tid, sid := ids(i)
		ss.Spans = append(ss.Spans, &tracepb.Span{TraceId: tid, SpanId: sid, Name: fmt.Sprintf("s%d", i),
			Kind: tracepb.Span_SPAN_KIND_CLIENT, StartTimeUnixNano: uint64(end - 100e6), EndTimeUnixNano: uint64(end),
			Events: []*tracepb.Span_Event{{TimeUnixNano: uint64(end - 50e6), Name: "retry"}},
			Links:  []*tracepb.Span_Link{{TraceId: tid, SpanId: sid}},
			Attributes: []*commonpb.KeyValue{{Key: "http.request.method", Value: &commonpb.AnyValue{
				Value: &commonpb.AnyValue_StringValue{StringValue: "GET"}}}}})
	}
	return &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{{Key: "service.name",
			Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "edge"}}}}},
		ScopeSpans: []*tracepb.ScopeSpans{ss}}}}
}

// recording writes requests ending at t0 + the given offsets, 2 spans each.
func recording(t *testing.T, name string, offsets ...time.Duration) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	w, err := tracefile.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, off := range offsets {
		if err := w.WriteProto(request(2*i, 2, t0+int64(off))); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// fakeClock jumps forward by whatever the player waits for, so a schedule is checked exactly and
// instantly.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

func TestPlayerKeepsRelativeTimingAtSpeed(t *testing.T) {
	path := recording(t, "r.jsonl", 0, time.Second, 3*time.Second)
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := &fakeClock{now: start}
	p := NewPlayer([]string{path}, Options{Speed: 2, Clock: clock})
	var at []time.Duration
	err := p.PlayTo(context.Background(), spans.ConsumerFunc(func(_ context.Context, b *spans.Batch) error {
		now := clock.Now()
		at = append(at, now.Sub(start))
		for _, s := range b.Spans {
			// Shifted to now, durations kept.
			if s.EndUnixNano != now.UnixNano() || s.DurationNanos() != 100e6 || s.Events[0].TimeUnixNano != now.UnixNano()-50e6 {
				t.Errorf("span %s: end %d (now %d), duration %d", s.Name, s.EndUnixNano, now.UnixNano(), s.DurationNanos())
			}
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(at) != "[0s 500ms 1.5s]" {
		t.Fatalf("delivered at %v, want [0s 500ms 1.5s] (speed 2)", at)
	}
}

func TestPlayerSpeedChangeAndMaxSpeed(t *testing.T) {
	path := recording(t, "r.pb", 0, time.Second, 3*time.Second)
	start := time.Unix(2_000_000_000, 0)
	clock := &fakeClock{now: start}
	p := NewPlayer([]string{path}, Options{Speed: 1, Clock: clock})
	var at []time.Duration
	p.Run(context.Background(), func(_ context.Context, it *Item) error {
		at = append(at, clock.Now().Sub(start))
		if len(at) == 2 {
			p.SetSpeed(4) // the dashboard's "+": the remaining 2s of recording take 500ms
		}
		return nil
	})
	if fmt.Sprint(at) != "[0s 1s 1.5s]" {
		t.Fatalf("delivered at %v, want [0s 1s 1.5s]", at)
	}

	clock = &fakeClock{now: start}
	p = NewPlayer([]string{path}, Options{Speed: 0, Clock: clock})
	n := 0
	p.Run(context.Background(), func(_ context.Context, it *Item) error {
		n++
		if clock.Now() != start {
			t.Errorf("speed 0 waited")
		}
		return nil
	})
	if n != 3 {
		t.Fatalf("%d records", n)
	}
}

func TestPlayerPauseStopsTheClock(t *testing.T) {
	path := recording(t, "r.jsonl", 0, time.Second)
	clock := &fakeClock{now: time.Unix(2_000_000_000, 0)}
	p := NewPlayer([]string{path}, Options{Speed: 1, Clock: clock})
	delivered := make(chan time.Time, 2)
	p.SetPaused(true)
	done := make(chan error)
	go func() {
		done <- p.Run(context.Background(), func(_ context.Context, it *Item) error {
			delivered <- clock.Now()
			return nil
		})
	}()
	select {
	case <-delivered:
		t.Fatal("a paused player delivered")
	case <-time.After(50 * time.Millisecond):
	}
	if !p.Paused() {
		t.Fatal("Paused() = false")
	}
	p.SetPaused(false)
	first := <-delivered
	second := <-delivered
	if d := second.Sub(first); d != time.Second {
		t.Fatalf("records 1s apart delivered %v apart", d)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := p.Progress(); got != "4 spans played, done" {
		t.Fatalf("Progress() = %q", got)
	}
}

func TestPlayerLoopGivesEachPassNewTraceIDs(t *testing.T) {
	path := recording(t, "r.jsonl", 0, time.Second)
	clock := &fakeClock{now: time.Unix(2_000_000_000, 0)}
	p := NewPlayer([]string{path}, Options{Speed: 1, Loop: true, Clock: clock, Read: tracefile.ReadOptions{Raw: true}})
	ctx, cancel := context.WithCancel(context.Background())
	var items []*Item
	var at []time.Time
	err := p.Run(ctx, func(_ context.Context, it *Item) error {
		items = append(items, it)
		at = append(at, clock.Now())
		if len(items) == 6 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if items[2].Pass != 1 || items[4].Pass != 2 {
		t.Fatalf("passes %d %d", items[2].Pass, items[4].Pass)
	}
	a, b := items[0].Batch.Spans[0], items[2].Batch.Spans[0]
	if a.SpanID != b.SpanID || a.TraceID == b.TraceID {
		t.Fatalf("pass 1 must keep span ids and change trace ids: %v/%v %v/%v", a.SpanID, b.SpanID, a.TraceID, b.TraceID)
	}
	if b.Links[0].TraceID != b.TraceID {
		t.Fatal("links must follow the remapped trace ids")
	}
	// The clock keeps running forward: pass 1 starts a second after pass 0's last record.
	if d := at[2].Sub(at[1]); d != time.Second {
		t.Fatalf("gap between passes %v", d)
	}
	raw, err := items[2].ShiftedRaw()
	if err != nil {
		t.Fatal(err)
	}
	req := &coltracepb.ExportTraceServiceRequest{}
	proto.Unmarshal(raw, req)
	if got := req.ResourceSpans[0].ScopeSpans[0].Spans[0]; string(got.TraceId) != string(b.TraceID[:]) || int64(got.EndTimeUnixNano) != b.EndUnixNano {
		t.Fatal("the raw request must get the same shift and ids as the batch")
	}
}

// testCollector is an OTLP receiver made of the generated gRPC service and net/http: enough to
// check what replay sends before (and independently of) our collector.
type testCollector struct {
	coltracepb.UnimplementedTraceServiceServer
	mu       sync.Mutex
	spans    map[string]*tracepb.Span
	requests int
	auth     []string
	// grpcErr and httpStatus make every request fail; failFirst only the first n.
	grpcErr    error
	httpStatus int
	failFirst  atomic.Int32

	grpcAddr string
	httpURL  string
}

func newTestCollector(t *testing.T) *testCollector {
	c := &testCollector{spans: map[string]*tracepb.Span{}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, c)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	c.grpcAddr = lis.Addr().String()
	hs := httptest.NewServer(http.HandlerFunc(c.serveHTTP))
	t.Cleanup(hs.Close)
	c.httpURL = hs.URL
	return c
}

func (c *testCollector) store(req *coltracepb.ExportTraceServiceRequest, auth string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests++
	c.auth = append(c.auth, auth)
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				c.spans[string(s.SpanId)] = s
			}
		}
	}
}

func (c *testCollector) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	if c.grpcErr != nil {
		return nil, c.grpcErr
	}
	if c.failFirst.Add(-1) >= 0 {
		return nil, status.Error(codes.Unavailable, "busy")
	}
	md, _ := metadata.FromIncomingContext(ctx)
	c.store(req, strings.Join(md.Get("authorization"), ""))
	return &coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{RejectedSpans: 1, ErrorMessage: "one span was too old"}}, nil
}

func (c *testCollector) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/traces" {
		http.NotFound(w, r)
		return
	}
	if c.httpStatus != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(c.httpStatus)
		io.WriteString(w, `{"code":3,"message":"span 12 has no trace id"}`)
		return
	}
	if c.failFirst.Add(-1) >= 0 {
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req *coltracepb.ExportTraceServiceRequest
	var err error
	switch r.Header.Get("Content-Type") {
	case "application/json":
		req, err = tracefile.UnmarshalJSON(body)
	case "application/x-protobuf":
		req = &coltracepb.ExportTraceServiceRequest{}
		err = proto.Unmarshal(body, req)
	default:
		err = fmt.Errorf("content type %q", r.Header.Get("Content-Type"))
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.store(req, r.Header.Get("Authorization"))
	w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
	if r.Header.Get("Content-Type") == "application/json" {
		io.WriteString(w, `{"partialSuccess":{"rejectedSpans":"1","errorMessage":"one span was too old"}}`)
		return
	}
	b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{RejectedSpans: 1}})
	w.Write(b)
}

func (c *testCollector) target(p Protocol) Target {
	if p == GRPC {
		return Target{Endpoint: c.grpcAddr, Token: "s3cret"}
	}
	return Target{Endpoint: c.httpURL, Protocol: p, Token: "s3cret"}
}

func TestSendReplaysEveryProtocol(t *testing.T) {
	path := recording(t, "r.jsonl", 0, 200*time.Millisecond, 400*time.Millisecond, time.Second)
	for _, p := range []Protocol{GRPC, HTTPProtobuf, HTTPJSON} {
		t.Run(string(p), func(t *testing.T) {
			c := newTestCollector(t)
			before := time.Now()
			st, err := Send(context.Background(), NewPlayer([]string{path}, Options{Speed: 0}), SendOptions{Target: c.target(p), Connections: 2})
			if err != nil {
				t.Fatal(err)
			}
			if st.Requests != 4 || st.Spans != 4 || st.Rejected != 4 {
				t.Fatalf("stats %+v: want 4 requests, 8 spans of which the collector rejected 4", st)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if len(c.spans) != 8 || c.requests != 4 {
				t.Fatalf("collector got %d spans in %d requests", len(c.spans), c.requests)
			}
			for _, s := range c.spans {
				end := time.Unix(0, int64(s.EndTimeUnixNano))
				if end.Before(before) || end.After(time.Now()) || s.EndTimeUnixNano-s.StartTimeUnixNano != 100e6 {
					t.Fatalf("span %s ends %v: not shifted to now with its duration kept", s.Name, end)
				}
			}
			for _, a := range c.auth {
				if a != "Bearer s3cret" {
					t.Fatalf("authorization %q", a)
				}
			}
		})
	}
}

func TestBlastSendsPreEncodedRequests(t *testing.T) {
	path := recording(t, "r.pb", 0, time.Second, 2*time.Second)
	for _, p := range []Protocol{GRPC, HTTPProtobuf, HTTPJSON} {
		t.Run(string(p), func(t *testing.T) {
			c := newTestCollector(t)
			now := time.Now()
			reqs, err := LoadRequests([]string{path}, tracefile.ReadOptions{}, p, now)
			if err != nil {
				t.Fatal(err)
			}
			st, err := Blast(context.Background(), reqs, SendOptions{Target: c.target(p), Connections: 3})
			if err != nil {
				t.Fatal(err)
			}
			if st.Requests != 3 {
				t.Fatalf("each request once: sent %d", st.Requests)
			}
			// The recording is shifted to end now.
			var last uint64
			for _, s := range c.spans {
				last = max(last, s.EndTimeUnixNano)
			}
			if int64(last) != now.UnixNano() {
				t.Fatalf("last span ends %d, want %d", last, now.UnixNano())
			}
			// For a duration it goes round and round.
			st, err = Blast(context.Background(), reqs, SendOptions{Target: c.target(p), Connections: 2, Duration: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			c.mu.Lock()
			got := c.requests
			c.mu.Unlock()
			if st.Requests <= 3 || int64(got) < st.Requests+3 {
				t.Fatalf("blast for a duration: stats %d requests, collector %d", st.Requests, got)
			}
		})
	}
}

func TestSendErrorsAreClear(t *testing.T) {
	path := recording(t, "r.jsonl", 0)
	// A port nothing listens on.
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := lis.Addr().String()
	lis.Close()
	c := newTestCollector(t)
	rejecting := newTestCollector(t)
	rejecting.grpcErr = status.Error(codes.InvalidArgument, "span 12 has no trace id")
	rejecting.httpStatus = http.StatusBadRequest
	cases := []struct {
		name   string
		target Target
		want   []string
	}{
		{"unreachable grpc", Target{Endpoint: dead}, []string{"cannot reach " + dead, "is a collector listening there?"}},
		{"unreachable http", Target{Endpoint: "http://" + dead}, []string{"cannot reach http://" + dead + "/v1/traces", "connection refused"}},
		{"rejected grpc", Target{Endpoint: rejecting.grpcAddr}, []string{"rejected the request: InvalidArgument: span 12 has no trace id"}},
		{"rejected http", Target{Endpoint: rejecting.httpURL}, []string{"rejected the request: 400 Bad Request: span 12 has no trace id"}},
		{"bad endpoint", Target{Endpoint: "localhost"}, []string{`endpoint "localhost": want host:port or an http:// URL`}},
		{"bad scheme", Target{Endpoint: "ftp://x:1"}, []string{`scheme "ftp"`}},
		{"insecure https", Target{Endpoint: "https://x:1", Insecure: true}, []string{"--insecure contradicts https://"}},
		{"wrong path", Target{Endpoint: c.httpURL + "/nope"}, []string{"404 Not Found"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Send(context.Background(), NewPlayer([]string{path}, Options{}), SendOptions{Target: tc.target, Retries: 1})
			if err == nil {
				t.Fatal("no error")
			}
			t.Log(err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	_, err := Send(context.Background(), NewPlayer([]string{filepath.Join(t.TempDir(), "missing.jsonl")}, Options{}), SendOptions{Target: c.target(GRPC)})
	if err == nil || !strings.Contains(err.Error(), "missing.jsonl") {
		t.Errorf("missing file: %v", err)
	}
}

func TestSendRetriesOverloadThenSucceeds(t *testing.T) {
	path := recording(t, "r.jsonl", 0)
	for _, p := range []Protocol{GRPC, HTTPProtobuf} {
		c := newTestCollector(t)
		c.failFirst.Store(2)
		st, err := Send(context.Background(), NewPlayer([]string{path}, Options{}), SendOptions{Target: c.target(p)})
		if err != nil || st.Requests != 1 {
			t.Fatalf("%s: %v, %+v", p, err, st)
		}
	}
}

// The wire patch must give what decoding, shifting and re-encoding gives.
func TestShiftRequestOnTheWireMatchesGenerated(t *testing.T) {
	for _, pass := range []int{0, 3} {
		raw, _ := proto.Marshal(request(0, 5, t0))
		got, err := ShiftRequest(raw, -12345, pass)
		if err != nil {
			t.Fatal(err)
		}
		want, err := shiftGenerated(raw, -12345, pass)
		if err != nil {
			t.Fatal(err)
		}
		g, w := &coltracepb.ExportTraceServiceRequest{}, &coltracepb.ExportTraceServiceRequest{}
		proto.Unmarshal(got, g)
		proto.Unmarshal(want, w)
		if !proto.Equal(g, w) {
			t.Fatalf("pass %d: wire shift differs from the generated one", pass)
		}
		if s := g.ResourceSpans[0].ScopeSpans[0].Spans[0]; int64(s.EndTimeUnixNano) != t0-12345 {
			t.Fatalf("end %d", s.EndTimeUnixNano)
		}
		orig := &coltracepb.ExportTraceServiceRequest{}
		proto.Unmarshal(raw, orig)
		if int64(orig.ResourceSpans[0].ScopeSpans[0].Spans[0].EndTimeUnixNano) != t0 {
			t.Fatal("ShiftRequest changed its input")
		}
	}
}
