package metrics

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/spans"
)

// fakeSource hands out the report it holds and counts the snapshots taken.
type fakeSource struct {
	mu    sync.Mutex
	rep   analyzer.Report
	stats engine.StoreStats
	taken int
}

func (f *fakeSource) Summary(now time.Time) *engine.Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.taken++
	return &engine.Snapshot{AtUnixNano: now.UnixNano(), Report: f.rep, Stats: f.stats}
}

func (f *fakeSource) set(r analyzer.Report) {
	f.mu.Lock()
	f.rep = r
	f.mu.Unlock()
}

// clock is a settable clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestCacheTakesOneSnapshotPerInterval(t *testing.T) {
	src := &fakeSource{}
	clk := &clock{t: time.Unix(1000, 0)}
	c := NewCache(src, time.Second, clk.now)
	first := c.Latest()
	for range 100 {
		if c.Latest() != first {
			t.Fatal("a fresh cache must hand out the same snapshot")
		}
	}
	if src.taken != 1 {
		t.Fatalf("100 reads within the interval took %d snapshots, want 1", src.taken)
	}
	clk.t = clk.t.Add(999 * time.Millisecond)
	c.Latest()
	if src.taken != 1 {
		t.Fatalf("before the interval ended: %d snapshots", src.taken)
	}
	clk.t = clk.t.Add(time.Millisecond)
	if c.Latest() == first || src.taken != 2 {
		t.Fatalf("after the interval: %d snapshots, want a new one", src.taken)
	}
	// A clock that steps back (NTP) must not pin an old snapshot forever.
	clk.t = clk.t.Add(-time.Hour)
	c.Latest()
	if src.taken != 3 {
		t.Fatalf("after the clock stepped back: %d snapshots, want 3", src.taken)
	}
	c.Fresh()
	if src.taken != 4 {
		t.Fatalf("Fresh must take a snapshot: %d", src.taken)
	}
}

func TestCacheConcurrentReadersShareOneSnapshot(t *testing.T) {
	src := &fakeSource{}
	c := NewCache(src, time.Hour, nil)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() { c.Latest() })
	}
	wg.Wait()
	if src.taken != 1 {
		t.Fatalf("50 concurrent readers took %d snapshots, want 1", src.taken)
	}
}

var (
	window = &analyzer.Detector{Name: "retry-budget-exceeded", Scope: analyzer.ScopeWindow}
	perTr  = &analyzer.Detector{Name: "retry-amplification"}
)

func storm() analyzer.Report {
	return analyzer.Report{
		Version: analyzer.ReportVersion,
		Input:   analyzer.InputStats{Spans: 158, Traces: 2, Operations: 26},
		Dependencies: []analyzer.DependencyStats{
			{Dependency: "http://dep:8080", Service: "dep", PhysicalCalls: 54, LogicalOperations: 2, Amplification: 27,
				Outcomes: map[string]int{"503": 54},
				ByCaller: []analyzer.CallerStats{{Caller: "adapter", PhysicalCalls: 54, LogicalOperations: 2, Amplification: 27}}},
			{Dependency: "http://cache:6379", PhysicalCalls: 3, LogicalOperations: 2, Amplification: 1.5,
				Outcomes: map[string]int{"ok": 2, "timeout": 1}},
		},
		Findings: []analyzer.Finding{
			{Detector: "retry-amplification", Severity: analyzer.SeverityCritical, TraceID: "t1", Service: "edge", Dependency: "http://dep:8080"},
			{Detector: "retry-amplification", Severity: analyzer.SeverityCritical, TraceID: "t2", Service: "edge", Dependency: "http://dep:8080"},
			{Detector: "retry-budget-exceeded", Severity: analyzer.SeverityWarning, TraceID: "t1", Service: "adapter", Dependency: "http://dep:8080"},
		},
	}
}

func TestCollectorSeries(t *testing.T) {
	src := &fakeSource{rep: storm(), stats: engine.StoreStats{PendingTraces: 4, TruncatedTraces: 1, TruncatedSpans: 7}}
	c := NewCollector(NewCache(src, -1, nil), []*analyzer.Detector{window, perTr})
	want := map[string]float64{
		`stormwatch_dependency_amplification_ratio{stormwatch_dependency="http://cache:6379",stormwatch_dependency_service=""}`:                                 1.5,
		`stormwatch_dependency_amplification_ratio{stormwatch_dependency="http://dep:8080",stormwatch_dependency_service="dep"}`:                                27,
		`stormwatch_dependency_attempts_total{stormwatch_attempt_outcome="503",stormwatch_dependency="http://dep:8080",stormwatch_dependency_service="dep"}`:    54,
		`stormwatch_dependency_attempts_total{stormwatch_attempt_outcome="ok",stormwatch_dependency="http://cache:6379",stormwatch_dependency_service=""}`:      2,
		`stormwatch_dependency_attempts_total{stormwatch_attempt_outcome="timeout",stormwatch_dependency="http://cache:6379",stormwatch_dependency_service=""}`: 1,
		`stormwatch_dependency_logical_operations_total{stormwatch_dependency="http://cache:6379",stormwatch_dependency_service=""}`:                            2,
		`stormwatch_dependency_logical_operations_total{stormwatch_dependency="http://dep:8080",stormwatch_dependency_service="dep"}`:                           2,
		`stormwatch_dependency_physical_calls_total{stormwatch_dependency="http://cache:6379",stormwatch_dependency_service=""}`:                                3,
		`stormwatch_dependency_physical_calls_total{stormwatch_dependency="http://dep:8080",stormwatch_dependency_service="dep"}`:                               54,
		`stormwatch_caller_physical_calls_total{stormwatch_caller="adapter",stormwatch_dependency="http://dep:8080",stormwatch_dependency_service="dep"}`:       54,
		`stormwatch_caller_logical_operations_total{stormwatch_caller="adapter",stormwatch_dependency="http://dep:8080",stormwatch_dependency_service="dep"}`:   2,
		`stormwatch_caller_amplification_ratio{stormwatch_caller="adapter",stormwatch_dependency="http://dep:8080",stormwatch_dependency_service="dep"}`:        27,
		`stormwatch_findings_total{stormwatch_finding_detector="retry-amplification",stormwatch_finding_severity="critical"}`:                                   2,
		`stormwatch_findings_total{stormwatch_finding_detector="retry-budget-exceeded",stormwatch_finding_severity="warning"}`:                                  1,
		// Split by dependency and caller, for alerts that route by them; the cross-trace finding
		// also as a gauge of what its window shows now.
		`stormwatch_dependency_findings_total{stormwatch_caller="edge",stormwatch_dependency="http://dep:8080",stormwatch_dependency_service="dep",stormwatch_finding_detector="retry-amplification",stormwatch_finding_severity="critical"}`:     2,
		`stormwatch_dependency_findings_total{stormwatch_caller="adapter",stormwatch_dependency="http://dep:8080",stormwatch_dependency_service="dep",stormwatch_finding_detector="retry-budget-exceeded",stormwatch_finding_severity="warning"}`: 1,
		`stormwatch_window_findings{stormwatch_caller="adapter",stormwatch_dependency="http://dep:8080",stormwatch_dependency_service="dep",stormwatch_finding_detector="retry-budget-exceeded",stormwatch_finding_severity="warning"}`:           1,
		`stormwatch_analyzed_spans_total`:      158,
		`stormwatch_analyzed_traces_total`:     2,
		`stormwatch_analyzed_operations_total`: 26,
		`stormwatch_pending_traces`:            4,
		`stormwatch_truncated_spans_total`:     7,
		`stormwatch_truncated_traces_total`:    1,
	}
	got := gather(t, c)
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected series %s", k)
		}
	}
}

// A live analyzer's windowed runs are paced by their length: the scrape says how long the last
// one took and how long the next waits, so an operator can see why cross-trace findings come
// later under load. An analyzer that never runs them live (WindowEvery not positive) has neither.
func TestCollectorWindowPacing(t *testing.T) {
	src := &fakeSource{rep: storm(), stats: engine.StoreStats{WindowRun: 300 * time.Millisecond, WindowEvery: 15 * time.Second}}
	got := gather(t, NewCollector(NewCache(src, -1, nil), []*analyzer.Detector{window, perTr}))
	if got[NameWindowRun] != 0.3 || got[NameWindowInterval] != 15 {
		t.Errorf("%s = %v, %s = %v; want 0.3 and 15", NameWindowRun, got[NameWindowRun], NameWindowInterval, got[NameWindowInterval])
	}
	src = &fakeSource{rep: storm(), stats: engine.StoreStats{WindowEvery: -1}}
	got = gather(t, NewCollector(NewCache(src, -1, nil), []*analyzer.Detector{window, perTr}))
	for _, name := range []string{NameWindowRun, NameWindowInterval} {
		if _, ok := got[name]; ok {
			t.Errorf("offline analyzer: %s present", name)
		}
	}
}

// gather scrapes c through a pedantic registry (which checks the series against Describe) and
// renders each series as name{label="value",...} in label order, as the exposition does.
func gather(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, p := range m.GetLabel() {
				ls = append(ls, p.GetName()+`="`+p.GetValue()+`"`)
			}
			k := mf.GetName()
			if len(ls) > 0 {
				k += "{" + strings.Join(ls, ",") + "}"
			}
			v := m.GetGauge().GetValue()
			if mf.GetType() == dto.MetricType_COUNTER {
				v = m.GetCounter().GetValue()
			}
			out[k] = v
		}
	}
	return out
}

// TestFindingsCountedOnceAcrossReanalysis: a finding is counted when first seen, not at every
// scrape or re-analysis; a cross-trace finding that cites another example trace is the same
// finding; one that leaves the report and comes back counts again (as in the connector).
func TestFindingsCountedOnceAcrossReanalysis(t *testing.T) {
	src := &fakeSource{rep: storm()}
	c := NewCollector(NewCache(src, -1, nil), []*analyzer.Detector{window, perTr})
	count := func(det, sev string) float64 {
		t.Helper()
		return gather(t, c)[NameFindings+`{`+LabelDetector+`="`+det+`",`+LabelSeverity+`="`+sev+`"}`]
	}
	for range 3 {
		if n := count("retry-amplification", "critical"); n != 2 {
			t.Fatalf("repeated scrapes: %v findings, want 2", n)
		}
	}
	r := storm()
	r.Findings[0].Summary = "late span: 28 calls" // re-analysis changed its content, not its key
	r.Findings[2].TraceID = "t9"                  // the cross-trace finding cites another example
	r.Findings = append(r.Findings, analyzer.Finding{Detector: "retry-amplification", Severity: analyzer.SeverityCritical,
		TraceID: "t3", Service: "edge", Dependency: "http://dep:8080"})
	src.set(r)
	if n := count("retry-amplification", "critical"); n != 3 {
		t.Errorf("after one new finding: %v, want 3", n)
	}
	if n := count("retry-budget-exceeded", "warning"); n != 1 {
		t.Errorf("the cross-trace finding with a new example trace was counted again: %v", n)
	}
	src.set(analyzer.Report{})
	count("retry-amplification", "critical")
	// The window no longer shows the budget finding: its gauge goes away (stale to Prometheus),
	// so an alert on it resolves.
	for k := range gather(t, c) {
		if strings.HasPrefix(k, NameWindowFindings+"{") {
			t.Errorf("window finding still exposed after the window dropped it: %s", k)
		}
	}
	src.set(storm())
	if n := count("retry-amplification", "critical"); n != 5 {
		t.Errorf("findings that left and came back: %v, want 5", n)
	}
}

// TestCollectorReusesSeriesForTheSameSnapshot: scrapes within the cache interval build nothing
// new and take no snapshot.
func TestCollectorReusesSeriesForTheSameSnapshot(t *testing.T) {
	src := &fakeSource{rep: storm()}
	c := NewCollector(NewCache(src, time.Hour, nil), nil)
	for range 20 {
		if n := len(gather(t, c)); n != 22 {
			t.Fatalf("%d series, want 22", n)
		}
	}
	if src.taken != 1 {
		t.Errorf("20 scrapes took %d snapshots, want 1", src.taken)
	}
}

// TestTruncatedSpansCountedAfterAnalysis: spans that reach a trace already at the per-trace cap
// and already analyzed are not analyzed, and are counted, every one, in the series.
func TestTruncatedSpansCountedAfterAnalysis(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	a := engine.New(engine.Config{MaxTraceSpans: 8, Settle: time.Second, Now: clk.now})
	trace := spans.TraceID{1}
	batch := func(from, n int) *spans.Batch {
		b := &spans.Batch{}
		for i := from; i < from+n; i++ {
			b.Spans = append(b.Spans, spans.Span{TraceID: trace, SpanID: spans.SpanID{byte(i >> 16), byte(i >> 8), byte(i), 1},
				StartUnixNano: clk.t.UnixNano(), EndUnixNano: clk.t.UnixNano() + 1e6})
		}
		return b
	}
	ctx := context.Background()
	if err := a.ConsumeBatch(ctx, batch(0, 8)); err != nil {
		t.Fatal(err)
	}
	clk.t = clk.t.Add(2 * time.Second)
	a.Settle(clk.t)
	for i := range 10 {
		if err := a.ConsumeBatch(ctx, batch(8+1000*i, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	c := NewCollector(NewCache(a, -1, clk.now), nil)
	got := gather(t, c)
	if got["stormwatch_truncated_spans_total"] != 10000 || got["stormwatch_truncated_traces_total"] != 1 ||
		got["stormwatch_analyzed_spans_total"] != 8 {
		t.Errorf("truncated spans %v, traces %v, analyzed %v; want 10000, 1, 8", got["stormwatch_truncated_spans_total"],
			got["stormwatch_truncated_traces_total"], got["stormwatch_analyzed_spans_total"])
	}
}

// TestThousandPortsOfOneServiceAreOneSeries: a callee reached on a new port by every trace (a
// test container, a service behind pod IPs) is one dependency, so one series per metric - named
// by its service.name where its SERVER spans are seen, by its host where they are not.
func TestThousandPortsOfOneServiceAreOneSeries(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	a := engine.New(engine.Config{Settle: time.Millisecond, Now: clk.now})
	caller, callee := &spans.Resource{ServiceName: "checkout"}, &spans.Resource{ServiceName: "inventory"}
	b := &spans.Batch{}
	for i := range 1000 {
		trace := spans.TraceID{byte(i >> 8), byte(i), 1}
		at := clk.t.UnixNano() + int64(i)*1e6
		id := func(n byte) spans.SpanID { return spans.SpanID{byte(i >> 8), byte(i), n} }
		port := 40000 + i
		b.Spans = append(b.Spans,
			spans.Span{TraceID: trace, SpanID: id(1), Kind: spans.KindServer, Name: "GET /", Resource: caller, StartUnixNano: at, EndUnixNano: at + 9e5},
			// Traced callee, on loopback: named inventory.
			spans.Span{TraceID: trace, SpanID: id(2), ParentID: id(1), Kind: spans.KindClient, Name: "GET", Resource: caller,
				StartUnixNano: at + 1e5, EndUnixNano: at + 3e5, Attrs: []spans.Attr{spans.StringAttr(spans.AttrHTTPMethod, "GET"),
					spans.StringAttr(spans.AttrURLFull, fmt.Sprintf("http://127.0.0.1:%d/items", port)), spans.IntAttr(spans.AttrHTTPStatus, 200)}},
			spans.Span{TraceID: trace, SpanID: id(3), ParentID: id(2), Kind: spans.KindServer, Name: "GET /items", Resource: callee,
				StartUnixNano: at + 1e5, EndUnixNano: at + 3e5, Attrs: []spans.Attr{spans.IntAttr(spans.AttrHTTPStatus, 200)}},
			// Untraced callee: named by its host, whatever the port.
			spans.Span{TraceID: trace, SpanID: id(4), ParentID: id(1), Kind: spans.KindClient, Name: "GET", Resource: caller,
				StartUnixNano: at + 4e5, EndUnixNano: at + 6e5, Attrs: []spans.Attr{spans.StringAttr(spans.AttrHTTPMethod, "GET"),
					spans.StringAttr(spans.AttrURLFull, fmt.Sprintf("http://pricing.internal:%d/price", port)), spans.IntAttr(spans.AttrHTTPStatus, 200)}},
		)
	}
	if err := a.ConsumeBatch(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	clk.t = clk.t.Add(2 * time.Second)
	a.Settle(clk.t)
	got := gather(t, NewCollector(NewCache(a, -1, clk.now), nil))
	series := map[string]float64{}
	for k, v := range got {
		if strings.HasPrefix(k, "stormwatch_dependency_physical_calls_total{") {
			series[k] = v
		}
	}
	want := map[string]float64{
		`stormwatch_dependency_physical_calls_total{stormwatch_dependency="inventory",stormwatch_dependency_service="inventory"}`: 1000,
		`stormwatch_dependency_physical_calls_total{stormwatch_dependency="pricing.internal",stormwatch_dependency_service=""}`:   1000,
	}
	if !maps.Equal(series, want) {
		t.Errorf("%d series %v, want %v", len(series), series, want)
	}
	// The report keeps the addresses as bounded detail: eight listed; of the others, 56 counted
	// one by one (64 in all) and the 936 past those as one more - a lower bound.
	for _, d := range a.Report().Dependencies {
		if len(d.Origins) != 8 || d.MoreOrigins != 64-8+1 {
			t.Errorf("%s: %d origins listed, %d more; want 8 and 57", d.Dependency, len(d.Origins), d.MoreOrigins)
		}
	}
}
