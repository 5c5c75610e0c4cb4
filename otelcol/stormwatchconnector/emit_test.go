package stormwatchconnector

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
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
	an := engine.New(engine.Config{Detectors: dets})
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

// Evidence is written as its JSON form reads back (the rule): every finding the fixtures give,
// and values at the edges of the rule.
func TestEvidenceMatchesJSON(t *testing.T) {
	check := func(name string, x analyzer.Value) {
		t.Helper()
		want, got := pcommon.NewValueEmpty(), pcommon.NewValueEmpty()
		putJSON(t, want, x)
		putEvidence(got, x)
		if !got.Equal(want) || got.Type() != want.Type() {
			t.Errorf("%s: %v written as %s %v, JSON gives %s %v", name, x, got.Type(), got.AsRaw(), want.Type(), want.AsRaw())
		}
	}
	n := 0
	for _, c := range fixtures.Cases {
		an := engine.New(engine.Config{Detectors: suite.Default()})
		if err := an.ConsumeBatch(context.Background(), newConverter(false).convert(merged(t, c.Name))); err != nil {
			t.Fatal(err)
		}
		an.Flush()
		for _, f := range an.Report().Findings {
			for k, x := range f.Evidence {
				check(c.Name+" "+f.Detector+" "+k, x)
				n++
			}
		}
	}
	if n == 0 {
		t.Error("no fixture evidence")
	}
	for name, x := range map[string]analyzer.Value{
		"none": {}, "true": analyzer.Bool(true), "int": analyzer.Int(3), "int min": analyzer.Int(math.MinInt),
		"float integral": analyzer.Float(5.0), "float negative zero": analyzer.Float(math.Copysign(0, -1)),
		"float fraction": analyzer.Float(0.1), "float tiny": analyzer.Float(1e-7), "float 2^63": analyzer.Float(math.Exp2(63)),
		"float 1e21": analyzer.Float(1e21), "float big integral": analyzer.Float(1e20), "float -2^63": analyzer.Float(-math.Exp2(63)),
		"float 2^62": analyzer.Float(math.Exp2(62)), "float 2^53+2": analyzer.Float(math.Exp2(53) + 2),
		"string": analyzer.Text("a<b>&c\""), "bad utf8": analyzer.Text("a\xffb\xfe\xfd"),
		"strings": analyzer.Texts([]string{"x", "\xfe"}), "nil strings": analyzer.Texts(nil), "empty strings": analyzer.Texts([]string{}),
		"ints": analyzer.Ints([]int{1, -2}), "floats": analyzer.Floats([]float64{1, 2.5, 1e300}),
		"record":     analyzer.Record(analyzer.Evidence{"b": analyzer.Int(1), "a": analyzer.Texts([]string{"q"}), "c": {}}),
		"nil record": analyzer.Record(nil), "empty record": analyzer.Record(analyzer.Evidence{}),
		"records": analyzer.Records([]analyzer.Evidence{{"service": analyzer.Text("api"), "attempts": analyzer.Int(3)}, nil}),
		"counts":  analyzer.Counts(map[string]int{"200": 60, "503": 2}),
	} {
		check(name, x)
	}
}

// putJSON writes x through the report's JSON form, read back with integers kept as integers:
// the rule putEvidence follows without the marshal and decode.
func putJSON(t *testing.T, v pcommon.Value, x analyzer.Value) {
	t.Helper()
	data, err := json.Marshal(x)
	if err != nil {
		t.Fatalf("%v: %v", x, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	setValue(v, generic)
}

func setValue(v pcommon.Value, x any) {
	switch t := x.(type) {
	case nil:
	case string:
		v.SetStr(t)
	case bool:
		v.SetBool(t)
	case json.Number:
		if i, err := t.Int64(); err == nil {
			v.SetInt(i)
		} else if f, err := t.Float64(); err == nil {
			v.SetDouble(f)
		} else {
			v.SetStr(t.String())
		}
	case []any:
		s := v.SetEmptySlice()
		for _, e := range t {
			setValue(s.AppendEmpty(), e)
		}
	case map[string]any:
		m := v.SetEmptyMap()
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			setValue(m.PutEmpty(k), t[k])
		}
	}
}

// TestCostMetricsAreTheReportsCosts: what retries cost reaches the metrics backend as the single
// binary's /metrics gives it - a histogram of added latency per entry point (OTLP's per-bucket
// counts, adding up to the requests) and per dependency the added latency, extra calls and late
// work - with the offline report's figures exactly.
func TestCostMetricsAreTheReportsCosts(t *testing.T) {
	const fixture = "amplification-27-reference"
	h := newSinkHarness(t, testConfig())
	for _, td := range fixtureTraces(t, fixture) {
		h.consume(td)
	}
	h.step(11 * time.Second)
	want := offlineReport(t, fixture)
	ms := lastMetrics(t, h.metrics)

	hist, ok := ms[metricEntryAddedLatency]
	if !ok || hist.Type() != pmetric.MetricTypeHistogram || hist.Unit() != "s" ||
		hist.Histogram().AggregationTemporality() != pmetric.AggregationTemporalityCumulative {
		t.Fatalf("%s missing or not a cumulative histogram of seconds", metricEntryAddedLatency)
	}
	entries, deps := 0, 0
	for _, c := range want.Costs {
		switch c.Kind {
		case analyzer.CostEntryPoint:
			entries++
			dp, ok := histogramPoint(hist.Histogram(), attrEntryService+"="+c.Service, attrEntryName+"="+c.Name)
			if !ok {
				t.Fatalf("no added-latency point for entry point %s %s", c.Service, c.Name)
			}
			var n uint64
			for _, b := range dp.BucketCounts().AsRaw() {
				n += b
			}
			if dp.Count() != uint64(c.Requests) || n != dp.Count() || dp.Sum() != c.AddedLatencyMs.Total/1000 ||
				dp.BucketCounts().Len() != dp.ExplicitBounds().Len()+1 {
				t.Errorf("%s %s: count %d, buckets adding to %d, sum %v s, %d buckets for %d bounds; want %d requests, %v s",
					c.Service, c.Name, dp.Count(), n, dp.Sum(), dp.BucketCounts().Len(), dp.ExplicitBounds().Len(), c.Requests, c.AddedLatencyMs.Total/1000)
			}
		case analyzer.CostDependency:
			deps++
			dep := attrDependency + "=" + c.Dependency
			if got := mustValue(t, ms, metricDepAddedLatency, dep); got != c.AddedLatencyMs.Total/1000 {
				t.Errorf("%s added latency %v s, want %v", c.Dependency, got, c.AddedLatencyMs.Total/1000)
			}
			if got := mustValue(t, ms, metricDepExtraCalls, dep); got != float64(c.ExtraCalls) {
				t.Errorf("%s extra calls %v, want %d", c.Dependency, got, c.ExtraCalls)
			}
			if got := mustValue(t, ms, metricDepLateWork, dep); got != c.LateWorkSeconds {
				t.Errorf("%s late work %v s, want %v", c.Dependency, got, c.LateWorkSeconds)
			}
		}
	}
	if entries == 0 || deps == 0 {
		t.Fatalf("the reference report has %d entry points and %d dependencies with costs: the fixture no longer retries", entries, deps)
	}
	// The storm's figures are not zero: a test that compared zeroes would prove nothing.
	var extra float64
	for _, c := range want.Costs {
		extra += float64(c.ExtraCalls)
	}
	if extra == 0 {
		t.Error("no extra calls in a fixture of 27x amplification")
	}
	h.shutdown()
}

// histogramPoint finds the histogram point whose attributes include attrs ("k=v" pairs).
func histogramPoint(h pmetric.Histogram, attrs ...string) (pmetric.HistogramDataPoint, bool) {
next:
	for i := 0; i < h.DataPoints().Len(); i++ {
		dp := h.DataPoints().At(i)
		for _, kv := range attrs {
			k, v, _ := strings.Cut(kv, "=")
			if got, ok := dp.Attributes().Get(k); !ok || got.AsString() != v {
				continue next
			}
		}
		return dp, true
	}
	return pmetric.HistogramDataPoint{}, false
}
