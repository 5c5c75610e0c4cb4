package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

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
			Evidence: map[string]any{"factor": 27, "leaf_calls": 27, "layers": []map[string]any{
				{"service": "edge", "attempts": 3}, {"service": "api", "attempts": 3}}}}},
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
		"stormwatch analyze: 2 traces, 158 spans, 26 logical operations",
		"http://dep:8080", "54", "(27.00x)", "503:50 timeout:4",
		"Findings: 1 critical, 0 warning, 0 info",
		"CRITICAL retry-amplification  trace abc",
		"  observation  3 layers retried",
		"  evidence     factor=27 layers=edge x3 > api x3 leaf_calls=27",
		"  action       let one layer own retries",
		"  where        edge -> http://dep:8080",
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
		if strings.HasPrefix(line, "| critical") && strings.Count(strings.ReplaceAll(line, `\|`, ""), "|") != 7 {
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
