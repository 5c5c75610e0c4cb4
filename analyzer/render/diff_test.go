package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/diff"
	"github.com/stormwatch/stormwatch/analyzer/whatif"
)

func sampleDiff() *diff.Report {
	before := sample()
	after := &analyzer.Report{Version: analyzer.ReportVersion, Input: analyzer.InputStats{Spans: 40, Traces: 2, Operations: 8},
		Dependencies: []analyzer.DependencyStats{{Dependency: "http://dep:8080", Service: "dep", PhysicalCalls: 6,
			LogicalOperations: 2, Amplification: 3, ByCaller: []analyzer.CallerStats{{Caller: "adapter", PhysicalCalls: 6, LogicalOperations: 2, Amplification: 3}}}},
		Findings: []analyzer.Finding{{Detector: "no-backoff", Severity: analyzer.SeverityWarning, Service: "edge", Dependency: "http://dep:8080", Summary: "no pause"}}}
	pred := &whatif.Prediction{Changes: []string{"api.maxAttempts=1"}, Assumption: "as recorded",
		Rows: []whatif.Row{{Dependency: "http://dep:8080", Service: "dep", Recorded: 54, Predicted: 18}}}
	r := diff.Compare(diff.Input{Before: before, After: after, BeforeLabel: "before.jsonl", AfterLabel: "after.jsonl", Prediction: pred},
		diff.Options{Tolerance: 0.05, FailOn: analyzer.SeverityWarning})
	return &r
}

// The text starts with the verdict, names both sides, and shows every figure before -> after
// with its change, the regressions, the findings by place and the what-if check.
func TestDiffTextReadsAtAGlance(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteDiff(&buf, FormatText, sampleDiff()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if first, _, _ := strings.Cut(out, "\n"); first != "stormwatch diff: worse: dep: 27.00x -> 3.00x; findings: 1 resolved, 1 new, 0 persisting" {
		t.Errorf("first line %q", first)
	}
	for _, want := range []string{
		"  before  before.jsonl: 2 traces, 158 spans, 26 operations",
		"  after   after.jsonl: 2 traces, 40 spans, 8 operations",
		"Regressions:\n  - new warning no-backoff at edge -> http://dep:8080",
		"54 -> 6", "2 -> 2", "27.00x -> 3.00x", "↓ -24.00x", "27 -> none (before: edge x3 > api x3)",
		"    by adapter", "- -> 6", "- -> 3.00x", "new",
		"Findings by detector and place: 1 resolved, 1 new, 0 persisting",
		"NEW       warning   no-backoff           edge -> http://dep:8080  0 -> 1",
		"RESOLVED  critical  retry-amplification  edge -> http://dep:8080  1 -> 0",
		"What if api.maxAttempts=1: predicted from before, measured after:",
		"http://dep:8080  dep      54        18         6         -12 (-67%) WRONG",
		"  - dep: 18 calls expected, 6 measured: fewer than the model said (-67%)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
}

// A chain deeper than its finding lists (its two ends) shows the layers left out where they fall,
// counted, on whichever side has the chain.
func TestDiffLayersCountTheUnlisted(t *testing.T) {
	deep := &diff.Figures{LayerProduct: 1 << 20, LayersNotListed: 96,
		Layers: []diff.Layer{{Service: "s0", Attempts: 2}, {Service: "s1", Attempts: 2}, {Service: "s98", Attempts: 2}, {Service: "s99", Attempts: 2}}}
	shallow := &diff.Figures{LayerProduct: 9, Layers: []diff.Layer{{Service: "edge", Attempts: 3}, {Service: "api", Attempts: 3}}}
	for _, c := range []struct {
		name string
		b, a *diff.Figures
		want string
	}{
		{"after", shallow, deep, "9 -> 1048576 (after: s0 x2 > s1 x2 > 96 more layers > s98 x2 > s99 x2)"},
		{"before", deep, nil, "1048576 -> - (before: s0 x2 > s1 x2 > 96 more layers > s98 x2 > s99 x2)"},
		{"all listed", nil, shallow, "- -> 9 (after: edge x3 > api x3)"},
	} {
		if got := layers(c.b, c.a); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// Markdown is a pull-request comment: the verdict in bold, tables with right-aligned numbers,
// pipes escaped.
func TestDiffMarkdown(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteDiff(&buf, FormatMarkdown, sampleDiff()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"## stormwatch diff\n\n**worse: dep: 27.00x -> 3.00x; findings: 1 resolved, 1 new, 0 persisting**",
		"### Regressions\n\n- new warning no-backoff at edge -> http://dep:8080",
		"| dependency | caller | calls | intents | amplification | change | layer product |\n|---|---|--:|--:|--:|--:|---|",
		"| `http://dep:8080` | all | 54 -> 6 | 2 -> 2 | 27.00x -> 3.00x | ↓ -24.00x | 27 -> none (before: edge x3 > api x3) |",
		"| new | warning | `no-backoff` | edge -> http://dep:8080 | 0 | 1 |",
		"| `http://dep:8080` | 54 | 18 | 6 | -12 (-67%) WRONG |",
		"_Assumption: as recorded._",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
}

// JSON is the diff.Report, whole: it decodes back to what was written.
func TestDiffJSONRoundTrips(t *testing.T) {
	var buf bytes.Buffer
	r := sampleDiff()
	if err := WriteDiff(&buf, FormatJSON, r); err != nil {
		t.Fatal(err)
	}
	var back diff.Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Verdict != r.Verdict || !back.Worse || len(back.Dependencies) != 1 || back.WhatIf == nil ||
		back.WhatIf.Rows[0].Predicted != 18 || back.Findings[0].State != diff.New || back.Findings[0].Severity != analyzer.SeverityWarning {
		t.Errorf("round trip lost something:\n%s", buf.String())
	}
}

func TestDiffWriteErrorsAreReported(t *testing.T) {
	for _, f := range []Format{FormatText, FormatMarkdown, FormatJSON} {
		if err := WriteDiff(failingWriter{}, f, sampleDiff()); err == nil || !errors.Is(err, errDiskFull) {
			t.Errorf("%s: %v, want the write error", f, err)
		}
	}
}

var errDiskFull = errors.New("disk full")

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errDiskFull }
