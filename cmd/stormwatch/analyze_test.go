package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/fixtures"
)

// fixture writes one embedded fixture to a temporary file and returns its path.
func fixture(t *testing.T, name string) string {
	t.Helper()
	data, err := fixtures.Read(name)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".jsonl")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func runCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	code = exitCode(err, &errb)
	return code, out.String(), errb.String()
}

func TestAnalyzeExitCodes(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		want    int
		wantOut string
	}{
		{"healthy", []string{"analyze", fixture(t, "transient-retry-healthy-stock")}, 0, "No findings."},
		{"critical finding", []string{"analyze", fixture(t, "amplification-27-stock")}, 1, "CRITICAL retry-amplification"},
		{"warning below fail-on", []string{"analyze", fixture(t, "fanout-stock")}, 0, "WARNING unbounded-fanout"},
		{"warning at fail-on", []string{"analyze", "--fail-on", "warning", fixture(t, "fanout-stock")}, 1, "unbounded-fanout"},
		{"several files", []string{"analyze", fixture(t, "fanout-healthy-stock"), fixture(t, "post-deadline-stock"), "--fail-on=warning"}, 1, "post-deadline-work"},
		// A report-only CI step: the findings printed, exit 0, so no '|| true' hides a bad input.
		{"report only", []string{"analyze", "--fail-on", "never", fixture(t, "amplification-27-stock")}, 0, "CRITICAL retry-amplification"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, stderr := runCLI(t, "", c.args...)
			if code != c.want || !strings.Contains(out, c.wantOut) {
				t.Errorf("exit %d (want %d), stdout:\n%s\nstderr:\n%s", code, c.want, out, stderr)
			}
		})
	}
}

func TestAnalyzeFormats(t *testing.T) {
	path := fixture(t, "amplification-64-stock")
	code, out, _ := runCLI(t, "", "analyze", "--format", "json", path)
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	var rep analyzer.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("json report does not parse: %v\n%s", err, out)
	}
	if rep.Version != analyzer.ReportVersion || rep.Input.Traces != 1 || rep.Findings[0].Detector != "retry-amplification" ||
		!rep.Findings[0].Evidence["factor"].Equal(analyzer.Int(64)) {
		t.Errorf("report = %+v", rep)
	}
	var raw map[string]any
	json.Unmarshal([]byte(out), &raw)
	for _, k := range []string{"version", "input", "dependencies", "findings"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("json report lacks %q", k)
		}
	}
	_, md, _ := runCLI(t, "", "analyze", "--format", "markdown", path)
	for _, want := range []string{"## stormwatch analyze", "| dependency |", "`primary`", "grpc://primary:9090", "| critical | `retry-amplification` |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestAnalyzeReadsStdin(t *testing.T) {
	data, _ := fixtures.Read("fanout-stock")
	code, out, stderr := runCLI(t, string(data), "analyze", "--fail-on", "warning", "-")
	if code != 1 || !strings.Contains(out, "unbounded-fanout") {
		t.Errorf("exit %d stdout %s stderr %s", code, out, stderr)
	}
}

func TestAnalyzeBadInput(t *testing.T) {
	dir := t.TempDir()
	good, _ := fixtures.Read("fanout-healthy-stock")
	bad := filepath.Join(dir, "bad.jsonl")
	lines := strings.SplitAfter(string(good), "\n")
	os.WriteFile(bad, []byte(lines[0]+"{not json\n"+strings.Join(lines[1:], "")), 0o644)
	garbage := filepath.Join(dir, "garbage.jsonl")
	os.WriteFile(garbage, []byte("{nope\n{nope\n"), 0o644)
	policyFile := filepath.Join(dir, "policy.yaml")
	os.WriteFile(policyFile, []byte("no_such_key: 1\n"), 0o644)

	cases := []struct {
		name       string
		args       []string
		want       int
		wantStderr string
	}{
		{"missing file", []string{"analyze", filepath.Join(dir, "missing.jsonl")}, 2, "missing.jsonl"},
		{"malformed line skipped with a warning", []string{"analyze", bad}, 0, "bad.jsonl:2"},
		{"strict stops at the malformed line", []string{"analyze", "--strict", bad}, 2, "bad.jsonl:2"},
		{"nothing readable", []string{"analyze", garbage}, 2, "no readable record"},
		{"unknown format", []string{"analyze", "--format", "yaml", bad}, 2, "--format"},
		{"unknown severity", []string{"analyze", "--fail-on", "fatal", bad}, 2, `--fail-on: unknown value "fatal": want info, warning, critical, or never`},
		{"none is not never", []string{"analyze", "--fail-on", "none", bad}, 2, `--fail-on: unknown value "none": want info, warning, critical, or never`},
		{"no file", []string{"analyze"}, 2, "give trace files to analyze"},
		{"unknown flag", []string{"analyze", "--nope", bad}, 2, "nope"},
		{"negative settle", []string{"analyze", "--settle", "-1s", bad}, 2, "--settle"},
		{"window bound not a number", []string{"analyze", "--max-window-ops", "lots", bad}, 2, "--max-window-ops"},
		{"bad policy", []string{"analyze", "--policy", policyFile, bad}, 2, "policy.yaml"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, "", c.args...)
			if code != c.want || !strings.Contains(stderr, c.wantStderr) {
				t.Errorf("exit %d (want %d), stderr %q (want it to name %q)", code, c.want, stderr, c.wantStderr)
			}
		})
	}
}

// The bounded mode (--settle, the default) and holding everything (--settle 0) agree.
func TestAnalyzeSettleModesAgree(t *testing.T) {
	path := fixture(t, "amplification-27-reference")
	_, a, _ := runCLI(t, "", "analyze", "--format", "json", path)
	_, b, _ := runCLI(t, "", "analyze", "--format", "json", "--settle", "0", path)
	if a != b {
		t.Errorf("reports differ between --settle 1m and --settle 0:\n%s\n---\n%s", a, b)
	}
}

// On a recording long enough for traces to be analyzed, released and forgotten while reading, the
// report is the one holding everything gives, but for the note that traces were forgotten.
func TestAnalyzeReleaseWhileReadingAgrees(t *testing.T) {
	path := filepath.Join(t.TempDir(), "synthetic.jsonl")
	writeWorkload(t, path, 30_000) // about 2.7 s of recorded traffic
	_, a, _ := runCLI(t, "", "analyze", "--format", "json", "--settle", "200ms", path)
	_, b, _ := runCLI(t, "", "analyze", "--format", "json", "--settle", "0", path)
	var ra, rb map[string]any
	if err := json.Unmarshal([]byte(a), &ra); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(b), &rb); err != nil {
		t.Fatal(err)
	}
	notes, _ := ra["notes"].([]any)
	forgot := slices.IndexFunc(notes, func(n any) bool {
		s, _ := n.(string)
		return strings.Contains(s, "analyzed traces were forgotten once the recording had moved 400ms past their last span")
	})
	if forgot < 0 {
		t.Fatalf("no note of the traces forgotten with --settle 200ms: %q", notes)
	}
	ra["notes"] = slices.Delete(notes, forgot, forgot+1)
	if !reflect.DeepEqual(ra, rb) || !strings.Contains(a, "retry-amplification") {
		t.Errorf("reports differ between --settle 200ms and --settle 0 (%d and %d bytes)", len(a), len(b))
	}
}

func TestAnalyzeProgress(t *testing.T) {
	var buf bytes.Buffer
	at := time.Unix(1000, 0)
	p := newProgress(&buf, true)
	p.last, p.now = at, func() time.Time { return at }
	p.add("a.jsonl", 500) // within the second: quiet
	at = at.Add(1500 * time.Millisecond)
	p.add("a.jsonl", 700)
	p.done()
	want := "stormwatch: read 1200 spans (a.jsonl)\nstormwatch: read 1200 spans; analyzing\n"
	if buf.String() != want {
		t.Errorf("progress wrote %q, want %q", buf.String(), want)
	}
	// Off (not forced, not a terminal): silent.
	buf.Reset()
	q := newProgress(&buf, false)
	q.now = func() time.Time { return at.Add(time.Hour) }
	q.add("a.jsonl", 1)
	q.done()
	if buf.Len() != 0 {
		t.Errorf("progress off wrote %q", buf.String())
	}
}

// A record over --max-record-bytes is skipped with a warning that names the line and the flag, and
// the records around it are still analyzed.
func TestAnalyzeMaxRecordBytes(t *testing.T) {
	data, err := fixtures.Read("amplification-27-stock")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimRight(string(data), "\n"), "\n")
	longest := 0
	for _, l := range lines {
		longest = max(longest, len(l))
	}
	huge := `{"resourceSpans":[],"padding":"` + strings.Repeat("x", 2*longest) + `"}` + "\n"
	path := filepath.Join(t.TempDir(), "big.jsonl")
	if err := os.WriteFile(path, []byte(lines[0]+huge+strings.Join(lines[1:], "")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	limit := strconv.Itoa(longest + 64)
	code, out, stderr := runCLI(t, "", "analyze", "--max-record-bytes", limit, path)
	if code != 1 || !strings.Contains(out, "retry-amplification") {
		t.Errorf("exit %d (want 1, the amplification still found), stdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	if !strings.Contains(stderr, "big.jsonl:2:") || !strings.Contains(stderr, "--max-record-bytes") {
		t.Errorf("warning should name big.jsonl:2 and the flag, got:\n%s", stderr)
	}
}

// A recording with more operations than --max-window-ops is judged by the cross-trace detectors in
// chunks of that many, and the report says so; 0 is a quarter of --max-spans, negative the whole
// recording at once, as is the default for a recording within it.
func TestAnalyzeWindowOpsChunks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "synthetic.jsonl")
	writeWorkload(t, path, 30_000)
	notes := func(args ...string) []string {
		t.Helper()
		code, out, stderr := runCLI(t, "", append([]string{"analyze", "--format", "json", "--fail-on", "never"}, append(args, path)...)...)
		var rep struct{ Notes []string }
		if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
			t.Fatalf("exit %d, %v, stderr %s", code, err, stderr)
		}
		return rep.Notes
	}
	chunked := func(ns []string) string {
		i := slices.IndexFunc(ns, func(n string) bool { return strings.Contains(n, "the windowed detectors judged the input in") })
		if i < 0 {
			return ""
		}
		return ns[i]
	}
	if n := chunked(notes("--max-window-ops", "1000")); !strings.Contains(n, "chunks of at most 1000 operations,") {
		t.Errorf("--max-window-ops 1000: note %q, want chunks of at most 1000 operations", n)
	}
	if n := chunked(notes("--max-window-ops", "0", "--max-spans", "8000")); !strings.Contains(n, "chunks of at most 2000 operations (a quarter of --max-spans)") {
		t.Errorf("--max-window-ops 0 --max-spans 8000: note %q, want chunks of a quarter of --max-spans", n)
	}
	whole, def := notes("--max-window-ops", "-1"), notes()
	if chunked(whole) != "" || !slices.Equal(whole, def) {
		t.Errorf("the whole recording at once: notes %q; by default (within the bound): %q", whole, def)
	}
}

// The soft memory limit follows what the analysis holds: the default run's window bound keeps it
// under 256 MiB; an analysis that holds what grows with the input gets the ceiling.
func TestAnalyzeMemoryLimitFollowsWindow(t *testing.T) {
	var o analyzeOptions
	cmd := newAnalyzeCmd(streams{})
	if err := cmd.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	// The flags' defaults, read back from the command.
	get := func(name string) int {
		v, err := cmd.Flags().GetInt(name)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	o.maxSpans, o.maxWindowOps, o.settle = get("max-spans"), get("max-window-ops"), 30*time.Second
	def := softMemoryLimit(o.engineConfig())
	if def > 240<<20 || def < 200<<20 {
		t.Errorf("default limit %d MiB, want 200-240 MiB", def>>20)
	}
	quarter := o
	quarter.maxWindowOps = 0 // a quarter of --max-spans: 500,000 operations
	if got := softMemoryLimit(quarter.engineConfig()); got <= def || got >= memoryCeiling {
		t.Errorf("limit with a window of 500,000 operations %d MiB, want between %d MiB and the ceiling", got>>20, def>>20)
	}
	whatIf := o.engineConfig()
	whatIf.ForgetAfter = 0
	holdAll := o
	holdAll.settle = 0
	unbounded := o
	unbounded.maxWindowOps = -1
	huge := o
	huge.maxWindowOps = math.MaxInt // no overflow into a negative limit
	for name, cfg := range map[string]engine.Config{"what-if": whatIf, "--settle 0": holdAll.engineConfig(),
		"--max-window-ops -1": unbounded.engineConfig(), "--max-window-ops MaxInt": huge.engineConfig()} {
		if got := softMemoryLimit(cfg); got != memoryCeiling {
			t.Errorf("%s: limit %d MiB, want the ceiling %d MiB", name, got>>20, memoryCeiling>>20)
		}
	}
}
