package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/stormwatch/stormwatch/tracefile"
	"github.com/stormwatch/stormwatch/tracefile/foreigntest"
)

// Payloads a sender puts in its data to reach the terminal of whoever reads the analysis: a
// title change (OSC), leaving the alternate screen and clearing it (CSI), a bidi override and a
// zero-width space.
const (
	hostileService = "front\x1b]0;pwned\x07end"
	hostileHost    = "evil\x1b[2J\u202ehost"
	hostileName    = "GET \u202egnp.exe\u200b"
)

// obeyable reports what in s a terminal would obey.
func obeyable(s string) string {
	for _, bad := range []string{"\x1b", "\u009b", "\u202e", "\u200b", "\x07"} {
		if strings.Contains(s, bad) {
			return bad
		}
	}
	return ""
}

// writeHostileRecording writes a retry storm whose service, URL host and span names carry the
// payloads: a SERVER span of hostileService, three failing CLIENT attempts to hostileHost.
func writeHostileRecording(t *testing.T, path string, seed byte) {
	t.Helper()
	str := func(k, v string) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
	}
	num := func(k string, v int64) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}}
	}
	t0 := uint64(time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC).UnixNano())
	tid := []byte{seed, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	ss := []*tracepb.Span{{TraceId: tid, SpanId: []byte{seed, 0, 0, 0, 0, 0, 0, 1}, Name: hostileName, Kind: tracepb.Span_SPAN_KIND_SERVER,
		StartTimeUnixNano: t0, EndTimeUnixNano: t0 + 100e6}}
	for i := range 3 {
		ss = append(ss, &tracepb.Span{TraceId: tid, SpanId: []byte{seed, 0, 0, 0, 0, 0, 0, byte(2 + i)}, ParentSpanId: ss[0].SpanId,
			Name: hostileName, Kind: tracepb.Span_SPAN_KIND_CLIENT,
			StartTimeUnixNano: t0 + uint64(1+20*i)*1e6, EndTimeUnixNano: t0 + uint64(10+20*i)*1e6,
			Attributes: []*commonpb.KeyValue{str("http.request.method", "GET"), str("url.full", "http://"+hostileHost+":8080/x"),
				str("server.address", hostileHost), num("server.port", 8080), num("http.response.status_code", 503),
				num("http.request.resend_count", int64(i))},
			Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR}})
	}
	w, err := tracefile.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteProto(&coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource:   &resourcepb.Resource{Attributes: []*commonpb.KeyValue{str("service.name", hostileService)}},
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: ss}},
	}}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// The text and markdown outputs of analyze and diff show the payloads escaped (visible, e.g.
// `\x1b`), and JSON keeps them exact.
func TestHostileTextIsEscapedInEveryOutput(t *testing.T) {
	dir := t.TempDir()
	before, after := filepath.Join(dir, "before.jsonl"), filepath.Join(dir, "after.jsonl")
	writeHostileRecording(t, before, 1)
	writeHostileRecording(t, after, 2)
	for _, args := range [][]string{
		{"analyze", before},
		{"analyze", "--format", "markdown", before},
		{"diff", before, after},
		{"diff", "--format", "markdown", before, after},
	} {
		var out, errb bytes.Buffer
		err := run(context.Background(), args, strings.NewReader(""), &out, &errb)
		exitCode(err, &errb)
		if bad := obeyable(out.String() + errb.String()); bad != "" {
			t.Errorf("%v: %q reaches the terminal:\n%s\n%s", args, bad, out.String(), errb.String())
		}
		if !strings.Contains(out.String(), `evil\x1b[`) { // the dependency, named by its host
			t.Errorf("%v: the host is not shown escaped:\n%s", args, out.String())
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"analyze", "--format", "json", before}, strings.NewReader(""), &out, &bytes.Buffer{}); err != nil && exitCode(err, &bytes.Buffer{}) > 1 {
		t.Fatal(err)
	}
	var rep struct {
		Dependencies []struct {
			Callers []string `json:"callers"`
		} `json:"dependencies"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Dependencies) != 1 || len(rep.Dependencies[0].Callers) != 1 || rep.Dependencies[0].Callers[0] != hostileService {
		t.Errorf("JSON does not keep the service name exact: %+v", rep.Dependencies)
	}
}

// A Jaeger (or whatever answers at its address) whose error body carries escape sequences: the
// error the user reads shows them escaped.
func TestHostileJaegerErrorIsEscaped(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte("bad request \x1b]0;pwned\x07\x1b[2J \u202eevil"))
	}))
	defer srv.Close()
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"analyze", "--jaeger", srv.URL, "--service", "x"}, strings.NewReader(""), &out, &errb)
	if err == nil {
		t.Fatal("analyze succeeded against a failing Jaeger")
	}
	exitCode(err, &errb)
	if bad := obeyable(errb.String()); bad != "" {
		t.Errorf("%q reaches the terminal: %q", bad, errb.String())
	}
	if !strings.Contains(errb.String(), `\x1b]0;pwned`) {
		t.Errorf("the body is not shown escaped: %q", errb.String())
	}
}

// The dashboard in a real terminal (tmux) shows a hostile service name and URL escaped: the
// terminal's title stays, the alternate screen stays on, and the payload is visible.
func TestDashboardShowsHostileTextEscaped(t *testing.T) {
	dir, bin := buildForTerminal(t)
	rec := filepath.Join(dir, "hostile.jsonl")
	writeHostileRecording(t, rec, 3)
	s := newTmux(t, 160, 40, []string{"TERM=xterm-256color"}, bin+" replay --loop "+rec+"; sleep 60")
	screen := s.waitScreen(`callers: front\x1b]0;pwned\x07end`, 20*time.Second)
	if bad := obeyable(screen); bad != "" {
		t.Errorf("the pane holds %q:\n%s", bad, screen)
	}
	out, err := exec.Command("tmux", "-L", s.socket, "display-message", "-p", "-t", "main", "#{pane_title}|#{alternate_on}").CombinedOutput()
	if err != nil {
		t.Fatalf("tmux display-message: %v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); strings.Contains(got, "pwned") || !strings.HasSuffix(got, "|1") {
		t.Errorf("title|alternate screen = %q: the data was obeyed", got)
	}
}

// user:password in --jaeger authenticates and is printed nowhere: not in the report's notes or
// trace links (JSON, text), not on standard error; a redirect to another origin with those
// credentials fails the run with a clear error instead of sending them on.
func TestJaegerPasswordNeverPrinted(t *testing.T) {
	var body []byte
	{
		rec := filepath.Join(t.TempDir(), "t.jsonl")
		writeHostileRecording(t, rec, 4)
		r, err := tracefile.Open(rec, tracefile.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Next()
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UnixNano()
		for i := range got.Batch.Spans {
			s := &got.Batch.Spans[i]
			d := s.EndUnixNano - s.StartUnixNano
			s.StartUnixNano, s.EndUnixNano = now-int64(time.Minute)+int64(i)*int64(time.Millisecond), now-int64(time.Minute)+int64(i)*int64(time.Millisecond)+d
		}
		body = foreigntest.Jaeger(got.Batch.Spans)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "oncall" || p != "hunter2" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.URL.Path != "/api/traces" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Write(body)
	}))
	defer srv.Close()
	url := strings.Replace(srv.URL, "http://", "http://oncall:hunter2@", 1)
	for _, format := range []string{"json", "text", "markdown"} {
		var out, errb bytes.Buffer
		err := run(context.Background(), []string{"analyze", "--jaeger", url, "--service", hostileService, "--format", format}, strings.NewReader(""), &out, &errb)
		if code := exitCode(err, &errb); code > 1 {
			t.Fatalf("%s: exit %d: %s", format, code, errb.String())
		}
		if strings.Contains(out.String()+errb.String(), "hunter2") {
			t.Errorf("%s: the password is printed:\n%s\n%s", format, out.String(), errb.String())
		}
		if !strings.Contains(out.String(), srv.URL) {
			t.Errorf("%s: the Jaeger's address is not in the report:\n%s", format, out.String())
		}
	}
	away := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://localhost"+srv.URL[len("http://127.0.0.1"):]+r.URL.RequestURI(), http.StatusFound)
	}))
	defer away.Close()
	var errb bytes.Buffer
	err := run(context.Background(), []string{"analyze", "--jaeger", strings.Replace(away.URL, "http://", "http://oncall:hunter2@", 1), "--service", "x"},
		strings.NewReader(""), &bytes.Buffer{}, &errb)
	if code := exitCode(err, &errb); code != 2 || !strings.Contains(errb.String(), "refused a redirect") || strings.Contains(errb.String(), "hunter2") {
		t.Errorf("a redirect elsewhere: exit %d: %s", code, errb.String())
	}
}

// diff and analyze refuse what is not a regular file at once (`diff /dev/zero x` never ended); a
// collector's report URL that redirects elsewhere with --token-file is refused, and an answer
// that is not a report says why.
func TestDiffAndAnalyzeRefuseWhatIsNoFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	writeHostileRecording(t, good, 5)
	for _, args := range [][]string{{"diff", "/dev/zero", good}, {"diff", good, dir}, {"analyze", "/dev/zero"}, {"analyze", dir}} {
		done := make(chan string, 1)
		go func() {
			var errb bytes.Buffer
			err := run(context.Background(), args, strings.NewReader(""), &bytes.Buffer{}, &errb)
			exitCode(err, &errb)
			done <- errb.String()
		}()
		select {
		case msg := <-done:
			if !strings.Contains(msg, "not a regular file") {
				t.Errorf("%v: %s", args, msg)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%v: still running after 10 s", args)
		}
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var leaked atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Add(1)
		}
		w.Write([]byte(`{"version": 1}`))
	}))
	defer target.Close()
	away := httptest.NewServer(http.RedirectHandler(target.URL+"/api/v1/report", http.StatusFound))
	defer away.Close()
	notReport := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"version": `)) }))
	defer notReport.Close()
	for url, want := range map[string]string{away.URL: "refused a redirect", notReport.URL: "not a stormwatch report: unexpected EOF"} {
		var errb bytes.Buffer
		err := run(context.Background(), []string{"diff", "--token-file", tokenFile, url, good}, strings.NewReader(""), &bytes.Buffer{}, &errb)
		if code := exitCode(err, &errb); code != 2 || !strings.Contains(errb.String(), want) {
			t.Errorf("%s: exit %d: %s, want %q", url, code, errb.String(), want)
		}
	}
	if leaked.Load() != 0 {
		t.Errorf("the token reached another place %d times", leaked.Load())
	}
}
