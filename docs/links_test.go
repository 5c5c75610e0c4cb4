// Package docs_test checks the documentation as facts: every page is in the index, and every link
// between pages - and every docs/PAGE.md#section pointer in the code - leads to a page and a
// heading that exist, and every Go file a page names is in the repository. A renamed heading or a
// moved page or file breaks the test, not the reader. The counts and lists the pages state about
// the code are checked against it (facts_test.go).
package docs_test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository, from this package's directory.
const root = ".."

// anchors returns the GitHub-style anchors of a Markdown file's headings: lower case, punctuation
// but '-' and '_' dropped, spaces made '-', and "-1", "-2"... on repeats.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer f.Close()
	seen := map[string]int{}
	out := map[string]bool{}
	fence := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fence = !fence
			continue
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return out
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// inlineCode is a `code span`, whose text is never a link.
var inlineCode = regexp.MustCompile("`[^`]*`")

// mdLink is a Markdown link's target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// checkTarget reports a link in file `from` whose page or anchor does not exist; a relative page
// is read from the directory of `base`.
func checkTarget(t *testing.T, from, base, target string, cache map[string]map[string]bool) {
	t.Helper()
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return
	}
	page, anchor, _ := strings.Cut(target, "#")
	path := base
	if page != "" {
		path = filepath.Join(filepath.Dir(base), page)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("%s links to %s: no such file", from, target)
		return
	}
	if anchor == "" || !strings.HasSuffix(path, ".md") {
		return
	}
	if cache[path] == nil {
		cache[path] = anchors(t, path)
	}
	if !cache[path][anchor] {
		t.Errorf("%s links to %s: %s has no heading with anchor #%s", from, target, path, anchor)
	}
}

func markdownFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no pages in docs/: %v", err)
	}
	return append(pages, filepath.Join(root, "README.md"))
}

func TestEveryPageIsIndexed(t *testing.T) {
	index, err := os.ReadFile(filepath.Join(root, "docs", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range markdownFiles(t) {
		name := filepath.Base(p)
		if name == "README.md" {
			continue
		}
		if !strings.Contains(string(index), "("+name+")") {
			t.Errorf("docs/README.md does not list %s", name)
		}
	}
}

func TestLinksBetweenPagesResolve(t *testing.T) {
	cache := map[string]map[string]bool{}
	for _, p := range markdownFiles(t) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		fence := false
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "```") {
				fence = !fence
			}
			if fence {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, ""), -1) {
				checkTarget(t, p, p, m[1], cache)
			}
		}
	}
}

// codePointer is a docs page named in Go source, with an optional section: docs/lab.md,
// docs/principles.md#retry-cost.
var codePointer = regexp.MustCompile(`docs/([a-z0-9_-]+\.md)(#[a-z0-9_-]+)?`)

func TestPointersFromCodeResolve(t *testing.T) {
	cache := map[string]map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range codePointer.FindAllStringSubmatch(string(b), -1) {
			checkTarget(t, path, filepath.Join(root, "docs", "README.md"), m[1]+m[2], cache)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// goFile is a Go file named in a page: analyzer/engine/window.go, or doc.go alone.
var goFile = regexp.MustCompile("`([A-Za-z0-9_./-]+\\.go)`")

// Every Go file a page names exists: a path from the repository's root or from a directory in it
// (otelcol's distribution/components.go), or a file name alone that some directory has. A file
// moved or renamed breaks the test, not the reader who looks for it.
func TestGoFilesNamedInPagesExist(t *testing.T) {
	var files []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			files = append(files, "/"+filepath.ToSlash(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range markdownFiles(t) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range goFile.FindAllStringSubmatch(string(b), -1) {
			found := false
			for _, f := range files {
				if strings.HasSuffix(f, "/"+m[1]) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s names %s, which is not in the repository", p, m[1])
			}
		}
	}
}
