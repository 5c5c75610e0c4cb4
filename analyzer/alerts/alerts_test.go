package alerts

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/suite"
)

// A class's match patterns select the same dependencies and callers in PromQL as in the policy
// (path.Match: * and ? stop at '/').
func TestGlobRegexpMatchesAsThePolicyDoes(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		yes, no []string
	}{
		{"catalog.*", []string{"catalog.read", "catalog."}, []string{"catalogread", "catalog.a/b"}},
		{"http://10.0.0.*:8080", []string{"http://10.0.0.7:8080"}, []string{"http://10.0.0.7:9090", "http://10.0.1.7:8080"}},
		{"pay?", []string{"pays"}, []string{"pay", "pay/"}},
		{"svc-[a-c]", []string{"svc-b"}, []string{"svc-d"}},
		{"svc-[^a-c]", []string{"svc-d"}, []string{"svc-a"}},
		{`a\*b`, []string{"a*b"}, []string{"axb"}},
		{"a.b+c", []string{"a.b+c"}, []string{"aXb+c", "a.bbc"}},
	} {
		re := regexp.MustCompile("^(?:" + globRegexp(tc.pattern) + ")$")
		for _, s := range tc.yes {
			if !re.MatchString(s) {
				t.Errorf("%q (%s) does not match %q", tc.pattern, re, s)
			}
		}
		for _, s := range tc.no {
			if re.MatchString(s) {
				t.Errorf("%q (%s) matches %q", tc.pattern, re, s)
			}
		}
	}
}

// The first class that matches an operation is its class: a later class's alert leaves out the
// series an earlier one claims, and the defaults leave out every class's.
func TestFirstMatchingClassWins(t *testing.T) {
	p, err := policy.Parse("p.yaml", []byte(`defaults: {maxAttempts: 4}
classes:
  - name: a
    match: {service: checkout}
    maxAttempts: 2
  - name: b
    match: {dependency: payments}
    maxAttempts: 6
  - name: by-route
    match: {route: /search}
    maxAttempts: 9
  - name: bulk
    match: {dependency: batch}
    maxAttempts: 10
`), suite.Default())
	if err != nil {
		t.Fatal(err)
	}
	out, err := Rules(p, Options{Range: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	rec := "stormwatch_caller:amplification:ratio_rate1m"
	a := rec + `{stormwatch_caller="checkout"}`
	b := rec + `{stormwatch_dependency="payments"} or ` + rec + `{stormwatch_dependency_service="payments"}`
	bulk := rec + `{stormwatch_dependency="batch"} or ` + rec + `{stormwatch_dependency_service="batch"}`
	for _, want := range []string{
		"expr: (" + a + ") > 2\n",
		"expr: ((" + b + ") unless (" + a + ")) > 6 >= 9\n",
		"expr: ((" + rec + ") unless (" + a + " or " + b + " or " + bulk + ")) > 4\n",
		`Class "by-route" (p.yaml:9) matches by operation or route, which the metrics do not carry`,
		"for: 0s",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("rules lack %q:\n%s", want, s)
		}
	}
	// Under retry-amplification's criticalFactor (9) a limit gets a warning and a critical alert;
	// at or over it, anything above the limit is already critical.
	if n := strings.Count(s, "policy_class: b\n"); n != 2 {
		t.Errorf("class b has %d alerts, want a warning and a critical", n)
	}
	if n, crit := strings.Count(s, "policy_class: bulk\n"), strings.Count(s, "severity: critical"); n != 1 || crit != 4 {
		t.Errorf("class bulk has %d alerts, want 1 (critical); critical amplification alerts %d, want 4", n, crit)
	}
}

// Text from the policy file reaches Prometheus's template engine only as text.
func TestPolicyTextIsNotATemplate(t *testing.T) {
	if got := tmplText(`x {{ .Secret }} y`); got != `x {{ "{{" }} .Secret {{ "}}" }} y` {
		t.Errorf("tmplText = %q", got)
	}
	if got := tmplText("plain"); got != "plain" {
		t.Errorf("tmplText(plain) = %q", got)
	}
}

// A class that matches its dependency by address still selects that dependency's series: the
// metrics label a dependency by name, so the address is also matched as the name the analyzer
// gives a callee known by its address alone - its host, whatever port it moves to.
func TestClassByAddressMatchesTheDependencyName(t *testing.T) {
	p, err := policy.Parse("p.yaml", []byte(`classes:
  - name: pay
    match: {dependency: "http://payments:8443"}
    maxAttempts: 2
`), suite.Default())
	if err != nil {
		t.Fatal(err)
	}
	out, err := Rules(p, Options{Range: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	rec := "stormwatch_caller:amplification:ratio_rate1m"
	want := "expr: (" + rec + `{stormwatch_dependency="http://payments:8443"} or ` + rec +
		`{stormwatch_dependency_service="http://payments:8443"} or ` + rec + `{stormwatch_dependency="payments"}) > 2` + "\n"
	if !strings.Contains(string(out), want) {
		t.Errorf("rules lack %q:\n%s", want, out)
	}
}
