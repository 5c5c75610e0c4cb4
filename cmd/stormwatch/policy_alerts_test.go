package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/stormwatch/stormwatch/analyzer/policy"
)

// needProm finds one of Prometheus's binaries (Debian's prometheus package holds both). A
// developer without it gets a skip that says how to install it; under CI it must be there.
func needProm(t *testing.T, tool string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err == nil {
		return p
	}
	msg := tool + " is not installed: the alert rules are checked by a real Prometheus (apt-get install prometheus; CI installs it, see .ci/run)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// writeAlerts runs `policy alerts` with args and writes its output to a file in dir.
func writeAlerts(t *testing.T, dir string, args ...string) string {
	t.Helper()
	code, out, errs := runPolicyCmd(t, append([]string{"policy", "alerts"}, args...)...)
	if code != 0 {
		t.Fatalf("policy alerts %v: exit %d: %s", args, code, errs)
	}
	file := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

func promtool(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(needProm(t, "promtool"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// Every policy, the built-in defaults, the example, one that names no limit and one with patterns
// and awkward names, gives rules Prometheus accepts.
func TestPolicyAlertsPassPromtoolCheck(t *testing.T) {
	needProm(t, "promtool")
	dir := t.TempDir()
	example := filepath.Join(dir, "example.yaml")
	os.WriteFile(example, policy.Example, 0o644)
	empty := filepath.Join(dir, "empty.yaml")
	os.WriteFile(empty, []byte("# a policy that names no limit\nversion: 1\n"), 0o644)
	odd := filepath.Join(dir, "odd.yaml")
	os.WriteFile(odd, []byte(`classes:
  - name: 'pay{{ "me" }}'
    match: {service: "check*", dependency: "http://10.0.0.[1-9]:80?0"}
    maxAttempts: 2
  - name: "quote\"d"
    match: {dependency: payments}
    maxAttempts: 20
detectors:
  retry-amplification: {criticalFactor: 4}
  post-deadline-work: {enabled: false}
`), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"built-in defaults", nil, []string{"generated from the built-in defaults", "maxAttempts 5 (built-in default) x maxFanout 1 (built-in default)"}},
		{"example", []string{"--policy", example}, []string{`policy_class: payment-create`, `stormwatch_caller="checkout"`}},
		{"no limits", []string{"--policy", empty}, []string{"Defaults: maxAttempts 5 (built-in default) x maxFanout 1 (built-in default): where the policy names no limit, the built-in default applies."}},
		{"patterns", []string{"--policy", odd, "--range", "10m", "--for", "0s"}, []string{
			`stormwatch_caller=~"check[^/]*"`, `stormwatch_dependency=~"http://10\\.0\\.0\\.[1-9]:80[^/]0"`,
			`{{ "{{" }} "me" {{ "}}" }}`, "post-deadline-work is turned off", "ratio_rate10m", "for: 0s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := writeAlerts(t, t.TempDir(), tc.args...)
			promtool(t, "check", "rules", file)
			b, _ := os.ReadFile(file)
			for _, w := range tc.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("rules lack %q:\n%s", w, b)
				}
			}
		})
	}
}

// Bad input gets a clear error and exit 2: a policy with mistakes names each at file:line:col, as
// `policy check` does; a missing file, a bad --range or --for name the flag.
func TestPolicyAlertsErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("defaults:\n  maxAttempts: 0\n  backoff: {base: 2}\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--policy", bad}, []string{bad + ":2:16: defaults.maxAttempts", bad + ":3:19: defaults.backoff.base"}},
		{[]string{"--policy", filepath.Join(dir, "missing.yaml")}, []string{"read policy", "missing.yaml"}},
		{[]string{"--range", "0s"}, []string{"--range must be positive"}},
		{[]string{"--for", "-1m"}, []string{"--for must not be negative"}},
		{[]string{"--range", "soon"}, []string{`invalid argument "soon" for "--range"`}},
		{[]string{"extra"}, []string{`unknown command "extra"`}},
	} {
		code, out, errs := runPolicyCmd(t, append([]string{"policy", "alerts"}, tc.args...)...)
		if code != 2 || out != "" {
			t.Errorf("%v: exit %d, stdout %q; want exit 2 and nothing on stdout", tc.args, code, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%v: stderr %q lacks %q", tc.args, errs, w)
			}
		}
	}
}

// ruleAnnotations reads the generated file back: the description of the first alert named name
// whose labels include the given ones.
func ruleDescription(t *testing.T, file, alert, severity, class string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			if r.Alert == alert && (severity == "" || r.Labels["severity"] == severity) && (class == "" || r.Labels["policy_class"] == class) {
				return r.Annotations["description"]
			}
		}
	}
	t.Fatalf("no %s alert (severity %q, class %q) in %s", alert, severity, class, file)
	return ""
}

type promSeries struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

type promAlert struct {
	Labels      map[string]string `yaml:"exp_labels"`
	Annotations map[string]string `yaml:"exp_annotations"`
}

type promAlertTest struct {
	EvalTime  string      `yaml:"eval_time"`
	AlertName string      `yaml:"alertname"`
	Alerts    []promAlert `yaml:"exp_alerts"`
}

// TestPolicyAlertsFireInPromtool runs the rules generated from the example policy over series
// shaped as stormwatch exports them (promtool test rules): each alert fires for what the policy
// forbids, with the labels that route it and the summary an on-call engineer reads, and stays
// silent for traffic within the policy.
func TestPolicyAlertsFireInPromtool(t *testing.T) {
	needProm(t, "promtool")
	dir := t.TempDir()
	example := filepath.Join(dir, "policy.yaml")
	os.WriteFile(example, policy.Example, 0o644)
	rules := writeAlerts(t, dir, "--policy", example)

	dep := func(name, url, service, caller string) string {
		return name + `{stormwatch_dependency="` + url + `",stormwatch_dependency_service="` + service + `",stormwatch_caller="` + caller + `"}`
	}
	calls := func(url, service, caller, perMinute string) []promSeries {
		return []promSeries{
			{dep("stormwatch_caller_physical_calls_total", url, service, caller), "0+" + perMinute + "x30"},
			{dep("stormwatch_caller_logical_operations_total", url, service, caller), "0+1x30"},
		}
	}
	finding := func(name, detector, severity, url, service, caller string) string {
		return name + `{stormwatch_dependency="` + url + `",stormwatch_dependency_service="` + service + `",stormwatch_caller="` + caller +
			`",stormwatch_finding_detector="` + detector + `",stormwatch_finding_severity="` + severity + `"}`
	}
	var series []promSeries
	series = append(series, calls("http://catalog:8080", "catalog", "web", "8")...)        // 8 per intent: over the defaults' 3
	series = append(series, calls("http://dep:8080", "", "adapter", "27")...)              // 27: a storm, critical
	series = append(series, calls("http://payments:8443", "payments", "checkout", "3")...) // payment-create allows 2
	series = append(series, calls("http://search:8080", "search", "checkout", "3")...)     // the defaults allow 3: silent
	series = append(series,
		promSeries{finding("stormwatch_dependency_findings_total", "post-deadline-work", "warning", "grpc://stock:9090", "stock", "api"), "_x5 1x25"},
		promSeries{finding("stormwatch_window_findings", "retry-budget-exceeded", "critical", "http://origin:8080", "origin", "client"), "1x5 stale"},
		promSeries{`stormwatch_collector_rejected_spans_total{job="stormwatch",instance="127.0.0.1:4318",reason="overloaded"}`, "0+60x30"},
		promSeries{`stormwatch_collector_refused_connections_total{job="stormwatch",instance="127.0.0.1:4318",transport="grpc"}`, "0+6x30"},
		promSeries{`stormwatch_evicted_spans_total{job="stormwatch",instance="127.0.0.1:4318"}`, "0+120x30"},
	)
	amp := func(url, service, caller, dependency, severity, class, summary string) promAlert {
		a := promAlert{
			Labels: map[string]string{"stormwatch_dependency": url, "stormwatch_dependency_service": service, "stormwatch_caller": caller,
				"severity": severity, "dependency": dependency, "caller": caller, "policy_class": class},
			Annotations: map[string]string{"summary": summary, "description": ruleDescription(t, rules, "StormwatchAmplificationAboveLimit", severity, class)},
		}
		if service == "" { // an empty label is no label to Prometheus
			delete(a.Labels, "stormwatch_dependency_service")
		}
		return a
	}
	collectorAlert := func(name string, labels map[string]string, summary string) promAlert {
		l := map[string]string{"job": "stormwatch", "instance": "127.0.0.1:4318", "severity": "warning"}
		for k, v := range labels {
			l[k] = v
		}
		return promAlert{Labels: l, Annotations: map[string]string{"summary": summary, "description": ruleDescription(t, rules, name, "", "")}}
	}
	findingAlert := func(name, url, service, caller, severity, summary string) promAlert {
		return promAlert{
			Labels: map[string]string{"stormwatch_dependency": url, "stormwatch_dependency_service": service, "stormwatch_caller": caller,
				"stormwatch_finding_severity": severity, "severity": severity, "dependency": service, "caller": caller},
			Annotations: map[string]string{"summary": summary, "description": ruleDescription(t, rules, name, "", "")},
		}
	}
	tests := []promAlertTest{
		// One minute in, the rate has too few samples and the for: of 2m has not passed.
		{EvalTime: "1m", AlertName: "StormwatchAmplificationAboveLimit"},
		{EvalTime: "10m", AlertName: "StormwatchAmplificationAboveLimit", Alerts: []promAlert{
			amp("http://catalog:8080", "catalog", "web", "catalog", "warning", "defaults",
				"web sends 8.00 calls per intent to catalog; the policy allows 3"),
			amp("http://dep:8080", "", "adapter", "http://dep:8080", "warning", "defaults",
				"adapter sends 27.00 calls per intent to http://dep:8080; the policy allows 3"),
			amp("http://dep:8080", "", "adapter", "http://dep:8080", "critical", "defaults",
				"adapter sends 27.00 calls per intent to http://dep:8080; the policy allows 3"),
			amp("http://payments:8443", "payments", "checkout", "payments", "warning", "payment-create",
				"checkout sends 3.00 calls per intent to payments; the policy allows 2"),
		}},
		{EvalTime: "7m", AlertName: "StormwatchWorkAfterGiveUp", Alerts: []promAlert{
			findingAlert("StormwatchWorkAfterGiveUp", "grpc://stock:9090", "stock", "api", "warning",
				"api went on calling stock after its caller gave up: work done for nobody"),
		}},
		// Five minutes after the last new finding the alert resolves.
		{EvalTime: "12m", AlertName: "StormwatchWorkAfterGiveUp"},
		{EvalTime: "3m", AlertName: "StormwatchRetryBudgetExceeded", Alerts: []promAlert{
			findingAlert("StormwatchRetryBudgetExceeded", "http://origin:8080", "origin", "client", "critical",
				"client's retries to origin are over its retry budget"),
		}},
		// The window no longer shows the finding: resolved.
		{EvalTime: "8m", AlertName: "StormwatchRetryBudgetExceeded"},
		{EvalTime: "10m", AlertName: "StormwatchCollectorDroppingSpans", Alerts: []promAlert{
			collectorAlert("StormwatchCollectorDroppingSpans", map[string]string{"reason": "overloaded"},
				"stormwatch at 127.0.0.1:4318 is dropping spans (overloaded): 1.0 spans/s"),
		}},
		{EvalTime: "10m", AlertName: "StormwatchCollectorRefusingRequests", Alerts: []promAlert{
			collectorAlert("StormwatchCollectorRefusingRequests", map[string]string{"transport": "grpc", "outcome": "connection_refused"},
				"stormwatch at 127.0.0.1:4318 refuses grpc requests (connection_refused)"),
		}},
		{EvalTime: "10m", AlertName: "StormwatchSpansNotAnalyzed", Alerts: []promAlert{
			collectorAlert("StormwatchSpansNotAnalyzed", nil, "stormwatch at 127.0.0.1:4318 drops 2.0 spans/s from its analysis"),
		}},
	}
	doc := map[string]any{
		"rule_files":          []string{rules},
		"evaluation_interval": "1m",
		"tests": []map[string]any{{
			"interval":        "1m",
			"input_series":    series,
			"alert_rule_test": tests,
		}},
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	testFile := filepath.Join(dir, "rules_test.yaml")
	os.WriteFile(testFile, b, 0o644)
	promtool(t, "test", "rules", testFile)
}
