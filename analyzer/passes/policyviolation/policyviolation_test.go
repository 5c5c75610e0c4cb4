package policyviolation_test

import (
	"strings"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/analyzer/passes/policyviolation"
)

func TestTestdata(t *testing.T) { detectortest.Run(t, policyviolation.Detector, "testdata") }

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
		rep := detectortest.Analyze(t, "amplification-27-"+shape, "team.yaml", pol)
		got := detectortest.Of(rep, "policy-violation")
		byOwner := map[string]int{}
		for _, f := range got {
			if f.Evidence["rule"].String() != "owner" {
				t.Errorf("%s: unexpected rule %v: %s", shape, f.Evidence["rule"], f.Summary)
				continue
			}
			byOwner[f.Service]++
			if len(f.SpanIDs) == 0 || f.TraceID == "" {
				t.Errorf("%s: finding names no spans: %+v", shape, f)
			}
			pos, _ := f.Evidence["policy"].Text()
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
