// Package jaegertest starts a real Jaeger (the v2 binary, built from tools/jaeger) for tests: its
// OTLP receiver and query service on free loopback ports, in-memory storage, and none of its own
// telemetry (service.telemetry off, and the query service's own tracer off), so it neither exports
// its own traces to a collector on 127.0.0.1:4317 nor opens a metrics port.
package jaegertest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server is a running Jaeger.
type Server struct {
	// QueryURL is the query service and UI: http://127.0.0.1:PORT.
	QueryURL string
	// OTLPHTTP is the OTLP/HTTP receiver's base URL (POST OTLPHTTP+"/v1/traces").
	OTLPHTTP string
	// OTLPGRPC is the OTLP/gRPC receiver's host:port.
	OTLPGRPC string

	stop func()
}

// Stop stops the Jaeger before the test ends (to test what happens when it goes away).
func (s *Server) Stop() { s.stop() }

// Binary is the path of the Jaeger binary tools/jaeger/build.sh builds (or $STORMWATCH_JAEGER),
// and whether it is there.
func Binary() (string, bool, error) {
	if p := os.Getenv("STORMWATCH_JAEGER"); p != "" {
		_, err := os.Stat(p)
		return p, err == nil, nil
	}
	version, err := Version()
	if err != nil {
		return "", false, err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", false, err
	}
	p := filepath.Join(cache, "stormwatch", fmt.Sprintf("jaeger-%s-%s-%s", version, runtime.GOOS, runtime.GOARCH), "jaeger")
	_, err = os.Stat(p)
	return p, err == nil, nil
}

// Version is the Jaeger version tools/jaeger/go.mod pins: the build script and the tests agree
// on the cache path through it.
func Version() (string, error) {
	mod, err := toolsModule()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(mod)
	if err != nil {
		return "", fmt.Errorf("read the Jaeger tools module: %w", err)
	}
	m := regexp.MustCompile(`(?m)^\s*github\.com/jaegertracing/jaeger (v\S+)`).FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("%s does not require github.com/jaegertracing/jaeger", mod)
	}
	return string(m[1]), nil
}

// toolsModule finds tools/jaeger/go.mod: a test runs in its package's directory, somewhere under
// the repository's root.
func toolsModule() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "tools", "jaeger", "go.mod")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no tools/jaeger/go.mod above the working directory: run the tests from the repository")
		}
		dir = parent
	}
}

// Start runs a Jaeger until the test ends. Where the binary has not been built it skips the test,
// saying how to build it - except under CI (CI set), whose script builds it, where a missing
// binary is a failure.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, ok, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		msg := fmt.Sprintf("no Jaeger binary at %s: build it with tools/jaeger/build.sh (make jaeger; about 12 minutes once, then cached)", bin)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	ports := freePorts(t, 4)
	s := &Server{
		QueryURL: "http://" + ports[0],
		OTLPHTTP: "http://" + ports[1],
		OTLPGRPC: ports[2],
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(configTemplate, ports[2], ports[1], ports[0], ports[3])), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", config)
	cmd.Dir = dir
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = nil
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	var log logBuffer
	ready := make(chan struct{})
	exited := make(chan error, 1)
	go func() {
		// Jaeger is a collector: it says so once every receiver and extension listens.
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			log.add(sc.Text())
			if strings.Contains(sc.Text(), "Everything is ready") {
				once.Do(func() { close(ready) })
			}
		}
		exited <- cmd.Wait()
	}()
	var stopOnce sync.Once
	s.stop = func() {
		stopOnce.Do(func() {
			cmd.Process.Signal(os.Interrupt)
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-exited
			}
		})
	}
	t.Cleanup(func() {
		s.stop()
		if strings.Contains(log.String(), ":4317: connect") {
			t.Errorf("jaeger tried to export its own traces to port 4317:\n%s", log.String())
		}
	})
	select {
	case <-ready:
	case err := <-exited:
		exited <- err
		t.Fatalf("jaeger exited before it was ready: %v\n%s", err, log.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("jaeger not ready after 2 minutes:\n%s", log.String())
	}
	return s
}

// configTemplate: OTLP in, memory storage, the query service; receivers and extensions on the
// loopback ports given (OTLP gRPC, OTLP HTTP, query HTTP, query gRPC).
const configTemplate = `
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    traces:
      level: none
    logs:
      level: info
extensions:
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 100000
  jaeger_query:
    # Its own tracer would export jaeger's traces to 127.0.0.1:4317 - into a stormwatch running
    # there, or retrying for seconds at shutdown when nothing is.
    enable_tracing: false
    storage:
      traces: mem
    http:
      endpoint: "%[3]s"
    grpc:
      endpoint: "%[4]s"
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: "%[1]s"
      http:
        endpoint: "%[2]s"
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`

// freePorts reserves n loopback ports long enough to learn their numbers. Another process could
// take one before Jaeger binds it; Jaeger would then fail to start and say so.
func freePorts(t testing.TB, n int) []string {
	t.Helper()
	var out []string
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	for _, l := range ls {
		l.Close()
	}
	return out
}

// SendOTLPJSON posts OTLP/JSON export requests, one per line of lines, to the Jaeger's OTLP/HTTP
// receiver. The receiver answers once the storage has the spans, so they can be searched as soon
// as this returns.
func (s *Server) SendOTLPJSON(t testing.TB, lines []byte) {
	t.Helper()
	for _, line := range bytes.Split(lines, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		resp, err := http.Post(s.OTLPHTTP+"/v1/traces", "application/json", bytes.NewReader(line))
		if err != nil {
			t.Fatal(err)
		}
		var body bytes.Buffer
		body.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("jaeger OTLP receiver: %s: %s", resp.Status, body.String())
		}
	}
}

// logBuffer keeps Jaeger's log for a failure message.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (l *logBuffer) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) > 200 {
		l.lines = l.lines[1:]
	}
	l.lines = append(l.lines, s)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}
