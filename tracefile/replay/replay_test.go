package replay

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
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
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/stormwatch/stormwatch/fixtures"
	"github.com/stormwatch/stormwatch/internal/deadaddr"
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
	// Half a second past a whole one: the pass's shift is rounded down to whole seconds.
	start := time.Date(2030, 1, 1, 0, 0, 0, 500e6, time.UTC)
	clock := &fakeClock{now: start}
	p := NewPlayer([]string{path}, Options{Speed: 2, Clock: clock})
	var at []time.Duration
	wantDelta := start.Add(-500*time.Millisecond).UnixNano() - t0
	err := p.PlayTo(context.Background(), spans.ConsumerFunc(func(_ context.Context, b *spans.Batch) error {
		at = append(at, clock.Now().Sub(start))
		for _, s := range b.Spans {
			// One shift for the pass: every span keeps its recorded time plus the same delta,
			// whenever its record is delivered; durations and event offsets are kept.
			recorded := t0 + int64(at[len(at)-1])*2 // speed 2: delivered at half the recorded offset
			if s.EndUnixNano != recorded+wantDelta || s.DurationNanos() != 100e6 || s.Events[0].TimeUnixNano != s.EndUnixNano-50e6 {
				t.Errorf("span %s: end %d, want %d; duration %d", s.Name, s.EndUnixNano, recorded+wantDelta, s.DurationNanos())
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
	var shifts []Shift
	p.Run(context.Background(), func(_ context.Context, it *Item) error {
		at = append(at, clock.Now().Sub(start))
		shifts = append(shifts, it.Shift)
		if len(at) == 2 {
			p.SetSpeed(4) // the dashboard's "+": the remaining 2s of recording take 500ms
		}
		return nil
	})
	if fmt.Sprint(at) != "[0s 1s 1.5s]" {
		t.Fatalf("delivered at %v, want [0s 1s 1.5s]", at)
	}
	if shifts[0] != shifts[1] || shifts[1] != shifts[2] {
		t.Fatalf("a speed change mid-pass changed the shift: %+v", shifts)
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
	blocked := make(chan struct{}, 1)
	p.pausedWait = func() {
		select {
		case blocked <- struct{}{}:
		default:
		}
	}
	p.SetPaused(true)
	done := make(chan error)
	go func() {
		done <- p.Run(context.Background(), func(_ context.Context, it *Item) error {
			delivered <- clock.Now()
			return nil
		})
	}()
	// The player either blocks on the pause before its first record or delivers it.
	select {
	case <-delivered:
		t.Fatal("a paused player delivered")
	case <-blocked:
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
	salts := uint64(0)
	p := NewPlayer([]string{path}, Options{Speed: 1, Loop: true, Clock: clock, Read: tracefile.ReadOptions{Raw: true},
		Salt: func() uint64 { salts++; return salts << 8 }})
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
	if items[0].Shift != items[1].Shift || items[2].Shift != items[3].Shift || items[0].Shift == items[2].Shift {
		t.Fatalf("one shift per pass: %+v", items[:4])
	}
	// Each pass, the first included, XORs its own salt into the second half of the trace ids.
	for i, it := range items {
		rec, _ := ids(2 * (i % 2))
		want := spans.TraceID(rec)
		want[14] ^= byte(i/2 + 1)
		if it.Shift.Salt != uint64(i/2+1)<<8 || it.Batch.Spans[0].TraceID != want {
			t.Fatalf("record %d: trace id %s (salt %#x), want %s", i, it.Batch.Spans[0].TraceID, it.Shift.Salt, want)
		}
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
				c.spans[string(s.TraceId)+string(s.SpanId)] = s
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
			// One whole-second shift for all: the first request's spans end within the second
			// before it was sent, the others keep their recorded distance from it.
			delta := int64(0)
			for _, s := range c.spans {
				if s.Name == "s0" {
					delta = int64(s.EndTimeUnixNano) - t0
				}
			}
			if end := t0 + delta; delta%1e9 != 0 || end > time.Now().UnixNano() || end <= before.UnixNano()-1e9 {
				t.Fatalf("first span ends %v, sent after %v; shift %d", time.Unix(0, end), before, delta)
			}
			recorded := []time.Duration{0, 200 * time.Millisecond, 400 * time.Millisecond, time.Second}
			for _, s := range c.spans {
				var n int
				fmt.Sscanf(s.Name, "s%d", &n)
				if int64(s.EndTimeUnixNano) != t0+int64(recorded[n/2])+delta || s.EndTimeUnixNano-s.StartTimeUnixNano != 100e6 {
					t.Fatalf("span %s ends %d: not shifted by %d with its duration kept", s.Name, s.EndTimeUnixNano, delta)
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
			// The recording is shifted by whole seconds to end at most a second before now.
			var last uint64
			for _, s := range c.spans {
				last = max(last, s.EndTimeUnixNano)
			}
			if d := now.UnixNano() - int64(last); d < 0 || d >= int64(time.Second) || (int64(last)-t0-2e9)%1e9 != 0 {
				t.Fatalf("last span ends %d, want within the second before %d and moved by whole seconds", last, now.UnixNano())
			}
			// For a duration it goes round and round: more than the three requests in a second,
			// which a loaded machine running the tests of every package at once still gives
			// (in 200 ms it once sent only two).
			st, err = Blast(context.Background(), reqs, SendOptions{Target: c.target(p), Connections: 2, Duration: time.Second})
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
	dead := deadaddr.Loopback(t)
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
	for _, sh := range []Shift{{Delta: -12345}, {Delta: -12345, Salt: 0x5a5a}, {Salt: 7}} {
		raw, _ := proto.Marshal(request(0, 5, t0))
		got, err := sh.Request(raw)
		if err != nil {
			t.Fatal(err)
		}
		want, err := sh.generated(raw)
		if err != nil {
			t.Fatal(err)
		}
		g, w := &coltracepb.ExportTraceServiceRequest{}, &coltracepb.ExportTraceServiceRequest{}
		proto.Unmarshal(got, g)
		proto.Unmarshal(want, w)
		if !proto.Equal(g, w) {
			t.Fatalf("%+v: wire shift differs from the generated one", sh)
		}
		if s := g.ResourceSpans[0].ScopeSpans[0].Spans[0]; int64(s.EndTimeUnixNano) != t0+sh.Delta {
			t.Fatalf("end %d", s.EndTimeUnixNano)
		}
		orig := &coltracepb.ExportTraceServiceRequest{}
		proto.Unmarshal(raw, orig)
		if int64(orig.ResourceSpans[0].ScopeSpans[0].Spans[0].EndTimeUnixNano) != t0 {
			t.Fatal("Shift.Request changed its input")
		}
	}
}

// attrSpan is one span with the given attributes.
func attrSpan(n int, attrs ...*commonpb.KeyValue) *tracepb.Span {
	tid, sid := ids(n)
	return &tracepb.Span{TraceId: tid, SpanId: sid, Name: fmt.Sprintf("s%d", n), Kind: tracepb.Span_SPAN_KIND_CLIENT,
		StartTimeUnixNano: uint64(t0), EndTimeUnixNano: uint64(t0 + 1e9), Attributes: attrs}
}

func kv(k string, v *commonpb.AnyValue) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: v}
}
func str(v string) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}
}
func strs(v string) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: []*commonpb.AnyValue{str(v)}}}}
}

// Every attribute whose value is an instant moves with the spans, in the form it was written in;
// durations and everything else stay. The wire patch, the generated fallback and the batch shift
// must agree.
func TestShiftMovesTimeValuedAttributes(t *testing.T) {
	// t0 is 2023-11-14T22:13:20Z.
	req := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{
		attrSpan(0, kv(spans.AttrDeadline, &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: t0 + 5e8}}),
			kv(spans.AttrDeadlineRemaining, &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 500}})),
		attrSpan(1, kv(spans.AttrDeadline, &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: float64(t0 + 5e8)}})),
		attrSpan(2, kv(spans.AttrDeadline, str(fmt.Sprint(t0+5e8)))),
		attrSpan(3, kv(spans.AttrReqHeaderDeadline, strs("2023-11-14T22:13:20.500Z")),
			kv(spans.AttrResHeaderRetryAfter, strs("Tue, 14 Nov 2023 22:13:25 GMT"))),
		attrSpan(4, kv(spans.AttrReqHeaderDeadline, str("1700000000500")), kv(spans.AttrResHeaderRetryAfter, strs("2")),
			kv(spans.AttrReqHeaderIdempotencyKey, str("1700000000500"))),
		attrSpan(5, kv(spans.AttrReqHeaderDeadline, str("2023-11-15T00:13:20.5+02:00"))),
	}}}}}}
	raw, _ := proto.Marshal(req)
	const delta = (3*24*3600 + 7) * int64(time.Second)
	sh := Shift{Delta: delta, Salt: 0x1234}
	want := map[string]string{
		"s0 " + spans.AttrDeadline:                "1700259207500000000",
		"s0 " + spans.AttrDeadlineRemaining:       "500",
		"s1 " + spans.AttrDeadline:                "1.7002592075e+18",
		"s2 " + spans.AttrDeadline:                "1700259207500000000",
		"s3 " + spans.AttrReqHeaderDeadline:       `2023-11-17T22:13:27.500Z`,
		"s3 " + spans.AttrResHeaderRetryAfter:     `Fri, 17 Nov 2023 22:13:32 GMT`,
		"s4 " + spans.AttrReqHeaderDeadline:       "1700259207500",
		"s4 " + spans.AttrResHeaderRetryAfter:     `2`,
		"s4 " + spans.AttrReqHeaderIdempotencyKey: "1700000000500",
		"s5 " + spans.AttrReqHeaderDeadline:       "2023-11-18T00:13:27.5+02:00",
	}
	check := func(how string, b *spans.Batch) {
		t.Helper()
		n := 0
		for _, s := range b.Spans {
			for _, a := range s.Attrs {
				k := s.Name + " " + a.Key
				if !strings.Contains(a.AsString(), want[k]) || want[k] == "" {
					t.Errorf("%s: %s = %s, want %s", how, k, a.AsString(), want[k])
				}
				n++
			}
			if s.EndUnixNano != t0+1e9+delta {
				t.Errorf("%s: %s ends %d", how, s.Name, s.EndUnixNano)
			}
		}
		if n != len(want) {
			t.Errorf("%s: %d attributes, want %d", how, n, len(want))
		}
	}
	wire, err := sh.Request(raw)
	if err != nil {
		t.Fatal(err)
	}
	gen, err := sh.generated(raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := planProto(raw).apply(raw, sh); !ok {
		t.Fatal("the plan gave up on values that keep their length")
	}
	for how, b := range map[string][]byte{"wire": wire, "generated": gen} {
		batch, err := spans.DecodeProto(b, spans.DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		check(how, batch)
	}
	batch, _ := spans.DecodeProto(raw, spans.DecodeOptions{})
	sh.Batch(batch)
	check("batch", batch)

	// A Unix-nanosecond deadline whose varint grows cannot be patched in place: the generated
	// types take over and give the same answer.
	small := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{
		attrSpan(0, kv(spans.AttrDeadline, &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 1<<56 - 1}})),
	}}}}}}
	raw, _ = proto.Marshal(small)
	if p := planProto(raw); p == nil {
		t.Fatal("no plan for a request with a varint deadline")
	} else if _, ok := p.apply(raw, sh); ok {
		t.Fatal("the plan patched a varint that grows")
	}
	got, err := sh.Request(raw)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := spans.DecodeProto(got, spans.DecodeOptions{})
	if v, _ := b.Spans[0].Int(spans.AttrDeadline); v != 1<<56-1+delta {
		t.Fatalf("deadline %d, want %d", v, 1<<56-1+delta)
	}
}

// The planner reads a request as the generated code does: one with a field number protobuf does
// not allow gets no plan (the generated code refuses it, and so does Shift.Request), and one with
// what the generated code keeps as an unknown field (a deprecated group, here one numbered as the
// span's start time and holding such a field) or merges (a KeyValue's value sent twice) gets the
// plan whose patch is the generated shift.
func TestPlanProtoReadsWhatTheGeneratedCodeReads(t *testing.T) {
	// inSpan is a request of one span with a deadline attribute, extra appended to the span.
	inSpan := func(extra ...byte) []byte {
		sp, _ := proto.Marshal(attrSpan(0, kv(spans.AttrDeadline, &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: t0 + 5e8}})))
		b := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), append(sp, extra...)) // ScopeSpans.spans
		b = protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), b)                     // ResourceSpans.scope_spans
		return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), b)                  // the request's resource_spans
	}
	varint := func(num protowire.Number) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), 1)
	}
	sh := Shift{Delta: 3 * int64(time.Second), Salt: 0x1234}
	for name, raw := range map[string][]byte{
		"field 0":                           inSpan(varint(0)...),
		"field 2^29":                        inSpan(varint(1 << 29)...),
		"group 2^29":                        inSpan(protowire.AppendTag(protowire.AppendTag(nil, 1<<29, protowire.StartGroupType), 1<<29, protowire.EndGroupType)...),
		"field 0 beside the resource spans": append(inSpan(), varint(0)...),
	} {
		if proto.Unmarshal(raw, &coltracepb.ExportTraceServiceRequest{}) == nil {
			t.Fatalf("%s: the generated code accepts the request: not a case of this test", name)
		}
		if p := planProto(raw); p != nil {
			t.Errorf("%s: plan %v for a request the generated code refuses", name, p)
		}
		if _, err := sh.Request(raw); err == nil {
			t.Errorf("%s: Shift.Request shifted a request the generated code refuses", name)
		}
	}
	group := protowire.AppendTag(nil, 7, protowire.StartGroupType)
	group = binary.LittleEndian.AppendUint64(protowire.AppendTag(group, 7, protowire.Fixed64Type), uint64(t0))
	group = protowire.AppendTag(group, 7, protowire.EndGroupType)
	value := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), nil) // an empty AnyValue
	twice := protowire.AppendBytes(protowire.AppendTag(nil, 9, protowire.BytesType), append(
		protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), spans.AttrDeadline),
		append(protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), protowire.AppendVarint([]byte{3 << 3}, uint64(t0))), value...)...))
	for name, raw := range map[string][]byte{"group": inSpan(group...), "a value sent twice": inSpan(twice...)} {
		p := planProto(raw)
		if p == nil {
			t.Fatalf("%s: no plan", name)
		}
		patched, ok := p.apply(raw, sh)
		if !ok {
			t.Fatalf("%s: the plan gave up", name)
		}
		want, err := sh.generated(raw)
		if err != nil {
			t.Fatal(err)
		}
		g, w := &coltracepb.ExportTraceServiceRequest{}, &coltracepb.ExportTraceServiceRequest{}
		if err := proto.Unmarshal(patched, g); err != nil {
			t.Fatal(err)
		}
		proto.Unmarshal(want, w)
		if !proto.Equal(g, w) {
			t.Errorf("%s: the patch differs from the generated shift\ngot  %v\nwant %v", name, g, w)
		}
	}
}

// Trace ids change in their second half only, consistently for spans and links, and invalid ids
// stay invalid.
func TestShiftSaltsTraceIDs(t *testing.T) {
	r := request(0, 2, t0)
	zero := &tracepb.Span{TraceId: make([]byte, 16), SpanId: []byte{1, 2, 3, 4, 5, 6, 7, 8}, Name: "zero",
		Links: []*tracepb.Span_Link{{TraceId: make([]byte, 16), SpanId: []byte{1}}}}
	ss := r.ResourceSpans[0].ScopeSpans[0]
	ss.Spans = append(ss.Spans, zero)
	raw, _ := proto.Marshal(r)
	sh := Shift{Salt: 0xff}
	got, err := sh.Request(raw)
	if err != nil {
		t.Fatal(err)
	}
	g := &coltracepb.ExportTraceServiceRequest{}
	proto.Unmarshal(got, g)
	for i, s := range g.ResourceSpans[0].ScopeSpans[0].Spans {
		o := ss.Spans[i]
		if s.Name == "zero" {
			if !bytes.Equal(s.TraceId, make([]byte, 16)) || !bytes.Equal(s.Links[0].TraceId, make([]byte, 16)) {
				t.Fatal("an invalid trace id became a valid one")
			}
			continue
		}
		if !bytes.Equal(s.TraceId[:8], o.TraceId[:8]) || s.TraceId[15] != o.TraceId[15]^0xff || !bytes.Equal(s.TraceId, s.Links[0].TraceId) {
			t.Fatalf("trace id %x from %x (link %x)", s.TraceId, o.TraceId, s.Links[0].TraceId)
		}
		if !bytes.Equal(s.SpanId, o.SpanId) {
			t.Fatal("span ids must stay")
		}
	}
}

// Every pass of Blast, the first included, gets its own trace ids; a pass keeps the recording's
// timing; span ids and the number of spans stay.
func TestBlastGivesEveryPassFreshTraceIDs(t *testing.T) {
	path := recording(t, "r.jsonl", 0, time.Second, 2*time.Second)
	for _, p := range []Protocol{GRPC, HTTPJSON} {
		t.Run(string(p), func(t *testing.T) {
			c := newTestCollector(t)
			reqs, err := LoadRequests([]string{path}, tracefile.ReadOptions{}, p, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			st, err := Blast(context.Background(), reqs, SendOptions{Target: c.target(p), Connections: 2, Passes: 3})
			if err != nil {
				t.Fatal(err)
			}
			if st.Requests != 9 {
				t.Fatalf("sent %d requests, want 3 passes of 3", st.Requests)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if len(c.spans) != 18 {
				t.Fatalf("collector holds %d distinct spans, want 18 (3 passes of 6)", len(c.spans))
			}
			// Group by trace: 3 recorded traces x 3 passes, each trace's spans at their recorded
			// distance from one another.
			traces := map[string][]*tracepb.Span{}
			for _, s := range c.spans {
				traces[string(s.TraceId)] = append(traces[string(s.TraceId)], s)
				orig, _ := ids(int(s.SpanId[7]) - 1)
				if bytes.Equal(s.TraceId, orig) || !bytes.Equal(s.TraceId[:8], orig[:8]) {
					t.Fatalf("trace id %x for recorded %x: want a new one with the same first half", s.TraceId, orig)
				}
			}
			if len(traces) != 9 {
				t.Fatalf("%d traces, want 9", len(traces))
			}
			for _, tr := range traces {
				if len(tr) != 2 || tr[0].EndTimeUnixNano != tr[1].EndTimeUnixNano {
					t.Fatalf("a trace of a pass holds %d spans (ends %d)", len(tr), tr[0].EndTimeUnixNano)
				}
			}
		})
	}
}

// A later pass of Blast is patched in place at the places found when the request was encoded; it
// must be byte for byte what the long way gives (walking the protobuf request, encoding it to
// OTLP/JSON again), for every fixture and both encodings, and the patch must be what is used for
// them (a plan that gave up on everything would pass the first check and cost the sender dearly).
func TestBlastPatchMatchesTheLongWay(t *testing.T) {
	shifts := []Shift{{Delta: 7 * int64(time.Second), Salt: 0xdeadbeef}, {Delta: -3 * int64(time.Second), Salt: 1}, {Salt: 5}}
	check := func(t *testing.T, reqs []*Request, wantPlan bool) {
		t.Helper()
		for i, req := range reqs {
			if wantPlan && req.plan == nil {
				t.Fatalf("request %d: no patch plan", i)
			}
			for _, sh := range shifts {
				got, err := req.forPass(sh)
				if err != nil {
					t.Fatal(err)
				}
				pb := req.pb
				if pb == nil {
					pb = req.Body
				}
				want, err := sh.Request(pb)
				if err != nil {
					t.Fatal(err)
				}
				if req.pb != nil {
					if want, err = tracefile.ProtoToJSON(want); err != nil {
						t.Fatal(err)
					}
				}
				if !bytes.Equal(got.Body, want) {
					t.Fatalf("request %d, %+v: the patch differs from the long way\ngot  %q\nwant %q", i, sh, got.Body, want)
				}
			}
		}
	}
	for _, name := range fixtures.Names() {
		data, _ := fixtures.Read(name)
		path := filepath.Join(t.TempDir(), name+".jsonl")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, p := range []Protocol{GRPC, HTTPJSON} {
			t.Run(name+"/"+string(p), func(t *testing.T) {
				reqs, err := LoadRequests([]string{path}, tracefile.ReadOptions{Strict: true}, p, time.Now())
				if err != nil {
					t.Fatal(err)
				}
				// Captured Request-Deadline and Retry-After headers are text: OTLP/JSON leaves
				// requests that hold them to the long way.
				headers := strings.Contains(string(data), spans.AttrResHeaderRetryAfter) || strings.Contains(string(data), spans.AttrReqHeaderDeadline)
				check(t, reqs, p == GRPC || !headers)
			})
		}
	}
	t.Run("deadline as a string", func(t *testing.T) {
		req := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{
			attrSpan(0, kv(spans.AttrDeadline, str(fmt.Sprint(t0+5e8)))),
		}}}}}}
		raw, _ := proto.Marshal(req)
		for _, p := range []Protocol{GRPC, HTTPJSON} {
			r, err := Encode(p, raw, 1)
			if err != nil {
				t.Fatal(err)
			}
			// In protobuf the text is patched where it lies while it keeps its length; OTLP/JSON
			// leaves it to the long way.
			if (r.plan != nil) != (p == GRPC) {
				t.Fatalf("%s: plan %v for a deadline written as a string", p, r.plan)
			}
			check(t, []*Request{r}, p == GRPC)
		}
	})
}

// BenchmarkLaterPass is what the sender of `replay --max` spends on a request of a pass after
// the first, per protocol: the fixture with the most spans per request (the reference client's,
// deadlines included), each request shifted in turn.
func BenchmarkLaterPass(b *testing.B) {
	data, _ := fixtures.Read("amplification-64-reference")
	path := filepath.Join(b.TempDir(), "f.jsonl")
	os.WriteFile(path, data, 0o644)
	for _, p := range []Protocol{GRPC, HTTPJSON} {
		b.Run("protocol="+strings.ReplaceAll(string(p), "/", "-"), func(b *testing.B) {
			reqs, err := LoadRequests([]string{path}, tracefile.ReadOptions{}, p, time.Now())
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for _, r := range reqs {
				n += r.Spans
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				for _, r := range reqs {
					if _, err := r.forPass(Shift{Delta: int64(i) * 1e9, Salt: uint64(i + 1)}); err != nil {
						b.Fatal(err)
					}
				}
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/span")
		})
	}
}

// TestPlanProtoBoundsItsRecursion: Shift.Request is exported, and a caller may hand it a request
// no decoder has read. The planner follows a time attribute's arrays only as deep as the decoders
// take values (spans.MaxValueDepth); past that there is no plan and the generated types decide -
// a request a million arrays deep is refused, where the planner's recursion overflowed the stack
// and took the process down.
func TestPlanProtoBoundsItsRecursion(t *testing.T) {
	// nested is a request of one span whose deadline attribute is an int under depth arrays.
	nested := func(depth int) []byte {
		inner := protowire.AppendVarint(protowire.AppendTag(nil, 3, protowire.VarintType), uint64(t0)) // AnyValue.int_value
		sizes, arrs := make([]int, depth+1), make([]int, depth+1)                                      // of the AnyValue and the ArrayValue i levels up
		sizes[0] = len(inner)
		for i := 1; i <= depth; i++ {
			arrs[i] = 1 + protowire.SizeVarint(uint64(sizes[i-1])) + sizes[i-1]
			sizes[i] = 1 + protowire.SizeVarint(uint64(arrs[i])) + arrs[i]
		}
		v := make([]byte, 0, sizes[depth]+len(inner))
		for i := depth; i >= 1; i-- {
			v = protowire.AppendVarint(append(v, 5<<3|2), uint64(arrs[i]))    // AnyValue.array_value
			v = protowire.AppendVarint(append(v, 1<<3|2), uint64(sizes[i-1])) // ArrayValue.values
		}
		kv := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), spans.AttrDeadline)
		kv = protowire.AppendBytes(protowire.AppendTag(kv, 2, protowire.BytesType), append(v, inner...))
		b := protowire.AppendBytes(protowire.AppendTag(nil, 9, protowire.BytesType), kv)  // Span.attributes
		b = protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), b)    // ScopeSpans.spans
		b = protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), b)    // ResourceSpans.scope_spans
		return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), b) // the request's resource_spans
	}
	if p := planProto(nested(3)); p.count(siteVarint) != 1 {
		t.Fatalf("plan %v for a deadline three arrays deep: want its int", p)
	}
	if p := planProto(nested(spans.MaxValueDepth + 1)); p != nil {
		t.Errorf("plan %v for a value deeper than the decoders take", p)
	}
	if _, err := (Shift{Delta: 3 * int64(time.Second)}).Request(nested(1 << 20)); err == nil {
		t.Error("Shift.Request shifted a request a million arrays deep, which the generated types refuse")
	}
}
