package suite_test

import (
	"go/ast"
	"go/constant"
	"go/types"
	"slices"
	"testing"

	"golang.org/x/tools/go/packages"

	"github.com/stormwatch/stormwatch/analyzer/suite"
)

// askedKeys type-checks the packages and returns, by import path, the attribute keys their code
// asks Trace.CarriesAttr about, directly or through audit.Carries: a constant key by its value,
// any other argument (a declared list passed as keys...) as "" - asked, value not known here.
func askedKeys(t *testing.T, paths []string) map[string][]string {
	t.Helper()
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo}
	pkgs, err := packages.Load(cfg, paths...)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Errorf("%s: %v", p.ID, e)
		}
		for _, f := range p.Syntax {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				fn, ok := p.TypesInfo.Uses[calleeIdent(call.Fun)].(*types.Func)
				if !ok || fn.Pkg() == nil {
					return true
				}
				var keys []ast.Expr
				switch {
				case fn.Name() == "CarriesAttr" && fn.Pkg().Path() == "github.com/stormwatch/stormwatch/analyzer":
					keys = call.Args
				case fn.Name() == "Carries" && fn.Pkg().Path() == "github.com/stormwatch/stormwatch/analyzer/passes/internal/audit":
					keys = call.Args[1:]
				default:
					return true
				}
				for _, k := range keys {
					key := ""
					if v := p.TypesInfo.Types[k].Value; v != nil && v.Kind() == constant.String {
						key = constant.StringVal(v)
					}
					out[p.PkgPath] = append(out[p.PkgPath], key)
				}
				return true
			})
		}
	}
	return out
}

// A detector that asks whether a trace carries an attribute declares the keys it asks about
// (Detector.CarriedAttrs), so that the engine answers from its index instead of a scan of the
// trace per detector: a constant key it asks is among them, and a detector that asks through a
// list of its own declares some.
func TestDetectorsDeclareTheAttributesTheyAskAbout(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks every detector package")
	}
	var paths []string
	for _, d := range suite.Default() {
		if p := packageOf(d.Run); !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	asked := askedKeys(t, paths)
	askers := 0
	for _, d := range suite.Default() {
		keys := asked[packageOf(d.Run)]
		if len(keys) == 0 {
			continue
		}
		askers++
		if len(d.CarriedAttrs) == 0 {
			t.Errorf("%s asks whether a trace carries an attribute but declares no CarriedAttrs", d.Name)
		}
		for _, k := range keys {
			if k != "" && !slices.Contains(d.CarriedAttrs, k) {
				t.Errorf("%s asks whether a trace carries %q but does not declare it in CarriedAttrs", d.Name, k)
			}
		}
	}
	if askers < 3 {
		t.Errorf("found %d detectors that ask about carried attributes, want the 3 that do", askers)
	}
}
