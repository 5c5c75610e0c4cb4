package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/collector"
	"github.com/stormwatch/stormwatch/tracefile"
	"github.com/stormwatch/stormwatch/tracefile/replay"
)

// ampFixture is the stock-instrumentation storm: 2 requests, three retrying layers, 54 calls to
// dep (27x).
const ampFixture = "../../fixtures/amplification-27-stock.jsonl"

// sendFixture sends a recorded fixture to the running collector over real OTLP (the replay
// blaster: pre-encoded requests, shifted to now).
func sendFixture(t *testing.T, endpoint string, proto replay.Protocol, token, path string) {
	t.Helper()
	reqs, err := replay.LoadRequests([]string{path}, tracefile.ReadOptions{Strict: true}, proto, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	st, err := replay.Blast(context.Background(), reqs, replay.SendOptions{
		Target: replay.Target{Endpoint: endpoint, Protocol: proto, Insecure: true, Token: token}})
	if err != nil {
		t.Fatalf("send %s: %v", path, err)
	}
	if st.Refused > 0 || st.Rejected > 0 {
		t.Fatalf("send %s: %+v", path, st)
	}
}

// get fetches url with an optional bearer token.
func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// eventually polls f until it returns "" (success) or 15 s pass, then fails with its last message.
func eventually(t *testing.T, f func() string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		msg := f()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var depAmplification = regexp.MustCompile(
	`(?m)^stormwatch_dependency_amplification_ratio\{stormwatch_dependency="dep",stormwatch_dependency_service="dep"\} (\S+)$`)

// TestCollectAnalyzesLive: `stormwatch collect` runs the live analyzer. The 27x fixture, sent over
// OTLP/gRPC, shows up in /metrics (the connector's series), in GET /api/v1/report (the --format
// json contract, the same dependencies as the golden `analyze` report), in the status line, in
// the shutdown summary and in --report.
func TestCollectAnalyzesLive(t *testing.T) {
	reportFile := filepath.Join(t.TempDir(), "final.json")
	r := startCollect(t, "--settle", "100ms", "--status-interval", "50ms", "--report", reportFile)
	sendFixture(t, r.grpc, replay.GRPC, "", ampFixture)

	eventually(t, func() string {
		_, body := get(t, "http://"+r.http+"/metrics", "")
		m := depAmplification.FindStringSubmatch(body)
		if m == nil || m[1] != "27" {
			return "/metrics never showed dep at 27x:\n" + grepLines(body, "stormwatch_dependency_amplification")
		}
		return ""
	})
	_, body := get(t, "http://"+r.http+"/metrics", "")
	for _, want := range []string{
		`stormwatch_dependency_physical_calls_total{stormwatch_dependency="dep",stormwatch_dependency_service="dep"} 54`,
		`stormwatch_dependency_logical_operations_total{stormwatch_dependency="dep",stormwatch_dependency_service="dep"} 2`,
		`stormwatch_dependency_attempts_total{stormwatch_attempt_outcome="503",stormwatch_dependency="dep",stormwatch_dependency_service="dep"} 54`,
		`stormwatch_caller_physical_calls_total{stormwatch_caller="adapter",stormwatch_dependency="dep",stormwatch_dependency_service="dep"} 54`,
		`stormwatch_caller_amplification_ratio{stormwatch_caller="adapter",stormwatch_dependency="dep",stormwatch_dependency_service="dep"} 27`,
		`stormwatch_findings_total{stormwatch_finding_detector="retry-amplification",stormwatch_finding_severity="critical"}`,
		`stormwatch_analyzed_traces_total 2`,
		`stormwatch_held_traces 2`,
		`stormwatch_collector_received_spans_total{transport="grpc"} 158`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	code, js := get(t, "http://"+r.http+reportPath, "")
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", reportPath, code, js)
	}
	var got, golden analyzer.Report
	if err := json.Unmarshal([]byte(js), &got); err != nil {
		t.Fatalf("the report is not the JSON contract: %v\n%s", err, js)
	}
	gb, err := os.ReadFile("../../fixtures/golden/amplification-27-stock.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(gb, &golden); err != nil {
		t.Fatal(err)
	}
	if got.Version != analyzer.ReportVersion || got.Input != golden.Input {
		t.Errorf("report input %+v (version %d), want %+v", got.Input, got.Version, golden.Input)
	}
	gd, _ := json.Marshal(got.Dependencies)
	wd, _ := json.Marshal(golden.Dependencies)
	if !bytes.Equal(gd, wd) {
		t.Errorf("live dependencies differ from analyze's:\n got %s\nwant %s", gd, wd)
	}
	if !hasFinding(got, "retry-amplification", analyzer.SeverityCritical) {
		t.Errorf("no critical retry-amplification in the live report: %+v", got.Findings)
	}
	if code, _ := get(t, "http://"+r.http+reportPath, ""); code != http.StatusOK {
		t.Errorf("second GET: %d", code)
	}
	// The answer is bounded: ?findings=N carries the first N and says how many there are.
	if len(got.Findings) < 2 {
		t.Fatalf("the fixture gave %d findings, want several", len(got.Findings))
	}
	_, js = get(t, "http://"+r.http+reportPath+"?findings=1", "")
	var one analyzer.Report
	if err := json.Unmarshal([]byte(js), &one); err != nil {
		t.Fatal(err)
	}
	if len(one.Findings) != 1 || !slices.ContainsFunc(one.Notes, func(n string) bool {
		return strings.Contains(n, fmt.Sprintf("the first 1 of %d findings", len(got.Findings)))
	}) {
		t.Errorf("?findings=1: %d findings, notes %q", len(one.Findings), one.Notes)
	}
	if code, body := get(t, "http://"+r.http+reportPath+"?findings=lots", ""); code != http.StatusBadRequest || !strings.Contains(body, "want a number") {
		t.Errorf("?findings=lots: %d %s", code, body)
	}
	if resp, err := http.Head("http://" + r.http + reportPath); err != nil || resp.StatusCode != http.StatusOK ||
		resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("HEAD %s: %v %v", reportPath, err, resp)
	} else {
		resp.Body.Close()
	}
	resp, err := http.Post("http://"+r.http+reportPath, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST %s: %d Allow %q, want 405 GET, HEAD", reportPath, resp.StatusCode, resp.Header.Get("Allow"))
	}

	r.waitStderr(t, regexp.MustCompile(`stormwatch: .*158 spans .* · findings [1-9]\d* critical \d+ warning \d+ info · worst 27\.00x dep\n`))
	if err := r.stop(t); err != nil {
		t.Fatalf("Ctrl-C: %v", err)
	}
	out := r.stderr.String()
	for _, want := range []string{
		"stormwatch: analyzed 2 traces, 158 spans, 26 operations; findings: ",
		"stormwatch:   dep (http://dep:8080): 54 calls for 2 intents (27.00x)",
		"stormwatch: report written to " + reportFile,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
	}
	fb, err := os.ReadFile(reportFile)
	if err != nil {
		t.Fatal(err)
	}
	var final analyzer.Report
	if err := json.Unmarshal(fb, &final); err != nil {
		t.Fatalf("--report is not the JSON contract: %v", err)
	}
	if fd, _ := json.Marshal(final.Dependencies); !bytes.Equal(fd, wd) {
		t.Errorf("--report dependencies:\n got %s\nwant %s", fd, wd)
	}
}

// TestCollectFinalReportIncludesUnsettledTraces: traces still inside --settle at Ctrl-C are
// analyzed before the final summary and --report.
func TestCollectFinalReportIncludesUnsettledTraces(t *testing.T) {
	reportFile := filepath.Join(t.TempDir(), "final.json")
	// A longer report from an earlier run: replaced whole, no tail of it left behind.
	if err := os.WriteFile(reportFile, bytes.Repeat([]byte("x"), 1<<16), 0o644); err != nil {
		t.Fatal(err)
	}
	r := startCollect(t, "--settle", "1h", "--status-interval", "0", "--report", reportFile)
	sendFixture(t, "http://"+r.http, replay.HTTPProtobuf, "", ampFixture)
	eventually(t, func() string {
		if _, body := get(t, "http://"+r.http+"/metrics", ""); !strings.Contains(body, "stormwatch_pending_traces 2") {
			return "the fixture's traces never arrived:\n" + grepLines(body, "stormwatch_pending")
		}
		return ""
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.stderr.String(), "dep (http://dep:8080): 54 calls for 2 intents (27.00x)") {
		t.Errorf("the final summary lacks the unsettled storm:\n%s", r.stderr.String())
	}
	fb, err := os.ReadFile(reportFile)
	if err != nil {
		t.Fatal(err)
	}
	var final analyzer.Report
	if err := json.Unmarshal(fb, &final); err != nil || len(final.Dependencies) == 0 || final.Dependencies[0].Amplification != 27 {
		t.Errorf("--report: %v %+v", err, final.Dependencies)
	}
}

// TestCollectReportNeedsTheToken: with --token-file the report API wants the token (it names
// services and endpoints); /metrics stays open to scrapers.
func TestCollectReportNeedsTheToken(t *testing.T) {
	const token = "tok-report-51"
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startCollect(t, "--token-file", tokenFile, "--settle", "100ms", "--status-interval", "0")
	sendFixture(t, r.grpc, replay.GRPC, token, ampFixture)
	for _, c := range []struct {
		path, token string
		want        int
	}{
		{reportPath, "", http.StatusUnauthorized},
		{reportPath, "wrong", http.StatusUnauthorized},
		{reportPath, token, http.StatusOK},
		{"/metrics", "", http.StatusOK},
	} {
		code, body := get(t, "http://"+r.http+c.path, c.token)
		if code != c.want {
			t.Errorf("GET %s with token %q: %d, want %d: %s", c.path, c.token, code, c.want, body)
		}
		if code == http.StatusUnauthorized && (strings.Contains(body, "dep:8080") || strings.Contains(body, token)) {
			t.Errorf("a refused request got report content or the token: %s", body)
		}
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

func hasFinding(r analyzer.Report, detector string, sev analyzer.Severity) bool {
	for _, f := range r.Findings {
		if f.Detector == detector && f.Severity == sev {
			return true
		}
	}
	return false
}

// grepLines keeps the lines of s that contain sub, for failure messages.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestAnalysisStatusAndFinalSummary(t *testing.T) {
	if got := analysisStatus(nil); got != "" {
		t.Errorf("no snapshot yet: %q", got)
	}
	empty := &engine.Snapshot{}
	if got, want := analysisStatus(empty), " · findings 0 critical 0 warning 0 info"; got != want {
		t.Errorf("nothing analyzed: %q, want %q (no worst dependency)", got, want)
	}
	var r analyzer.Report
	for i := range 7 {
		r.Dependencies = append(r.Dependencies, analyzer.DependencyStats{
			Dependency: "d" + string(rune('a'+i)), PhysicalCalls: 10 - i, LogicalOperations: 2, Amplification: float64(10-i) / 2})
	}
	r.Dependencies[0].Origins, r.Dependencies[0].MoreOrigins = []string{"http://10.0.0.1:80", "http://10.0.0.2:80"}, 3
	r.Findings = []analyzer.Finding{{Severity: analyzer.SeverityCritical}, {Severity: analyzer.SeverityWarning}, {Severity: analyzer.SeverityWarning}}
	if got, want := analysisStatus(&engine.Snapshot{Report: r}), " · findings 1 critical 2 warning 0 info · worst 5.00x da"; got != want {
		t.Errorf("\n got %q\nwant %q", got, want)
	}
	var b bytes.Buffer
	finalSummary(&b, &r)
	want := `stormwatch: analyzed 0 traces, 0 spans, 0 operations; findings: 1 critical, 2 warning, 0 info
stormwatch:   da (http://10.0.0.1:80 +4): 10 calls for 2 intents (5.00x)
stormwatch:   db: 9 calls for 2 intents (4.50x)
stormwatch:   dc: 8 calls for 2 intents (4.00x)
stormwatch:   dd: 7 calls for 2 intents (3.50x)
stormwatch:   de: 6 calls for 2 intents (3.00x)
stormwatch:   ... and 2 more dependencies
`
	if b.String() != want {
		t.Errorf("final summary\n got %s\nwant %s", b.String(), want)
	}

	// One of each reads in the singular.
	if got, want := stopSummary(collector.Stats{AcceptedSpans: 1, RefusedRequests: 1, IgnoredLogsRequests: 1}),
		"stormwatch: stopped: 1 span accepted, 0 rejected, 1 request refused; metrics and logs are received and ignored (1 request)"; got != want {
		t.Errorf("stopped line\n got %q\nwant %q", got, want)
	}
	one := analyzer.Report{Input: analyzer.InputStats{Traces: 1, Spans: 1, Operations: 1},
		Dependencies: []analyzer.DependencyStats{{Dependency: "http://dep:8080", PhysicalCalls: 27, LogicalOperations: 1, Amplification: 27}}}
	for i := range 5 {
		one.Dependencies = append(one.Dependencies, analyzer.DependencyStats{Dependency: fmt.Sprintf("http://d%d:80", i), PhysicalCalls: 1, LogicalOperations: 1, Amplification: 1})
	}
	b.Reset()
	finalSummary(&b, &one)
	for _, w := range []string{"analyzed 1 trace, 1 span, 1 operation;", "http://dep:8080: 27 calls for 1 intent (27.00x)", "http://d0:80: 1 call for 1 intent", "... and 1 more dependency\n"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("final summary lacks %q:\n%s", w, b.String())
		}
	}
}
