package spanstest

import (
	"bufio"
	"bytes"
	"slices"
	"testing"

	"github.com/stormwatch/stormwatch/fixtures"
	"github.com/stormwatch/stormwatch/spans"
)

// Fixture is one recorded fixture's spans, grouped by trace in the order the traces first appear.
type Fixture struct {
	Name   string
	Traces [][]spans.Span
}

// FixtureTraces decodes every recorded fixture (fixtures.Names, in name order) with opts; a
// record that does not decode fails the test.
func FixtureTraces(t testing.TB, opts spans.DecodeOptions) []Fixture {
	t.Helper()
	names := fixtures.Names()
	if len(names) == 0 {
		t.Fatal("no fixtures")
	}
	var out []Fixture
	for _, name := range names {
		body, err := fixtures.Read(name)
		if err != nil {
			t.Fatal(err)
		}
		f := Fixture{Name: name}
		var all []spans.Span
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			b, err := spans.DecodeJSON(slices.Clone(sc.Bytes()), opts)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			all = append(all, b.Spans...)
		}
		if err := sc.Err(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, b := range spans.ByTrace(all) {
			f.Traces = append(f.Traces, b.Spans)
		}
		out = append(out, f)
	}
	return out
}
