package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/fixtures"
)

// TestAnalyzeRefusesWhatIsNotATraceFile: a file of another kind fails with exit 2 and a message
// naming the formats read and what the file holds - never "0 traces" and exit 0, which a CI gate
// would read as a clean audit, and never a "record too large".
func TestAnalyzeRefusesWhatIsNotATraceFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path, found string
	}{
		{"README", write("README.md", string(readme)), `text beginning "# stormwatch"`},
		{"JSON of another shape", write("report.json", `{"version":1,"input":{"spans":0},"findings":[]}`), `"version", "input", "findings"`},
		{"JSON array", write("numbers.json", `[1, 2, 3]`), "a JSON array of something other than spans"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, format := range []string{"text", "json"} {
				code, out, stderr := runCLI(t, "", "analyze", "--format", format, c.path)
				if code != 2 || out != "" {
					t.Errorf("--format %s: exit %d, stdout %q; want exit 2 and no report", format, code, out)
				}
				for _, want := range []string{c.path, "not a trace file", c.found, "OTLP/JSON lines", "OTLP/protobuf"} {
					if !strings.Contains(stderr, want) {
						t.Errorf("stderr %q does not say %q", stderr, want)
					}
				}
				if strings.Contains(stderr, "too large") {
					t.Errorf("stderr %q speaks of a record too large", stderr)
				}
			}
		})
	}
	// Given with a good file, the bad one still fails the run: nothing is reported as clean.
	if code, _, _ := runCLI(t, "", "analyze", fixture(t, "fanout-healthy-stock"), filepath.Join(dir, "README.md")); code != 2 {
		t.Errorf("a good file and a README: exit %d, want 2", code)
	}
}

// TestAnalyzeEmptyInput: a file with no span is an error (exit 2) unless --allow-empty, which
// gives an empty report and exit 0.
func TestAnalyzeEmptyInput(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.jsonl")
	os.WriteFile(empty, nil, 0o644)
	emptyReq := filepath.Join(dir, "nothing.jsonl")
	os.WriteFile(emptyReq, []byte("{\"resourceSpans\":[]}\n{}\n"), 0o644)
	for _, p := range []string{empty, emptyReq} {
		code, out, stderr := runCLI(t, "", "analyze", p)
		if code != 2 || out != "" || !strings.Contains(stderr, p+": no spans") || !strings.Contains(stderr, "--allow-empty") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 naming the file and --allow-empty", p, code, out, stderr)
		}
		code, out, stderr = runCLI(t, "", "analyze", "--allow-empty", "--format", "json", p)
		var rep analyzer.Report
		if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || rep.Input.Spans != 0 {
			t.Errorf("%s --allow-empty: exit %d, report %q (%v), stderr %q", p, code, out, err, stderr)
		}
	}
	if code, _, stderr := runCLI(t, "", "analyze", "-"); code != 2 || !strings.Contains(stderr, "-: no spans") {
		t.Errorf("empty stdin: exit %d, stderr %q", code, stderr)
	}
}

// TestAnalyzeJSONReportNotesSkippedRecords: records the reader skipped (malformed, cut short) are
// said in the report's notes, with the file, the count and the first; the records around them are
// analyzed; a clean input has an empty notes list, never null.
func TestAnalyzeJSONReportNotesSkippedRecords(t *testing.T) {
	good, _ := fixtures.Read("fanout-healthy-stock")
	lines := strings.SplitAfter(strings.TrimRight(string(good), "\n"), "\n")
	path := filepath.Join(t.TempDir(), "cut.jsonl")
	// A malformed line in the middle, and a last line cut short by a crash.
	data := lines[0] + "{not json\n" + strings.Join(lines[1:], "") + "\n" + lines[0][:len(lines[0])/2]
	os.WriteFile(path, []byte(data), 0o644)

	_, cleanOut, _ := runCLI(t, "", "analyze", "--format", "json", fixture(t, "fanout-healthy-stock"))
	var clean map[string]any
	if err := json.Unmarshal([]byte(cleanOut), &clean); err != nil {
		t.Fatal(err)
	}
	if notes, ok := clean["notes"].([]any); !ok || len(notes) != 0 {
		t.Errorf("clean input: notes = %#v, want an empty list", clean["notes"])
	}

	code, out, stderr := runCLI(t, "", "analyze", "--format", "json", path)
	var rep analyzer.Report
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("exit %d, %v, stderr %s", code, err, stderr)
	}
	var cleanRep analyzer.Report
	json.Unmarshal([]byte(cleanOut), &cleanRep)
	if rep.Input != cleanRep.Input {
		t.Errorf("input %+v, want every good record analyzed: %+v", rep.Input, cleanRep.Input)
	}
	found := false
	for _, n := range rep.Notes {
		if strings.HasPrefix(n, path+": 2 records skipped") && strings.Contains(n, path+":2:") {
			found = true
		}
	}
	if !found {
		t.Errorf("notes %q: want one saying 2 records of %s were skipped, the first at line 2", rep.Notes, path)
	}
}

// TestAnalyzeNotesUnsetAndFutureTimes: spans with a time of 0, and spans stamped far in the
// future, are said in the report's notes, whatever --settle says.
func TestAnalyzeNotesUnsetAndFutureTimes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "times.jsonl")
	const ids = `"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"%s"`
	span := func(id, start, end string) string {
		return `{` + strings.Replace(ids, "%s", id, 1) + `,"name":"GET","kind":3,"startTimeUnixNano":"` + start + `","endTimeUnixNano":"` + end + `"}`
	}
	line := `{"resourceSpans":[{"scopeSpans":[{"spans":[` + strings.Join([]string{
		span("00f067aa0ba902b7", "1768471200000000000", "1768471200100000000"),
		span("00f067aa0ba902b8", "0", "0"),
		span("00f067aa0ba902b9", "4102444800000000000", "4102444800100000000"), // 2100
	}, ",") + `]}]}]}` + "\n"
	os.WriteFile(path, []byte(line), 0o644)
	for _, settle := range []string{"30s", "0"} {
		code, out, stderr := runCLI(t, "", "analyze", "--format", "json", "--settle", settle, path)
		var rep analyzer.Report
		if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
			t.Fatalf("--settle %s: exit %d, %v, stderr %s", settle, code, err, stderr)
		}
		joined := strings.Join(rep.Notes, "\n")
		if !strings.Contains(joined, "1 spans have a start or end time of 0") ||
			!strings.Contains(joined, path+": 1 spans have times more than a day ahead") {
			t.Errorf("--settle %s: notes %q; want the unset and the future span said", settle, rep.Notes)
		}
	}
}
