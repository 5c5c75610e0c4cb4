package stormwatchconnector

import (
	"bytes"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormwatch/stormwatch/fixtures"
)

// fixtureTraces reads a fixture (OTLP/JSON lines, the collector file exporter's format) into one
// pdata Traces per line, as a receiver would hand them to the connector.
func fixtureTraces(t testing.TB, name string) []ptrace.Traces {
	t.Helper()
	data, err := fixtures.Read(name)
	if err != nil {
		t.Fatalf("read fixture %s: %v", name, err)
	}
	var out []ptrace.Traces
	var u ptrace.JSONUnmarshaler
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		td, err := u.UnmarshalTraces(line)
		if err != nil {
			t.Fatalf("fixture %s line %d: %v", name, i+1, err)
		}
		out = append(out, td)
	}
	return out
}

// merged is all of a fixture's requests in one Traces.
func merged(t testing.TB, name string) ptrace.Traces {
	t.Helper()
	all := ptrace.NewTraces()
	for _, td := range fixtureTraces(t, name) {
		td.ResourceSpans().MoveAndAppendTo(all.ResourceSpans())
	}
	return all
}
