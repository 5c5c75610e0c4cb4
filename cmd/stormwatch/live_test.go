package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/tui"
)

// tmuxSession runs a command in a detached tmux session on its own server (a unique -L socket),
// so the test never touches a user's tmux, and kills that server at the end.
type tmuxSession struct {
	t      *testing.T
	socket string
}

func newTmux(t *testing.T, width, height int, env []string, command string) *tmuxSession {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed: the end-to-end dashboard test needs a real terminal (CI installs tmux, see .ci/run)")
	}
	s := &tmuxSession{t: t, socket: fmt.Sprintf("stormwatch-test-%d-%d", os.Getpid(), time.Now().UnixNano())}
	args := []string{"-L", s.socket, "-f", "/dev/null", "new-session", "-d", "-s", "main",
		"-x", fmt.Sprint(width), "-y", fmt.Sprint(height)}
	for _, e := range env {
		args = append(args, "-e", e)
	}
	args = append(args, command)
	if out, err := exec.Command("tmux", args...).CombinedOutput(); err != nil {
		t.Fatalf("start tmux: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", s.socket, "kill-server").Run() })
	return s
}

func (s *tmuxSession) capture() string {
	out, err := exec.Command("tmux", "-L", s.socket, "capture-pane", "-p", "-t", "main").CombinedOutput()
	if err != nil {
		return "capture-pane failed: " + err.Error() + ": " + string(out)
	}
	return string(out)
}

func (s *tmuxSession) keys(keys ...string) {
	args := append([]string{"-L", s.socket, "send-keys", "-t", "main"}, keys...)
	if out, err := exec.Command("tmux", args...).CombinedOutput(); err != nil {
		s.t.Fatalf("send-keys %v: %v: %s", keys, err, out)
	}
}

// waitScreen polls the pane until it shows want, or fails with the last screen.
func (s *tmuxSession) waitScreen(want string, within time.Duration) string {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for {
		screen := s.capture()
		if strings.Contains(screen, want) {
			return screen
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the screen never showed %q within %s; last screen:\n%s", want, within, screen)
		}
		time.Sleep(150 * time.Millisecond)
	}
}

func freeLoopbackPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// buildForTerminal builds the real binary into a temporary directory for a test that drives it in
// tmux, or skips the test (-short, or no tmux on the machine). It returns the directory and the binary.
func buildForTerminal(t *testing.T) (dir, bin string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary and drives a terminal")
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed: the end-to-end dashboard test needs a real terminal (CI installs tmux, see .ci/run)")
	}
	dir = t.TempDir()
	bin = filepath.Join(dir, "stormwatch")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir, bin
}

// TestLiveDashboardEndToEnd builds the real binary, runs `stormwatch` in a tmux terminal, sends a
// retrying client's spans with the OpenTelemetry SDK's OTLP/HTTP exporter to its port, and reads
// the dependency and its amplification off the screen.
func TestLiveDashboardEndToEnd(t *testing.T) {
	dir, bin := buildForTerminal(t)
	grpcAddr, httpAddr := freeLoopbackPort(t), freeLoopbackPort(t)
	logFile := filepath.Join(dir, "stormwatch.log")
	cmd := fmt.Sprintf("%s --grpc %s --http %s --settle 300ms --log-file %s; echo EXITED $?; sleep 60",
		bin, grpcAddr, httpAddr, logFile)
	s := newTmux(t, 120, 36, []string{"TERM=xterm-256color"}, cmd)

	s.waitScreen("No traces yet", 20*time.Second)
	screen := s.waitScreen("http "+httpAddr, time.Second)
	if !strings.Contains(screen, "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+httpAddr) {
		t.Errorf("the empty state does not show the exporter example for this port:\n%s", screen)
	}

	sendRetryStorm(t, httpAddr)

	screen = s.waitScreen("WORST reviews.internal", 20*time.Second)
	for _, want := range []string{"▲ WORST", "3.00x", "100% 503"} {
		if !strings.Contains(screen, want) {
			t.Errorf("dashboard lacks %q:\n%s", want, screen)
		}
	}

	// Drill in: operations of that dependency, then its trace.
	s.keys("Enter")
	s.waitScreen("filter: dependency=reviews.internal", 5*time.Second)
	s.keys("Enter")
	screen = s.waitScreen("#3/3", 5*time.Second)
	if !strings.Contains(screen, "[4 Trace]") {
		t.Errorf("enter on the operation did not open its trace:\n%s", screen)
	}
	s.keys("q")
	s.waitScreen("EXITED 0", 10*time.Second)
	if b, err := os.ReadFile(logFile); err != nil || !strings.Contains(string(b), "dashboard starting") {
		t.Errorf("the log file %s lacks the start line (err %v)", logFile, err)
	}
}

// sendRetryStorm exports one trace as a service with a retry loop would: an operation span and
// three failed attempts to one dependency.
func sendRetryStorm(t *testing.T, httpAddr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(httpAddr), otlptracehttp.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "frontend"))))
	tr := tp.Tracer("e2e")
	ctx2, root := tr.Start(ctx, "GET /product", trace.WithSpanKind(trace.SpanKindServer))
	for i := 0; i < 3; i++ {
		_, sp := tr.Start(ctx2, "GET", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			attribute.String("http.request.method", "GET"),
			attribute.String("url.full", "http://reviews.internal:8080/reviews/1"),
			attribute.String("server.address", "reviews.internal"),
			attribute.Int("server.port", 8080),
			attribute.Int("http.response.status_code", 503),
			attribute.Int("http.request.resend_count", i),
		))
		sp.SetStatus(codes.Error, "503")
		time.Sleep(5 * time.Millisecond)
		sp.End()
	}
	root.End()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatalf("export to %s: %v", httpAddr, err)
	}
}

const stormFixture = "../../fixtures/amplification-27-reference.jsonl"

// TestDashboardCommandsRefuseWithoutTerminal: piped or in CI, each dashboard command says what to
// run instead, and exits 2.
func TestDashboardCommandsRefuseWithoutTerminal(t *testing.T) {
	for _, args := range [][]string{{}, {"demo"}, {"replay", stormFixture}} {
		var out, errb bytes.Buffer
		err := run(context.Background(), args, strings.NewReader(""), &out, &errb)
		if err == nil {
			t.Fatalf("%v: started without a terminal", args)
		}
		if code := exitCode(err, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
		for _, want := range []string{"needs a terminal", "stormwatch collect", "stormwatch analyze"} {
			if !strings.Contains(errb.String(), want) {
				t.Errorf("%v: message lacks %q: %s", args, want, errb.String())
			}
		}
		if out.Len() != 0 {
			t.Errorf("%v: wrote to stdout: %q", args, out.String())
		}
	}
}

// TestDashboardStopsWithoutWaitingForItsNextSnapshot: when the command's context ends (SIGTERM),
// the dashboard and its pipeline stop at once, even though the dashboard's next snapshot never
// comes - the limit of an idle dashboard's long tick. A shutdown that waited for the tick would
// hang here.
func TestDashboardStopsWithoutWaitingForItsNextSnapshot(t *testing.T) {
	var f collectorFlags
	fs := pflag.NewFlagSet("dashboard", pflag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse([]string{"--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	d := dashboardFlags{analysisFlags: analysisFlags{settle: time.Hour}, refresh: time.Hour}
	log := slog.New(slog.DiscardHandler)
	s, err := newSession(&d, f.maxSpans, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := startPipeline(ctx, &f, s, log)
	if err != nil {
		t.Fatal(err)
	}
	opt := p.tuiOptions(&f, &d)
	shown, never := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(never) })
	var pulls atomic.Int32
	opt.Source = tui.SourceFunc(func(now time.Time) *engine.Snapshot {
		if pulls.Add(1) > 1 {
			// Released when the test ends, into a program that has stopped: it must not
			// close shown again (a panic the program would recover from while it is gone).
			<-never
			return s.Snapshot(now)
		}
		defer close(shown)
		return s.Snapshot(now)
	})
	in, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	out, err := os.Create(filepath.Join(t.TempDir(), "screen"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	var errb bytes.Buffer
	io := streams{in: in, out: out, err: &errb}
	done := make(chan error, 1)
	go func() { done <- p.endDashboard(io, &d, &demoTraffic{}, runDashboard(ctx, io, opt)) }()

	select {
	case <-shown:
	case <-time.After(30 * time.Second):
		t.Fatal("the dashboard never took its first snapshot")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the dashboard stopped with %v, want a normal exit", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the dashboard did not stop when its context ended: it waits for its next snapshot")
	}
	if !strings.Contains(errb.String(), "logs are in") {
		t.Errorf("stderr lacks where the logs went: %q", errb.String())
	}
}

// selectedRow is the pane line of the selected row (marked ">"), or -1.
func selectedRow(screen string) (int, string) {
	for i, l := range strings.Split(screen, "\n") {
		if strings.HasPrefix(l, ">") {
			return i, l
		}
	}
	return -1, ""
}

// TestDashboardAppliesBatchedKeys: keys that reach the dashboard in one read - "jjj" sent at once,
// as a held key or a slow SSH link delivers them - each move the cursor, in a real terminal.
func TestDashboardAppliesBatchedKeys(t *testing.T) {
	dir, bin := buildForTerminal(t)
	fixture, err := filepath.Abs("../../fixtures/lab-layers.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	cmd := fmt.Sprintf("%s replay --speed 0 --settle 200ms --log-file %s %s; echo EXITED $?; sleep 60",
		bin, filepath.Join(dir, "stormwatch.log"), fixture)
	s := newTmux(t, 120, 36, []string{"TERM=xterm-256color"}, cmd)
	s.waitScreen("spans played, done", 20*time.Second)
	s.waitScreen("at http://dependency:8080", 10*time.Second)
	s.keys("p") // freeze the view: rows keep their places while the keys move the cursor
	s.waitScreen("VIEW FROZEN", 5*time.Second)
	before, row := selectedRow(s.capture())
	if before < 0 {
		t.Fatalf("no selected row:\n%s", s.capture())
	}
	s.keys("-l", "jjj")
	deadline := time.Now().Add(5 * time.Second)
	for {
		after, sel := selectedRow(s.capture())
		if after == before+3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jjj moved the cursor from line %d (%q) to line %d (%q), want 3 rows down:\n%s", before, row, after, sel, s.capture())
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.keys("q")
	s.waitScreen("EXITED 0", 10*time.Second)
}
