package engine_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The package's layout is checked here as facts: each file has its place in the package comment's
// map, and no function is longer than maxFuncLines unless its comment says why.

// The package comment's map of the files by concern names every file of the package, and no
// file that is gone: a file added or renamed without a place in the map fails here.
func TestDocMapsEveryFile(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "doc.go" {
			continue
		}
		have[f] = true
		if !strings.Contains(text, " "+f) {
			t.Errorf("doc.go's map of the files does not name %s", f)
		}
	}
	for _, w := range strings.Fields(text) {
		w = strings.TrimRight(w, ":,;.")
		if strings.HasSuffix(w, ".go") && w != "doc.go" && !have[w] {
			t.Errorf("doc.go names %s, which is not a file of the package", w)
		}
	}
}

// maxFuncLines is the length past which a function is split into named steps, or says beside it
// (in its doc comment, with the words "over 100 lines") why it is not.
const maxFuncLines = 100

func TestNoLongFunctionWithoutAReason(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			if n > maxFuncLines && !strings.Contains(fd.Doc.Text(), "over 100 lines") {
				t.Errorf("%s: %s is %d lines: split it into named steps, or say in its comment why it is over 100 lines", f, fd.Name.Name, n)
			}
		}
	}
}
