package detectortest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/fixtures"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/tracefile"
)

// Analyze reads the fixture `name` into an analyzer running the default suite under the policy
// written in policyYAML ("" for none, i.e. built-in defaults), flushes it and returns the report.
func Analyze(t testing.TB, name, policyFile, policyYAML string) analyzer.Report {
	t.Helper()
	cfg := engine.Config{Detectors: suite.Default()}
	if policyYAML != "" {
		p, err := policy.Parse(policyFile, []byte(policyYAML), cfg.Detectors)
		if err != nil {
			t.Fatalf("policy: %v", err)
		}
		policy.Configure(&cfg.Detectors, &cfg.Settings, p, policy.Offline)
	}
	return Load(t, name, cfg).Report()
}

// Load reads the fixture `name` into a new analyzer with cfg, flushed, for tests that need more
// than the report (the operations of a snapshot).
func Load(t testing.TB, name string, cfg engine.Config) *engine.Engine {
	t.Helper()
	a := engine.New(cfg)
	Feed(t, a, name)
	return a
}

// Feed reads the named fixtures into a, as `stormwatch analyze` reads files (a malformed record
// fails the test), then flushes it.
func Feed(t testing.TB, a *engine.Engine, names ...string) {
	t.Helper()
	for _, name := range names {
		for _, b := range Batches(t, name) {
			if err := a.ConsumeBatch(context.Background(), b); err != nil {
				t.Fatal(err)
			}
		}
	}
	a.Flush()
}

// Batches reads a fixture's records, one batch each, in file order; a malformed record fails the
// test.
func Batches(t testing.TB, name string) []*spans.Batch {
	t.Helper()
	data, err := fixtures.Read(name)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decode(name+".jsonl", data)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// decode reads a trace file's records, one batch each, in file order, strictly: a malformed
// record is an error, never skipped, so a test never passes on part of its input.
func decode(name string, data []byte) ([]*spans.Batch, error) {
	r, err := tracefile.NewReader(bytes.NewReader(data), name, tracefile.ReadOptions{Strict: true})
	if err != nil {
		return nil, err
	}
	var out []*spans.Batch
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, rec.Batch)
	}
}

// Spans reads a fixture's spans in file order.
func Spans(t testing.TB, name string) []spans.Span {
	t.Helper()
	var out []spans.Span
	for _, b := range Batches(t, name) {
		out = append(out, b.Spans...)
	}
	return out
}

// Of returns the findings of one detector.
func Of(r analyzer.Report, detector string) []analyzer.Finding {
	var out []analyzer.Finding
	for _, f := range r.Findings {
		if f.Detector == detector {
			out = append(out, f)
		}
	}
	return out
}
