package main

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/fixtures"
	"github.com/stormwatch/stormwatch/sources/jaeger/jaegertest"
)

// TestAnalyzeFromJaeger sends fixtures to a real Jaeger over OTLP and analyzes them back with
// `analyze --jaeger` and from the Jaeger JSON file Jaeger itself writes (/api/traces): the
// findings and dependency counts are those of the recording, and each finding's trace is linked
// to its page in the Jaeger UI in the text and Markdown reports.
func TestAnalyzeFromJaeger(t *testing.T) {
	for _, name := range []string{"amplification-27-stock", "fanout-stock", "post-deadline-stock", "untraced-proxy-stock"} {
		t.Run(name, func(t *testing.T) {
			srv := jaegertest.Start(t)
			file := fixture(t, name)
			data, _ := fixtures.Read(name)
			srv.SendOTLPJSON(t, data)
			all := readAllSpans(t, file)
			first, service := all[0].StartUnixNano, ""
			for _, s := range all {
				first = min(first, s.StartUnixNano)
				if s.ParentID.IsZero() {
					service = s.Service()
				}
			}
			since := (time.Since(time.Unix(0, first)) + time.Hour).Round(time.Hour).String()
			args := []string{"analyze", "--jaeger", srv.QueryURL, "--service", service, "--since", since}

			want := analyzeReport(t, file)
			code, out, stderr := runCLI(t, "", append(args, "--format", "json")...)
			if code > 1 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var got analyzer.Report
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatal(err)
			}
			if got.Input != want.Input || !reflect.DeepEqual(got.Findings, want.Findings) || !reflect.DeepEqual(got.Dependencies, want.Dependencies) {
				t.Errorf("from Jaeger:\n%s\nfrom the file:\n%s", mustJSON(got), mustJSON(want))
			}
			if got.TraceURL != srv.QueryURL+"/trace/{trace_id}" || !strings.Contains(strings.Join(got.Notes, "\n"), "from Jaeger at "+srv.QueryURL+" (/api/v3/traces)") {
				t.Errorf("trace_url %q, notes %q", got.TraceURL, got.Notes)
			}
			// The same traces as a file saved from Jaeger's own /api/traces (what the UI downloads).
			q := url.Values{"service": {service}, "limit": {"100"},
				"start": {strconv.FormatInt(first/1000-3_600_000_000, 10)}, "end": {strconv.FormatInt(first/1000+3_600_000_000, 10)}}
			resp, err := http.Get(srv.QueryURL + "/api/traces?" + q.Encode())
			if err != nil {
				t.Fatal(err)
			}
			saved, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			path := filepath.Join(t.TempDir(), "jaeger-download.json")
			if err := os.WriteFile(path, saved, 0o644); err != nil {
				t.Fatal(err)
			}
			fromFile := analyzeReport(t, path)
			if fromFile.Input != want.Input || !reflect.DeepEqual(fromFile.Findings, want.Findings) || !reflect.DeepEqual(fromFile.Dependencies, want.Dependencies) {
				t.Errorf("from a file Jaeger wrote:\n%s\nfrom the recording:\n%s", mustJSON(fromFile), mustJSON(want))
			}

			for _, format := range []string{"text", "markdown"} {
				_, out, _ := runCLI(t, "", append(args, "--format", format)...)
				for _, f := range want.Findings {
					if link := srv.QueryURL + "/trace/" + f.TraceID; f.TraceID != "" && !strings.Contains(out, link) {
						t.Errorf("%s report lacks the link %s:\n%s", format, link, out)
					}
				}
			}
		})
	}
}

// TestAnalyzeJaegerUsage: --jaeger's flags are checked before anything is fetched, and a Jaeger
// that cannot be reached is an input error (exit 2) that names it.
func TestAnalyzeJaegerUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"analyze"}, "give trace files to analyze, or --jaeger URL --service NAME"},
		{[]string{"analyze", "--jaeger", "http://127.0.0.1:1", "x.jsonl"}, "give trace files or --jaeger, not both"},
		{[]string{"analyze", "--jaeger", "http://127.0.0.1:1"}, "--jaeger needs --service NAME"},
		{[]string{"analyze", "--jaeger", "jaeger:16686", "--service", "a"}, "want http(s)://host:port"},
		{[]string{"analyze", "--jaeger", "http://127.0.0.1:1", "--service", "a", "--jaeger-user", "u"}, "--jaeger-user and --jaeger-password-file go together"},
		{[]string{"analyze", "--jaeger", "http://127.0.0.1:1", "--service", "a", "--jaeger-token-file", "/nonexistent"}, "--jaeger-token-file"},
		{[]string{"analyze", "--jaeger", "http://127.0.0.1:1", "--service", "a", "--since", "-1m"}, "--since -1m0s: must be positive"},
		{[]string{"analyze", "--jaeger", "http://127.0.0.1:1", "--service", "a", "--jaeger-timeout", "1s"}, "read traces from Jaeger at http://127.0.0.1:1"},
	} {
		code, out, stderr := runCLI(t, "", c.args...)
		if code != 2 || out != "" || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 saying %q", c.args, code, out, stderr, c.want)
		}
	}
}

// TestLiveJaegerUsage: the dashboard checks its --jaeger flags before it asks for a terminal, so
// a mistake is reported plainly (exit 2) wherever it runs.
func TestLiveJaegerUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--jaeger", "http://127.0.0.1:1"}, "--jaeger needs --service NAME"},
		{[]string{"--jaeger", "http://127.0.0.1:1", "--service", "a", "--poll", "0s"}, "--poll 0s: must be positive"},
		{[]string{"--jaeger", "ftp://jaeger", "--service", "a"}, "want http(s)://host:port"},
	} {
		code, _, stderr := runCLI(t, "", c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 saying %q", c.args, code, stderr, c.want)
		}
	}
}

// jaegerSplitResult is an answer of Jaeger's UI API (/api/traces) that lists one trace whose
// second span names a trace id of its own: one search result, two traces to analyze.
const jaegerSplitResult = `{"data":[{"traceID":"00000000000000000000000000000001","spans":[` +
	`{"traceID":"00000000000000000000000000000001","spanID":"0000000000000001","operationName":"GET /","startTime":1000000000000000,"duration":1000,"processID":"p1"},` +
	`{"traceID":"00000000000000000000000000000002","spanID":"0000000000000002","operationName":"GET /","startTime":1000000000000000,"duration":1000,"processID":"p1"}],` +
	`"processes":{"p1":{"serviceName":"edge"}}}]}`

// fakeJaegerV1 is a Jaeger without the OTLP query API that answers every search with body.
func fakeJaegerV1(t *testing.T, body string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/traces" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestAnalyzeJaegerLimitNote: the note that Jaeger may have more traces is about what the search
// returned, which --limit bounds: a result whose spans name two trace ids counts once.
func TestAnalyzeJaegerLimitNote(t *testing.T) {
	url := fakeJaegerV1(t, jaegerSplitResult)
	for _, c := range []struct {
		limit string
		noted bool
	}{{"1", true}, {"2", false}} {
		code, out, stderr := runCLI(t, "", "analyze", "--jaeger", url, "--service", "edge", "--since", "1h", "--limit", c.limit, "--format", "json")
		if code != 0 {
			t.Fatalf("--limit %s: exit %d: %s", c.limit, code, stderr)
		}
		var rep analyzer.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		notes := strings.Join(rep.Notes, "\n")
		if rep.Input.Traces != 2 || !strings.Contains(notes, "read 2 traces") {
			t.Fatalf("--limit %s: input %+v, notes %q; want the result's two traces read", c.limit, rep.Input, rep.Notes)
		}
		if noted := strings.Contains(notes, "Jaeger may have more"); noted != c.noted {
			t.Errorf("--limit %s, one trace returned: noted that Jaeger may have more: %v, want %v (%q)", c.limit, noted, c.noted, rep.Notes)
		}
	}
}

// TestAnalyzeJaegerGuardsMemory: the traces read from a Jaeger go through the memory guard as a
// file's records do, so a search that holds more than the soft limit was sized for raises it.
func TestAnalyzeJaegerGuardsMemory(t *testing.T) {
	o := analyzeOptions{since: time.Hour, settle: 30 * time.Second,
		jaeger: jaegerFlags{url: fakeJaegerV1(t, jaegerSplitResult), service: "edge", limit: 10, timeout: time.Second}}
	// A limit the guard never raises: the test counts its checks and leaves the process's alone.
	o.mem = &memoryGuard{limit: math.MaxInt64}
	o.mem.sample[0].Name = liveHeapMetric
	a := engine.New(o.engineConfig())
	if _, _, err := readJaeger(context.Background(), a, o); err != nil {
		t.Fatal(err)
	}
	if o.mem.reads != 2 {
		t.Errorf("the guard checked %d times for the 2 traces read from Jaeger", o.mem.reads)
	}
}
