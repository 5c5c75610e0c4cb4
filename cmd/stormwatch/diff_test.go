package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/diff"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/internal/deadaddr"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/tracefile/replay"
)

// labStart fixes the lab's fake clock, so recordings made one after another can be laid end to end.
const labStart = "2026-01-01T00:00:00Z"

// recordLayers runs `stormwatch lab layers` with args and returns the recording.
func recordLayers(t *testing.T, name string, args ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".jsonl")
	args = append([]string{"lab", "layers", "--record", path}, args...)
	if !containsFlag(args, "--start") {
		args = append(args, "--start", labStart)
	}
	if code, out, stderr := runCLI(t, "", args...); code != 0 {
		t.Fatalf("lab %v: exit %d\n%s\n%s", args, code, out, stderr)
	}
	return path
}

func containsFlag(args []string, flag string) bool {
	for _, a := range args {
		if a == flag {
			return true
		}
	}
	return false
}

// diffJSON runs diff --format json and decodes the document.
func diffJSON(t *testing.T, wantCode int, args ...string) diff.Report {
	t.Helper()
	code, out, stderr := runCLI(t, "", append([]string{"diff", "--format", "json"}, args...)...)
	if code != wantCode {
		t.Fatalf("diff %v: exit %d, want %d\n%s\n%s", args, code, wantCode, out, stderr)
	}
	var r diff.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("diff --format json: %v\n%s", err, out)
	}
	return r
}

func depOf(t *testing.T, r diff.Report, name string) diff.Dependency {
	t.Helper()
	for _, d := range r.Dependencies {
		if d.Dependency == name {
			return d
		}
	}
	t.Fatalf("no %s in the diff: %+v", name, r.Dependencies)
	return diff.Dependency{}
}

const labDep = "dependency"

// The fix of the layered storm (docs/principles.md#one-budget-one-owner), recorded by the lab on
// both sides: every layer retrying (27x) against one retry owner (3x). The verdict comes first and
// names the change; the layer product goes from 27 to none; the retry-amplification findings are
// resolved by place although no trace id is shared. Turned around, the same pair is a regression:
// --fail-if-worse exits 1.
func TestDiffLabOneOwner(t *testing.T) {
	before := recordLayers(t, "before", "--requests", "4")
	after := recordLayers(t, "after", "--requests", "4", "--attempts", "3,1,1")

	code, out, stderr := runCLI(t, "", "diff", "--fail-if-worse", before, after)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	first, _, _ := strings.Cut(out, "\n")
	if want := "stormwatch diff: better: dependency: 27.00x -> 3.00x; findings: 1 resolved, 0 new, 0 persisting"; first != want {
		t.Errorf("first line\n got %q\nwant %q\n%s", first, want, out)
	}
	for _, want := range []string{
		"dependency    http://dependency:8080  108 -> 12  4 -> 4", "27.00x -> 3.00x  ↓ -24.00x  27 -> none (before: edge x3 > api x3 > adapter x3)",
		"RESOLVED  critical  retry-amplification  edge -> dependency  4 -> 0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("diff lacks %q:\n%s", want, out)
		}
	}

	r := diffJSON(t, 0, before, after)
	d := depOf(t, r, labDep)
	if d.Before.PhysicalCalls != 108 || d.After.PhysicalCalls != 12 || d.Before.LayerProduct != 27 || d.After.LayerProduct != 0 || d.Worse {
		t.Errorf("dependency %+v / %+v", d.Before, d.After)
	}
	if len(d.Callers) != 1 || d.Callers[0].Caller != "adapter" || d.Callers[0].Change != -24 {
		t.Errorf("callers %+v", d.Callers)
	}

	code, out, _ = runCLI(t, "", "diff", "--fail-if-worse", after, before)
	if code != 1 || !strings.HasPrefix(out, "stormwatch diff: worse: dependency: 3.00x -> 27.00x, api still retries x3, adapter still retries x3") ||
		!strings.Contains(out, "  - dependency: amplification 3.00x -> 27.00x (more than 5%)") ||
		!strings.Contains(out, "  - new critical retry-amplification at edge -> dependency") {
		t.Errorf("the reverse: exit %d, want 1 with the regressions:\n%s", code, out)
	}
	// Without --fail-if-worse a worse diff still exits 0: it is a report.
	if code, _, _ := runCLI(t, "", "diff", after, before); code != 0 {
		t.Errorf("without --fail-if-worse: exit %d", code)
	}
}

// --tolerance decides how much growth is still "the same"; --fail-on which new findings count.
func TestDiffToleranceAndFailOn(t *testing.T) {
	small := recordLayers(t, "small", "--attempts", "3,3,3")
	big := recordLayers(t, "big", "--attempts", "3,3,4")
	// 27x -> 36x is +33%: worse at 5%, not at 50%; no new place (the same chain still amplifies).
	if code, out, _ := runCLI(t, "", "diff", "--fail-if-worse", small, big); code != 1 || !strings.Contains(out, "27.00x -> 36.00x (more than 5%)") {
		t.Errorf("+33%% at the default tolerance: exit %d\n%s", code, out)
	}
	if code, out, _ := runCLI(t, "", "diff", "--fail-if-worse", "--tolerance", "0.5", small, big); code != 0 {
		t.Errorf("+33%% within --tolerance 0.5: exit %d\n%s", code, out)
	}
	// A lone retrying layer against three: the new places are critical (retry-amplification) and
	// warning; --fail-on above them lets the diff pass on amplification alone.
	owner := recordLayers(t, "owner", "--attempts", "3,1,1")
	r := diffJSON(t, 1, "--fail-if-worse", "--tolerance", "100", owner, small)
	if len(r.Regressions) == 0 || !strings.Contains(strings.Join(r.Regressions, "\n"), "new critical retry-amplification") {
		t.Errorf("regressions %q", r.Regressions)
	}
	// --fail-on never: new findings alone are not worse; the amplification still is.
	if code, out, _ := runCLI(t, "", "diff", "--fail-if-worse", "--tolerance", "100", "--fail-on", "never", owner, small); code != 0 {
		t.Errorf("--fail-on never with only new findings: exit %d\n%s", code, out)
	}
	if code, out, _ := runCLI(t, "", "diff", "--fail-if-worse", "--fail-on", "never", small, big); code != 1 {
		t.Errorf("--fail-on never with an amplification that grew: exit %d\n%s", code, out)
	}
}

// What-if checked against the lab: for layered retries the prediction made from BEFORE equals,
// call for call, what AFTER measured - for 27 and 64 and any split of attempts.
func TestDiffWhatIfExactForLayers(t *testing.T) {
	for _, c := range []struct {
		before, after, changes string
	}{
		{"3,3,3", "3,1,1", "api.maxAttempts=1,adapter.maxAttempts=1"},
		{"4,4,4", "4,1,1", "api.maxAttempts=1,adapter.maxAttempts=1"},
		{"4,4,4", "1,1,4", "edge.maxAttempts=1,api.maxAttempts=1"},
		{"3,3,3", "2,3,2", "edge.maxAttempts=2,adapter.maxAttempts=2"},
		{"2,2,2,2", "2,2,1,1", "adapter.maxAttempts=1,backend.maxAttempts=1"},
	} {
		t.Run(c.before+"->"+c.after, func(t *testing.T) {
			before := recordLayers(t, "before", "--attempts", c.before, "--requests", "3")
			after := recordLayers(t, "after", "--attempts", c.after, "--requests", "3")
			r := diffJSON(t, 0, "--what-if", c.changes, before, after)
			if r.WhatIf == nil || len(r.WhatIf.Rows) == 0 {
				t.Fatalf("no what-if: %+v", r)
			}
			for _, row := range r.WhatIf.Rows {
				if row.Predicted != row.Measured || row.Error != 0 || row.Wrong {
					t.Errorf("%s: predicted %d, measured %d", row.Dependency, row.Predicted, row.Measured)
				}
			}
			if len(r.WhatIf.Wrong) != 0 {
				t.Errorf("the model was wrong: %q", r.WhatIf.Wrong)
			}
		})
	}
}

// Budgets and breakers, within the bounds docs/diff.md states. A retry budget: the model spends no
// reserve, the reference client starts with Reserve retries (10) per client, so the k-th layer's
// dependency sees more than predicted, by at most E(k) = (1+ratio) E(k-1) + Reserve calls (E(0) =
// 0: 10, 21 and 33.1 calls for three layers at ratio 0.1), and never fewer. A breaker on requests
// sent one after another, within its recovery time: exact.
func TestDiffWhatIfBudgetAndBreakerWithinBound(t *testing.T) {
	before := recordLayers(t, "before", "--requests", "40")

	budget := recordLayers(t, "budget", "--requests", "40", "--budget", "0.1")
	r := diffJSON(t, 0, "--what-if", "edge.retryBudget=0.1,api.retryBudget=0.1,adapter.retryBudget=0.1", before, budget)
	const reserve, ratio = 10.0, 0.1
	bound := map[string]float64{"edge": 0}
	e := 0.0
	for _, d := range []string{"api", "adapter", labDep} {
		e = (1+ratio)*e + reserve
		bound[d] = e
	}
	for _, row := range r.WhatIf.Rows {
		b, ok := bound[row.Dependency]
		if !ok {
			t.Errorf("unexpected dependency %s", row.Dependency)
			continue
		}
		if row.Error < 0 || row.Error > b {
			t.Errorf("budget, %s: predicted %d, measured %d: error %v outside [0, %.1f]", row.Dependency, row.Predicted, row.Measured, row.Error, b)
		}
		t.Logf("budget, %s: predicted %d, measured %d, error %+v (bound %.1f)", row.Dependency, row.Predicted, row.Measured, row.Error, b)
	}
	// The model is wrong here and says where: the calls the reserve allowed.
	if len(r.WhatIf.Wrong) == 0 || !strings.Contains(r.WhatIf.Wrong[0], "more than the model said") {
		t.Errorf("the budget's error is not reported: %q", r.WhatIf.Wrong)
	}
	if len(r.WhatIf.Notes) != 1 || !strings.HasPrefix(r.WhatIf.Notes[0], "the model spends no reserve") {
		t.Errorf("the report does not say what the model leaves out: %q", r.WhatIf.Notes)
	}

	breaker := recordLayers(t, "breaker", "--requests", "40", "--breaker", "5")
	r = diffJSON(t, 0, "--what-if", "edge.breaker=5,api.breaker=5,adapter.breaker=5", before, breaker)
	for _, row := range r.WhatIf.Rows {
		if row.Predicted != row.Measured {
			t.Errorf("breaker, %s: predicted %d, measured %d", row.Dependency, row.Predicted, row.Measured)
		}
	}
	if len(r.WhatIf.Wrong) != 0 || len(r.WhatIf.Notes) != 0 {
		t.Errorf("breaker: the model was right, yet the report says %q %q", r.WhatIf.Wrong, r.WhatIf.Notes)
	}
	if d := depOf(t, r, labDep); d.After.PhysicalCalls != 15 {
		t.Errorf("breaker: the dependency saw %d, want 15 (5 adapter operations of 3 calls before it opened)", d.After.PhysicalCalls)
	}
}

// Two windows of one recording compare like the two recordings they were cut from: a trace is
// kept whole by the window its first span starts in. Offsets count from the recording's first
// span; RFC 3339 times work the same.
func TestDiffWindowsOfOneRecording(t *testing.T) {
	before := recordLayers(t, "before", "--requests", "2", "--start", "2026-01-01T00:00:00Z")
	after := recordLayers(t, "after", "--requests", "2", "--attempts", "3,1,1", "--start", "2026-01-01T01:00:00Z")
	both := filepath.Join(t.TempDir(), "both.jsonl")
	var data []byte
	for _, f := range []string{before, after} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, b...)
	}
	if err := os.WriteFile(both, data, 0o644); err != nil {
		t.Fatal(err)
	}
	files := diffJSON(t, 0, before, after)
	for _, args := range [][]string{
		{"--before-window", "..30m", "--after-window", "30m..", both},
		{"--before-window", "0s..30m", "--after-window", "2026-01-01T00:30:00Z..2026-01-01T02:00:00Z", both},
		{"--before-window", "2026-01-01T00:00:00Z..2026-01-01T00:30:00Z", "--after-window", "1h..", both, both},
	} {
		w := diffJSON(t, 0, args...)
		if w.Verdict != files.Verdict || len(w.Dependencies) != len(files.Dependencies) || w.Before.Input != files.Before.Input || w.After.Input != files.After.Input {
			t.Errorf("%v:\n verdict %q, want %q\n inputs %+v %+v, want %+v %+v", args, w.Verdict, files.Verdict,
				w.Before.Input, w.After.Input, files.Before.Input, files.After.Input)
		}
		for _, d := range files.Dependencies {
			if got := depOf(t, w, d.Dependency); !reflect.DeepEqual(got.Before, d.Before) || !reflect.DeepEqual(got.After, d.After) {
				t.Errorf("%v: %s %+v -> %+v, want %+v -> %+v", args, d.Dependency, got.Before, got.After, d.Before, d.After)
			}
		}
		if !strings.Contains(w.Before.Label, "both.jsonl [2026-01-01T00:00:00Z..2026-01-01T00:30:00Z)") {
			t.Errorf("%v: before label %q", args, w.Before.Label)
		}
	}
}

// A live collector's report against a file: `stormwatch collect` (real, on loopback) receives the
// before side over OTLP; diff fetches GET /api/v1/report and compares it with the after file, as
// it compares two files.
func TestDiffLiveCollectorAgainstFile(t *testing.T) {
	before := recordLayers(t, "before", "--requests", "2")
	after := recordLayers(t, "after", "--requests", "2", "--attempts", "3,1,1")
	c := startCollect(t, "--settle", "100ms", "--status-interval", "0")
	sendFixture(t, c.grpc, replay.GRPC, "", before)
	url := "http://" + c.http
	eventually(t, func() string {
		_, body := get(t, url+reportPath, "")
		var r analyzer.Report
		if err := json.Unmarshal([]byte(body), &r); err != nil || r.Input.Traces != 2 || len(r.Dependencies) != 4 {
			return "the collector never reported both traces: " + body
		}
		return ""
	})
	// The collector is idle from here on, and every report it serves is one snapshot taken again:
	// it must still say that it has settled what it held when diff asks.
	time.Sleep(time.Second)
	files := diffJSON(t, 0, before, after)
	for _, src := range []string{url, url + reportPath} {
		live := diffJSON(t, 0, "--timeout", "5s", src, after)
		// The figures agree; the findings may not, since a collector runs its detectors over its
		// own windows of live traffic, not once over a whole file.
		if !strings.HasPrefix(live.Verdict, "better: dependency: 27.00x -> 3.00x; ") || live.Before.Label != src {
			t.Errorf("%s: verdict %q (label %q), want %q", src, live.Verdict, live.Before.Label, files.Verdict)
		}
		if d, f := depOf(t, live, labDep), depOf(t, files, labDep); !reflect.DeepEqual(d.Before, f.Before) || !reflect.DeepEqual(d.After, f.After) {
			t.Errorf("%s: %+v -> %+v, want %+v -> %+v", src, d.Before, d.After, f.Before, f.After)
		}
	}
}

// Every bad input exits 2 with a message that names what is wrong.
func TestDiffBadInput(t *testing.T) {
	dir := t.TempDir()
	rec := recordLayers(t, "rec")
	garbage := filepath.Join(dir, "garbage.jsonl")
	if err := os.WriteFile(garbage, []byte("not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.jsonl")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	emptyToken := filepath.Join(dir, "empty-token")
	if err := os.WriteFile(emptyToken, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	twoLineToken := filepath.Join(dir, "two-line-token")
	if err := os.WriteFile(twoLineToken, []byte("a secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	notReport := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/missing":
			http.NotFound(w, r)
			return
		case "/html":
			fmt.Fprint(w, "<html>a login page</html>")
			return
		}
		fmt.Fprint(w, `{"version": 9}`)
	}))
	defer notReport.Close()
	closed := deadaddr.Loopback(t)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"one argument", []string{rec}, "want BEFORE and AFTER (or one recording with --before-window and --after-window), got 1"},
		{"three arguments", []string{rec, rec, rec}, "got 3 argument(s)"},
		{"one window only", []string{"--before-window", "..1s", rec}, "got 1 argument(s)"},
		{"missing file", []string{rec, filepath.Join(dir, "nope.jsonl")}, "after: open trace file: open " + filepath.Join(dir, "nope.jsonl")},
		{"unreadable file", []string{garbage, rec}, "before: " + garbage + ": no readable record"},
		{"empty file", []string{empty, rec}, "before: " + empty + ": no spans (0 records read); --allow-empty accepts a file without spans"},
		{"bad format", []string{"--format", "yaml", rec, rec}, `--format: unknown format "yaml"`},
		{"bad fail-on", []string{"--fail-on", "fatal", rec, rec}, `--fail-on: unknown value "fatal"`},
		{"negative tolerance", []string{"--tolerance", "-1", rec, rec}, "--tolerance: must not be negative, got -1"},
		{"bad tolerance", []string{"--tolerance", "lots", rec, rec}, `invalid argument "lots" for "--tolerance"`},
		{"bad what-if", []string{"--what-if", "edge.retries=1", rec, rec}, `--what-if: change "edge.retries=1": unknown field "retries"`},
		{"what-if for a layer not in BEFORE", []string{"--what-if", "gateway.maxAttempts=1", rec, rec}, "before: --what-if: change \"gateway.maxAttempts=1\": no layer \"gateway\" in these traces"},
		{"window without dots", []string{"--before-window", "10s", "--after-window", "20s..", rec}, `--before-window "10s": want FROM..TO`},
		{"window bad end", []string{"--before-window", "..soon", "--after-window", "1s..", rec}, `--before-window "..soon": TO: "soon" is neither an RFC 3339 time`},
		{"window backwards", []string{"--before-window", "..1s", "--after-window", "20s..10s", rec}, `--after-window "20s..10s": TO must be after FROM`},
		{"window negative", []string{"--before-window", "-5s..", "--after-window", "1s..", rec}, `FROM: offset "-5s" is before the recording's start`},
		{"window empty ends", []string{"--before-window", "..", "--after-window", "1s..", rec}, "both ends are empty"},
		{"window with nothing in it", []string{"--before-window", "..1s", "--after-window", "1h..", rec}, "after: " + rec + ": no trace starts in the window [2026-01-01T01:00:00Z..)"},
		{"stdin twice", []string{"-", "-"}, "standard input ('-') can be only one side"},
		{"window on stdin", []string{"--before-window", "..1s", "--after-window", "1s..", "-", rec}, "before: a window reads its recording twice"},
		{"window on a URL", []string{"--before-window", "..1s", "--after-window", "1s..", notReport.URL, rec}, "a window needs a recording"},
		{"what-if from a URL", []string{"--what-if", "api.maxAttempts=1", notReport.URL, rec}, "--what-if predicts from BEFORE's operations"},
		{"URL not a report", []string{rec, notReport.URL}, "after: GET " + notReport.URL + "/api/v1/report: report version 9"},
		{"URL not JSON", []string{rec, notReport.URL + "/html"}, "after: GET " + notReport.URL + "/html: not a stormwatch report: invalid character '<'"},
		{"negative settle", []string{"--settle", "-1s", rec, rec}, "--settle: must not be negative, got -1s"},
		{"zero timeout", []string{"--timeout", "0s", rec, rec}, "--timeout: must be positive, got 0s"},
		{"URL 404", []string{rec, notReport.URL + "/missing"}, "after: GET " + notReport.URL + "/missing: 404 Not Found"},
		{"URL refused", []string{"http://" + closed, rec}, "before: cannot reach the collector at http://" + closed + "/api/v1/report: dial tcp " + closed +
			": connect: connection refused (is 'stormwatch collect' running with --http at that address?)"},
		{"missing token file", []string{"--token-file", filepath.Join(dir, "token"), notReport.URL, rec}, "--token-file: open " + filepath.Join(dir, "token")},
		{"empty token file", []string{"--token-file", emptyToken, notReport.URL, rec}, "--token-file " + emptyToken + ": the file is empty"},
		{"token with a space", []string{"--token-file", twoLineToken, notReport.URL, rec}, "--token-file " + twoLineToken + ": the token must be one line without spaces"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, stderr := runCLI(t, "", append([]string{"diff"}, c.args...)...)
			if code != 2 || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d (want 2), stderr %q, want it to contain %q\n%s", code, stderr, c.want, out)
			}
		})
	}
}

// --allow-empty takes a side without traffic: every dependency of the other side is new, and a
// finding there is a new one (worse at the default --fail-on critical).
func TestDiffAllowEmpty(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.jsonl")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rec := recordLayers(t, "rec")
	r := diffJSON(t, 0, "--allow-empty", empty, rec)
	if d := depOf(t, r, labDep); d.Before != nil || d.After == nil || d.After.PhysicalCalls != 27 {
		t.Errorf("dependency %+v", d)
	}
	if r.Verdict != "worse: dependency: new, 27.00x; findings: 0 resolved, 1 new, 0 persisting" {
		t.Errorf("verdict %q", r.Verdict)
	}
}

// A collector with a token: the diff reads it from --token-file, and without it says 401.
func TestDiffLiveCollectorToken(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rec := recordLayers(t, "rec")
	c := startCollect(t, "--token-file", tok, "--status-interval", "0")
	url := "http://" + c.http
	if code, _, stderr := runCLI(t, "", "diff", url, rec); code != 2 || !strings.Contains(stderr, "401") {
		t.Errorf("without the token: exit %d, %q", code, stderr)
	}
	if code, out, stderr := runCLI(t, "", "diff", "--token-file", tok, url, rec); code != 0 || !strings.Contains(out, "before  "+url+": 0 traces") {
		t.Errorf("with the token: exit %d\n%s\n%s", code, out, stderr)
	}
}

// Each side of a diff is analyzed as `analyze` analyzes the recording: released traces are
// forgotten once the recording has moved on, so what a diff holds follows the recording's rate,
// not its length - unless a prediction needs every operation of BEFORE at the end.
func TestDiffSideForgetsAsAnalyzeDoes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "synthetic.jsonl")
	writeWorkload(t, path, 30_000) // about 2.7 s of recorded traffic
	var o diffOptions
	o.maxSpans, o.settle = 100_000, 200*time.Millisecond
	std := streams{in: strings.NewReader(""), out: io.Discard, err: io.Discard}
	side, _, _, err := diffSide(context.Background(), std, o, nil, path, window{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, out, _ := runCLI(t, "", "analyze", "--format", "json", "--settle", "200ms", "--max-spans", "100000", path)
	var whole analyzer.Report
	if err := json.Unmarshal([]byte(out), &whole); err != nil {
		t.Fatal(err)
	}
	forgot := func(r *analyzer.Report) bool {
		return slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, "analyzed traces were forgotten") })
	}
	if !forgot(side) || !reflect.DeepEqual(side.Notes, whole.Notes) || len(side.Findings) != len(whole.Findings) {
		t.Errorf("the diff's side and analyze differ: notes %q and %q, %d and %d findings",
			side.Notes, whole.Notes, len(side.Findings), len(whole.Findings))
	}
	changes := []policy.Change{{Layer: "api", Field: policy.FieldMaxAttempts, Value: 1}}
	predicted, _, _, err := diffSide(context.Background(), std, o, nil, path, window{}, changes)
	if err != nil {
		t.Fatal(err)
	}
	if forgot(predicted) {
		t.Errorf("a side predicted from forgot operations: %q", predicted.Notes)
	}
}

// diff against a live collector right after the traffic waits for the collector to settle what
// it holds - the traces still in their settle period, then the cross-trace findings of the
// detectors' next run, seconds later - so identical traffic reads "unchanged", never "better"
// for findings not in yet.
func TestDiffLiveWaitsUntilTheCollectorSettled(t *testing.T) {
	fixture := "../../fixtures/retry-budget-exceeded-stock.jsonl"
	// 3 s of settle: long enough that diff surely asks before the traces settle (sending and
	// starting diff can take a second on a busy machine), else the test would prove nothing.
	c := startCollect(t, "--settle", "3s", "--status-interval", "0")
	sendFixture(t, c.grpc, replay.GRPC, "", fixture)
	code, out, stderr := runCLI(t, "", "diff", "--format", "json", "http://"+c.http, fixture)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	var r diff.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.Verdict, "unchanged") || r.Counts.New != 0 || r.Counts.Persisting == 0 {
		t.Errorf("identical traffic: verdict %q, counts %+v; want unchanged, nothing resolved\nstderr: %s", r.Verdict, r.Counts, stderr)
	}
	if !strings.Contains(stderr, "waiting (at most --timeout 30s) for the collector at http://"+c.http+reportPath+" to settle what it holds") {
		t.Errorf("stderr does not say diff waited: %q", stderr)
	}

	// A collector that cannot settle within --timeout gives no verdict, and says what is pending.
	slow := startCollect(t, "--settle", "1m", "--status-interval", "0")
	sendFixture(t, slow.grpc, replay.GRPC, "", fixture)
	code, out, stderr = runCLI(t, "", "diff", "--timeout", "1s", fixture, "http://"+slow.http)
	want := "no verdict: the collector at http://" + slow.http + reportPath + " has not settled what it held within --timeout 1s: 40 traces still settling"
	if code != 2 || out != "" || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 2, no report, and %q", code, out, stderr, want)
	}
}

// The same recording with its ports moved - every callee on an ephemeral port, another one on
// every call, as test containers and httptest servers are - is the same traffic: diff matches
// the dependencies by name (the callee's service.name here), reads "unchanged", and
// --fail-if-worse passes. Keyed by address, every dependency would read "no calls" on one side.
func TestDiffSameRecordingWithPortsMoved(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "fixtures", "amplification-27-stock.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	dir := t.TempDir()
	before, after := filepath.Join(dir, "before.jsonl"), filepath.Join(dir, "after.jsonl")
	moved := strings.NewReplacer(":8080/", ":41234/", `"intValue":"8080"`, `"intValue":"41234"`).Replace(text)
	// After: a new port for every address the spans state.
	var b strings.Builder
	for n, part := range strings.Split(text, "8080") {
		if n > 0 {
			fmt.Fprint(&b, 50000+n)
		}
		b.WriteString(part)
	}
	if err := os.WriteFile(before, []byte(moved), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(after, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI(t, "", "diff", "--fail-if-worse", before, after)
	if code != 0 || !strings.HasPrefix(out, "stormwatch diff: unchanged: dep: 27.00x -> 27.00x") ||
		!strings.Contains(out, "findings: 0 resolved, 0 new, 1 persisting") {
		t.Errorf("exit %d, want 0 and unchanged:\n%s\n%s", code, out, stderr)
	}
	r := diffJSON(t, 0, before, after)
	if len(r.Dependencies) != 3 {
		t.Errorf("%d dependencies, want dep, adapter and api once each: %+v", len(r.Dependencies), r.Dependencies)
	}
	d := depOf(t, r, "dep")
	if d.Before == nil || d.After == nil || d.Before.PhysicalCalls != 54 || d.After.PhysicalCalls != 54 || d.Worse {
		t.Errorf("dep: %+v -> %+v", d.Before, d.After)
	}
	// The addresses stay visible as detail: the after side's 54 ports, at most eight listed.
	if len(d.Origins) != 8 || !strings.HasPrefix(d.Origins[0], "http://dep:5") {
		t.Errorf("dep's origins %q, want eight of the moved ports", d.Origins)
	}
}

// A chain of more than 64 retrying layers is compared by the counts its findings carry, not only
// by the layers they list: a recursive service 100 levels deep whose every call to the next level
// is retried, fixed to 80 levels, its leaf now tried three times. Each side's figures list the 64
// layers at the ends and count those between (37, then 17), and the verdict names what still
// retries with the unlisted counted where they fall.
func TestDiffDeepChainCountsTheLayersNotListed(t *testing.T) {
	dir := t.TempDir()
	before, after := filepath.Join(dir, "before.jsonl"), filepath.Join(dir, "after.jsonl")
	writeDeepChain(t, before, 100, 2)
	writeDeepChain(t, after, 80, 3)

	r := diffJSON(t, 0, before, after)
	var d *diff.Dependency
	for i := range r.Dependencies {
		if f := r.Dependencies[i].Before; f != nil && f.LayerProduct > 0 {
			d = &r.Dependencies[i]
		}
	}
	if d == nil || d.After == nil {
		t.Fatalf("no dependency with a layer product on both sides: %+v", r.Dependencies)
	}
	if d.Before.LayerProduct != 2 || len(d.Before.Layers) != 64 || d.Before.LayersNotListed != 37 ||
		d.After.LayerProduct != 3 || len(d.After.Layers) != 64 || d.After.LayersNotListed != 17 {
		t.Errorf("%s: before %d layers listed, %d not (product %d); after %d, %d (product %d); want 64 and 37 (2), 64 and 17 (3)",
			d.Dependency, len(d.Before.Layers), d.Before.LayersNotListed, d.Before.LayerProduct,
			len(d.After.Layers), d.After.LayersNotListed, d.After.LayerProduct)
	}
	still := strings.Repeat("rec still retries x2, ", 31) + "17 more layers still retry, " +
		strings.Repeat("rec still retries x2, ", 31) + "rec still retries x3; findings:"
	if !strings.Contains(r.Verdict, ": 2.00x -> 3.00x, "+still) {
		t.Errorf("verdict %q, want the layers still retrying: %q", r.Verdict, still)
	}
}

// writeDeepChain writes a recording of one request to api through a recursive service rec, levels
// deep: each level's call to the next fails once (503, no SERVER span) and is retried, and the
// deepest level calls leaf leafTries times, the last answered. Its chain has levels+1 retrying
// layers: api, the levels-1 rec levels that call rec, and the deepest's loop over leaf.
func writeDeepChain(t *testing.T, path string, levels, leafTries int) {
	t.Helper()
	t0 := time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC).UnixNano()
	var ss []spans.Span
	span := func(parent int, kind spans.Kind, service string, from, to int64, attrs ...spans.Attr) int {
		s := spans.Span{TraceID: spans.TraceID{1, byte(levels), byte(leafTries)}, Kind: kind, Name: "GET",
			StartUnixNano: t0 + from*int64(time.Millisecond), EndUnixNano: t0 + to*int64(time.Millisecond),
			Resource: &spans.Resource{ServiceName: service}, Attrs: attrs}
		binary.BigEndian.PutUint64(s.SpanID[:], uint64(len(ss)+1))
		if parent >= 0 {
			s.ParentID = ss[parent].SpanID
		}
		ss = append(ss, s)
		return len(ss) - 1
	}
	call := func(parent int, service, url string, status, from, to int64) int {
		return span(parent, spans.KindClient, service, from, to, spans.StringAttr(spans.AttrHTTPMethod, "GET"),
			spans.StringAttr(spans.AttrURLFull, url), spans.IntAttr(spans.AttrHTTPStatus, status))
	}
	serve := func(parent int, service string, from, to int64) int {
		return span(parent, spans.KindServer, service, from, to, spans.StringAttr(spans.AttrHTTPMethod, "GET"),
			spans.StringAttr(spans.AttrURLPath, "/x"), spans.IntAttr(spans.AttrHTTPStatus, 200))
	}
	end := 6*int64(levels) + int64(leafTries) + 10
	caller, svc := serve(-1, "api", 0, end), "api"
	for i := range int64(levels) {
		at := 5*i + 1
		call(caller, svc, "http://rec:80/x", 503, at, at+1)
		next := call(caller, svc, "http://rec:80/x", 200, at+2, end-i-1)
		caller, svc = serve(next, "rec", at+3, end-i-1), "rec"
	}
	for k := range int64(leafTries) {
		status, at := int64(503), 5*int64(levels)+1+2*k
		if k == int64(leafTries)-1 {
			status = 200
		}
		call(caller, svc, "http://leaf:80/x", status, at, at+1)
	}
	line := batchJSON(t, &spans.Batch{Spans: ss})
	if err := os.WriteFile(path, append(line, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
