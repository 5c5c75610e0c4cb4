package suite_test

import (
	"go/ast"
	"go/constant"
	"go/types"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"

	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/analyzer/suite"
)

const (
	detectortestPath = "github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	detectorType     = "*github.com/stormwatch/stormwatch/analyzer.Detector"
)

// packageOf is the import path of the package that defines fn.
func packageOf(fn any) string {
	name := runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name()
	slash := strings.LastIndex(name, "/")
	dot := strings.Index(name[slash+1:], ".")
	if dot < 0 {
		return name
	}
	return name[:slash+1+dot]
}

// tested is what the type checker finds in a package's tests: each package-level
// *analyzer.Detector variable of the package, and the testdata directories a test passes to
// detectortest.Run with it.
type tested struct {
	dir       string
	detectors map[string]bool     // the package's *analyzer.Detector variables
	runs      map[string][]string // variable -> the directories detectortest.Run reads for it
}

// testsOf type-checks the packages and their tests and returns, by import path, what they test.
// The call is found by what its names denote, not by how it is written: pkg.Detector from an
// external test or Detector from the package's own, under any import name or layout.
func testsOf(t *testing.T, paths []string) map[string]*tested {
	t.Helper()
	cfg := &packages.Config{
		Mode:  packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo,
		Tests: true,
	}
	pkgs, err := packages.Load(cfg, paths...)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*tested{}
	for _, path := range paths {
		out[path] = &tested{detectors: map[string]bool{}, runs: map[string][]string{}}
	}
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		for _, e := range p.Errors {
			t.Errorf("%s: %v", p.ID, e)
		}
	})
	for _, p := range pkgs {
		path := strings.TrimSuffix(p.PkgPath, "_test")
		got := out[path]
		if got == nil || p.Types == nil {
			continue
		}
		if p.PkgPath == path && len(p.GoFiles) > 0 {
			got.dir = filepath.Dir(p.GoFiles[0])
			for _, name := range p.Types.Scope().Names() {
				if v, ok := p.Types.Scope().Lookup(name).(*types.Var); ok && v.Type().String() == detectorType {
					got.detectors[name] = true
				}
			}
		}
		for _, f := range p.Syntax {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) != 3 {
					return true
				}
				fn, ok := p.TypesInfo.Uses[calleeIdent(call.Fun)].(*types.Func)
				if !ok || fn.Pkg() == nil || fn.Pkg().Path() != detectortestPath || fn.Name() != "Run" {
					return true
				}
				v, ok := p.TypesInfo.Uses[calleeIdent(call.Args[1])].(*types.Var)
				dir := p.TypesInfo.Types[call.Args[2]].Value
				if ok && v.Pkg() != nil && v.Pkg().Path() == path && v.Parent() == v.Pkg().Scope() && dir != nil && dir.Kind() == constant.String {
					got.runs[v.Name()] = append(got.runs[v.Name()], constant.StringVal(dir))
				}
				return true
			})
		}
	}
	return out
}

// calleeIdent is the identifier an expression names: x in x and in pkg.x.
func calleeIdent(e ast.Expr) *ast.Ident {
	switch e := e.(type) {
	case *ast.Ident:
		return e
	case *ast.SelectorExpr:
		return e.Sel
	}
	return nil
}

// Every detector of the suite is tested in its own package: a test there passes it to
// detectortest.Run with a testdata directory of cases, and so does one for each other detector
// that package declares. The package is found from the detector's Run (by reflection), so a
// detector cannot borrow another's tests.
func TestEveryDetectorIsTested(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks every detector package and its tests")
	}
	var paths []string
	for _, d := range suite.Default() {
		if p := packageOf(d.Run); !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	found := testsOf(t, paths)
	for _, d := range suite.Default() {
		path := packageOf(d.Run)
		if !strings.HasPrefix(path, "github.com/stormwatch/stormwatch/analyzer/passes/") {
			t.Errorf("%s: Run is in %s, not in a package of analyzer/passes", d.Name, path)
			continue
		}
		got := found[path]
		if len(got.detectors) == 0 {
			t.Errorf("%s: %s declares no package-level *analyzer.Detector", d.Name, path)
		}
		for v := range got.detectors {
			dirs := got.runs[v]
			if len(dirs) == 0 {
				t.Errorf("%s: no test in %s calls detectortest.Run(t, %s, \"testdata\")", d.Name, path, v)
			}
			for _, dir := range dirs {
				if _, err := detectortest.Cases(filepath.Join(got.dir, dir)); err != nil {
					t.Errorf("%s: %v", d.Name, err)
				}
			}
		}
	}
}

// The check finds the call written either way - pkg.Detector in an external test package,
// a bare name in the package's own tests - and no call where there is none.
func TestTestsOfFindsTheCall(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks packages")
	}
	const (
		external = "github.com/stormwatch/stormwatch/analyzer/passes/nobackoff"
		internal = detectortestPath // its own test runs a stand-in detector it declares: Run(t, retried, "testdata")
		none     = "github.com/stormwatch/stormwatch/analyzer/passes/internal/audit"
	)
	found := testsOf(t, []string{external, internal, none})
	if got := found[external]; !reflect.DeepEqual(got.runs, map[string][]string{"Detector": {"testdata"}}) || !got.detectors["Detector"] {
		t.Errorf("nobackoff: %+v", got)
	}
	if got := found[internal]; !reflect.DeepEqual(got.runs, map[string][]string{"retried": {"testdata"}}) || !got.detectors["retried"] {
		t.Errorf("detectortest: %+v", got)
	}
	if got := found[none]; len(got.runs) != 0 || len(got.detectors) != 0 {
		t.Errorf("audit: %+v", got)
	}
}
