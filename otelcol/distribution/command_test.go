package distribution

import (
	"bytes"
	"strings"
	"testing"
)

// TestCommandListsComponents runs the command line of cmd/otelcol-stormwatch: its `components`
// subcommand must list the stormwatch connector with its stability and the build's name.
func TestCommandListsComponents(t *testing.T) {
	cmd := NewCommand("1.2.3")
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"components"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("components: %v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{"otelcol-stormwatch", "1.2.3", "name: stormwatch", "traces-to-metrics: Alpha", "traces-to-logs: Alpha",
		"name: load_balancing", "loadbalancingexporter v0.161.0", "name: prometheus"} {
		if !strings.Contains(text, want) {
			t.Errorf("`components` output lacks %q:\n%s", want, text)
		}
	}
}
