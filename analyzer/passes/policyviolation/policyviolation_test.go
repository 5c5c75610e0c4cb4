package policyviolation_test

import (
	"strings"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/passes/passtest"
)

// The 27-call trace under a policy that makes edge the only owner of retries: api and adapter
// broke the owner rule, and each finding names the rule, the line and the spans.
func TestOwnerRuleNamesRuleLineAndSpans(t *testing.T) {
	const pol = `classes:
  - name: items
    match:
      route: "/items/{id}"
    owner: edge
  - name: catalog
    match:
      route: "/catalog/{id}"
    owner: edge
`
	for _, shape := range []string{"stock", "reference"} {
		rep := passtest.Analyze(t, "amplification-27-"+shape, "team.yaml", pol)
		got := passtest.Of(rep, "policy-violation")
		byOwner := map[string]int{}
		for _, f := range got {
			if f.Evidence["rule"] != "owner" {
				t.Errorf("%s: unexpected rule %v: %s", shape, f.Evidence["rule"], f.Summary)
				continue
			}
			byOwner[f.Service]++
			if len(f.SpanIDs) == 0 || f.TraceID == "" {
				t.Errorf("%s: finding names no spans: %+v", shape, f)
			}
			pos := f.Evidence["policy"].(string)
			if pos != "team.yaml:5" && pos != "team.yaml:9" {
				t.Errorf("%s: policy position %q, want team.yaml:5 or :9", shape, pos)
			}
			if !strings.Contains(f.Summary, "(policy owner at "+pos) {
				t.Errorf("%s: summary does not cite the rule: %s", shape, f.Summary)
			}
		}
		// Two requests: per request api makes 3 operations' worth of retries... one per retrying
		// operation: api retried once per edge attempt (3), adapter once per api attempt (9).
		if byOwner["edge"] != 0 || byOwner["api"] != 6 || byOwner["adapter"] != 18 {
			t.Errorf("%s: owner violations by service = %v, want api 6, adapter 18, edge 0", shape, byOwner)
		}
	}
}

func TestDeadlineAndBackoffRules(t *testing.T) {
	// no-backoff-stock: four attempts back to back, ~10 ms in all. A 5 ms deadline and an
	// exponential backoff without jitter are both broken.
	const pol = `defaults:
  deadline: 5ms
  backoff: {base: 100ms, cap: 1s, jitter: none}
classes:
  - name: catalog
    match: {service: web}
`
	rep := passtest.Analyze(t, "no-backoff-stock", "p.yaml", pol)
	rules := map[string]string{}
	for _, f := range passtest.Of(rep, "policy-violation") {
		rules[f.Evidence["rule"].(string)] = f.Evidence["policy"].(string)
	}
	if rules["deadline"] != "p.yaml:2" || rules["backoff"] != "p.yaml:3" {
		t.Errorf("rules = %v, want deadline at p.yaml:2 and backoff at p.yaml:3", rules)
	}
	// The healthy twin backs off 100, 200, 400 ms exactly: within the backoff rule.
	rep = passtest.Analyze(t, "no-backoff-healthy-stock", "p.yaml", strings.Replace(pol, "5ms", "2s", 1))
	if got := passtest.Of(rep, "policy-violation"); len(got) != 0 {
		t.Errorf("healthy twin: %v", got)
	}
}

func TestSilentWithoutPolicyFile(t *testing.T) {
	rep := passtest.Analyze(t, "amplification-27-reference", "", "")
	if got := passtest.Of(rep, "policy-violation"); len(got) != 0 {
		t.Errorf("built-in defaults are not a policy, got %v", got)
	}
}
