package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/suite"
)

// runCmd runs the command line as main does and returns the exit code and both streams.
func runPolicyCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(""), &out, &errb)
	code = exitCode(err, &errb)
	return code, out.String(), errb.String()
}

func TestPolicyInitToStdoutIsValid(t *testing.T) {
	code, out, errs := runPolicyCmd(t, "policy", "init")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if out != string(policy.Example) {
		t.Fatalf("stdout is not the example policy")
	}
	if _, err := policy.Parse("stdout", []byte(out), suite.Default()); err != nil {
		t.Fatalf("written example does not validate: %v", err)
	}
}

func TestPolicyInitRefusesToOverwrite(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if code, _, errs := runPolicyCmd(t, "policy", "init", file); code != 0 {
		t.Fatalf("first init: exit %d: %s", code, errs)
	}
	if err := os.WriteFile(file, []byte("# mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runPolicyCmd(t, "policy", "init", file)
	if code != 2 || !strings.Contains(errs, file+" already exists (use --force to overwrite)") {
		t.Fatalf("second init: exit %d, stderr %q", code, errs)
	}
	if b, _ := os.ReadFile(file); string(b) != "# mine\n" {
		t.Fatalf("file was overwritten without --force")
	}
	if code, _, errs := runPolicyCmd(t, "policy", "init", "--force", file); code != 0 {
		t.Fatalf("init --force: exit %d: %s", code, errs)
	}
	if b, _ := os.ReadFile(file); !bytes.Equal(b, policy.Example) {
		t.Fatalf("--force did not write the example")
	}
	// And the file it wrote passes check.
	code, out, errs := runPolicyCmd(t, "policy", "check", file)
	if code != 0 || !strings.Contains(out, file+": ok (3 classes") {
		t.Fatalf("check of init output: exit %d, out %q, err %q", code, out, errs)
	}
}

func TestPolicyCheckReportsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	src := "defaults:\n  maxAttempts: 0\n  deadline: -1s\nclasses:\n  - name: a\n    match: {operation: x}\n    backoff: {base: 1s, cap: 1ms}\n    colour: red\n"
	if err := os.WriteFile(bad, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("defaults:\n  maxAttempts: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runPolicyCmd(t, "policy", "check", good, bad)
	if code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	if !strings.Contains(out, good+": ok") {
		t.Errorf("good file not reported ok: %q", out)
	}
	want := []string{
		bad + ":2:16: defaults.maxAttempts: must be at least 1 (1 means no retries), got 0",
		bad + ":3:13: defaults.deadline: must be positive, got -1s",
		bad + ":7:30: classes[0].backoff.cap: 1ms is below base 1s",
		bad + `:8:5: classes[0]: unknown key "colour" (known keys:`,
		"stormwatch: policy check: 1 of 2 files invalid",
	}
	for _, w := range want {
		if !strings.Contains(errs, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errs)
		}
	}
}

func TestPolicyCheckUsage(t *testing.T) {
	if code, _, _ := runPolicyCmd(t, "policy", "check"); code != 2 {
		t.Errorf("check without a file: exit %d, want 2", code)
	}
	code, _, errs := runPolicyCmd(t, "policy", "check", filepath.Join(t.TempDir(), "nope.yaml"))
	if code != 2 || !strings.Contains(errs, "read policy: ") || !strings.Contains(errs, "nope.yaml") {
		t.Errorf("missing file: exit %d, stderr %q", code, errs)
	}
}

// analyze --policy: a bad file stops the run with exit 2 and the file:line; a good one reports
// the trace that breaks it, naming the rule, the policy line and the spans.
func TestAnalyzeWithPolicy(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("defaults:\n  maxAttempts: 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fixture := filepath.Join("..", "..", "fixtures", "amplification-27-stock.jsonl")
	code, _, errs := runPolicyCmd(t, "analyze", "--policy", bad, fixture)
	if code != 2 || !strings.Contains(errs, bad+":2:16: defaults.maxAttempts: must be at least 1") {
		t.Fatalf("bad policy: exit %d, stderr %q", code, errs)
	}
	good := filepath.Join(dir, "team.yaml")
	pol := "classes:\n  - name: items\n    match: {route: \"/items/{id}\"}\n    owner: edge\n"
	if err := os.WriteFile(good, []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runPolicyCmd(t, "analyze", "--format", "json", "--fail-on", "warning", "--policy", good, fixture)
	if code != 1 {
		t.Fatalf("exit %d (stderr %q), want 1: policy violations are warnings", code, errs)
	}
	if !strings.Contains(out, `"detector": "policy-violation"`) || !strings.Contains(out, `"policy": "`+good+`:4"`) ||
		!strings.Contains(out, `"rule": "owner"`) {
		t.Errorf("report lacks the owner violation citing %s:4:\n%.2000s", good, out)
	}
}
