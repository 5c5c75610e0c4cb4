package policy_test

import (
	"flag"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
)

var update = flag.Bool("update", false, "rewrite the detector settings of docs/policy.md and docs/detectors.md from the detectors' declarations")

const (
	policyDoc    = "../../docs/policy.md"
	detectorsDoc = "../../docs/detectors.md"
	tableStart   = "<!-- settings table: generated from each detector's Settings; go test ./analyzer/policy -run TestDocs -update rewrites it -->\n"
	tableEnd     = "<!-- end of settings table -->\n"
	settingsLine = "**Settings**"
)

// allowed says which values a field takes, from its bounds.
func allowed(f analyzer.SettingField) string {
	switch {
	case f.Min != "" && f.Max != "":
		return f.Min + " to " + f.Max
	case f.Min != "":
		return "at least " + f.Min
	case f.Max != "":
		return "at most " + f.Max
	}
	return "any"
}

func defaultOf(d *analyzer.Detector, f analyzer.SettingField) string {
	return f.Format(reflect.ValueOf(d.Settings).Elem().Field(f.Index))
}

// settingsTable is docs/policy.md's table of every detector setting.
func settingsTable(t *testing.T) string {
	var b strings.Builder
	b.WriteString(tableStart)
	b.WriteString("| detector | setting | default | allowed | what it does |\n|---|---|---|---|---|\n")
	for _, ds := range declared(t) {
		for _, f := range ds.fields {
			fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s | %s |\n", ds.Name, f.Key, defaultOf(ds.Detector, f), allowed(f), f.Doc)
		}
	}
	b.WriteString(tableEnd)
	return b.String()
}

// detectorSettings is the line of a detector's section of docs/detectors.md naming its settings.
func detectorSettings(d *analyzer.Detector, fields []analyzer.SettingField) string {
	parts := make([]string, len(fields))
	for i, f := range fields {
		parts[i] = fmt.Sprintf("`%s` (default %s, %s): %s", f.Key, defaultOf(d, f), allowed(f), f.Doc)
	}
	return fmt.Sprintf("%s (policy `detectors.%s`): %s.", settingsLine, d.Name, strings.Join(parts, "; "))
}

// The docs name every setting of every detector with its default, its bounds and its doc, as
// the detectors declare them: docs/policy.md in one table, docs/detectors.md in each detector's
// section. Run with -update to rewrite both after changing a declaration.
func TestDocsNameEverySetting(t *testing.T) {
	data, err := os.ReadFile(policyDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	i, j := strings.Index(doc, tableStart), strings.Index(doc, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("%s: no settings table (between %q and %q)", policyDoc, strings.TrimSpace(tableStart), strings.TrimSpace(tableEnd))
	}
	want := settingsTable(t)
	if got := doc[i : j+len(tableEnd)]; got != want {
		if *update {
			doc = doc[:i] + want + doc[j+len(tableEnd):]
			if err := os.WriteFile(policyDoc, []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
		} else {
			t.Errorf("%s: the settings table differs from the detectors' declarations (-update rewrites it); want:\n%s", policyDoc, want)
		}
	}

	data, err = os.ReadFile(detectorsDoc)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	changed := false
	has := map[string][]analyzer.SettingField{}
	for _, ds := range declared(t) {
		has[ds.Name] = ds.fields
	}
	section := ""
	found := map[string]bool{}
	for i, line := range lines {
		if name, ok := strings.CutPrefix(line, "## "); ok {
			section, _, _ = strings.Cut(name, " ")
			continue
		}
		if !strings.HasPrefix(line, settingsLine) {
			continue
		}
		d := mustDetector(t, section)
		fields, ok := has[section]
		if !ok {
			t.Errorf("%s: %s names settings, but it declares none", detectorsDoc, section)
			continue
		}
		found[section] = true
		if want := detectorSettings(d, fields); line != want {
			if *update {
				lines[i], changed = want, true
			} else {
				t.Errorf("%s: section %s:\n got: %s\nwant: %s", detectorsDoc, section, line, want)
			}
		}
	}
	for _, ds := range declared(t) {
		if found[ds.Name] {
			continue
		}
		want := detectorSettings(ds.Detector, ds.fields)
		if !*update {
			t.Errorf("%s: section %s names none of its settings (-update adds them); add:\n%s", detectorsDoc, ds.Name, want)
			continue
		}
		var ok bool
		if lines, ok = insertSettings(lines, ds.Name, want); !ok {
			t.Errorf("%s: no section \"## %s\" to write its settings in: add the section first", detectorsDoc, ds.Name)
			continue
		}
		changed = true
	}
	if changed {
		if err := os.WriteFile(detectorsDoc, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// insertSettings puts a detector's settings line into its section of docs/detectors.md: before
// the section's **Severity** paragraph, or at the section's end when it has none. It returns
// false when there is no section for the detector.
func insertSettings(lines []string, name, settings string) ([]string, bool) {
	start := -1
	for i, line := range lines {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			if h, _, _ = strings.Cut(h, " "); h == name {
				start = i
				break
			}
		}
	}
	if start < 0 {
		return lines, false
	}
	end := len(lines)
	for i := start + 1; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "## ") {
			end = i
			break
		}
		if strings.HasPrefix(lines[i], "**Severity**") {
			return slices.Insert(lines, i, settings, ""), true
		}
	}
	for end > start+1 && strings.TrimSpace(lines[end-1]) == "" {
		end--
	}
	return slices.Insert(lines, end, "", settings), true
}

// -update writes a new detector's settings line into its section: before its severity, else at
// its end, and nowhere when the section is missing.
func TestInsertSettings(t *testing.T) {
	doc := "# Detectors\n\n## a-b\n\n**Proves**: x.\n\n**Severity**: warning.\n\n## c-d (cross-trace)\n\n**Proves**: y.\n\n## Evidence\n"
	got, ok := insertSettings(strings.Split(doc, "\n"), "a-b", "**Settings** A")
	if want := "# Detectors\n\n## a-b\n\n**Proves**: x.\n\n**Settings** A\n\n**Severity**: warning.\n\n## c-d (cross-trace)\n"; !ok || !strings.HasPrefix(strings.Join(got, "\n"), want) {
		t.Errorf("before the severity:\n%s", strings.Join(got, "\n"))
	}
	got, ok = insertSettings(strings.Split(doc, "\n"), "c-d", "**Settings** C")
	if want := "## c-d (cross-trace)\n\n**Proves**: y.\n\n**Settings** C\n\n## Evidence\n"; !ok || !strings.HasSuffix(strings.Join(got, "\n"), want) {
		t.Errorf("at the section's end:\n%s", strings.Join(got, "\n"))
	}
	if _, ok := insertSettings(strings.Split(doc, "\n"), "e-f", "**Settings** E"); ok {
		t.Error("wrote settings for a detector with no section")
	}
}
