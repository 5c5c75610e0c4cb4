package detectortest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/spans"
)

// Suffixes of the files Run reads in a detector's testdata besides NAME.trace (TextExt): NAME.jsonl
// is a recorded trace (OTLP/JSON lines), NAME.want the findings expected on it, NAME.policy.yaml
// (optional) the policy a trace of either form is analyzed under.
const (
	OTLPExt   = ".jsonl"
	WantExt   = ".want"
	PolicyExt = ".policy.yaml"
)

// Run analyzes every trace file in dir with d alone, as `stormwatch analyze --settle 0` does
// (offline, every span held to the end, every finding kept, the policy file beside the trace
// applied when there is one), and compares d's findings on each with its expectations, one
// subtest per trace: the `# want` comments of a NAME.trace (see the package documentation), or
// the lines of the NAME.want beside a NAME.jsonl. A mismatch fails with a diff, -want +got.
//
// An expectation, a `# want` comment or a .want line, reads
//
//	SEVERITY SERVICE -> DEPENDENCY [KEY=VALUE ...]
//
// SERVICE and DEPENDENCY are the finding's (`-` for none). Each KEY=VALUE is an evidence key that
// must hold VALUE, written as JSON (strings without spaces may go unquoted); keys left out are
// not compared. A .trace without a `# want`, or an empty .want, says the detector stays silent
// on that trace. In a .want file, expectations are in any order and lines starting with '#' (say
// there why the detector fires or stays silent) are skipped.
//
// To add a case, write the trace without expectations and run the test: the diff lists each
// finding with all its evidence and the lines of its spans; put each on one of its span's lines
// as a `# want`, with the keys that prove the point.
//
// Run also fails when dir has no trace where d fires or none where it stays silent: a detector is
// only tested when both are.
func Run(t *testing.T, d *analyzer.Detector, dir string) {
	t.Helper()
	if err := analyzer.Validate([]*analyzer.Detector{d}); err != nil {
		t.Fatal(err)
	}
	if *convert != "" {
		done, err := Convert(d, dir, *convert)
		for _, name := range done {
			t.Logf("%s: converted to %s", filepath.Join(dir, name+OTLPExt), name+TextExt)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	cases, err := Cases(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			got, err := c.Analyze(d)
			if err != nil {
				t.Fatal(err)
			}
			if diff := c.diff(got); diff != "" {
				t.Errorf("%s: findings of %s differ (-want +got):\n%s", c.Trace, d.Name, diff)
			}
		})
	}
	if err := firesAndStaysSilent(dir, d.Name, cases); err != nil {
		t.Error(err)
	}
}

// firesAndStaysSilent says what is missing when cases has no trace where the detector fires or
// none where it stays silent.
func firesAndStaysSilent(dir, name string, cases []Case) error {
	fires, silent := false, false
	for _, c := range cases {
		if len(c.Want) > 0 {
			fires = true
		} else {
			silent = true
		}
	}
	var errs []error
	if !fires {
		errs = append(errs, fmt.Errorf("%s: no trace where %s fires (a .trace with a `# want`, or a .want with a line)", dir, name))
	}
	if !silent {
		errs = append(errs, fmt.Errorf("%s: no trace where %s stays silent (a .trace without a `# want`, or an empty .want)", dir, name))
	}
	return errors.Join(errs...)
}

// Case is one trace of a testdata folder and what is expected of it.
type Case struct {
	Name   string // the trace's file name without its suffix
	Trace  string // path of the trace file: NAME.trace, or NAME.jsonl (OTLP) beside NAME.want
	Policy string // path of its policy file, "" for none
	Want   []Want
	text   *textTrace // the .trace file read; nil for OTLP
}

// Cases reads the cases of dir in name order. A .jsonl without a .want, a .want or policy without
// a trace, or a .want beside a .trace (whose expectations are its `# want` comments) is an error:
// every trace states what it expects, in one place, and nothing is left unread.
func Cases(dir string) ([]Case, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read testdata: %w", err)
	}
	var cases []Case
	var errs []error
	has := map[string]bool{}
	for _, e := range entries {
		has[e.Name()] = true
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		if name, ok := strings.CutSuffix(e.Name(), TextExt); ok {
			c := Case{Name: name, Trace: filepath.Join(dir, e.Name())}
			if has[name+PolicyExt] {
				c.Policy = filepath.Join(dir, name+PolicyExt)
			}
			switch {
			case has[name+OTLPExt]:
				errs = append(errs, fmt.Errorf("%s and %s: one case, two traces", c.Trace, name+OTLPExt))
				continue
			case has[name+WantExt]:
				errs = append(errs, fmt.Errorf("%s: the expectations of %s are its `# want` comments, not a .want file", filepath.Join(dir, name+WantExt), e.Name()))
				continue
			}
			data, err := os.ReadFile(c.Trace)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if c.text, err = parseText(c.Trace, data); err != nil {
				errs = append(errs, err)
				continue
			}
			c.Want = c.text.want
			cases = append(cases, c)
			continue
		}
		name, ok := strings.CutSuffix(e.Name(), OTLPExt)
		if !ok {
			continue
		}
		c := Case{Name: name, Trace: filepath.Join(dir, e.Name())}
		if has[name+PolicyExt] {
			c.Policy = filepath.Join(dir, name+PolicyExt)
		}
		data, err := os.ReadFile(filepath.Join(dir, name+WantExt))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s has no expectations: write %s (start with an empty one: the failure shows what the detector reports)", c.Trace, name+WantExt))
			continue
		}
		if c.Want, err = ParseWant(filepath.Join(dir, name+WantExt), data); err != nil {
			errs = append(errs, err)
			continue
		}
		cases = append(cases, c)
	}
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), WantExt); ok && !has[name+OTLPExt] && !has[name+TextExt] {
			errs = append(errs, fmt.Errorf("%s: no trace %s beside it", filepath.Join(dir, e.Name()), name+OTLPExt))
		}
		if name, ok := strings.CutSuffix(e.Name(), PolicyExt); ok && !has[name+OTLPExt] && !has[name+TextExt] {
			errs = append(errs, fmt.Errorf("%s: no trace %s or %s beside it", filepath.Join(dir, e.Name()), name+TextExt, name+OTLPExt))
		}
	}
	if len(cases) == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("%s: no trace files (*%s or *%s)", dir, TextExt, OTLPExt))
	}
	return cases, errors.Join(errs...)
}

// Analyze runs d alone over the case's trace and returns its findings in report order.
func (c Case) Analyze(d *analyzer.Detector) ([]analyzer.Finding, error) {
	cfg := engine.Config{Detectors: []*analyzer.Detector{d}, WindowInterval: -1, MaxFindings: -1}
	if c.Policy != "" {
		data, err := os.ReadFile(c.Policy)
		if err != nil {
			return nil, err
		}
		// The base name only, so that evidence citing the rule (file:line) reads the same
		// wherever the test runs.
		p, err := policy.Parse(filepath.Base(c.Policy), data, policyDetectors(d))
		if err != nil {
			return nil, err
		}
		policy.Configure(&cfg.Detectors, &cfg.Settings, p, policy.Offline)
	}
	batches, err := c.batches()
	if err != nil {
		return nil, err
	}
	a := engine.New(cfg)
	for _, b := range batches {
		if err := a.ConsumeBatch(context.Background(), b); err != nil {
			return nil, fmt.Errorf("%s: %w", c.Trace, err)
		}
	}
	a.Flush()
	return a.Report().Findings, nil
}

// batches are the case's spans as the analyzer is fed them: a .trace's one batch a trace, an
// OTLP file's one batch a record.
func (c Case) batches() ([]*spans.Batch, error) {
	data, err := os.ReadFile(c.Trace)
	if err != nil {
		return nil, err
	}
	if c.text != nil {
		// Read again: the analyzer owns what it is fed.
		t, err := parseText(c.Trace, data)
		if err != nil {
			return nil, err
		}
		return t.batches, nil
	}
	return decode(c.Trace, data)
}

// policyDetectors are the detectors a case's policy may configure: the default suite, d in place
// of the suite's detector of its name (or beside them when it is not one), so that a policy
// naming another detector reads as it does in `stormwatch analyze`.
func policyDetectors(d *analyzer.Detector) []*analyzer.Detector {
	ds := suite.Default()
	if i := slices.IndexFunc(ds, func(s *analyzer.Detector) bool { return s.Name == d.Name }); i >= 0 {
		ds[i] = d
		return ds
	}
	return append(ds, d)
}

// Want is one expected finding: a line of a .want file, or a `# want` comment of a .trace file.
type Want struct {
	Severity, Service, Dependency string
	// Pos is where a .trace file states it (file:line), Span the id of the span on that line,
	// which the finding's span ids must include; both "" for a line of a .want file.
	Pos, Span string
	// Evidence holds the keys the line names, in its order, each value canonical JSON.
	Evidence []Evidence
}

// Evidence is one KEY=VALUE of a Want.
type Evidence struct {
	Key, Value string
}

// ParseWant reads a .want file; file names it in errors.
func ParseWant(file string, data []byte) ([]Want, error) {
	var out []Want
	var errs []error
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		w, err := parseWantLine(line)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %w", file, i+1, err))
			continue
		}
		out = append(out, w)
	}
	return out, errors.Join(errs...)
}

func parseWantLine(line string) (Want, error) {
	const form = "want SEVERITY SERVICE -> DEPENDENCY [KEY=VALUE ...]"
	f := strings.Fields(line)
	if len(f) < 4 || f[2] != "->" {
		return Want{}, fmt.Errorf("%q: %s", line, form)
	}
	if _, err := analyzer.ParseSeverity(f[0]); err != nil {
		return Want{}, err
	}
	w := Want{Severity: f[0], Service: unDash(f[1]), Dependency: unDash(f[3])}
	// The evidence is what follows the dependency; values may be JSON with spaces inside.
	rest := line
	for range 4 {
		rest = strings.TrimLeft(rest, " \t")
		rest = rest[strings.IndexAny(rest+" ", " \t"):]
	}
	for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimSpace(rest) {
		key, after, ok := strings.Cut(rest, "=")
		if !ok || key == "" || strings.ContainsAny(key, " \t") {
			return Want{}, fmt.Errorf("%q: evidence must be KEY=VALUE", rest)
		}
		val, n, err := parseValue(after)
		if err != nil {
			return Want{}, fmt.Errorf("%s: %w", key, err)
		}
		w.Evidence = append(w.Evidence, Evidence{Key: key, Value: val})
		rest = after[n:]
	}
	return w, nil
}

// parseValue reads one value at the start of s and returns it as canonical JSON with the bytes it
// took. A value starting with '"', '[' or '{' is JSON; any other runs to the next space and is
// JSON when it parses as such (a number, true, false, null), a string otherwise.
func parseValue(s string) (string, int, error) {
	if s != "" && strings.ContainsRune(`"[{`, rune(s[0])) {
		dec := json.NewDecoder(strings.NewReader(s))
		var v any
		if err := dec.Decode(&v); err != nil {
			return "", 0, fmt.Errorf("value %q: %w", s, err)
		}
		return canonical(v), int(dec.InputOffset()), nil
	}
	n := strings.IndexAny(s, " \t")
	if n < 0 {
		n = len(s)
	}
	tok := s[:n]
	var v any
	if json.Unmarshal([]byte(tok), &v) != nil {
		v = tok
	}
	return canonical(v), n, nil
}

// canonical is v as JSON with map keys sorted and every number a float64, so that a value written
// by hand and one a detector reported compare equal whenever they mean the same.
func canonical(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	var generic any
	if json.Unmarshal(b, &generic) == nil {
		b, _ = json.Marshal(generic)
	}
	return string(b)
}

// missing stands for an evidence key the finding lacks; it is no JSON, so no value written in a
// .want can equal it.
const missing = "(missing)"

// display writes a canonical value back as a .want would: strings without spaces unquoted.
func display(canon string) string {
	var s string
	if canon == missing || json.Unmarshal([]byte(canon), &s) != nil {
		return canon
	}
	var v any
	if s == "" || strings.ContainsAny(s, " \t\"[{") || json.Unmarshal([]byte(s), &v) == nil {
		return canon
	}
	return s
}

func unDash(s string) string {
	if s == "-" {
		return ""
	}
	return s
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (w Want) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s -> %s", w.Severity, dash(w.Service), dash(w.Dependency))
	for _, e := range w.Evidence {
		fmt.Fprintf(&b, " %s=%s", e.Key, display(e.Value))
	}
	return b.String()
}

// format writes f as a .want line with the evidence keys named (all of them, sorted, when keys is
// nil).
func format(f analyzer.Finding, keys []string) string {
	if keys == nil {
		for k := range f.Evidence {
			keys = append(keys, k)
		}
		slices.Sort(keys)
	}
	return as(f, keys).String()
}

// as is f seen through the keys of a Want.
func as(f analyzer.Finding, keys []string) Want {
	w := Want{Severity: f.Severity.String(), Service: f.Service, Dependency: f.Dependency}
	for _, k := range keys {
		v, ok := f.Evidence[k]
		c := missing
		if ok {
			c = canonical(v)
		}
		w.Evidence = append(w.Evidence, Evidence{Key: k, Value: c})
	}
	return w
}

func keysOf(w Want) []string {
	keys := make([]string, 0, len(w.Evidence))
	for _, e := range w.Evidence {
		keys = append(keys, e.Key)
	}
	return keys
}

// Diff compares the findings with the expectations, in any order, and returns "" when each
// finding matches one line and each line one finding. Otherwise it lists the matched lines
// (unmarked), the lines nothing matched (-) and the findings no line matched (+, with the
// finding's summary below it); an unmatched finding is shown through the keys of an unmatched line
// about the same service and dependency, so that the two differ only where the values do, or
// with all its evidence when there is no such line. A line from a .trace file (Want.Pos set)
// matches only a finding about the span of its line, and is shown with its position.
func Diff(want []Want, got []analyzer.Finding) string { return diff(want, got, nil) }

func (c Case) diff(got []analyzer.Finding) string {
	var lines map[string]int
	if c.text != nil {
		lines = c.text.line
	}
	return diff(c.Want, got, lines)
}

// diff is Diff, with the line of each span of a .trace file (nil for OTLP) to say where an
// unexpected finding's spans are.
func diff(want []Want, got []analyzer.Finding, lines map[string]int) string {
	about := func(w Want, f analyzer.Finding) bool { return w.Span == "" || slices.Contains(f.SpanIDs, w.Span) }
	used := make([]bool, len(got))
	matched := make([]bool, len(want))
	for i, w := range want {
		text := w.String()
		for j, f := range got {
			if !used[j] && about(w, f) && as(f, keysOf(w)).String() == text {
				used[j], matched[i] = true, true
				break
			}
		}
	}
	if !slices.Contains(used, false) && !slices.Contains(matched, false) {
		return ""
	}
	// onLines says where a finding's spans are written, when the trace is a .trace file.
	onLines := func(f analyzer.Finding) string {
		var at []string
		for _, id := range f.SpanIDs {
			if n, ok := lines[id]; ok {
				at = append(at, strconv.Itoa(n))
			}
		}
		if len(at) == 0 {
			return ""
		}
		return "lines " + strings.Join(at, ", ")
	}
	var b bytes.Buffer
	for i, w := range want {
		mark := "  "
		if !matched[i] {
			mark = "- "
		}
		pos := ""
		if w.Pos != "" {
			pos = w.Pos + ": want "
		}
		fmt.Fprintf(&b, "%s%s%s", mark, pos, w)
		if !matched[i] && w.Span != "" {
			for j, f := range got {
				if !used[j] && as(f, keysOf(w)).String() == w.String() {
					fmt.Fprintf(&b, "\n      # reported, but about the spans on %s, not this line's", onLines(f))
					break
				}
			}
		}
		b.WriteString("\n")
	}
	paired := make([]bool, len(want))
	for j, f := range got {
		if used[j] {
			continue
		}
		var keys []string
		for i, w := range want {
			if !matched[i] && !paired[i] && w.Service == f.Service && w.Dependency == f.Dependency {
				paired[i], keys = true, keysOf(w)
				if keys == nil {
					keys = []string{}
				}
				break
			}
		}
		fmt.Fprintf(&b, "+ %s\n      # %s\n", format(f, keys), f.Summary)
		if at := onLines(f); at != "" {
			fmt.Fprintf(&b, "      # unexpected: no want on the %s\n", at)
		}
	}
	return b.String()
}
