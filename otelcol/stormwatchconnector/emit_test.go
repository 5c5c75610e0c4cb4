package stormwatchconnector

import (
	"context"
	"math"
	"testing"
	"time"

	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/fixtures"
)

// A cross-trace finding cites an example trace, which changes as traffic moves on; it is still
// the same finding and must be counted once (and its record re-sent, since it says something new).
func TestWindowFindingCountedOnceWhileItsExampleTraceChanges(t *testing.T) {
	window := &analyzer.Detector{
		Name: "test-window", Title: "test", Doc: "reports one finding citing the last operation's trace",
		Scope: analyzer.ScopeWindow, Severity: analyzer.SeverityWarning,
		Run: func(p *analyzer.Pass) error {
			if n := len(p.Operations); n > 0 {
				op := p.Operations[n-1]
				p.Report(analyzer.Finding{Severity: analyzer.SeverityWarning, TraceID: op.TraceID.String(),
					Dependency: "http://dep:8080", Summary: "retries in waves, e.g. in trace " + op.TraceID.String()})
			}
			return nil
		},
	}
	dets := []*analyzer.Detector{window}
	an := analyzer.New(analyzer.Config{Detectors: dets})
	em := newEmitter(connectortest.NewNopSettings(NewFactory().Type()), an, dets, time.Unix(0, 0))
	conv := newConverter(false)

	var records []plog.Logs
	for i, fixture := range []string{"amplification-27-stock", "fanout-stock", "post-deadline-stock"} {
		if err := an.ConsumeBatch(context.Background(), conv.convert(merged(t, fixture))); err != nil {
			t.Fatal(err)
		}
		an.Flush()
		out := em.collect(time.Unix(int64(i+1), 0), true, true)
		em.delivered(out)
		records = append(records, out.logs)
		ms := metricsByName(out.metrics)
		if got := mustValue(t, ms, metricFindings, attrDetector+"=test-window"); got != 1 {
			t.Fatalf("after %s the window finding was counted %v times, want once", fixture, got)
		}
	}
	if records[1].LogRecordCount() != 1 || records[2].LogRecordCount() != 1 {
		t.Errorf("a changed window finding should be re-sent: %d and %d records", records[1].LogRecordCount(), records[2].LogRecordCount())
	}
}

// Evidence written directly must be exactly what the JSON round trip (the rule) writes: every
// finding the fixtures give, and values at the edges of the rule.
func TestEvidenceDirectMatchesJSON(t *testing.T) {
	check := func(name string, x any) {
		t.Helper()
		want, got := pcommon.NewValueEmpty(), pcommon.NewValueEmpty()
		putJSON(want, x)
		putEvidence(got, x)
		if !got.Equal(want) || got.Type() != want.Type() {
			t.Errorf("%s: %#v written as %s %v, JSON gives %s %v", name, x, got.Type(), got.AsRaw(), want.Type(), want.AsRaw())
		}
	}
	directN := 0
	for _, c := range fixtures.Cases {
		an := analyzer.New(analyzer.Config{Detectors: suite.Default()})
		if err := an.ConsumeBatch(context.Background(), newConverter(false).convert(merged(t, c.Name))); err != nil {
			t.Fatal(err)
		}
		an.Flush()
		for _, f := range an.Report().Findings {
			for k, x := range f.Evidence {
				check(c.Name+" "+f.Detector+" "+k, x)
				if direct(x) {
					directN++
				}
			}
		}
	}
	if directN == 0 {
		t.Error("no fixture evidence took the direct path")
	}
	type layer struct{ Service string }
	for name, x := range map[string]any{
		"nil": nil, "true": true, "int": 3, "int8": int8(-3), "uint32": uint32(7), "uint max": uint64(math.MaxUint64),
		"int64 min": int64(math.MinInt64), "float integral": 5.0, "float negative zero": math.Copysign(0, -1),
		"float fraction": 0.1, "float tiny": 1e-7, "float 2^63": math.Exp2(63), "float 1e21": 1e21,
		"float big integral": 1e20, "float -2^63": -math.Exp2(63), "float 2^62": math.Exp2(62), "float 2^53+2": math.Exp2(53) + 2, "NaN": math.NaN(), "Inf": math.Inf(1),
		"float32": float32(0.1), "string": "a<b>&c\"", "bad utf8": "a\xffb", "strings": []string{"x", "\xfe"},
		"nil strings": []string(nil), "ints": []int{1, -2}, "floats": []float64{1, 2.5, 1e300},
		"anys": []any{1, "x", nil, 2.5, []any{true}}, "map": map[string]any{"b": 1, "a": []string{"q"}, "c": nil},
		"nil map": map[string]any(nil), "maps": []map[string]any{{"service": "api", "attempts": 3}, nil},
		"struct": layer{"api"}, "structs": []layer{{"a"}}, "empty map": map[string]any{},
	} {
		check(name, x)
	}
}
