package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
)

// analyze --what-if on the 27-call recording (two requests): with retries owned by the adapter
// alone the dependency would have received 3 calls per request instead of 27.
func TestAnalyzeWhatIf(t *testing.T) {
	fixture := filepath.Join("..", "..", "fixtures", "amplification-27-stock.jsonl")
	code, out, errs := runPolicyCmd(t, "analyze", "--format", "json", "--fail-on", "critical",
		"--what-if", "edge.maxAttempts=1,api.maxAttempts=1", fixture)
	if code != 1 { // the recording itself still has its critical amplification findings
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	var doc struct {
		Version  int              `json:"version"`
		Findings []map[string]any `json:"findings"`
		WhatIf   struct {
			Changes    []string `json:"changes"`
			Assumption string   `json:"assumption"`
			Rows       []struct {
				Dependency          string
				Recorded, Predicted int
			} `json:"dependencies"`
		} `json:"what_if"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("not one JSON document: %v\n%s", err, out)
	}
	if doc.Version != analyzer.ReportVersion || len(doc.Findings) == 0 {
		t.Errorf("the report is still there: version %d, %d findings", doc.Version, len(doc.Findings))
	}
	if !strings.Contains(doc.WhatIf.Assumption, "outcomes per attempt as recorded") {
		t.Errorf("assumption not stated: %q", doc.WhatIf.Assumption)
	}
	got := map[string][2]int{}
	for _, r := range doc.WhatIf.Rows {
		got[r.Dependency] = [2]int{r.Recorded, r.Predicted}
	}
	if got["dep"] != [2]int{54, 6} {
		t.Errorf("dep recorded/predicted = %v, want 54/6 (27 -> 3 per request)", got["dep"])
	}

	// Text: side by side, with the assumption.
	_, out, _ = runPolicyCmd(t, "analyze", "--what-if", "edge.maxAttempts=1,api.maxAttempts=1", fixture)
	for _, want := range []string{"What if edge.maxAttempts=1, api.maxAttempts=1", "recorded  predicted", "dep      dep        54          6    -89%", "assumption: outcomes per attempt as recorded"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
}

func TestAnalyzeWhatIfFromPolicyAndBadChanges(t *testing.T) {
	fixture := filepath.Join("..", "..", "fixtures", "amplification-27-stock.jsonl")
	pol := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(pol, []byte("whatIf:\n  - \"*.maxAttempts=1\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, out, errs := runPolicyCmd(t, "analyze", "--format", "markdown", "--policy", pol, fixture)
	if !strings.Contains(out, "### What if *.maxAttempts=1") || !strings.Contains(out, "| dep | dep | 54 | 2 | -96% |") {
		t.Errorf("policy whatIf not applied (stderr %q):\n%s", errs, out)
	}
	code, _, errs := runPolicyCmd(t, "analyze", "--what-if", "edge.maxAttempts=0", fixture)
	if code != 2 || !strings.Contains(errs, `--what-if: change "edge.maxAttempts=0": maxAttempts must be a whole number of at least 1`) {
		t.Errorf("bad change: exit %d, stderr %q", code, errs)
	}
}

// TestAnalyzeWhatIfUnknownLayer: a misspelt layer is named, the known ones listed, exit 2, and no
// table of +0% that reads as "the change would not help".
func TestAnalyzeWhatIfUnknownLayer(t *testing.T) {
	fixture := filepath.Join("..", "..", "fixtures", "amplification-27-stock.jsonl")
	code, out, errs := runPolicyCmd(t, "analyze", "--what-if", "nosuchsvc.maxAttempts=1", fixture)
	want := `what-if: change "nosuchsvc.maxAttempts=1": no layer "nosuchsvc" in these traces; the layers that own retries are adapter, api, edge (or * for all)`
	if code != 2 || !strings.Contains(errs, want) {
		t.Errorf("exit %d, stderr %q; want 2 and %q", code, errs, want)
	}
	if strings.Contains(out, "What if") {
		t.Errorf("a prediction was printed for an unknown layer:\n%s", out)
	}
}
