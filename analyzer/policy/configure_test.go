package policy_test

import (
	"strings"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/suite"
)

// Rules owned by other detectors are cited the same way: rule name and file:line.
func TestDetectorsCiteThePolicyLine(t *testing.T) {
	cases := []struct {
		fixture, detector, pol, rule, at string
	}{
		// unbounded-retries-healthy makes 3 tries: over a class maxAttempts of 2.
		{"unbounded-retries-healthy-stock", "unbounded-retries",
			"classes:\n  - name: reads\n    match: {operation: \"GET /items/42\"}\n    maxAttempts: 2\n", "maxAttempts", "p.yaml:4"},
		{"unbounded-retries-healthy-reference", "unbounded-retries",
			"classes:\n  - name: reads\n    match: {operation: catalog.read}\n    maxAttempts: 2\n", "maxAttempts", "p.yaml:4"},
		// A retry after a 503 where the class allows only timeouts.
		{"retry-budget-exceeded-stock", "retry-non-retryable",
			"defaults:\n  retryable: [timeout]\n", "retryable", "p.yaml:2"},
		// A PUT-like class marked not idempotent: the POST with a key is still a write, but the
		// key makes it safe, so nothing is reported; without the key it is, citing the rule.
		{"unsafe-write-retry-stock", "unsafe-write-retry",
			"classes:\n  - name: charges\n    match: {dependency: payments}\n    idempotent: false\n", "idempotent", "p.yaml:4"},
		// 2 retries for 40 first attempts is 0.05: over a class budget of 0.01 with no reserve.
		{"retry-budget-exceeded-healthy-stock", "retry-budget-exceeded",
			"defaults:\n  retryBudget: 0.01\ndetectors:\n  retry-budget-exceeded: {reserve: 0}\n", "retryBudget", "p.yaml:2"},
	}
	for _, c := range cases {
		t.Run(c.fixture+"/"+c.detector, func(t *testing.T) {
			rep := detectortest.Analyze(t, c.fixture, "p.yaml", c.pol)
			got := detectortest.Of(rep, c.detector)
			if len(got) == 0 {
				t.Fatalf("no %s finding; report: %+v", c.detector, rep.Findings)
			}
			f := got[0]
			if f.Evidence["rule"].String() != c.rule || f.Evidence["policy"].String() != c.at {
				t.Errorf("evidence rule=%v policy=%v, want %s at %s", f.Evidence["rule"], f.Evidence["policy"], c.rule, c.at)
			}
			if !strings.Contains(f.Summary, "at "+c.at) || len(f.SpanIDs) == 0 {
				t.Errorf("summary %q should cite %s and name spans %v", f.Summary, c.at, f.SpanIDs)
			}
		})
	}
}

// idempotent: true declares the write safe to repeat: the unsafe-write finding goes away.
func TestIdempotentClassSilencesUnsafeWrite(t *testing.T) {
	pol := "classes:\n  - name: charges\n    match: {dependency: payments}\n    idempotent: true\n"
	if got := detectortest.Of(detectortest.Analyze(t, "unsafe-write-retry-stock", "p.yaml", pol), "unsafe-write-retry"); len(got) != 0 {
		t.Errorf("got %v", got)
	}
}

func TestConfigureDisablesAndSetsSeverity(t *testing.T) {
	pol := "detectors:\n  no-backoff: {severity: critical}\n  retry-amplification: {enabled: false}\n"
	rep := detectortest.Analyze(t, "no-backoff-stock", "p.yaml", pol)
	nb := detectortest.Of(rep, "no-backoff")
	if len(nb) != 1 || nb[0].Severity != analyzer.SeverityCritical {
		t.Errorf("no-backoff findings %+v, want one critical", nb)
	}
	rep = detectortest.Analyze(t, "amplification-27-stock", "p.yaml", pol)
	if got := detectortest.Of(rep, "retry-amplification"); len(got) != 0 {
		t.Errorf("disabled detector still reports: %v", got)
	}

	p, err := policy.Parse("p.yaml", []byte(pol), suite.Default())
	if err != nil {
		t.Fatal(err)
	}
	detectors, settings := suite.Default(), analyzer.RunSettings{}
	policy.Configure(&detectors, &settings, p, policy.Live)
	if len(detectors) != len(suite.Default())-1 {
		t.Errorf("detectors %d, want one fewer than the suite's %d", len(detectors), len(suite.Default()))
	}
	if policy.Window(settings) != policy.DefaultWindow {
		t.Errorf("live window = %v", policy.Window(settings))
	}
	policy.Configure(&detectors, &settings, p, policy.Offline)
	if policy.Window(settings) != 0 {
		t.Errorf("offline must see the whole input, window = %v", policy.Window(settings))
	}
	// The suite's own values are untouched: Configure copied the one it re-severitied.
	for _, d := range suite.Default() {
		if d.Name == "no-backoff" && d.Severity != analyzer.SeverityWarning {
			t.Errorf("Configure changed the shared detector value")
		}
	}
}

// A class's maxFanout is unbounded-fanout's limit for its operations.
func TestClassMaxFanout(t *testing.T) {
	pol := "classes:\n  - name: reads\n    match: {service: edge}\n    maxFanout: 2\n"
	if got := detectortest.Of(detectortest.Analyze(t, "fanout-stock", "p.yaml", pol), "unbounded-fanout"); len(got) != 0 {
		t.Errorf("maxFanout 2 allows primary-b + primary-c, got %v", got)
	}
	if got := detectortest.Of(detectortest.Analyze(t, "fanout-stock", "", ""), "unbounded-fanout"); len(got) == 0 {
		t.Errorf("default maxFanout 1 must fire")
	}
	// A maxFanout of 1 written in the file is cited with its line.
	got := detectortest.Of(detectortest.Analyze(t, "fanout-stock", "p.yaml", "defaults:\n  maxFanout: 1\n"), "unbounded-fanout")
	if len(got) == 0 || got[0].Evidence["rule"].String() != "maxFanout" || got[0].Evidence["policy"].String() != "p.yaml:2" {
		t.Errorf("maxFanout from the file not cited: %+v", got)
	}
}
