package diff_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/diff"
	"github.com/stormwatch/stormwatch/analyzer/whatif"
)

func dep(name, service string, calls, ops int, callers ...analyzer.CallerStats) analyzer.DependencyStats {
	return analyzer.DependencyStats{Dependency: name, Service: service, PhysicalCalls: calls, LogicalOperations: ops,
		Amplification: float64(calls) / float64(ops), ByCaller: callers}
}

func caller(name string, calls, ops int) analyzer.CallerStats {
	return analyzer.CallerStats{Caller: name, PhysicalCalls: calls, LogicalOperations: ops, Amplification: float64(calls) / float64(ops)}
}

func amplification(trace, service, dependency string, layers ...any) analyzer.Finding {
	factor := 1
	for i := 1; i < len(layers); i += 2 {
		factor *= layers[i].(int)
	}
	var ev []analyzer.Evidence
	for i := 0; i < len(layers); i += 2 {
		ev = append(ev, analyzer.Evidence{"service": analyzer.Text(layers[i].(string)), "attempts": analyzer.Int(layers[i+1].(int))})
	}
	return analyzer.Finding{Detector: "retry-amplification", Severity: analyzer.SeverityCritical, TraceID: trace,
		Service: service, Dependency: dependency, Summary: "layers retried",
		Evidence: analyzer.Evidence{"factor": analyzer.Int(factor), "leaf_calls": analyzer.Int(factor), "layers": analyzer.Records(ev)}}
}

func finding(detector string, sev analyzer.Severity, trace, service, dependency string) analyzer.Finding {
	return analyzer.Finding{Detector: detector, Severity: sev, TraceID: trace, Service: service, Dependency: dependency, Summary: detector}
}

const depURL = "http://dep:8080"

// Findings are matched by detector and place, whatever their trace ids: two recordings of
// different requests compare. Counts and states follow, and the rates are per thousand
// operations of each side.
func TestFindingsMatchedByDetectorAndPlace(t *testing.T) {
	before := &analyzer.Report{Input: analyzer.InputStats{Operations: 100},
		Findings: []analyzer.Finding{
			amplification("t1", "edge", depURL, "edge", 3, "api", 3, "adapter", 3),
			amplification("t2", "edge", depURL, "edge", 3, "api", 3, "adapter", 3),
			finding("no-backoff", analyzer.SeverityWarning, "t1", "api", "http://adapter:8080"),
		}}
	after := &analyzer.Report{Input: analyzer.InputStats{Operations: 50},
		Findings: []analyzer.Finding{
			amplification("u9", "edge", depURL, "edge", 3, "api", 3),
			finding("unbounded-fanout", analyzer.SeverityWarning, "u9", "edge", "http://catalog:8080"),
			// Same detector, other place: not the before side's no-backoff.
			finding("no-backoff", analyzer.SeverityWarning, "u9", "edge", "http://adapter:8080"),
		}}
	r := diff.Compare(diff.Input{Before: before, After: after}, diff.Options{})
	if r.Counts != (diff.Counts{Resolved: 1, New: 2, Persisting: 1}) {
		t.Fatalf("counts %+v, want 1 resolved, 2 new, 1 persisting: %+v", r.Counts, r.Findings)
	}
	got := map[string]diff.Finding{}
	for _, f := range r.Findings {
		got[f.Detector+" "+f.Place()] = f
	}
	amp := got["retry-amplification edge -> "+depURL]
	if amp.State != diff.Persisting || amp.Before != 2 || amp.After != 1 || amp.BeforeRate != 20 || amp.AfterRate != 20 {
		t.Errorf("retry-amplification: %+v, want persisting 2 -> 1, 20 per 1k operations on both sides", amp)
	}
	if f := got["no-backoff api -> http://adapter:8080"]; f.State != diff.Resolved || f.Before != 1 || f.After != 0 {
		t.Errorf("no-backoff at api: %+v, want resolved", f)
	}
	if f := got["no-backoff edge -> http://adapter:8080"]; f.State != diff.New {
		t.Errorf("no-backoff at edge: %+v, want new", f)
	}
	// New first, then persisting, then resolved.
	if r.Findings[0].State != diff.New || r.Findings[len(r.Findings)-1].State != diff.Resolved {
		t.Errorf("order: %+v", r.Findings)
	}
}

// Amplification is calls per logical operation: ten times the traffic at the same amplification
// is not worse; a growth within the tolerance is not worse; beyond it is, and says so.
func TestWorseIsPerLogicalOperation(t *testing.T) {
	before := &analyzer.Report{Dependencies: []analyzer.DependencyStats{dep(depURL, "dep", 30, 10)}}
	cases := []struct {
		name      string
		calls     int
		ops       int
		worse     bool
		verdictIs string
	}{
		{"ten times the traffic", 300, 100, false, "unchanged: dep: 3.00x -> 3.00x"},
		{"within the tolerance", 31, 10, false, "unchanged: dep: 3.00x -> 3.10x"},
		{"beyond the tolerance", 32, 10, true, "worse: dep: 3.00x -> 3.20x"},
		{"fewer calls per operation", 100, 100, false, "better: dep: 3.00x -> 1.00x"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			after := &analyzer.Report{Dependencies: []analyzer.DependencyStats{dep(depURL, "dep", c.calls, c.ops)}}
			r := diff.Compare(diff.Input{Before: before, After: after}, diff.Options{Tolerance: 0.05})
			if r.Worse != c.worse || r.Dependencies[0].Worse != c.worse {
				t.Errorf("worse %v, want %v: %+v", r.Worse, c.worse, r.Regressions)
			}
			if !strings.HasPrefix(r.Verdict, c.verdictIs) {
				t.Errorf("verdict %q, want it to start %q", r.Verdict, c.verdictIs)
			}
			if c.worse && (len(r.Regressions) != 1 || !strings.Contains(r.Regressions[0], "dep: amplification 3.00x -> 3.20x (more than 5%)")) {
				t.Errorf("regressions %q", r.Regressions)
			}
		})
	}
}

// A new finding is worse only at or above --fail-on.
func TestNewFindingWorseAtFailOn(t *testing.T) {
	before := &analyzer.Report{}
	after := &analyzer.Report{Findings: []analyzer.Finding{finding("no-backoff", analyzer.SeverityWarning, "t", "api", depURL)}}
	if r := diff.Compare(diff.Input{Before: before, After: after}, diff.Options{FailOn: analyzer.SeverityCritical}); r.Worse {
		t.Errorf("a new warning is worse at fail-on critical: %q", r.Regressions)
	}
	r := diff.Compare(diff.Input{Before: before, After: after}, diff.Options{FailOn: analyzer.SeverityWarning})
	if !r.Worse || len(r.Regressions) != 1 || r.Regressions[0] != "new warning no-backoff at api -> "+depURL {
		t.Errorf("a new warning at fail-on warning: worse %v %q", r.Worse, r.Regressions)
	}
	// The same finding persisting is not new.
	if r := diff.Compare(diff.Input{Before: after, After: after}, diff.Options{FailOn: analyzer.SeverityInfo}); r.Worse {
		t.Errorf("a persisting finding is worse: %q", r.Regressions)
	}
}

// The verdict names the dependency that moved most and the layers that still retry under the
// top one, read from the retry-amplification evidence whether it comes from the analyzer
// (typed) or from a report decoded from JSON (a collector's).
func TestVerdictAndLayerProduct(t *testing.T) {
	before := &analyzer.Report{Input: analyzer.InputStats{Operations: 13},
		Dependencies: []analyzer.DependencyStats{dep(depURL, "dep", 27, 1, caller("adapter", 27, 1)), dep("http://api:8080", "api", 3, 1)},
		Findings:     []analyzer.Finding{amplification("t1", "edge", depURL, "edge", 3, "api", 3, "adapter", 3)}}
	after := &analyzer.Report{Input: analyzer.InputStats{Operations: 5},
		Dependencies: []analyzer.DependencyStats{dep(depURL, "dep", 9, 1, caller("adapter", 9, 1)), dep("http://api:8080", "api", 3, 1)},
		Findings:     []analyzer.Finding{amplification("t9", "edge", depURL, "edge", 3, "api", 3)}}
	// The after side as a collector serves it: through JSON.
	js, err := json.Marshal(after)
	if err != nil {
		t.Fatal(err)
	}
	var decoded analyzer.Report
	if err := json.Unmarshal(js, &decoded); err != nil {
		t.Fatal(err)
	}
	for name, a := range map[string]*analyzer.Report{"typed": after, "decoded": &decoded} {
		r := diff.Compare(diff.Input{Before: before, After: a}, diff.Options{Tolerance: 0.05})
		want := "better: dep: 27.00x -> 9.00x, api still retries x3; findings: 0 resolved, 0 new, 1 persisting"
		if r.Verdict != want {
			t.Errorf("%s: verdict\n got %q\nwant %q", name, r.Verdict, want)
		}
		d := r.Dependencies[0]
		if d.Dependency != depURL || d.Before.LayerProduct != 27 || d.After.LayerProduct != 9 || len(d.After.Layers) != 2 ||
			d.After.Layers[1] != (diff.Layer{Service: "api", Attempts: 3}) || d.Change != -18 {
			t.Errorf("%s: dependency %+v before %+v after %+v", name, d, d.Before, d.After)
		}
		if len(d.Callers) != 1 || d.Callers[0].Caller != "adapter" || d.Callers[0].Change != -18 {
			t.Errorf("%s: callers %+v", name, d.Callers)
		}
	}
}

// A dependency on one side only is listed with the other side empty, and never counts as a
// regression of amplification.
func TestDependencyOnOneSide(t *testing.T) {
	before := &analyzer.Report{Dependencies: []analyzer.DependencyStats{dep("http://old:8080", "", 4, 2)}}
	after := &analyzer.Report{Dependencies: []analyzer.DependencyStats{dep("http://new:8080", "", 9, 1)}}
	r := diff.Compare(diff.Input{Before: before, After: after}, diff.Options{})
	if r.Worse || len(r.Dependencies) != 2 {
		t.Fatalf("worse %v, dependencies %+v", r.Worse, r.Dependencies)
	}
	for _, d := range r.Dependencies {
		if (d.Before == nil) == (d.After == nil) {
			t.Errorf("%s: before %v after %v, want exactly one side", d.Dependency, d.Before, d.After)
		}
	}
	if !strings.HasPrefix(r.Verdict, "unchanged: http://new:8080: new, 9.00x") {
		t.Errorf("verdict %q", r.Verdict)
	}
}

// The what-if check scales the prediction to the after side's traffic, and says where the model
// missed by more than the tolerance, and which dependency it could not know.
func TestPredictionCheckedAgainstAfter(t *testing.T) {
	before := &analyzer.Report{Input: analyzer.InputStats{Traces: 10},
		Dependencies: []analyzer.DependencyStats{dep(depURL, "dep", 270, 10), dep("http://api:8080", "api", 30, 10)}}
	after := &analyzer.Report{Input: analyzer.InputStats{Traces: 20},
		Dependencies: []analyzer.DependencyStats{dep(depURL, "dep", 60, 20), dep("http://api:8080", "api", 80, 20), dep("http://cache:8080", "", 5, 5)}}
	pred := &whatif.Prediction{Changes: []string{"api.maxAttempts=1"}, Assumption: whatif.Assumption,
		Rows: []whatif.Row{{Dependency: depURL, Service: "dep", Recorded: 270, Predicted: 30}, {Dependency: "http://api:8080", Service: "api", Recorded: 30, Predicted: 30}}}
	r := diff.Compare(diff.Input{Before: before, After: after, Prediction: pred}, diff.Options{Tolerance: 0.05})
	w := r.WhatIf
	if w == nil || w.Scale != 2 || len(w.Rows) != 3 {
		t.Fatalf("what-if %+v", w)
	}
	if row := w.Rows[0]; row.Expected != 60 || row.Measured != 60 || row.Error != 0 || row.Wrong {
		t.Errorf("dep: %+v, want 60 expected (30 at twice the traffic), 60 measured, right", row)
	}
	if row := w.Rows[1]; row.Expected != 60 || row.Measured != 80 || row.Error != 20 || !row.Wrong || row.RelativeError != 0.3333 {
		t.Errorf("api: %+v, want 20 calls more than the 60 expected, wrong", row)
	}
	if row := w.Rows[2]; row.Dependency != "http://cache:8080" || row.Expected != 0 || !row.Wrong {
		t.Errorf("cache: %+v, want measured without a prediction", row)
	}
	want := []string{
		"api: 60 calls expected, 80 measured: more than the model said (+33%)",
		"http://cache:8080: 5 calls measured, but the before side never called it: the model cannot predict a new dependency",
	}
	if strings.Join(w.Wrong, "\n") != strings.Join(want, "\n") {
		t.Errorf("wrong:\n%s\nwant:\n%s", strings.Join(w.Wrong, "\n"), strings.Join(want, "\n"))
	}
	if w.MaxRelativeError != 0.3333 {
		t.Errorf("max relative error %v", w.MaxRelativeError)
	}
}

// The zero Options and nil reports are usable.
func TestZeroValues(t *testing.T) {
	r := diff.Compare(diff.Input{}, diff.Options{})
	if r.Worse || r.Verdict != "unchanged: findings: 0 resolved, 0 new, 0 persisting" || r.Version != diff.Version {
		t.Errorf("%+v", r)
	}
}
