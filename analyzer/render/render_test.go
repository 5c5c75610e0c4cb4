package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
)

func sample() *analyzer.Report {
	return &analyzer.Report{
		Version: analyzer.ReportVersion,
		Input:   analyzer.InputStats{Spans: 158, Traces: 2, Operations: 26},
		Dependencies: []analyzer.DependencyStats{{Dependency: "http://dep:8080", Service: "dep", PhysicalCalls: 54,
			LogicalOperations: 2, Amplification: 27, Outcomes: map[string]int{"503": 50, "timeout": 4}, Callers: []string{"adapter"}}},
		Findings: []analyzer.Finding{{Detector: "retry-amplification", Severity: analyzer.SeverityCritical, TraceID: "abc",
			SpanIDs: []string{"1", "2", "3", "4", "5"}, Service: "edge", Dependency: "http://dep:8080",
			Summary: "3 layers retried | a pipe", Action: "let one layer own retries",
			Evidence: analyzer.Evidence{"factor": analyzer.Int(27), "leaf_calls": analyzer.Int(27), "layers": analyzer.Records([]analyzer.Evidence{
				{"service": analyzer.Text("edge"), "attempts": analyzer.Int(3)}, {"service": analyzer.Text("api"), "attempts": analyzer.Int(3)}})}}},
		Notes: []string{"2 orphan spans"},
	}
}

func TestTextReadsAtAGlance(t *testing.T) {
	var buf bytes.Buffer
	if err := Text(&buf, sample()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"stormwatch analyze: 2 traces, 158 spans, 26 operations",
		"http://dep:8080", "54", "27.00x", "503 x50, timeout x4",
		"calls  intents  amplification",
		"intents: what the top layer asked of the dependency, counted once however many layers retried it",
		"Findings: 1 critical, 0 warning, 0 info, in 1 group",
		"CRITICAL retry-amplification  edge -> api -> http://dep:8080  1 finding\n", // the retrying layers, nearest the dependency last
		"  observation  3 layers retried",
		"  evidence     factor=27  layers=edge x3 -> api x3  leaf_calls=27",
		"  action       let one layer own retries",
		"  traces       abc",
		"1 2 3 4 ... (5 in all)",
		"Notes:\n  - 2 orphan spans",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
}

func TestMarkdownEscapesPipes(t *testing.T) {
	var buf bytes.Buffer
	if err := Markdown(&buf, sample()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, `3 layers retried \| a pipe`) || !strings.Contains(out, "**1 critical**") {
		t.Errorf("markdown:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "| critical") && strings.Count(strings.ReplaceAll(line, `\|`, ""), "|") != 10 {
			t.Errorf("finding row has the wrong number of cells: %s", line)
		}
	}
}

func TestJSONIsTheContract(t *testing.T) {
	var buf bytes.Buffer
	empty := &analyzer.Report{Version: 1, Dependencies: []analyzer.DependencyStats{}, Findings: []analyzer.Finding{}}
	if err := JSON(&buf, empty); err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(buf.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["findings"].([]any); !ok {
		t.Errorf("empty findings must be [], got %s", buf.String())
	}
	buf.Reset()
	JSON(&buf, sample())
	if !strings.Contains(buf.String(), `"severity": "critical"`) || !strings.Contains(buf.String(), `"amplification": 27`) {
		t.Errorf("json:\n%s", buf.String())
	}
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]Format{"text": FormatText, "json": FormatJSON, "markdown": FormatMarkdown, "md": FormatMarkdown} {
		if got, err := ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseFormat("yaml"); err == nil || !strings.Contains(err.Error(), "text, json or markdown") {
		t.Errorf("ParseFormat(yaml) = %v", err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteErrorsAreReported(t *testing.T) {
	for _, f := range []Format{FormatText, FormatJSON, FormatMarkdown} {
		if err := Write(failWriter{}, f, sample()); err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Errorf("%s: error = %v", f, err)
		}
	}
}

// storm is what a storm reports: the same finding once per request, here 3 at one place and 1 at
// another, with a detector whose evidence holds counts by status.
func storm() *analyzer.Report {
	r := sample()
	r.Findings = nil
	for i, tr := range []string{"t1", "t2", "t2", "t3"} {
		f := analyzer.Finding{Detector: "breaker-wrong-key", Severity: analyzer.SeverityWarning, TraceID: tr,
			Service: "web", Dependency: "http://stock:8080", Summary: "breaker refused 5 calls",
			TimeUnixNano: time.Date(2026, 1, 15, 10, 0, i, 0, time.UTC).UnixNano(),
			Evidence: analyzer.Evidence{"answers": analyzer.Counts(map[string]int{"200": 60, "503": 2}),
				"failed_origins": analyzer.Record(analyzer.Evidence{"http://reviews:8080": analyzer.Float(5.0)})}}
		if i == 3 {
			f.Dependency = "http://pricing:8080"
		}
		r.Findings = append(r.Findings, f)
	}
	return r
}

// TestFindingsAreGrouped: text and Markdown print one entry per detector and place with its
// count, first and last time and example traces; no evidence is printed as a Go map.
func TestFindingsAreGrouped(t *testing.T) {
	var text, mdown bytes.Buffer
	if err := Text(&text, storm()); err != nil {
		t.Fatal(err)
	}
	if err := Markdown(&mdown, storm()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Findings: 0 critical, 4 warning, 0 info, in 2 groups",
		"WARNING breaker-wrong-key  web -> http://stock:8080  3 findings in 2 traces\n",
		"  when         2026-01-15 10:00:00.000 - 10:00:02.000 UTC\n",
		"  for example  breaker refused 5 calls\n",
		"  evidence     answers=200 x60, 503 x2  failed_origins=http://reviews:8080 x5\n",
		"  traces       t1 t2\n",
		"WARNING breaker-wrong-key  web -> http://pricing:8080  1 finding\n",
		"  when         2026-01-15 10:00:03.000 UTC\n",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	if n := strings.Count(text.String(), "breaker refused 5 calls"); n != 2 {
		t.Errorf("text prints %d examples, want one per group (2):\n%s", n, text.String())
	}
	for _, want := range []string{
		"4 findings in 2 groups",
		"| warning | `breaker-wrong-key` | web -> http://stock:8080 | 3 | 2026-01-15 10:00:00.000 - 10:00:02.000 | breaker refused 5 calls | answers=200 x60, 503 x2  failed_origins=http://reviews:8080 x5 |  | `t1` `t2` |",
	} {
		if !strings.Contains(mdown.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, mdown.String())
		}
	}
	for _, out := range []string{text.String(), mdown.String()} {
		if strings.Contains(out, "map[") {
			t.Errorf("evidence printed as a Go map:\n%s", out)
		}
	}
}

// TestJSONKeepsFindingsAndAddsGroups: JSON keeps every finding, and the groups list says
// detector, caller, dependency, count and the trace ids.
func TestJSONKeepsFindingsAndAddsGroups(t *testing.T) {
	r := storm()
	r.Groups = analyzer.GroupFindings(r.Findings)
	var buf bytes.Buffer
	if err := JSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Findings []map[string]any `json:"findings"`
		Groups   []struct {
			Detector, Caller, Dependency string
			Count                        int
			TraceIDs                     []string `json:"trace_ids"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Findings) != 4 || len(doc.Groups) != 2 {
		t.Fatalf("%d findings, %d groups; want 4 and 2:\n%s", len(doc.Findings), len(doc.Groups), buf.String())
	}
	g := doc.Groups[0]
	if g.Detector != "breaker-wrong-key" || g.Caller != "web" || g.Dependency != "http://stock:8080" || g.Count != 3 ||
		strings.Join(g.TraceIDs, ",") != "t1,t2" {
		t.Errorf("first group: %+v", g)
	}
}

// TestEvidenceLayers: the layers read the same as the detector builds them and as they come back
// from JSON; other lists are comma-separated, not Go syntax.
func TestEvidenceLayers(t *testing.T) {
	want := "edge x3 -> api x3"
	built := analyzer.Records([]analyzer.Evidence{
		{"service": analyzer.Text("edge"), "attempts": analyzer.Int(3)},
		{"service": analyzer.Text("api"), "attempts": analyzer.Int(3)}})
	var decoded analyzer.Value
	if err := json.Unmarshal([]byte(`[{"service":"edge","attempts":3},{"service":"api","attempts":3.0}]`), &decoded); err != nil {
		t.Fatal(err)
	}
	for _, v := range []analyzer.Value{built, decoded} {
		if got := Evidence(analyzer.Evidence{"layers": v}); got != "layers="+want {
			t.Errorf("%s: %q, want %q", v.Kind(), got, "layers="+want)
		}
	}
	if got := analyzer.Ints([]int{1, 2}).String(); got != "1, 2" {
		t.Errorf("other lists: %q", got)
	}
	if got := analyzer.Counts(map[string]int{"200": 60, "503": 2}).String(); got != "200 x60, 503 x2" {
		t.Errorf("a record of counts: %q", got)
	}
}
