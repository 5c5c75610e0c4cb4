package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
)

// analyzeWith runs analyze --format json on fixture under the policy text and returns its findings.
func analyzeWith(t *testing.T, policyText, fixture string) []analyzer.Finding {
	t.Helper()
	args := []string{"analyze", "--format", "json", "--fail-on", "never"}
	if policyText != "" {
		file := filepath.Join(t.TempDir(), "policy.yaml")
		if err := os.WriteFile(file, []byte(policyText), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--policy", file)
	}
	code, out, errs := runCLI(t, "", append(args, fixture)...)
	if code != 0 {
		t.Fatalf("analyze %s: exit %d: %s", fixture, code, errs)
	}
	var rep analyzer.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("analyze %s: %v", fixture, err)
	}
	return rep.Findings
}

func fixturePath(name string) string { return filepath.Join("..", "..", "fixtures", name+".jsonl") }

// Where the policy allows one attempt (maxAttempts: 1), no advice asks for what it forbids: the
// retry loop is to go, not to be capped at 3-5 or budgeted; and the rules about how to pace a
// retry (no-backoff, synchronized-retries, retry-after-ignored, the policy's backoff rule) do not
// fire, since no retry may be made at all. Without the policy the same fixtures do fire them,
// so the silence is the policy's doing.
func TestAdviceAgreesWithMaxAttemptsOne(t *testing.T) {
	const oneAttempt = "defaults:\n  maxAttempts: 1\n  backoff: {base: 100ms, cap: 2s, jitter: full}\n"
	pacing := map[string]bool{"no-backoff": true, "synchronized-retries": true, "retry-after-ignored": true}
	for _, fx := range []string{"no-backoff-stock", "synchronized-retries-stock", "retry-after-ignored-stock", "retry-after-ignored-reference"} {
		fired := false
		for _, f := range analyzeWith(t, "", fixturePath(fx)) {
			fired = fired || pacing[f.Detector]
		}
		if !fired {
			t.Fatalf("%s fires no pacing rule without a policy: the test would prove nothing", fx)
		}
	}
	fixtures, err := filepath.Glob(filepath.Join("..", "..", "fixtures", "*.jsonl"))
	if err != nil || len(fixtures) < 50 {
		t.Fatalf("fixtures: %v (%d)", err, len(fixtures))
	}
	unbounded := 0
	for _, fx := range fixtures {
		for _, f := range analyzeWith(t, oneAttempt, fx) {
			name := filepath.Base(fx) + ": " + f.Detector
			if pacing[f.Detector] || f.Detector == "policy-violation" && f.Evidence["rule"].Equal(analyzer.Text("backoff")) {
				t.Errorf("%s fired where the policy allows no retry: %s", name, f.Summary)
			}
			if strings.Contains(f.Action, "3-5") || strings.Contains(f.Action, "cap the attempts") || strings.Contains(f.Action, "put a retry budget") {
				t.Errorf("%s asks for retries the policy forbids: %s", name, f.Action)
			}
			if f.Detector == "unbounded-retries" && f.Evidence["limit"].Equal(analyzer.Int(1)) {
				unbounded++
				if !strings.Contains(f.Action, "one attempt is allowed here (policy maxAttempts at ") {
					t.Errorf("%s: action %q does not say the policy allows one attempt", name, f.Action)
				}
			}
		}
	}
	if unbounded == 0 {
		t.Error("no unbounded-retries finding over the fixtures with maxAttempts 1")
	}
}

// The advice quotes the policy in force: its cap, its budget, its backoff and its jitter, never
// the generic numbers the policy overrides.
func TestAdviceQuotesThePolicy(t *testing.T) {
	for _, tc := range []struct {
		policy, fixture, detector string
		want                      []string
	}{
		{"defaults: {maxAttempts: 4}\n", "unbounded-retries-stock", "unbounded-retries",
			[]string{"cap the attempts at 4 (policy maxAttempts at ", "policy.yaml:1)"}},
		{"", "unbounded-retries-stock", "unbounded-retries",
			[]string{"cap the attempts at 5 or fewer (the built-in limit"}},
		{"defaults: {retryBudget: 0.2}\n", "retry-budget-exceeded-stock", "retry-budget-exceeded",
			[]string{"retries at most 0.2 x requests (policy retryBudget at ", "policy.yaml:1)"}},
		{"defaults:\n  backoff: {base: 50ms, cap: 1s, jitter: equal}\n", "no-backoff-stock", "no-backoff",
			[]string{"wait between attempts: the policy's backoff (base 50ms, cap 1s, equal jitter, at ", "policy.yaml:2)"}},
		{"defaults:\n  backoff: {base: 100ms, cap: 2s, jitter: none}\n", "synchronized-retries-stock", "synchronized-retries",
			[]string{"the policy's backoff has no jitter (", "make it jitter: full there and in the client"}},
		{"defaults: {owner: edge}\n", "amplification-27-stock", "retry-amplification",
			[]string{"let edge own the retries, as the policy says (owner at ", "policy.yaml:1)"}},
		{"", "amplification-27-stock", "retry-amplification",
			[]string{"let one layer own retries (adapter is nearest the dependency)"}},
		{"defaults:\n  backoff: {base: 100ms, cap: 2s, jitter: 0.2}\n", "synchronized-retries-stock", "synchronized-retries",
			[]string{"apply the policy's jitter (+-20% at "}},
	} {
		found := false
		for _, f := range analyzeWith(t, tc.policy, fixturePath(tc.fixture)) {
			if f.Detector != tc.detector {
				continue
			}
			found = true
			for _, w := range tc.want {
				if !strings.Contains(f.Action, w) {
					t.Errorf("%s under %q: action %q lacks %q", tc.detector, tc.policy, f.Action, w)
				}
			}
		}
		if !found {
			t.Errorf("%s under %q: no %s finding", tc.fixture, tc.policy, tc.detector)
		}
	}
}
