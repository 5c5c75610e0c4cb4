package collector

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestShutdownDrainsTheQueueAndClosesTheRecording(t *testing.T) {
	s := &sink{gate: make(chan struct{})}
	rec := &fakeRecorder{}
	c, err := New(Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", QueueSize: 16}, s, WithRecorder(rec))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	httpAddr := c.HTTPAddr()
	for i := range 5 {
		resp := post(t, c, protoBody(t, request(i*10, 5, 0)), map[string]string{"Content-Type": contentTypeProto})
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
	}
	if d := c.Stats().QueueDepth; d == 0 {
		t.Fatal("nothing queued: the test would prove nothing")
	}
	done := make(chan error, 1)
	go func() { done <- c.Shutdown(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) before the consumer drained the queue", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(s.gate)
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if n := s.count(); n != 25 {
		t.Errorf("consumer got %d spans, want all 25 accepted", n)
	}
	bodies, flushes, closed := rec.snapshot()
	if bodies != 5 || flushes == 0 || !closed {
		t.Errorf("recorder: %d bodies, %d flushes, closed=%v; want 5, flushed, closed", bodies, flushes, closed)
	}
	if _, err := http.Post("http://"+httpAddr+tracesPath, contentTypeProto, bytes.NewReader(nil)); err == nil {
		t.Error("the collector still accepts connections after Shutdown")
	}
}

func TestShutdownGivesUpWhenTheConsumerIsStuck(t *testing.T) {
	s := &sink{gate: make(chan struct{})}
	defer close(s.gate)
	c, err := New(Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"}, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		post(t, c, protoBody(t, request(i*10, 1, 0)), map[string]string{"Content-Type": contentTypeProto}).Body.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = c.Shutdown(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "3 requests still queued") {
		t.Errorf("shutdown error %v: want the deadline and the queued count", err)
	}
}

func TestRecorderGetsEveryAcceptedRequestAsReceived(t *testing.T) {
	rec := &fakeRecorder{}
	c := start(t, Config{RecordFlushInterval: 10 * time.Millisecond}, &sink{}, WithRecorder(rec))
	pb := protoBody(t, request(0, 3, 0))
	post(t, c, gzipped(t, pb), map[string]string{"Content-Type": contentTypeProto, "Content-Encoding": "gzip"}).Body.Close()
	post(t, c, []byte(handJSON), map[string]string{"Content-Type": contentTypeJSON}).Body.Close()
	post(t, c, []byte("garbage"), map[string]string{"Content-Type": contentTypeJSON}).Body.Close()
	post(t, c, protoBody(t, request(0, 0, 2)), map[string]string{"Content-Type": contentTypeProto}).Body.Close()
	waitFor(t, "a timed flush", func() bool { b, f, _ := rec.snapshot(); return b == 2 && f > 0 })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !bytes.Equal(rec.bodies[0], pb) || rec.json[0] {
		t.Errorf("first record is not the decompressed protobuf body")
	}
	if string(rec.bodies[1]) != handJSON || !rec.json[1] {
		t.Errorf("second record is not the JSON body as sent")
	}
}

func TestSlowRecorderIsBoundedByTheQueue(t *testing.T) {
	rec := &fakeRecorder{gate: make(chan struct{})}
	c := start(t, Config{QueueSize: 2}, &sink{}, WithRecorder(rec))
	defer close(rec.gate)
	codes := []int{}
	for i := range 3 {
		resp := post(t, c, protoBody(t, request(i*10, 1, 0)), map[string]string{"Content-Type": contentTypeProto})
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
	}
	if codes[0] != 200 || codes[1] != 200 || codes[2] != http.StatusTooManyRequests {
		t.Errorf("codes %v: a stuck recorder must fill the queue and turn into 429, not block or drop", codes)
	}
}

func TestRequestsDuringShutdownAreRefusedRetryably(t *testing.T) {
	c, err := New(Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"}, &sink{})
	if err != nil {
		t.Fatal(err)
	}
	c.queue.close() // what Shutdown does once the servers stopped
	_, err = c.export(protoBody(t, request(0, 1, 0)), nil, encProto)
	if cl := classify(err); !errors.Is(err, ErrShuttingDown) || cl.http != 503 {
		t.Errorf("export after close: %v (%d)", err, cl.http)
	}
	if err := c.Shutdown(context.Background()); err != nil {
		t.Errorf("shutdown of a never-started collector: %v", err)
	}
}

func TestMetricsExposeHeldAndEvicted(t *testing.T) {
	// The holder downstream (the analyzer) reports what it holds and evicted; the collector
	// exports it and puts it in the status line.
	held := func() HeldStats { return HeldStats{Spans: 8, Traces: 2, EvictedSpans: 4, EvictedTraces: 1} }
	s := &sink{}
	c := start(t, Config{}, s, WithHeldStats(held))
	post(t, c, protoBody(t, request(0, 12, 0)), map[string]string{"Content-Type": contentTypeProto}).Body.Close()
	waitFor(t, "spans delivered", func() bool { return len(s.spans()) == 12 })
	m := scrape(t, c)
	for _, want := range []string{
		"stormwatch_held_spans 8", "stormwatch_held_traces 2",
		"stormwatch_evicted_spans_total 4", "stormwatch_evicted_traces_total 1",
		`stormwatch_collector_received_spans_total{transport="http"} 12`,
		"stormwatch_collector_queue_depth 0", "stormwatch_collector_queue_capacity 64",
		`stormwatch_collector_request_duration_seconds_count{transport="http"} 1`,
		"go_goroutines",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	line := StatusLine(Stats{}, c.Stats(), 2*time.Second)
	if want := "6 spans/s · 12 spans · 2 traces held (8 spans) · 0 rejected · 4 evicted · queue 0/64"; line != want {
		t.Errorf("status line\n got %q\nwant %q", line, want)
	}
}

func TestStatusLine(t *testing.T) {
	prev := Stats{AcceptedSpans: 1_000}
	cur := Stats{AcceptedSpans: 26_000, RejectedSpans: 1_234_567, QueueDepth: 3, QueueCapacity: 64, RecordErrors: 2}
	got := StatusLine(prev, cur, 5*time.Second)
	want := "5,000 spans/s · 26,000 spans · 1,234,567 rejected · queue 3/64 · 2 RECORD ERRORS"
	if got != want {
		t.Errorf("\n got %q\nwant %q", got, want)
	}
	if got := StatusLine(Stats{}, Stats{}, 0); !strings.HasPrefix(got, "0 spans/s") {
		t.Errorf("zero elapsed: %q", got)
	}
}

func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{MaxRequestBytes: -1}, "max request bytes -1"},
		{Config{QueueSize: -3}, "queue size -3"},
		{Config{QueueSize: MaxQueueSize + 1}, "must be between 1 and 65536"},
		{Config{MaxQueueBytes: -1}, "max queue bytes"},
		{Config{RetryAfter: -time.Second}, "negative"},
		{Config{GRPCAddr: Disabled, HTTPAddr: Disabled}, "nothing to listen on"},
	} {
		if _, err := New(tc.cfg, &sink{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := New(Config{}, nil); err == nil {
		t.Error("a nil consumer is accepted")
	}
	c, err := New(Config{}, &sink{})
	if err != nil {
		t.Fatal(err)
	}
	if c.cfg.GRPCAddr != "127.0.0.1:4317" || c.cfg.HTTPAddr != "127.0.0.1:4318" || c.cfg.MaxRequestBytes != 20<<20 {
		t.Errorf("zero-value defaults %+v", c.cfg)
	}
}

func TestStartReportsBindErrorsAndWarnsWhenExposed(t *testing.T) {
	busy := start(t, Config{GRPCAddr: Disabled}, &sink{})
	c, err := New(Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: busy.HTTPAddr()}, &sink{})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "listen for OTLP/HTTP on "+busy.HTTPAddr()) {
		t.Errorf("bind error %v", err)
	}

	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	// Tests bind loopback only: the warning is checked on the address as configured.
	exposed, err := New(Config{GRPCAddr: "0.0.0.0:4317", HTTPAddr: Disabled, Token: "tok-123"}, &sink{}, WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	exposed.warnIfExposed("OTLP/gRPC", exposed.cfg.GRPCAddr)
	exposed.warnIfExposed("OTLP/HTTP", "127.0.0.1:4318")
	exposed.warnIfExposed("OTLP/HTTP", "[::1]:4318")
	exposed.warnIfExposed("OTLP/HTTP", ":4318") // no host: every interface
	if exposed.HTTPAddr() != "" {
		t.Errorf("disabled HTTP has address %q", exposed.HTTPAddr())
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 2 {
		t.Errorf("%d warnings, want 2 (for the addresses beyond loopback only)", n)
	}
	out := logs.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "beyond loopback") || !strings.Contains(out, "no TLS") {
		t.Errorf("no exposure warning in %q", out)
	}
	if strings.Contains(out, "tok-123") {
		t.Error("the token was logged")
	}
}
