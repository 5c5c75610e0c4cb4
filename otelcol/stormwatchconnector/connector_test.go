package stormwatchconnector

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/suite"
)

// fakeClock is the connector's clock in tests: time moves only when the test says so.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// harness is one connector with both outputs wired to sinks, as a collector with a metrics and a
// logs pipeline would create it, and a clock stepped by hand.
type harness struct {
	t       *testing.T
	clock   *fakeClock
	metrics *consumertest.MetricsSink
	logs    *consumertest.LogsSink
	toM     connector.Traces
	toL     connector.Traces
	s       *shared
}

func newHarness(t *testing.T, cfg *Config, metrics consumer.Metrics, logs consumer.Logs) *harness {
	t.Helper()
	f := NewFactory()
	set := connectortest.NewNopSettings(f.Type())
	h := &harness{t: t, clock: &fakeClock{now: time.Unix(1_800_000_000, 0)}}
	ctx := context.Background()
	var err error
	if metrics != nil {
		if h.toM, err = f.CreateTracesToMetrics(ctx, set, cfg, metrics); err != nil {
			t.Fatal(err)
		}
		h.s = h.toM.(*edge).s
	}
	if logs != nil {
		if h.toL, err = f.CreateTracesToLogs(ctx, set, cfg, logs); err != nil {
			t.Fatal(err)
		}
		if h.s != nil && h.toL.(*edge).s != h.s {
			t.Fatal("the two edges of one connector ID do not share the analyzer")
		}
		h.s = h.toL.(*edge).s
	}
	h.s.now = h.clock.Now
	// The clock's ticks never fire on their own: the test steps time with h.step.
	h.s.newTicker = func(time.Duration) (<-chan time.Time, func()) { return nil, func() {} }
	for _, c := range h.edges() {
		if err := c.Start(ctx, componenttest.NewNopHost()); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func newSinkHarness(t *testing.T, cfg *Config) *harness {
	m, l := new(consumertest.MetricsSink), new(consumertest.LogsSink)
	h := newHarness(t, cfg, m, l)
	h.metrics, h.logs = m, l
	return h
}

func (h *harness) edges() []connector.Traces {
	var out []connector.Traces
	for _, c := range []connector.Traces{h.toM, h.toL} {
		if c != nil {
			out = append(out, c)
		}
	}
	return out
}

// consume hands td to every edge, as the collector's fan-out does.
func (h *harness) consume(td ptrace.Traces) {
	h.t.Helper()
	for _, c := range h.edges() {
		if err := c.ConsumeTraces(context.Background(), td); err != nil {
			h.t.Fatal(err)
		}
	}
}

func (h *harness) step(d time.Duration) { h.s.step(context.Background(), h.clock.Add(d)) }

func (h *harness) shutdown() {
	h.t.Helper()
	for _, c := range h.edges() {
		if err := c.Shutdown(context.Background()); err != nil {
			h.t.Fatal(err)
		}
	}
}

func testConfig() *Config {
	c := createDefaultConfig()
	c.Settle = 5 * time.Second
	c.TickInterval = time.Second
	c.EmitInterval = 10 * time.Second
	return c
}

// offlineReport is what `stormwatch analyze` says about the fixtures: the trace-file reader, the
// default suite, Flush, Report.
func offlineReport(t testing.TB, names ...string) analyzer.Report {
	t.Helper()
	cfg := engine.Config{Detectors: suite.Default()}
	policy.Configure(&cfg.Detectors, &cfg.Settings, nil, policy.Offline)
	a := engine.New(cfg)
	detectortest.Feed(t, a, names...)
	return a.Report()
}

// lastMetrics is the latest emission's metrics by name.
func lastMetrics(t *testing.T, sink *consumertest.MetricsSink) map[string]pmetric.Metric {
	t.Helper()
	all := sink.AllMetrics()
	if len(all) == 0 {
		t.Fatal("no metrics emitted")
	}
	return metricsByName(all[len(all)-1])
}

func metricsByName(md pmetric.Metrics) map[string]pmetric.Metric {
	out := map[string]pmetric.Metric{}
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		sms := rms.At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				out[ms.At(k).Name()] = ms.At(k)
			}
		}
	}
	return out
}

func points(m pmetric.Metric) pmetric.NumberDataPointSlice {
	if m.Type() == pmetric.MetricTypeSum {
		return m.Sum().DataPoints()
	}
	return m.Gauge().DataPoints()
}

// value finds the data point whose attributes include attrs ("k=v" pairs).
func value(t *testing.T, ms map[string]pmetric.Metric, name string, attrs ...string) (float64, bool) {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		t.Fatalf("metric %s not emitted", name)
	}
	dps := points(m)
next:
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		for _, kv := range attrs {
			k, v, _ := strings.Cut(kv, "=")
			got, ok := dp.Attributes().Get(k)
			if !ok || got.AsString() != v {
				continue next
			}
		}
		if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
			return float64(dp.IntValue()), true
		}
		return dp.DoubleValue(), true
	}
	return 0, false
}

func mustValue(t *testing.T, ms map[string]pmetric.Metric, name string, attrs ...string) float64 {
	t.Helper()
	v, ok := value(t, ms, name, attrs...)
	if !ok {
		t.Fatalf("metric %s has no point with %v", name, attrs)
	}
	return v
}

func allRecords(sink *consumertest.LogsSink) []plog.LogRecord {
	var out []plog.LogRecord
	for _, ld := range sink.AllLogs() {
		rls := ld.ResourceLogs()
		for i := 0; i < rls.Len(); i++ {
			sls := rls.At(i).ScopeLogs()
			for j := 0; j < sls.Len(); j++ {
				lrs := sls.At(j).LogRecords()
				for k := 0; k < lrs.Len(); k++ {
					out = append(out, lrs.At(k))
				}
			}
		}
	}
	return out
}

func attr(lr plog.LogRecord, k string) string {
	v, ok := lr.Attributes().Get(k)
	if !ok {
		return ""
	}
	return v.AsString()
}

func TestFixtureMetricsAndFindingLogs(t *testing.T) {
	const fixture = "amplification-27-reference"
	h := newSinkHarness(t, testConfig())
	for _, td := range fixtureTraces(t, fixture) {
		h.consume(td)
	}
	h.step(11 * time.Second) // past the settle period and the first emission
	want := offlineReport(t, fixture)
	ms := lastMetrics(t, h.metrics)

	// Every dependency's figures are the single process's, exactly.
	if len(want.Dependencies) == 0 {
		t.Fatal("the reference report has no dependency")
	}
	for _, d := range want.Dependencies {
		dep := attrDependency + "=" + d.Dependency
		if got := mustValue(t, ms, metricPhysicalCalls, dep); got != float64(d.PhysicalCalls) {
			t.Errorf("%s physical calls %v, want %d", d.Dependency, got, d.PhysicalCalls)
		}
		if got := mustValue(t, ms, metricLogicalOps, dep); got != float64(d.LogicalOperations) {
			t.Errorf("%s logical operations %v, want %d", d.Dependency, got, d.LogicalOperations)
		}
		if got := mustValue(t, ms, metricAmplification, dep); got != d.Amplification {
			t.Errorf("%s amplification %v, want %v", d.Dependency, got, d.Amplification)
		}
		for o, n := range d.Outcomes {
			if got := mustValue(t, ms, metricAttempts, dep, attrOutcome+"="+o); got != float64(n) {
				t.Errorf("%s attempts with outcome %s: %v, want %d", d.Dependency, o, got, n)
			}
		}
		if d.Service != "" {
			mustValue(t, ms, metricPhysicalCalls, dep, attrDependencyService+"="+d.Service)
		}
		// Per (caller, dependency): the single process's split, caller by caller.
		if len(d.ByCaller) == 0 {
			t.Errorf("%s: the reference report has no caller", d.Dependency)
		}
		for _, c := range d.ByCaller {
			caller := attrCaller + "=" + c.Caller
			if got := mustValue(t, ms, metricCallerPhysical, dep, caller); got != float64(c.PhysicalCalls) {
				t.Errorf("%s from %s: physical calls %v, want %d", d.Dependency, c.Caller, got, c.PhysicalCalls)
			}
			if got := mustValue(t, ms, metricCallerLogical, dep, caller); got != float64(c.LogicalOperations) {
				t.Errorf("%s from %s: logical operations %v, want %d", d.Dependency, c.Caller, got, c.LogicalOperations)
			}
			if got := mustValue(t, ms, metricCallerAmp, dep, caller); got != c.Amplification {
				t.Errorf("%s from %s: amplification %v, want %v", d.Dependency, c.Caller, got, c.Amplification)
			}
		}
	}
	// adapter's retry loop is the one that sends 27 calls to dep per request.
	callerLeaf := []string{attrDependency + "=dep", attrCaller + "=adapter"}
	if p, l, a := mustValue(t, ms, metricCallerPhysical, callerLeaf...), mustValue(t, ms, metricCallerLogical, callerLeaf...), mustValue(t, ms, metricCallerAmp, callerLeaf...); p != 54 || l != 2 || a != 27 {
		t.Errorf("adapter -> dep: %v calls for %v operations (%vx), want 54 for 2 (27x)", p, l, a)
	}
	// The numbers of docs/principles.md, stated plainly: 3 layers x 3 attempts = 27 calls to dep
	// per request.
	leaf := attrDependency + "=dep"
	if p, l, a := mustValue(t, ms, metricPhysicalCalls, leaf), mustValue(t, ms, metricLogicalOps, leaf), mustValue(t, ms, metricAmplification, leaf); p != 54 || l != 2 || a != 27 {
		t.Errorf("dep: %v calls for %v operations (%vx), want 54 for 2 (27x)", p, l, a)
	}
	if got := mustValue(t, ms, metricTracesAnalyzed); got != float64(want.Input.Traces) {
		t.Errorf("traces analyzed %v, want %d", got, want.Input.Traces)
	}
	if got := mustValue(t, ms, metricSpansAnalyzed); got != float64(want.Input.Spans) {
		t.Errorf("spans analyzed %v, want %d", got, want.Input.Spans)
	}

	// Findings by detector and severity, and one log record per finding.
	wantCounts := map[[2]string]int{}
	for _, f := range want.Findings {
		wantCounts[[2]string{f.Detector, f.Severity.String()}]++
	}
	for k, n := range wantCounts {
		if got := mustValue(t, ms, metricFindings, attrDetector+"="+k[0], attrSeverity+"="+k[1]); got != float64(n) {
			t.Errorf("findings %s/%s: %v, want %d", k[0], k[1], got, n)
		}
	}
	recs := allRecords(h.logs)
	if len(recs) != len(want.Findings) {
		t.Fatalf("%d finding records, want %d", len(recs), len(want.Findings))
	}
	amp := 0
	for _, lr := range recs {
		if attr(lr, attrDetector) != "retry-amplification" {
			continue
		}
		amp++
		if lr.TraceID().IsEmpty() || lr.SpanID().IsEmpty() {
			t.Errorf("finding record without trace or span id: %s", lr.Body().AsString())
		}
		if lr.SeverityText() != "critical" || lr.SeverityNumber() != plog.SeverityNumberError || lr.EventName() != eventFinding {
			t.Errorf("severity %s/%v event %q", lr.SeverityText(), lr.SeverityNumber(), lr.EventName())
		}
		ids, _ := lr.Attributes().Get(attrSpanIDs)
		if ids.Type() != pcommon.ValueTypeSlice || ids.Slice().Len() != 27 {
			t.Errorf("span ids %s, want the 27 leaf calls", ids.AsString())
		}
		if lr.SpanID().String() != ids.Slice().At(0).Str() {
			t.Errorf("record span id %s is not the first of the finding's spans", lr.SpanID())
		}
		factor, _ := lr.Attributes().Get(attrEvidencePrefix + "factor")
		if factor.Type() != pcommon.ValueTypeInt || factor.Int() != 27 {
			t.Errorf("evidence factor %s (%s), want the integer 27", factor.AsString(), factor.Type())
		}
		layers, _ := lr.Attributes().Get(attrEvidencePrefix + "layers")
		if layers.Type() != pcommon.ValueTypeSlice || layers.Slice().Len() != 3 {
			t.Fatalf("evidence layers %s, want 3 layers", layers.AsString())
		}
		if l0 := layers.Slice().At(0).Map(); l0.Len() != 2 {
			t.Errorf("a layer should be {service, attempts}, got %s", layers.Slice().At(0).AsString())
		}
		if !strings.Contains(lr.Body().Str(), "27 calls") || attr(lr, attrDependency) != "dep" {
			t.Errorf("body %q dependency %q", lr.Body().Str(), attr(lr, attrDependency))
		}
	}
	if amp != 2 {
		t.Errorf("%d retry-amplification records, want one per trace (2)", amp)
	}

	// The next emission repeats the totals (cumulative) but no finding record.
	h.step(10 * time.Second)
	if n := len(h.metrics.AllMetrics()); n != 2 {
		t.Fatalf("%d metric emissions after two emit intervals, want 2", n)
	}
	if got := len(allRecords(h.logs)); got != len(recs) {
		t.Errorf("finding records repeated: %d after the second emission, want %d", got, len(recs))
	}
	ms = lastMetrics(t, h.metrics)
	if got := mustValue(t, ms, metricPhysicalCalls, leaf); got != 54 {
		t.Errorf("cumulative physical calls changed to %v without new spans", got)
	}
	h.shutdown()
}

func TestMetricsFormat(t *testing.T) {
	h := newSinkHarness(t, testConfig())
	h.consume(merged(t, "amplification-27-stock"))
	start := h.clock.Now()
	h.step(11 * time.Second)
	md := h.metrics.AllMetrics()[0]
	if md.ResourceMetrics().Len() != 1 || md.ResourceMetrics().At(0).ScopeMetrics().At(0).Scope().Name() != scopeName {
		t.Fatal("metrics should come in one resource with the connector's scope")
	}
	for name, m := range metricsByName(md) {
		if !strings.HasPrefix(name, "stormwatch.") || strings.HasSuffix(name, "_total") || m.Description() == "" || m.Unit() == "" {
			t.Errorf("%s: name, unit %q or description %q break the naming rules", name, m.Unit(), m.Description())
		}
		if m.Type() == pmetric.MetricTypeSum {
			s := m.Sum()
			if !s.IsMonotonic() || s.AggregationTemporality() != pmetric.AggregationTemporalityCumulative {
				t.Errorf("%s should be a cumulative monotonic sum", name)
			}
			for i := 0; i < s.DataPoints().Len(); i++ {
				if got := s.DataPoints().At(i).StartTimestamp().AsTime(); !got.Equal(start) {
					t.Errorf("%s starts at %s, want the connector's start %s", name, got, start)
				}
			}
		}
	}
	for _, name := range []string{metricAmplification, metricCallerAmp} {
		if m, ok := metricsByName(md)[name]; !ok || m.Type() != pmetric.MetricTypeGauge {
			t.Errorf("%s should be a gauge: a ratio does not sum", name)
		}
	}
	h.shutdown()
}

// The connector says how its windowed runs are paced, as the single binary's /metrics does: how
// long the last one took, and the least time to the next (window_interval, or longer after a
// long run).
func TestWindowPacingMetrics(t *testing.T) {
	cfg := testConfig()
	cfg.WindowInterval = 7 * time.Second
	h := newSinkHarness(t, cfg)
	h.consume(merged(t, "amplification-27-stock"))
	h.step(11 * time.Second)
	ms := metricsByName(h.metrics.AllMetrics()[len(h.metrics.AllMetrics())-1])
	if got := mustValue(t, ms, metricWindowInterval); got != 7 {
		t.Errorf("%s = %v, want 7 (window_interval)", metricWindowInterval, got)
	}
	if got := mustValue(t, ms, metricWindowRun); got < 0 || got > 5 {
		t.Errorf("%s = %v s, want the last run's length", metricWindowRun, got)
	}
	for _, name := range []string{metricWindowRun, metricWindowInterval} {
		if m := ms[name]; m.Type() != pmetric.MetricTypeGauge || m.Unit() != "s" {
			t.Errorf("%s: %v in %q, want a gauge in seconds", name, m.Type(), m.Unit())
		}
	}
	h.shutdown()
}

func TestSettleThenLateSpansReanalyze(t *testing.T) {
	h := newSinkHarness(t, testConfig())
	td := merged(t, "amplification-27-reference")
	// Hold back one leaf call of one trace: it arrives late.
	late, kept := splitOneLeafCall(t, td, "http://dep:8080")
	h.consume(kept)

	h.step(4 * time.Second) // quiet for 4s: not settled yet
	if got := h.s.an.Stats().PendingTraces; got != 2 {
		t.Fatalf("%d traces pending before the settle period, want 2", got)
	}
	if got := h.s.an.Report().Input.Traces; got != 0 {
		t.Fatalf("%d traces analyzed before the settle period", got)
	}
	h.step(7 * time.Second) // settled, and the first emission is due
	ms := lastMetrics(t, h.metrics)
	leaf := attrDependency + "=dep"
	if got := mustValue(t, ms, metricPhysicalCalls, leaf); got != 53 {
		t.Fatalf("physical calls %v before the late span, want 53", got)
	}
	first := len(allRecords(h.logs))

	h.consume(late)
	h.step(time.Second)
	if got := h.s.an.Stats().PendingTraces; got != 1 {
		t.Fatalf("%d traces pending after a late span, want 1", got)
	}
	h.step(10 * time.Second)
	ms = lastMetrics(t, h.metrics)
	if got := mustValue(t, ms, metricPhysicalCalls, leaf); got != 54 {
		t.Errorf("physical calls %v after re-analysis, want 54", got)
	}
	if got := mustValue(t, ms, metricLogicalOps, leaf); got != 2 {
		t.Errorf("logical operations %v after re-analysis, want 2 (a late span must not count its trace twice)", got)
	}
	if got := mustValue(t, ms, metricTracesAnalyzed); got != 2 {
		t.Errorf("traces analyzed %v, want 2", got)
	}
	// The re-analyzed trace's amplification finding changed (26 -> 27 calls): it is sent again,
	// but counted once.
	recs := allRecords(h.logs)
	if len(recs) <= first {
		t.Errorf("no new finding record after the re-analysis changed a finding")
	}
	if got := mustValue(t, ms, metricFindings, attrDetector+"=retry-amplification", attrSeverity+"=critical"); got != 2 {
		t.Errorf("retry-amplification findings counted %v times, want 2", got)
	}
	h.shutdown()
}

// splitOneLeafCall moves one CLIENT span toward dep (and nothing else) out of td.
func splitOneLeafCall(t *testing.T, td ptrace.Traces, dep string) (late, kept ptrace.Traces) {
	t.Helper()
	late = ptrace.NewTraces()
	kept = ptrace.NewTraces()
	td.CopyTo(kept)
	// The call and the callee's SERVER span under it arrive late together: held back alone, the
	// orphaned SERVER span would still show the call (the analyzer attaches it by time).
	var call pcommon.SpanID
	found := false
	rss := kept.ResourceSpans()
	for i := 0; i < rss.Len() && !found; i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len() && !found; j++ {
			sp := sss.At(j).Spans()
			for k := 0; k < sp.Len() && !found; k++ {
				s := sp.At(k)
				if u, ok := s.Attributes().Get("url.full"); ok && s.Kind() == ptrace.SpanKindClient && strings.HasPrefix(u.Str(), dep) {
					call, found = s.SpanID(), true
				}
			}
		}
	}
	if !found {
		t.Fatalf("no CLIENT span toward %s", dep)
	}
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			sss.At(j).Spans().RemoveIf(func(s ptrace.Span) bool {
				if s.SpanID() != call && s.ParentSpanID() != call {
					return false
				}
				rs := late.ResourceSpans().AppendEmpty()
				rss.At(i).Resource().CopyTo(rs.Resource())
				s.CopyTo(rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty())
				return true
			})
		}
	}
	return late, kept
}

func TestOnlyOneEdgeFeedsTheAnalyzer(t *testing.T) {
	td := merged(t, "amplification-27-reference")
	for _, tc := range []struct {
		name          string
		metrics, logs bool
	}{{"both", true, true}, {"metrics only", true, false}, {"logs only", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			var m *consumertest.MetricsSink
			var l *consumertest.LogsSink
			var mc consumer.Metrics
			var lc consumer.Logs
			if tc.metrics {
				m = new(consumertest.MetricsSink)
				mc = m
			}
			if tc.logs {
				l = new(consumertest.LogsSink)
				lc = l
			}
			h := newHarness(t, testConfig(), mc, lc)
			h.consume(td)
			h.step(11 * time.Second)
			if got := h.s.an.Report().Input.Spans; got != 184 {
				t.Errorf("analyzer holds %d spans, want 184 (each span once)", got)
			}
			if l != nil && l.LogRecordCount() == 0 {
				t.Error("no finding records")
			}
			if m != nil && len(m.AllMetrics()) != 1 {
				t.Error("no metrics")
			}
			h.shutdown()
		})
	}
}

func TestShutdownAnalyzesPendingAndSendsFinalFigures(t *testing.T) {
	h := newSinkHarness(t, testConfig())
	h.consume(merged(t, "amplification-27-stock"))
	h.step(time.Second) // nothing settled, nothing due
	if len(h.metrics.AllMetrics()) != 0 {
		t.Fatal("metrics emitted before the emit interval")
	}
	h.shutdown()
	ms := lastMetrics(t, h.metrics)
	if got := mustValue(t, ms, metricTracesAnalyzed); got != 2 {
		t.Errorf("traces analyzed at shutdown %v, want 2", got)
	}
	if h.logs.LogRecordCount() == 0 {
		t.Error("findings of traces analyzed at shutdown were not sent")
	}
}

func TestFailedLogExportIsOfferedAgain(t *testing.T) {
	m := new(consumertest.MetricsSink)
	failing := &flakyLogs{fail: 1}
	h := newHarness(t, testConfig(), m, failing)
	h.consume(merged(t, "amplification-27-reference"))
	h.step(11 * time.Second)
	if failing.sink.LogRecordCount() != 0 {
		t.Fatal("the failing consumer kept records")
	}
	h.step(10 * time.Second)
	want := len(offlineReport(t, "amplification-27-reference").Findings)
	if got := failing.sink.LogRecordCount(); got != want {
		t.Errorf("%d records after the retry, want %d", got, want)
	}
	h.step(10 * time.Second)
	if got := failing.sink.LogRecordCount(); got != want {
		t.Errorf("%d records after a third emission, want still %d", got, want)
	}
	h.shutdown()
}

type flakyLogs struct {
	mu   sync.Mutex
	fail int
	sink consumertest.LogsSink
}

func (f *flakyLogs) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }
func (f *flakyLogs) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	f.mu.Lock()
	if f.fail > 0 {
		f.fail--
		f.mu.Unlock()
		return errors.New("backend unavailable")
	}
	f.mu.Unlock()
	return f.sink.ConsumeLogs(ctx, ld)
}

func TestSharedPerComponentID(t *testing.T) {
	f := NewFactory()
	cfg := testConfig()
	a := connectortest.NewNopSettings(f.Type())
	b := connectortest.NewNopSettings(f.Type())
	ctx := context.Background()
	am, _ := f.CreateTracesToMetrics(ctx, a, cfg, consumertest.NewNop())
	al, _ := f.CreateTracesToLogs(ctx, a, cfg, consumertest.NewNop())
	bm, _ := f.CreateTracesToMetrics(ctx, b, cfg, consumertest.NewNop())
	if am.(*edge).s != al.(*edge).s {
		t.Error("one component ID should share one analyzer")
	}
	if am.(*edge).s == bm.(*edge).s {
		t.Error("two component IDs must not share an analyzer")
	}
	// Two factories (two collectors in one process) never share.
	other, _ := NewFactory().CreateTracesToMetrics(ctx, a, cfg, consumertest.NewNop())
	if other.(*edge).s == am.(*edge).s {
		t.Error("two factories share an analyzer: state leaks between collectors")
	}
	for _, c := range []component.Component{am, al, bm, other} {
		if err := c.Start(ctx, componenttest.NewNopHost()); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []component.Component{am, al, bm, other} {
		if err := c.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// After shutdown the ID is free: a reloaded collector gets a fresh analyzer.
	again, _ := f.CreateTracesToMetrics(ctx, a, cfg, consumertest.NewNop())
	if again.(*edge).s == am.(*edge).s {
		t.Error("a shut-down connector's analyzer was reused")
	}
}

func TestRealClockTicks(t *testing.T) {
	// The one test on the real clock: a short settle and emit interval, bounded wait.
	cfg := &Config{Settle: 50 * time.Millisecond, TickInterval: 10 * time.Millisecond, EmitInterval: 20 * time.Millisecond}
	f := NewFactory()
	set := connectortest.NewNopSettings(f.Type())
	m := new(consumertest.MetricsSink)
	c, err := f.CreateTracesToMetrics(context.Background(), set, cfg, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown(context.Background())
	if err := c.ConsumeTraces(context.Background(), merged(t, "amplification-27-stock")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if all := m.AllMetrics(); len(all) > 0 {
			if v, ok := value(t, metricsByName(all[len(all)-1]), metricTracesAnalyzed); ok && v == 2 {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the connector's clock never analyzed the traces")
}
