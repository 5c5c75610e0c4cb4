package docs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/analyzer/passes/nobackoff"
	"github.com/stormwatch/stormwatch/analyzer/suite"
)

// The facts the README and the docs state about the code - how many detectors there are, which,
// and the names of the API - are checked against the code itself: adding a detector, a Config
// field or renaming a type fails here until the prose says so.

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// The README's one-line summary names three detectors and counts the rest.
func TestReadmeCountsTheDetectors(t *testing.T) {
	named := []string{"retry-amplification", "unbounded-fanout", "post-deadline-work"}
	for _, n := range named {
		if _, ok := suite.ByName(n); !ok {
			t.Errorf("the README names %s, which the suite does not have", n)
		}
	}
	m := regexp.MustCompile(`and\s+(\d+)\s+more\s+retry\s+defects`).FindStringSubmatch(read(t, "README.md"))
	if m == nil {
		t.Fatal(`README.md: no "and N more retry defects"`)
	}
	if n, _ := strconv.Atoi(m[1]); n != len(suite.Default())-len(named) {
		t.Errorf("README.md says %q; the suite has %d detectors, %d besides the %d it names", m[0], len(suite.Default()), len(suite.Default())-len(named), len(named))
	}
}

// docs/detectors.md has one section per detector of the suite, in the suite's order, marked
// "(cross-trace)" exactly when the detector judges a window of traces.
func TestDetectorsDocHasASectionPerDetector(t *testing.T) {
	var got []string
	for _, line := range strings.Split(read(t, "docs/detectors.md"), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok && h != "Evidence" && h != "Adding a detector" {
			got = append(got, h)
		}
	}
	var want []string
	for _, d := range suite.Default() {
		h := d.Name
		if d.Scope == analyzer.ScopeWindow {
			h += " (cross-trace)"
		}
		want = append(want, h)
	}
	if !slices.Equal(got, want) {
		t.Errorf("docs/detectors.md: the detector sections are\n%s\nthe suite (analyzer/suite) is\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// docs/analyzer.md's table of engine.Config has a row for each field and no row for a field that
// is not there.
func TestAnalyzerDocTablesEveryConfigField(t *testing.T) {
	doc := read(t, "docs/analyzer.md")
	i := strings.Index(doc, "| Config field |")
	if i < 0 {
		t.Fatal("docs/analyzer.md: no Config field table")
	}
	documented := map[string]bool{}
	for _, line := range strings.Split(doc[i:], "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		first := strings.Split(line, "|")[1]
		for _, m := range regexp.MustCompile("`([A-Za-z]+)`").FindAllStringSubmatch(first, -1) {
			documented[m[1]] = true
		}
	}
	typ := reflect.TypeFor[engine.Config]()
	for f := range typ.Fields() {
		if f.IsExported() && !documented[f.Name] {
			t.Errorf("docs/analyzer.md: the Config table has no row for %s", f.Name)
		}
		delete(documented, f.Name)
	}
	for name := range documented {
		t.Errorf("docs/analyzer.md: the Config table has a row for %s, which engine.Config does not have", name)
	}
}

// The names docs/analyzer.md lists as what each package offers are exported there (or, for the
// engine's, by the framework whose types it builds).
func TestAnalyzerDocNamesExist(t *testing.T) {
	doc := read(t, "docs/analyzer.md")
	framework := exported(t, "analyzer")
	for _, pkg := range []string{"analyzer", "analyzer/engine"} {
		start := strings.Index(doc, "\n- `"+pkg+"` is ")
		if start < 0 {
			t.Errorf("docs/analyzer.md: no item saying what `%s` is", pkg)
			continue
		}
		item := doc[start+1:]
		if end := strings.Index(item, "\n-"); end >= 0 {
			item = item[:end]
		}
		if end := strings.Index(item, "\n\n"); end >= 0 {
			item = item[:end]
		}
		names := exported(t, pkg)
		for _, m := range regexp.MustCompile("`([A-Z][A-Za-z]*)(?:\\.([A-Z][A-Za-z]*))?`").FindAllStringSubmatch(item, -1) {
			if !names[m[1]] && !(pkg != "analyzer" && framework[m[1]]) {
				t.Errorf("docs/analyzer.md names %s in %s, which does not export it", m[0], pkg)
			}
		}
	}
}

// exported are the exported top-level names of the package in dir (relative to the repository),
// test files left out.
func exported(t *testing.T, dir string) map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					names[d.Name.Name] = ast.IsExported(d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						names[s.Name.Name] = s.Name.IsExported()
					case *ast.ValueSpec:
						for _, n := range s.Names {
							names[n.Name] = n.IsExported()
						}
					}
				}
			}
		}
	}
	return names
}

// The testdata example of docs/detectors.md is a case that passes: no-backoff reports what its
// want says, about the span of its line.
func TestDetectorsDocTestdataExample(t *testing.T) {
	doc := read(t, "docs/detectors.md")
	i := strings.Index(doc, "A testdata trace is text")
	if i < 0 {
		t.Fatal("docs/detectors.md: no testdata example")
	}
	block := doc[i:]
	start := strings.Index(block, "```\n")
	end := strings.Index(block[start+4:], "```")
	if start < 0 || end < 0 {
		t.Fatal("docs/detectors.md: the testdata example is not in a code block")
	}
	example := block[start+4 : start+4+end]
	if !strings.Contains(example, "# want ") {
		t.Fatalf("docs/detectors.md: the testdata example has no want:\n%s", example)
	}
	dir := t.TempDir()
	for name, text := range map[string]string{"example.trace": example, "silent.trace": "trace t1\nweb server \"GET /\" 0s+1ms\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	detectortest.Run(t, nobackoff.Detector, dir)
}
