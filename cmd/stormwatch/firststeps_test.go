package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// repoRoot is where the README and the fixtures are, from this package's directory.
const repoRoot = "../.."

// TestHelpExamplesNameRealFiles: a file an example in --help names under fixtures/ exists, so a
// newcomer who copies the example gets a replay, not "no such file".
func TestHelpExamplesNameRealFiles(t *testing.T) {
	named := regexp.MustCompile(`fixtures/[A-Za-z0-9._/-]+`)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, p := range named.FindAllString(c.Example+"\n"+c.Long, -1) {
			if _, err := os.Stat(filepath.Join(repoRoot, p)); err != nil {
				t.Errorf("%s --help names %s, which does not exist", c.CommandPath(), p)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd(nil, &bytes.Buffer{}, &bytes.Buffer{}))
}

// readmeSection is the README's text under the heading that starts with title, up to the next
// heading of the same level or above.
func readmeSection(t *testing.T, readme, title string) string {
	t.Helper()
	i := strings.Index(readme, "\n## "+title)
	if i < 0 {
		t.Fatalf("README has no section %q", title)
	}
	rest := readme[i+1:]
	if j := strings.Index(rest[3:], "\n## "); j >= 0 {
		rest = rest[:j+3]
	}
	return rest
}

// TestReadmeFirstSteps: the README says how to get the stormwatch command before the first
// example that calls it, and its "point your traces" section says how --settle relates to the
// exporters' batch delay and what happens to metrics and logs.
func TestReadmeFirstSteps(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	install := strings.Index(readme, "go install ./cmd/stormwatch")
	firstCall := regexp.MustCompile("(?m)^stormwatch( |$)").FindStringIndex(readme)
	if install < 0 || firstCall == nil || install > firstCall[0] {
		t.Errorf("the install step (at %d) does not come before the first example that calls stormwatch (at %v)", install, firstCall)
	}
	if !strings.Contains(readme, "make build, which writes bin/stormwatch") {
		t.Errorf("the README does not say where make build puts the binary")
	}
	point := readmeSection(t, readme, "Point your traces at it")
	for _, want := range []string{"--settle", "batch delay", "OTEL_BSP_SCHEDULE_DELAY", "metrics and logs are received and ignored"} {
		if !strings.Contains(point, want) {
			t.Errorf("the \"Point your traces at it\" section lacks %q", want)
		}
	}
}
