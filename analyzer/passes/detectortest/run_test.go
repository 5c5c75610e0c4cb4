package detectortest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/policy"
)

// retried stands in for a detector: it reports every operation tried more than once, about its
// attempts after the first, with the number of classes of the policy it runs under, which shows
// whether Run applied a policy file.
var retried = &analyzer.Detector{
	Name: "retried", Title: "retried operations", Severity: analyzer.SeverityWarning,
	Doc: "reports every operation tried more than once (a stand-in for the harness's tests)",
	Run: func(pass *analyzer.Pass) error {
		classes := 0
		if p, ok := policy.RunPolicy.Get(pass.RunSettings); ok {
			classes = len(p.Classes)
		}
		for _, op := range pass.Operations {
			if len(op.Attempts) > 1 {
				var ids []string
				for _, a := range op.Attempts[1:] {
					ids = append(ids, a.SpanID.String())
				}
				pass.Report(analyzer.Finding{Severity: pass.Detector.Severity, Service: op.Caller, Dependency: op.Dependency, SpanIDs: ids,
					Summary:  op.Caller + " tried again",
					Evidence: analyzer.Evidence{"attempts": analyzer.Int(len(op.Attempts)), "classes": analyzer.Int(classes)}})
			}
		}
		return nil
	},
}

func TestRunReadsEveryTraceOfTestdata(t *testing.T) {
	Run(t, retried, "testdata")
}

// The diff marks what only the expectations say (-) and what only the detector said (+): an
// unmatched finding is written through the keys of the unmatched line about the same service and
// dependency, so the two lines differ only where the values do.
func TestDiff(t *testing.T) {
	finding := func(sev analyzer.Severity, svc string, attempts int) analyzer.Finding {
		return analyzer.Finding{Severity: sev, Service: svc, Dependency: "http://dep:80", Summary: svc + " retried",
			Evidence: analyzer.Evidence{"attempts": analyzer.Int(attempts), "status": analyzer.Text("503"),
				"targets": analyzer.Texts([]string{"a", "b"})}}
	}
	want := func(text string) []Want {
		w, err := ParseWant("t.want", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	tests := []struct {
		name, want string
		got        []analyzer.Finding
		diff       string
	}{
		{"match in any order, keys not named are not compared",
			"warning b -> http://dep:80 attempts=2\nwarning a -> http://dep:80 attempts=3 status=\"503\" targets=[\"a\",\"b\"]\n",
			[]analyzer.Finding{finding(analyzer.SeverityWarning, "a", 3), finding(analyzer.SeverityWarning, "b", 2)}, ""},
		{"silent and nothing reported", "# nothing\n", nil, ""},
		{"a value differs",
			"warning a -> http://dep:80 attempts=4\n",
			[]analyzer.Finding{finding(analyzer.SeverityWarning, "a", 3)},
			"- warning a -> http://dep:80 attempts=4\n+ warning a -> http://dep:80 attempts=3\n      # a retried\n"},
		{"the severity differs",
			"critical a -> http://dep:80\n",
			[]analyzer.Finding{finding(analyzer.SeverityWarning, "a", 3)},
			"- critical a -> http://dep:80\n+ warning a -> http://dep:80\n      # a retried\n"},
		{"one finding fewer than expected",
			"warning a -> http://dep:80 attempts=3\nwarning a -> http://dep:80 attempts=3\n",
			[]analyzer.Finding{finding(analyzer.SeverityWarning, "a", 3)},
			"  warning a -> http://dep:80 attempts=3\n- warning a -> http://dep:80 attempts=3\n"},
		{"an unexpected finding shows all its evidence",
			"",
			[]analyzer.Finding{finding(analyzer.SeverityInfo, "a", 3)},
			"+ info a -> http://dep:80 attempts=3 status=\"503\" targets=[\"a\",\"b\"]\n      # a retried\n"},
		{"a key the finding lacks",
			"warning a -> http://dep:80 factor=3\n",
			[]analyzer.Finding{finding(analyzer.SeverityWarning, "a", 3)},
			"- warning a -> http://dep:80 factor=3\n+ warning a -> http://dep:80 factor=(missing)\n      # a retried\n"},
	}
	for _, tt := range tests {
		if got := Diff(want(tt.want), tt.got); got != tt.diff {
			t.Errorf("%s: diff\n%s\nwant\n%s", tt.name, got, tt.diff)
		}
	}
}

// Values are JSON, strings without spaces unquoted; a value written by hand equals the
// detector's when they mean the same (1 and 1.0, map keys in any order).
func TestParseWant(t *testing.T) {
	w, err := ParseWant("t.want", []byte(`
# a comment, then a line
critical - -> grpc://x:1 n=1.0 s=plain q="two words" m={"b":2,"a":1} l=[1, "x y"] status="404" t=true
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(w) != 1 {
		t.Fatalf("%d wants, want 1", len(w))
	}
	if w[0].Severity != "critical" || w[0].Service != "" || w[0].Dependency != "grpc://x:1" {
		t.Errorf("head %+v", w[0])
	}
	got := map[string]string{}
	for _, e := range w[0].Evidence {
		got[e.Key] = e.Value
	}
	for k, v := range map[string]string{"n": "1", "s": `"plain"`, "q": `"two words"`, "m": `{"a":1,"b":2}`,
		"l": `[1,"x y"]`, "status": `"404"`, "t": "true"} {
		if got[k] != v {
			t.Errorf("%s = %s, want %s", k, got[k], v)
		}
	}
	if s := w[0].String(); s != `critical - -> grpc://x:1 n=1 s=plain q="two words" m={"a":1,"b":2} l=[1,"x y"] status="404" t=true` {
		t.Errorf("written back as %s", s)
	}

	for _, bad := range []string{
		"warn a -> b",              // not a severity
		"warning a b",              // no arrow
		"warning a -> b attempts",  // no value
		"warning a -> b m={\"a\":", // cut JSON
	} {
		if _, err := ParseWant("bad.want", []byte("\n"+bad+"\n")); err == nil || !strings.Contains(err.Error(), "bad.want:2:") {
			t.Errorf("%q: error %v, want one at bad.want:2", bad, err)
		}
	}
}

// Every trace states its expectations, and no expectation or policy file lies beside no trace.
func TestCasesRejectsUnpairedFiles(t *testing.T) {
	write := func(dir string, files ...string) {
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tt := range []struct {
		files []string
		err   string
	}{
		{nil, "no trace files"},
		{[]string{"a.jsonl"}, "a.jsonl has no expectations: write a.want"},
		{[]string{"a.jsonl", "a.want", "b.want"}, "b.want: no trace b.jsonl"},
		{[]string{"a.jsonl", "a.want", "c.policy.yaml"}, "c.policy.yaml: no trace c.trace or c.jsonl"},
		{[]string{"a.trace", "a.want"}, "a.want: the expectations of a.trace are its `# want` comments"},
		{[]string{"a.trace", "a.jsonl", "a.want"}, "one case, two traces"},
	} {
		dir := t.TempDir()
		write(dir, tt.files...)
		if _, err := Cases(dir); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%v: error %v, want %q", tt.files, err, tt.err)
		}
	}
	cases, err := Cases("testdata")
	if err != nil {
		t.Fatal(err)
	}
	// In name order; only the trace with a policy beside it has one.
	if len(cases) != 3 || cases[1].Name != "retried-under-policy" || !strings.HasSuffix(cases[1].Policy, "retried-under-policy.policy.yaml") || cases[2].Policy != "" {
		t.Errorf("cases %+v", cases)
	}
}

func TestFiresAndStaysSilent(t *testing.T) {
	fires, silent := Case{Want: []Want{{Severity: "warning"}}}, Case{}
	if err := firesAndStaysSilent("td", "d", []Case{silent, fires}); err != nil {
		t.Error(err)
	}
	if err := firesAndStaysSilent("td", "d", []Case{silent}); err == nil || !strings.Contains(err.Error(), "no trace where d fires") {
		t.Errorf("only silent: %v", err)
	}
	if err := firesAndStaysSilent("td", "d", []Case{fires}); err == nil || !strings.Contains(err.Error(), "no trace where d stays silent") {
		t.Errorf("only firing: %v", err)
	}
}
