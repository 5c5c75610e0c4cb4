package analyzer_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
)

// The JSON report names the counts with the screens' words (calls, intents, operations), so a
// reader of the JSON and a reader of the dashboard talk about the same things.
func TestReportJSONUsesTheScreensWords(t *testing.T) {
	rep := analyzer.Report{Version: analyzer.ReportVersion, Input: analyzer.InputStats{Operations: 13},
		Dependencies: []analyzer.DependencyStats{{Dependency: "http://dep:8080", PhysicalCalls: 27, LogicalOperations: 1,
			ByCaller: []analyzer.CallerStats{{Caller: "adapter", PhysicalCalls: 27, LogicalOperations: 1}}}}}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{`"version":2`, `"operations":13`, `"calls":27,"intents":1`, `"caller":"adapter","calls":27,"intents":1`} {
		if !strings.Contains(s, want) {
			t.Errorf("report JSON lacks %s:\n%s", want, s)
		}
	}
	for _, old := range []string{"physical", "logical"} {
		if strings.Contains(s, old) {
			t.Errorf("report JSON still says %q:\n%s", old, s)
		}
	}
}
