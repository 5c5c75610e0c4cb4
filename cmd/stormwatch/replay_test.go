package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/stormwatch/stormwatch/collector"
	"github.com/stormwatch/stormwatch/internal/deadaddr"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/tracefile"
)

// replayRecording writes n requests of 3 spans, 100ms apart in recorded time.
func replayRecording(t *testing.T, name string, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	w, err := tracefile.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	base := uint64(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	for i := 0; i < n; i++ {
		ss := &tracepb.ScopeSpans{}
		for j := 0; j < 3; j++ {
			k := i*3 + j
			tid := make([]byte, 16)
			sid := make([]byte, 8)
			tid[0], tid[15] = 0x1f, byte(i+1)
			sid[0], sid[7] = 0x2f, byte(k+1)
			end := base + uint64(i)*100e6
			ss.Spans = append(ss.Spans, &tracepb.Span{TraceId: tid, SpanId: sid, Name: "GET", Kind: tracepb.Span_SPAN_KIND_CLIENT,
				StartTimeUnixNano: end - 20e6, EndTimeUnixNano: end})
		}
		req := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
			Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{{Key: "service.name",
				Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "edge"}}}}},
			ScopeSpans: []*tracepb.ScopeSpans{ss}}}}
		if err := w.WriteProto(req); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// spanID is a span's identity: its trace id and span id.
type spanID struct {
	trace spans.TraceID
	span  spans.SpanID
}

// spanSink counts what the collector hands downstream.
type spanSink struct {
	mu    sync.Mutex
	spans map[spanID]spans.Span
}

func (s *spanSink) ConsumeBatch(_ context.Context, b *spans.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sp := range b.Spans {
		s.spans[spanID{sp.TraceID, sp.SpanID}] = sp
	}
	return nil
}

func (s *spanSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.spans)
}

func startTestCollector(t *testing.T, token string) (*collector.Collector, *spanSink) {
	t.Helper()
	sink := &spanSink{spans: map[spanID]spans.Span{}}
	c, err := collector.New(collector.Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Token: token}, sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Shutdown(ctx)
	})
	return c, sink
}

func runCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return errb.String(), err
}

// waitFor polls until the collector's queue has reached the sink (ingestion is asynchronous).
func waitFor(t *testing.T, sink *spanSink, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for sink.count() < want && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := sink.count(); got != want {
		t.Fatalf("collector received %d spans, want %d", got, want)
	}
}

func TestReplayToOurCollectorEveryProtocol(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600)
	rec := replayRecording(t, "rec.jsonl.gz", 5)
	for _, tc := range []struct{ name, to, protocol string }{
		{"grpc", "grpc", ""},
		{"http/protobuf", "http", ""},
		{"http/json", "http", "http/json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, sink := startTestCollector(t, "s3cret")
			to := c.GRPCAddr()
			if tc.to == "http" {
				to = "http://" + c.HTTPAddr()
			}
			args := []string{"replay", "--to", to, "--token-file", tokenFile, "--speed", "20", rec}
			if tc.protocol != "" {
				args = append(args, "--protocol", tc.protocol)
			}
			before := time.Now()
			stderr, err := runCmd(t, args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			waitFor(t, sink, 15)
			if !strings.Contains(stderr, "done: 5 requests, 15 spans accepted") {
				t.Errorf("stderr: %s", stderr)
			}
			sink.mu.Lock()
			defer sink.mu.Unlock()
			// One shift for the replay: every span keeps its recorded time plus the same whole
			// number of seconds, which brings the first request to the second before it was sent.
			base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
			var delta int64
			for _, s := range sink.spans {
				i := int64(s.SpanID[7]-1) / 3 // request i ended at base + i*100ms
				d := s.EndUnixNano - base - i*100e6
				if delta == 0 {
					delta = d
				}
				if d != delta || d%1e9 != 0 || s.DurationNanos() != 20e6 {
					t.Fatalf("span %s moved by %d, others by %d (duration %d)", s.SpanID, d, delta, s.DurationNanos())
				}
			}
			if first := base + delta; first < before.Add(-time.Second).UnixNano() || first > time.Now().UnixNano() {
				t.Fatalf("the first request's spans end %v, sent after %v", time.Unix(0, first), before)
			}
		})
	}
}

func TestReplayMaxBlastsForADuration(t *testing.T) {
	c, sink := startTestCollector(t, "")
	rec := replayRecording(t, "rec.pb", 4)
	stderr, err := runCmd(t, "replay", "--to", c.GRPCAddr(), "--max", "--connections", "3", rec)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	waitFor(t, sink, 12)
	if !strings.Contains(stderr, "sending 4 requests to "+c.GRPCAddr()+" (OTLP/gRPC) from 3 connections") {
		t.Errorf("stderr: %s", stderr)
	}
	stderr, err = runCmd(t, "replay", "--to", "http://"+c.HTTPAddr(), "--max", "--duration", "300ms", "--loop", rec)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "done: ") {
		t.Errorf("stderr: %s", stderr)
	}
	// Every pass, the first of each run included, makes traces of its own: the recording's 4
	// traces of 3 spans, again and again, never one trace piling up duplicates.
	// Requests the blaster gave up on at the deadline may still be in the collector's handlers,
	// counted when they return: shut it down, which waits for them and drains its queue into the
	// sink, so the count and the sink are final.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	accepted := int(c.Stats().AcceptedSpans)
	if got := sink.count(); got != accepted {
		t.Fatalf("the sink holds %d spans, the collector accepted %d", got, accepted)
	}
	traces := map[spans.TraceID]int{}
	sink.mu.Lock()
	for id := range sink.spans {
		traces[id.trace]++
	}
	sink.mu.Unlock()
	if len(traces) <= 8 || len(traces) != accepted/3 {
		t.Fatalf("%d spans accepted in %d traces: want several passes of 4 traces of 3 spans", accepted, len(traces))
	}
	for id, n := range traces {
		if n != 3 {
			t.Fatalf("trace %s holds %d spans, want 3", id, n)
		}
	}
}

func TestReplayErrors(t *testing.T) {
	rec := replayRecording(t, "rec.jsonl", 1)
	dead := deadaddr.Loopback(t)
	c, _ := startTestCollector(t, "right")
	wrongToken := filepath.Join(t.TempDir(), "token")
	os.WriteFile(wrongToken, []byte("wrong"), 0o600)
	// The token files every command refuses (readToken): before anything is sent.
	emptyToken := filepath.Join(t.TempDir(), "empty-token")
	os.WriteFile(emptyToken, []byte(" \n"), 0o600)
	twoLineToken := filepath.Join(t.TempDir(), "two-line-token")
	os.WriteFile(twoLineToken, []byte("right\nsecret\n"), 0o600)
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(bad, []byte("{\"resourceSpans\":[{\n"), 0o644)
	readme := filepath.Join(t.TempDir(), "README.md")
	os.WriteFile(readme, []byte("# stormwatch\n\nFind the retry storm.\n"), 0o644)
	other := filepath.Join(t.TempDir(), "report.json")
	os.WriteFile(other, []byte(`{"version":1,"findings":[]}`), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no terminal for the dashboard", []string{"replay", rec}, 2, "the dashboard needs a terminal"},
		{"unreachable", []string{"replay", "--to", dead, rec}, 2, "cannot reach " + dead},
		{"unauthenticated", []string{"replay", "--to", c.GRPCAddr(), "--token-file", wrongToken, rec}, 2, "rejected the request: Unauthenticated"},
		{"unauthenticated http", []string{"replay", "--to", "http://" + c.HTTPAddr(), "--token-file", wrongToken, rec}, 2, "rejected the request: 401 Unauthorized"},
		{"empty token file", []string{"replay", "--to", c.GRPCAddr(), "--token-file", emptyToken, rec}, 2, "--token-file " + emptyToken + ": the file is empty"},
		{"token file without end", []string{"replay", "--to", c.GRPCAddr(), "--token-file", "/dev/zero", rec}, 2, "--token-file /dev/zero: more than 65536 bytes, not a token file"},
		{"token file of two lines", []string{"replay", "--to", c.GRPCAddr(), "--token-file", twoLineToken, rec}, 2, "--token-file " + twoLineToken + ": the token must be one line without spaces"},
		{"missing file", []string{"replay", "--to", c.GRPCAddr(), "--max", "nope.jsonl"}, 2, "nope.jsonl"},
		{"malformed strict", []string{"replay", "--to", c.GRPCAddr(), "--strict", bad}, 2, "bad.jsonl:1: decode OTLP/JSON request"},
		{"bad protocol", []string{"replay", "--to", dead, "--protocol", "udp", rec}, 2, `--protocol: unknown protocol "udp"`},
		{"bad endpoint", []string{"replay", "--to", "nohost", rec}, 2, "--to: endpoint \"nohost\""},
		{"negative speed", []string{"replay", "--speed", "-1", rec}, 2, "--speed -1"},
		{"duration without max", []string{"replay", "--to", dead, "--duration", "1s", rec}, 2, "--duration applies to --max"},
		{"protocol without to", []string{"replay", "--protocol", "grpc", rec}, 2, "need --to ENDPOINT"},
		{"no files", []string{"replay", "--to", dead}, 2, "requires at least 1 arg"},
		{"loop stdin", []string{"replay", "--loop", "--to", dead, "-"}, 2, "--loop cannot replay standard input"},
		{"not a trace file", []string{"replay", "--to", c.GRPCAddr(), rec, readme}, 2, readme + `: not a trace file: it holds text beginning "# stormwatch"`},
		{"not a trace file, max", []string{"replay", "--to", c.GRPCAddr(), "--max", readme}, 2, "not a trace file"},
		{"not a trace file, dashboard", []string{"replay", readme}, 2, "not a trace file"},
		{"JSON of another shape", []string{"replay", "--to", c.GRPCAddr(), other}, 2, `a JSON object with the keys "version", "findings"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runCmd(t, tc.args...)
			if err == nil {
				t.Fatal("no error")
			}
			var msg bytes.Buffer
			code := exitCode(err, &msg)
			if code != tc.code || !strings.Contains(msg.String(), tc.want) {
				t.Fatalf("exit %d, %q; want exit %d and %q", code, msg.String(), tc.code, tc.want)
			}
			t.Log(strings.TrimSpace(msg.String()))
		})
	}
}

func TestReplayFromStdin(t *testing.T) {
	c, sink := startTestCollector(t, "")
	rec := replayRecording(t, "rec.jsonl", 2)
	data, _ := os.ReadFile(rec)
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"replay", "--to", c.GRPCAddr(), "--max", "-"}, bytes.NewReader(data), &out, &errb)
	if err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	waitFor(t, sink, 6)
}

// TestReplayDashboardEndToEnd replays a fixture into the real dashboard in a tmux terminal: the
// dependency appears, the header shows the replay and its speed, and space and + act on the player.
func TestReplayDashboardEndToEnd(t *testing.T) {
	dir, bin := buildForTerminal(t)
	fixture, err := filepath.Abs("../../fixtures/amplification-27-reference.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	cmd := fmt.Sprintf("%s replay --speed 8 --loop --settle 300ms --log-file %s %s; echo EXITED $?; sleep 60",
		bin, filepath.Join(dir, "stormwatch.log"), fixture)
	s := newTmux(t, 120, 36, []string{"TERM=xterm-256color"}, cmd)

	screen := s.waitScreen("WORST dep ", 20*time.Second)
	if !strings.Contains(screen, "REPLAY 8x") || !strings.Contains(screen, "spans played") {
		t.Errorf("the header does not show the replay and its speed:\n%s", screen)
	}
	s.keys("Space")
	s.waitScreen("REPLAY PAUSED 8x", 5*time.Second)
	s.keys("Space", "+")
	s.waitScreen("REPLAY 16x", 5*time.Second)
	s.keys("q")
	s.waitScreen("EXITED 0", 10*time.Second)
}
