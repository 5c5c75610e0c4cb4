package analyzer_test

import (
	"errors"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

const (
	module     = "github.com/stormwatch/stormwatch"
	enginePath = module + "/analyzer/engine"
)

// TestDetectorsDoNotImportTheEngine: neither this package nor any package under analyzer/passes
// (the detectors and their helpers) imports analyzer/engine, directly or through another package
// such as analyzer/policy: a detector sees what its Pass gives it and nothing of the engine's.
// detectortest is the exception, the harness that drives detectors through the engine. Only non-test
// files count, as for a build.
func TestDetectorsDoNotImportTheEngine(t *testing.T) {
	root := ".." // the module's root, from this package's directory
	pkgs := []string{module + "/analyzer"}
	err := filepath.WalkDir(filepath.Join(root, "analyzer", "passes"), func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if name := d.Name(); name == "detectortest" || name == "testdata" {
			return filepath.SkipDir
		}
		if _, err := build.ImportDir(dir, 0); err != nil {
			var none *build.NoGoError
			if errors.As(err, &none) {
				return nil
			}
			return err
		}
		rel, err := filepath.Rel(root, dir)
		pkgs = append(pkgs, module+"/"+filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 10 {
		t.Fatalf("found %d packages to check, want the framework and every detector: %v", len(pkgs), pkgs)
	}
	for _, p := range pkgs {
		if chain := importChain(t, root, p, enginePath); chain != nil {
			t.Errorf("%s imports the engine: %s", p, strings.Join(chain, " -> "))
		}
	}
	// The check must see an import of the engine where there is one, or it proves nothing.
	if importChain(t, root, module+"/analyzer/passes/detectortest", enginePath) == nil {
		t.Error("the check does not see detectortest's import of the engine")
	}
}

// importChain is a chain of imports from package from to package to within the module, found
// breadth first through the non-test files, or nil when from does not import to.
func importChain(t *testing.T, root, from, to string) []string {
	t.Helper()
	parent := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == to {
			var chain []string
			for ; p != ""; p = parent[p] {
				chain = append([]string{p}, chain...)
			}
			return chain
		}
		dir := filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(p, module)))
		bp, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, imp := range bp.Imports {
			if _, seen := parent[imp]; !seen && (imp == module || strings.HasPrefix(imp, module+"/")) {
				parent[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	return nil
}

// TestDetectorsDoNotBuildTheModel: the names analyzer exports for the engine that builds a Trace
// and its Operations (build.go) are not used by any detector (the packages under analyzer/passes
// but detectortest, non-test files): a detector writing a trace's index or an operation's intent key
// would change what the detectors after it read. Index is the one name common elsewhere
// (strings.Index takes arguments); a call of it without arguments is Trace.Index.
func TestDetectorsDoNotBuildTheModel(t *testing.T) {
	engineOnly := map[string]bool{"TraceIndex": true, "CallFacts": true, "CarriedKeys": true,
		"SetIntentKey": true, "SetChildCount": true, "SetRecordedNumber": true}
	files, err := filepath.Glob(filepath.Join("passes", "*", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob(filepath.Join("passes", "internal", "*", "*.go"))
	files = append(files, more...)
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || strings.Contains(f, "detectortest") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(file, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.SelectorExpr:
				if engineOnly[x.Sel.Name] {
					t.Errorf("%s uses %s, which only the engine may", f, x.Sel.Name)
				}
			case *ast.CallExpr:
				if sel, ok := x.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Index" && len(x.Args) == 0 {
					t.Errorf("%s calls Index(), the engine's access to a trace's index", f)
				}
			}
			return true
		})
	}
	if checked < 17 {
		t.Fatalf("checked %d files, want every detector's", checked)
	}
}
