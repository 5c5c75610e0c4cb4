package policy_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/passes/nobackoff"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/suite"
)

// TestParseRejects holds every kind of bad input with the exact message a user sees: the file,
// line and column of the offending key or value, the path to it, and what is wrong.
func TestParseRejects(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want string
	}{
		{"unknown top-level key", "classs: []\n",
			`p.yaml:1:1: unknown key "classs" (did you mean "classes"?)`},
		{"unknown key far from any", "defaults:\n  colour: blue\n",
			`p.yaml:2:3: defaults: unknown key "colour" (known keys: backoff, deadline, fallback, idempotent, maxAttempts, maxFanout, owner, retryBudget, retryable, terminal)`},
		{"misspelt rule", "defaults:\n  maxAttempt: 3\n",
			`p.yaml:2:3: defaults: unknown key "maxAttempt" (did you mean "maxAttempts"?)`},
		{"repeated key", "defaults:\n  maxAttempts: 3\n  maxAttempts: 4\n",
			`p.yaml:3:3: defaults.maxAttempts: repeated key (first at line 2)`},
		{"maxAttempts zero", "defaults:\n  maxAttempts: 0\n",
			`p.yaml:2:16: defaults.maxAttempts: must be at least 1 (1 means no retries), got 0`},
		{"maxAttempts negative in a class", "classes:\n  - name: a\n    match: {operation: x}\n    maxAttempts: -2\n",
			`p.yaml:4:18: classes[0].maxAttempts: must be at least 1 (1 means no retries), got -2`},
		{"maxAttempts a word", "defaults:\n  maxAttempts: three\n",
			`p.yaml:2:16: defaults.maxAttempts: want an integer, got "three"`},
		{"maxAttempts a float", "defaults:\n  maxAttempts: 2.5\n",
			`p.yaml:2:16: defaults.maxAttempts: want an integer, got "2.5"`},
		{"maxAttempts a list", "defaults:\n  maxAttempts: [3]\n",
			`p.yaml:2:16: defaults.maxAttempts: want an integer, got a list`},
		{"maxAttempts empty", "defaults:\n  maxAttempts:\n",
			`p.yaml:2:15: defaults.maxAttempts: want an integer, got nothing`},
		{"negative deadline", "defaults:\n  deadline: -2s\n",
			`p.yaml:2:13: defaults.deadline: must be positive, got -2s`},
		{"zero deadline", "defaults:\n  deadline: 0s\n",
			`p.yaml:2:13: defaults.deadline: must be positive, got 0s`},
		{"deadline without unit", "defaults:\n  deadline: 2\n",
			`p.yaml:2:13: defaults.deadline: want a duration with a unit such as 250ms or 2s, got 2`},
		{"deadline nonsense", "defaults:\n  deadline: soon\n",
			`p.yaml:2:13: defaults.deadline: want a duration such as 250ms or 2s, got "soon"`},
		{"cap below base", "defaults:\n  backoff: {base: 1s, cap: 10ms}\n",
			`p.yaml:2:28: defaults.backoff.cap: 10ms is below base 1s`},
		{"backoff without base", "defaults:\n  backoff: {cap: 1s}\n",
			`p.yaml:2:12: defaults.backoff: backoff needs a base`},
		{"backoff zero base", "defaults:\n  backoff: {base: 0s}\n",
			`p.yaml:2:19: defaults.backoff.base: must be positive, got 0s`},
		{"backoff a number", "defaults:\n  backoff: 100ms\n",
			`p.yaml:2:12: defaults.backoff: want a mapping, got "100ms"`},
		{"unknown jitter", "defaults:\n  backoff: {base: 1s, jitter: random}\n",
			`p.yaml:2:31: defaults.backoff.jitter: unknown jitter "random" (want none, full, equal, decorrelated or a ratio between 0 and 1)`},
		{"jitter ratio above 1", "defaults:\n  backoff: {base: 1s, jitter: 1.5}\n",
			`p.yaml:2:31: defaults.backoff.jitter: must be a ratio between 0 and 1, got 1.5`},
		{"budget above 1", "defaults:\n  retryBudget: 1.5\n",
			`p.yaml:2:16: defaults.retryBudget: must be a ratio between 0 and 1, got 1.5`},
		{"budget negative", "defaults:\n  retryBudget: -0.1\n",
			`p.yaml:2:16: defaults.retryBudget: must be a ratio between 0 and 1, got -0.1`},
		{"budget a word", "defaults:\n  retryBudget: ten-percent\n",
			`p.yaml:2:16: defaults.retryBudget: want a number between 0 and 1, got "ten-percent"`},
		{"maxFanout zero", "defaults:\n  maxFanout: 0\n",
			`p.yaml:2:14: defaults.maxFanout: must be at least 1 (one origin per attempt), got 0`},
		{"retryable not a list", "defaults:\n  retryable: 503\n",
			`p.yaml:2:14: defaults.retryable: want a list of outcomes such as [timeout, 503], got "503"`},
		{"retryable unknown", "defaults:\n  retryable: [503, flaky]\n",
			`p.yaml:2:20: defaults.retryable[1]: unknown outcome "flaky" (want an HTTP status such as 503, a class such as 5xx, a gRPC code such as UNAVAILABLE, or timeout, connect-error, cancelled)`},
		{"retryable status out of range", "defaults:\n  retryable: [700]\n",
			`p.yaml:2:15: defaults.retryable[0]: HTTP status 700 is outside 100-599`},
		{"idempotent a word", "defaults:\n  idempotent: maybe\n",
			`p.yaml:2:15: defaults.idempotent: want true or false, got "maybe"`},
		{"terminal unknown", "defaults:\n  terminal: retry-forever\n",
			`p.yaml:2:13: defaults.terminal: unknown terminal action "retry-forever" (want fail-fast, shed, fallback or fallback:<name>)`},
		{"owner empty", "defaults:\n  owner: \"\"\n",
			`p.yaml:2:10: defaults.owner: must not be empty`},
		{"classes a mapping", "classes: {a: 1}\n",
			`p.yaml:1:10: classes: want a list of classes, got a mapping`},
		{"class without name", "classes:\n  - match: {operation: x}\n",
			`p.yaml:2:5: classes[0]: a class needs a name`},
		{"class without match", "classes:\n  - name: a\n",
			`p.yaml:2:5: classes[0]: a class needs a match (operation, service, dependency or route)`},
		{"empty match", "classes:\n  - name: a\n    match: {}\n",
			`p.yaml:3:12: classes[0].match: empty match: give operation, service, dependency or route`},
		{"unknown match key", "classes:\n  - name: a\n    match: {host: x}\n",
			`p.yaml:3:13: classes[0].match: unknown key "host" (known keys: dependency, operation, route, service)`},
		{"bad match pattern", "classes:\n  - name: a\n    match: {operation: \"[x\"}\n",
			`p.yaml:3:24: classes[0].match.operation: bad pattern "[x": syntax error in pattern`},
		{"duplicate class", "classes:\n  - name: a\n    match: {operation: x}\n  - name: a\n    match: {operation: y}\n",
			`p.yaml:4:11: classes[1].name: class "a" is already defined at line 2`},
		{"unknown detector", "detectors:\n  no-backof: {enabled: false}\n",
			`p.yaml:2:3: detectors: unknown key "no-backof" (did you mean "no-backoff"?)`},
		{"tunable of another detector", "detectors:\n  no-backoff: {maxCV: 0.1}\n",
			`p.yaml:2:16: detectors.no-backoff: unknown key "maxCV" (known keys: enabled, minPause, severity)`},
		{"bad severity", "detectors:\n  no-backoff: {severity: fatal}\n",
			`p.yaml:2:26: detectors.no-backoff.severity: unknown severity "fatal" (want info, warning or critical)`},
		{"maxCV above 1", "detectors:\n  synchronized-retries: {maxCV: 2}\n",
			`p.yaml:2:33: detectors.synchronized-retries.maxCV: must be a ratio between 0 and 1, got 2`},
		{"negative reserve", "detectors:\n  retry-budget-exceeded: {reserve: -1}\n",
			`p.yaml:2:36: detectors.retry-budget-exceeded.reserve: must not be negative, got -1`},
		{"unknown setting, with a suggestion", "detectors:\n  no-backoff: {minPaus: 2ms}\n",
			`p.yaml:2:16: detectors.no-backoff: unknown key "minPaus" (did you mean "minPause"?)`},
		{"unknown setting, far from any", "detectors:\n  retry-amplification: {layers: 3}\n",
			`p.yaml:2:25: detectors.retry-amplification: unknown key "layers" (known keys: criticalFactor, enabled, minRetryingLayers, severity)`},
		{"setting duration without unit", "detectors:\n  no-backoff: {minPause: 2}\n",
			`p.yaml:2:26: detectors.no-backoff.minPause: want a duration with a unit such as 250ms or 2s, got 2`},
		{"setting duration nonsense", "detectors:\n  no-backoff: {minPause: instant}\n",
			`p.yaml:2:26: detectors.no-backoff.minPause: want a duration such as 250ms or 2s, got "instant"`},
		{"negative duration setting", "detectors:\n  no-backoff: {minPause: -1ms}\n",
			`p.yaml:2:26: detectors.no-backoff.minPause: must not be negative, got -1ms`},
		{"setting integer a float", "detectors:\n  synchronized-retries: {minSamples: 2.5}\n",
			`p.yaml:2:38: detectors.synchronized-retries.minSamples: want an integer, got "2.5"`},
		{"setting integer a list", "detectors:\n  retry-budget-exceeded: {reserve: [1]}\n",
			`p.yaml:2:36: detectors.retry-budget-exceeded.reserve: want an integer, got a list`},
		{"setting integer below its bound", "detectors:\n  retry-budget-exceeded: {minSamples: 0}\n",
			`p.yaml:2:39: detectors.retry-budget-exceeded.minSamples: must be at least 1, got 0`},
		{"one retrying layer is no amplification", "detectors:\n  retry-amplification: {minRetryingLayers: 1}\n",
			`p.yaml:2:44: detectors.retry-amplification.minRetryingLayers: must be at least 2, got 1`},
		{"fan-out limit zero", "detectors:\n  unbounded-fanout: {maxFanout: 0}\n",
			`p.yaml:2:33: detectors.unbounded-fanout.maxFanout: must be at least 1, got 0`},
		{"ratio setting a word", "detectors:\n  synchronized-retries: {maxCV: low}\n",
			`p.yaml:2:33: detectors.synchronized-retries.maxCV: want a number between 0 and 1, got "low"`},
		{"ratio setting negative", "detectors:\n  synchronized-retries: {maxCV: -0.1}\n",
			`p.yaml:2:33: detectors.synchronized-retries.maxCV: must be a ratio between 0 and 1, got -0.1`},
		{"ratio setting not a number", "detectors:\n  synchronized-retries: {maxCV: .nan}\n",
			`p.yaml:2:33: detectors.synchronized-retries.maxCV: want a number between 0 and 1, got ".nan"`},
		{"enabled a word", "detectors:\n  no-backoff: {enabled: yes}\n",
			`p.yaml:2:25: detectors.no-backoff.enabled: want true or false, got "yes"`},
		{"detector a list", "detectors:\n  no-backoff: [minPause]\n",
			`p.yaml:2:15: detectors.no-backoff: want a mapping, got a list`},
		{"repeated setting", "detectors:\n  no-backoff:\n    minPause: 1ms\n    minPause: 2ms\n",
			`p.yaml:4:5: detectors.no-backoff.minPause: repeated key (first at line 3)`},
		{"several detector errors at once", "detectors:\n  no-backof: {}\n  synchronized-retries: {maxCV: 2, minSamples: 0}\n",
			"p.yaml:2:3: detectors: unknown key \"no-backof\" (did you mean \"no-backoff\"?)\n" +
				"p.yaml:3:33: detectors.synchronized-retries.maxCV: must be a ratio between 0 and 1, got 2\n" +
				"p.yaml:3:48: detectors.synchronized-retries.minSamples: must be at least 1, got 0"},
		{"negative window", "detectors:\n  window: -1m\n",
			`p.yaml:2:11: detectors.window: must be positive, got -1m`},
		{"bad what-if", "whatIf:\n  - edge.retries=1\n",
			`p.yaml:2:5: whatIf[0]: change "edge.retries=1": unknown field "retries" (want maxAttempts, maxFanout, retryBudget or breaker)`},
		{"version 2", "version: 2\n",
			`p.yaml:1:10: version: unsupported version 2 (this stormwatch reads version 1)`},
		{"top level a list", "- a\n",
			`p.yaml:1:1: want a mapping, got a list`},
		{"two documents", "version: 1\n---\nversion: 1\n",
			`p.yaml:3:1: a policy file holds one YAML document; found another here`},
		{"not YAML", "defaults:\n  maxAttempts: 3\n bad: [\n",
			`p.yaml:2:1: not valid YAML: did not find expected key`},
		{"several at once, in file order", "defaults:\n  retryBudget: 2\n  maxAttempts: 0\n",
			"p.yaml:2:16: defaults.retryBudget: must be a ratio between 0 and 1, got 2\n" +
				"p.yaml:3:16: defaults.maxAttempts: must be at least 1 (1 means no retries), got 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := policy.Parse("p.yaml", []byte(c.yaml), suite.Default())
			if err == nil {
				t.Fatalf("accepted:\n%s\ngot %+v", c.yaml, p)
			}
			if got := err.Error(); got != c.want {
				t.Errorf("message\n got: %s\nwant: %s", got, c.want)
			}
			var es policy.Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Errorf("error is %T, want policy.Errors", err)
			}
		})
	}
}

func TestExampleParses(t *testing.T) {
	p, err := policy.Parse("example.yaml", policy.Example, suite.Default())
	if err != nil {
		t.Fatalf("the example policy that `policy init` writes is invalid:\n%v", err)
	}
	if len(p.Classes) != 3 {
		t.Fatalf("classes = %d, want 3", len(p.Classes))
	}
	if nb := p.Detector("no-backoff"); nb.Set["minPause"].IsZero() || nb.Values.(*nobackoff.Settings).MinPause != 5*time.Millisecond {
		t.Errorf("no-backoff minPause = %+v", nb)
	}
}

func TestLookupMergesDefaultsAndKeepsPositions(t *testing.T) {
	src := `defaults:
  maxAttempts: 4
  backoff: {base: 100ms, cap: 1s, jitter: full}
classes:
  - name: reads
    match: {operation: "catalog.*"}
    maxAttempts: 2
  - name: checkout-payments
    match: {service: checkout, dependency: payments}
    idempotent: false
  - name: search
    match: {route: /search}
`
	p, err := policy.Parse("pol.yaml", []byte(src), suite.Default())
	if err != nil {
		t.Fatal(err)
	}
	c := p.Lookup(policy.Key{Operation: "catalog.read", Service: "edge"})
	if c.Name != "reads" || c.MaxAttempts.Value != 2 || c.MaxAttempts.Pos.FileLine() != "pol.yaml:7" {
		t.Errorf("reads: %s maxAttempts %d at %s", c.Name, c.MaxAttempts.Value, c.MaxAttempts.Pos)
	}
	if c.Backoff.Value.Jitter != policy.JitterFull || c.Backoff.Pos.FileLine() != "pol.yaml:3" {
		t.Errorf("reads inherits backoff from defaults: %+v at %s", c.Backoff.Value, c.Backoff.Pos)
	}
	// The dependency may be named by the callee's service.name.
	c = p.Lookup(policy.Key{Service: "checkout", Dependency: "http://10.0.0.7:8443", DependencyService: "payments"})
	if c.Name != "checkout-payments" || !c.Idempotent.Set || c.Idempotent.Value {
		t.Errorf("payments: %+v", c)
	}
	// Every field of a match must hold: the caller differs, so defaults apply.
	if c = p.Lookup(policy.Key{Service: "edge", DependencyService: "payments"}); c.Name != "defaults" || c.MaxAttempts.Value != 4 {
		t.Errorf("edge->payments got class %q maxAttempts %d", c.Name, c.MaxAttempts.Value)
	}
	if c = p.Lookup(policy.Key{Route: "/search"}); c.Name != "search" {
		t.Errorf("route: got %q", c.Name)
	}
	// Built-in defaults for what no one wrote.
	if c.MaxFanout.Value != policy.DefaultMaxFanout || c.MaxFanout.Set || c.MaxFanout.Pos.String() != "built-in default" {
		t.Errorf("maxFanout built-in: %+v", c.MaxFanout)
	}
	if c.RetryBudget.Value != policy.DefaultRetryBudget {
		t.Errorf("retryBudget built-in: %v", c.RetryBudget.Value)
	}
}

func TestEmptyFileIsDefaults(t *testing.T) {
	for _, src := range []string{"", "# nothing\n", "---\n"} {
		p, err := policy.Parse("e.yaml", []byte(src), suite.Default())
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if c := p.Lookup(policy.Key{Operation: "x"}); c.MaxAttempts.Value != policy.DefaultMaxAttempts {
			t.Errorf("%q: maxAttempts %d", src, c.MaxAttempts.Value)
		}
		if !p.Enabled("no-backoff") {
			t.Errorf("%q: detectors are on by default", src)
		}
	}
}

func TestDetectorSettings(t *testing.T) {
	p, err := policy.Parse("d.yaml", []byte("detectors:\n  window: 30s\n  hedge-not-cancelled: {enabled: false}\n  no-backoff: {minPause: 2ms, severity: critical}\n"), suite.Default())
	if err != nil {
		t.Fatal(err)
	}
	if p.Enabled("hedge-not-cancelled") || !p.Enabled("no-backoff") || !p.Enabled("retry-amplification") {
		t.Errorf("enabled: hedge %v no-backoff %v amplification %v", p.Enabled("hedge-not-cancelled"), p.Enabled("no-backoff"), p.Enabled("retry-amplification"))
	}
	nb := p.Detector("no-backoff")
	if nb.Values.(*nobackoff.Settings).MinPause != 2*time.Millisecond || nb.Set["minPause"].FileLine() != "d.yaml:4" || nb.Severity.Value != analyzer.SeverityCritical {
		t.Errorf("no-backoff: %+v", nb)
	}
	if p.Window.Value != 30*time.Second || p.Window.Pos.FileLine() != "d.yaml:2" {
		t.Errorf("window: %+v", p.Window)
	}
}

func TestAnchorsWork(t *testing.T) {
	src := "defaults:\n  backoff: &b {base: 10ms, cap: 1s}\nclasses:\n  - name: a\n    match: {operation: x}\n    backoff: *b\n"
	p, err := policy.Parse("a.yaml", []byte(src), suite.Default())
	if err != nil {
		t.Fatal(err)
	}
	if b := p.Classes[0].Backoff.Value; b.Base != 10*time.Millisecond || b.Cap != time.Second || b.Jitter != policy.JitterNone {
		t.Errorf("aliased backoff: %+v", b)
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "pol.yaml")
	if err := os.WriteFile(f, []byte("defaults:\n  maxAttempts: 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := policy.Load(f, suite.Default())
	if err == nil || !strings.HasPrefix(err.Error(), f+":2:16: ") {
		t.Errorf("policy.Load error %v, want it to start with %s:2:16", err, f)
	}
	_, err = policy.Load(filepath.Join(dir, "missing.yaml"), suite.Default())
	if err == nil || !strings.Contains(err.Error(), "read policy: ") || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
}

func TestOutcomesContains(t *testing.T) {
	o := policy.DefaultRetryable()
	cases := []struct {
		status, outcome string
		want            bool
	}{
		{"503", "retryable", true},
		{"429", "retryable", true},
		{"404", "permanent", false},
		{"400", "permanent", false},
		{"", "timeout", true},
		{"", "retryable", true}, // connect error: no answer, not a timeout
		{"", "cancelled", false},
		{"UNAVAILABLE", "retryable", true},
		{"INVALID_ARGUMENT", "permanent", false},
		{"500", "retryable", false},
	}
	for _, c := range cases {
		if got := o.Contains(c.status, c.outcome); got != c.want {
			t.Errorf("Contains(%q, %q) = %v, want %v", c.status, c.outcome, got, c.want)
		}
	}
	p, err := policy.Parse("o.yaml", []byte("defaults:\n  retryable: [5xx, unavailable, Timeout]\n"), suite.Default())
	if err != nil {
		t.Fatal(err)
	}
	r := p.Defaults.Retryable.Value
	if got := strings.Join(r.Tokens(), " "); got != "5xx UNAVAILABLE timeout" {
		t.Errorf("normalised tokens %q", got)
	}
	if !r.Contains("500", "retryable") || !r.Contains("599", "retryable") || r.Contains("429", "retryable") {
		t.Errorf("5xx class matching wrong")
	}
}

func TestParseChanges(t *testing.T) {
	good := []struct {
		in   string
		want string
	}{
		{"edge.maxAttempts=1,api.maxAttempts=1", "edge.maxAttempts=1 api.maxAttempts=1"},
		{" checkout.v2.retryBudget = 0.05 ", "checkout.v2.retryBudget=0.05"},
		{"*.maxFanout=1", "*.maxFanout=1"},
		{"adapter.breaker=5", "adapter.breaker=5"},
	}
	for _, c := range good {
		cs, err := policy.ParseChanges(c.in)
		if err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		var got []string
		for _, ch := range cs {
			got = append(got, ch.String())
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%q -> %q, want %q", c.in, strings.Join(got, " "), c.want)
		}
	}
	bad := []struct{ in, want string }{
		{"edge.maxAttempts", `change "edge.maxAttempts": want layer.field=value, such as edge.maxAttempts=1`},
		{"maxAttempts=1", `change "maxAttempts=1": want layer.field=value, such as edge.maxAttempts=1`},
		{"edge.maxAttempts=0", `change "edge.maxAttempts=0": maxAttempts must be a whole number of at least 1`},
		{"edge.retryBudget=2", `change "edge.retryBudget=2": retryBudget must be a ratio between 0 and 1`},
		{"edge.breaker=0.5", `change "edge.breaker=0.5": breaker must be a whole number of at least 1`},
		{"edge.timeout=1s", `change "edge.timeout=1s": unknown field "timeout" (want maxAttempts, maxFanout, retryBudget or breaker)`},
		{",", `no changes in ",": want layer.field=value, such as edge.maxAttempts=1`},
	}
	for _, c := range bad {
		_, err := policy.ParseChanges(c.in)
		if err == nil || err.Error() != c.want {
			t.Errorf("%q: error %v, want %s", c.in, err, c.want)
		}
	}
}
