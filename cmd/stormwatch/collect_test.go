package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/stormwatch/stormwatch/collector/collectortest"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/tracefile"
)

// collectStderr is a stderr the test reads while `collect` writes to it.
type collectStderr struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *collectStderr) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *collectStderr) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var (
	grpcListening = regexp.MustCompile(`msg="OTLP/gRPC listening" addr=(\S+)`)
	httpListening = regexp.MustCompile(`msg="OTLP/HTTP listening" url=https?://([^/\s]+)/v1/traces`)
)

// collectRun is a `stormwatch collect` running in the test, on loopback port 0 unless args say
// otherwise.
type collectRun struct {
	grpc, http string
	stderr     *collectStderr
	cancel     context.CancelFunc
	done       chan error
}

func startCollect(t *testing.T, args ...string) *collectRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &collectRun{stderr: &collectStderr{}, cancel: cancel, done: make(chan error, 1)}
	args = append([]string{"collect", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"}, args...)
	go func() { r.done <- run(ctx, args, strings.NewReader(""), io.Discard, r.stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(20 * time.Second):
			t.Error("collect did not stop")
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		out := r.stderr.String()
		g, h := grpcListening.FindStringSubmatch(out), httpListening.FindStringSubmatch(out)
		if g != nil && h != nil {
			r.grpc, r.http = g[1], h[1]
			return r
		}
		select {
		case err := <-r.done:
			t.Fatalf("collect exited early: %v\n%s", err, out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("collect never said where it listens:\n%s", out)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stop is Ctrl-C: cancel the context and wait for run to return.
func (r *collectRun) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("collect did not stop after Ctrl-C")
	}
	return nil
}

func (r *collectRun) waitStderr(t *testing.T, re *regexp.Regexp) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !re.MatchString(r.stderr.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("stderr never matched %s:\n%s", re, r.stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// collectStubs are n finished spans, ids from first on, for an SDK exporter's ExportSpans.
func collectStubs(first, n int) []sdktrace.ReadOnlySpan {
	var ss tracetest.SpanStubs
	for i := first; i < first+n; i++ {
		tid := trace.TraceID{0xcc, byte(i / 3)}
		sid := trace.SpanID{0xdd, byte(i)}
		ss = append(ss, tracetest.SpanStub{
			Name:        "GET",
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}),
			SpanKind:    trace.SpanKindClient,
			StartTime:   time.Unix(1_700_000_000, 0),
			EndTime:     time.Unix(1_700_000_001, 0),
			Attributes:  []attribute.KeyValue{attribute.Int(spans.AttrAttempt, i), attribute.String(spans.AttrHTTPMethod, "GET")},
		})
	}
	return ss.Snapshots()
}

func TestCollectReceivesRecordsAndExitsCleanlyOnCtrlC(t *testing.T) {
	for _, name := range []string{"rec.jsonl", "rec.pb.gz"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), name)
			r := startCollect(t, "--record", path, "--status-interval", "20ms")
			ctx := context.Background()

			gexp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(r.grpc), otlptracegrpc.WithInsecure(), otlptracegrpc.WithCompressor("gzip"))
			if err != nil {
				t.Fatal(err)
			}
			if err := gexp.ExportSpans(ctx, collectStubs(0, 5)); err != nil {
				t.Fatalf("gRPC export: %v", err)
			}
			hexp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(r.http), otlptracehttp.WithInsecure())
			if err != nil {
				t.Fatal(err)
			}
			if err := hexp.ExportSpans(ctx, collectStubs(5, 6)); err != nil {
				t.Fatalf("HTTP export: %v", err)
			}
			gexp.Shutdown(ctx)
			hexp.Shutdown(ctx)

			r.waitStderr(t, regexp.MustCompile(`stormwatch: \d+ spans/s · 11 spans · 4 traces held \(11 spans\) · 0 rejected`))
			if err := r.stop(t); err != nil {
				t.Fatalf("Ctrl-C: run returned %v, want nil (exit 0)", err)
			}
			if !strings.Contains(r.stderr.String(), "stopped: 11 spans accepted, 0 rejected") {
				t.Errorf("no final summary:\n%s", r.stderr.String())
			}

			// The recording reads back to every span, each once.
			rd, err := tracefile.Open(path, tracefile.ReadOptions{Strict: true})
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			seen := map[spans.SpanID]bool{}
			records := 0
			for {
				rec, err := rd.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("read back %s: %v", path, err)
				}
				records++
				for _, s := range rec.Batch.Spans {
					if seen[s.SpanID] {
						t.Errorf("span %s recorded twice", s.SpanID)
					}
					seen[s.SpanID] = true
					if s.Str(spans.AttrHTTPMethod) != "GET" {
						t.Errorf("recorded span lost its attributes: %+v", s.Attrs)
					}
				}
			}
			if records != 2 || len(seen) != 11 {
				t.Errorf("recording holds %d requests and %d spans, want 2 and 11", records, len(seen))
			}
		})
	}
}

func TestCollectTokenAndTLS(t *testing.T) {
	dir := t.TempDir()
	const token = "tok-8c1f0e"
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, pool := collectortest.WriteSelfSigned(t, dir)
	r := startCollect(t, "--token-file", tokenFile, "--tls-cert", certFile, "--tls-key", keyFile, "--status-interval", "0")
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	send := func(auth string) int {
		req, _ := http.NewRequest(http.MethodPost, "https://"+r.http+"/v1/traces", strings.NewReader(`{"resourceSpans":[]}`))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := send(""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
	if code := send("Bearer wrong"); code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d, want 401", code)
	}
	if code := send("Bearer " + token); code != http.StatusOK {
		t.Errorf("right token: %d, want 200", code)
	}
	// Plaintext on the TLS port: Go's server answers 400 to it; what matters is that it is no 200.
	if resp, err := http.Post("http://"+r.http+"/v1/traces", "application/json", strings.NewReader("{}")); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("a plaintext request was accepted on the TLS port")
		}
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(r.stderr.String(), token) {
		t.Errorf("the token appears on stderr:\n%s", r.stderr.String())
	}
}

func TestCollectFlagErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	certFile, _, _ := collectortest.WriteSelfSigned(t, dir)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", certFile}, "--tls-cert and --tls-key go together"},
		{[]string{"--tls-cert", certFile, "--tls-key", filepath.Join(dir, "nokey.pem")}, "--tls-key " + filepath.Join(dir, "nokey.pem")},
		{[]string{"--token-file", filepath.Join(dir, "missing")}, "--token-file: open " + filepath.Join(dir, "missing")},
		{[]string{"--token-file", empty}, "the file is empty"},
		{[]string{"--max-request-bytes", "lots"}, `"lots" is not a size`},
		{[]string{"--queue-size", "0"}, "--queue-size 0: must be positive"},
		{[]string{"--max-connections", "0"}, "--max-connections 0: must be positive"},
		{[]string{"--max-spans", "-1"}, "--max-spans -1"},
		{[]string{"--record", filepath.Join(dir, "out.txt")}, "--record"},
		{[]string{"--record-sync"}, "--record-sync needs --record FILE"},
		{[]string{"--grpc", ""}, `use "none"`},
		{[]string{"--grpc", "none", "--http", "none"}, "nothing to listen on"},
		// A port in use names the flag to change and the way to a free port.
		{[]string{"--http", busy.Addr().String()}, "listen for OTLP/HTTP on " + busy.Addr().String() + ": listen tcp " + busy.Addr().String() +
			": bind: address already in use\n  another process (another stormwatch?) is listening on " + busy.Addr().String() +
			": stop it, or give --http another address,\n  e.g. --http 127.0.0.1:0 to let the system pick a free port"},
		{[]string{"--grpc", busy.Addr().String()}, "give --grpc another address,\n  e.g. --grpc 127.0.0.1:0"},
		{[]string{"--status-interval", "-1s"}, "--status-interval"},
		{[]string{"--settle", "0s"}, "--settle 0s: must be positive"},
		{[]string{"--policy", filepath.Join(dir, "missing.yaml")}, "--policy"},
		{[]string{"--report", filepath.Join(dir, "no", "such", "dir", "r.json")}, "--report: open " + filepath.Join(dir, "no")},
		{[]string{"extra-arg"}, "unknown command"},
	} {
		args := append([]string{"collect", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0", "--status-interval", "0"}, tc.args...)
		var stderr bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := run(ctx, args, strings.NewReader(""), io.Discard, &stderr)
		cancel()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want it to contain %q", tc.args, err, tc.want)
		}
	}
}

// TestCollectRecordSync: with --record-sync, what `collect` acknowledged is in the recording when
// the answer arrives, while collect still runs; the dashboard (the root command) takes the flag
// too, from the same collector flags.
func TestCollectRecordSync(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	r := startCollect(t, "--record", rec, "--record-sync", "--status-interval", "0")
	exp, err := otlptracegrpc.New(context.Background(), otlptracegrpc.WithEndpoint(r.grpc), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Shutdown(context.Background())
	if err := exp.ExportSpans(context.Background(), collectStubs(0, 7)); err != nil {
		t.Fatal(err)
	}
	f, err := tracefile.Open(rec, tracefile.ReadOptions{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := f.Next()
	if err != nil || len(got.Batch.Spans) != 7 {
		t.Fatalf("the recording holds %v, err %v: want the 7 acknowledged spans", got, err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, strings.NewReader(""), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "--record-sync") {
		t.Errorf("the dashboard does not take --record-sync:\n%s", out.String())
	}
}

func TestCollectHelpSaysLoopbackAndExposure(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"collect", "--help"}, strings.NewReader(""), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"127.0.0.1:4317", "127.0.0.1:4318", "exposes the collector", "--token-file", "--record", "20MiB", "1000000"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

func TestByteSizeFlag(t *testing.T) {
	for in, want := range map[string]int64{"20MiB": 20 << 20, "512kib": 512 << 10, "1G": 1 << 30, "4096": 4096, " 2 MB ": 2 << 20, "7b": 7} {
		var b byteSize
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, b, err, want)
		}
	}
	for _, bad := range []string{"", "MiB", "-1MiB", "0", "1.5MiB", "12XB", "99999999999GiB"} {
		var b byteSize
		if err := b.Set(bad); err == nil {
			t.Errorf("Set(%q) accepted: %d", bad, b)
		}
	}
	for v, want := range map[int64]string{20 << 20: "20MiB", 1536: "1536", 1 << 30: "1GiB", 100: "100"} {
		b := byteSize(v)
		if b.String() != want {
			t.Errorf("String(%d) = %q, want %q", v, b.String(), want)
		}
	}
}
