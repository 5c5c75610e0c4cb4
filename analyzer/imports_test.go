package analyzer_test

import (
	"errors"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
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
	pkgs := append([]string{module + "/analyzer"}, detectorPackages(t, root, false)...)
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

// detectorPackages are the packages under analyzer/passes: the detectors and their helpers, with
// the harness detectortest when withHarness.
func detectorPackages(t *testing.T, root string, withHarness bool) []string {
	t.Helper()
	var pkgs []string
	err := filepath.WalkDir(filepath.Join(root, "analyzer", "passes"), func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if name := d.Name(); name == "detectortest" && !withHarness || name == "testdata" {
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
		t.Fatalf("found %d packages to check, want every detector: %v", len(pkgs), pkgs)
	}
	return pkgs
}

// importChain is a chain of imports from package from to package to within the module, found
// breadth first through the non-test files, or nil when from does not import to.
func importChain(t *testing.T, root, from, to string) []string {
	t.Helper()
	return importChainTo(t, root, from, func(p string) bool { return p == to })
}

// importChainTo is a chain of imports from package from to a package of the module that is
// reports true for, found breadth first through the non-test files and not through the packages
// skip (whose imports are not followed), or nil when there is none.
func importChainTo(t *testing.T, root, from string, is func(string) bool, skip ...string) []string {
	t.Helper()
	parent := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if is(p) {
			var chain []string
			for ; p != ""; p = parent[p] {
				chain = append([]string{p}, chain...)
			}
			return chain
		}
		if slices.Contains(skip, p) {
			continue
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

// TestDetectorsDoNotImportTheBuild: no detector package (under analyzer/passes, passes/internal
// included, detectortest too) imports analyzer/internal/build, where what the engine writes into
// the model lives, nor any other package under analyzer/internal, directly or through a package
// other than analyzer (which keeps that state unexported) and the engine (which detectortest
// drives): Go's internal rule would let them, and
// a detector writing a trace's index or an operation's intent key would change what the
// detectors after it read.
func TestDetectorsDoNotImportTheBuild(t *testing.T) {
	root := ".."
	pkgs := detectorPackages(t, root, true)
	internal := module + "/analyzer/internal/"
	for _, p := range pkgs {
		if chain := importChainTo(t, root, p, func(imp string) bool { return strings.HasPrefix(imp, internal) },
			module+"/analyzer", enginePath); chain != nil {
			t.Errorf("%s imports the model's build: %s", p, strings.Join(chain, " -> "))
		}
	}
	// The check must see such an import where there is one, or it proves nothing.
	if importChainTo(t, root, module+"/analyzer/engine", func(imp string) bool { return strings.HasPrefix(imp, internal) },
		module+"/analyzer") == nil {
		t.Error("the check does not see the engine's import of analyzer/internal/build")
	}
}

// TestTheModelExportsNoWrite: what package analyzer exports names nothing of analyzer/internal
// (no exported function, method, field, variable or type gives a detector the engine's write
// surface), and no exported method of the model's types (Trace, Operation, Attempt) is a setter: what `go doc` lists of
// analyzer is all a detector can reach.
func TestTheModelExportsNoWrite(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		internal := map[string]bool{} // the names this file imports analyzer/internal/... as
		for _, imp := range file.Imports {
			if path := strings.Trim(imp.Path.Value, `"`); strings.HasPrefix(path, module+"/analyzer/internal/") {
				name := path[strings.LastIndex(path, "/")+1:]
				if imp.Name != nil {
					name = imp.Name.Name
				}
				internal[name] = true
			}
		}
		namesInternal := func(n ast.Node) bool {
			found := false
			ast.Inspect(n, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := sel.X.(*ast.Ident); ok && internal[id.Name] {
						found = true
					}
				}
				return !found
			})
			return found
		}
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() || d.Recv != nil && !exportedRecv(d.Recv) {
					continue
				}
				if namesInternal(d.Type) {
					t.Errorf("%s: %s exposes analyzer/internal in its signature", fset.Position(d.Pos()), d.Name.Name)
				}
				if d.Recv != nil && modelType(d.Recv) && strings.HasPrefix(d.Name.Name, "Set") {
					t.Errorf("%s: exported setter %s: the engine writes the model through analyzer/internal/build", fset.Position(d.Pos()), d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch sp := spec.(type) {
					case *ast.TypeSpec:
						if !sp.Name.IsExported() {
							continue
						}
						st, ok := sp.Type.(*ast.StructType)
						if !ok {
							if namesInternal(sp.Type) {
								t.Errorf("%s: type %s is analyzer/internal's", fset.Position(sp.Pos()), sp.Name.Name)
							}
							continue
						}
						for _, fl := range st.Fields.List {
							exported := len(fl.Names) == 0 // an embedded field is promoted
							for _, n := range fl.Names {
								exported = exported || n.IsExported()
							}
							if exported && namesInternal(fl.Type) {
								t.Errorf("%s: %s has an exported field of analyzer/internal's", fset.Position(fl.Pos()), sp.Name.Name)
							}
						}
					case *ast.ValueSpec:
						for _, n := range sp.Names {
							if n.IsExported() && (sp.Type != nil && namesInternal(sp.Type) || slices.ContainsFunc(sp.Values, func(e ast.Expr) bool { return namesInternal(e) })) {
								t.Errorf("%s: %s is analyzer/internal's", fset.Position(n.Pos()), n.Name)
							}
						}
					}
				}
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d files, want all of package analyzer's", checked)
	}
}

// modelType reports whether a method's receiver is one of the model's types, which the engine
// builds and detectors read.
func modelType(recv *ast.FieldList) bool {
	typ := recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && (id.Name == "Trace" || id.Name == "Operation" || id.Name == "Attempt")
}

// exportedRecv reports whether a method's receiver type is exported (T or *T).
func exportedRecv(recv *ast.FieldList) bool {
	typ := recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if idx, ok := typ.(*ast.IndexExpr); ok {
		typ = idx.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && id.IsExported()
}
