package engine_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
