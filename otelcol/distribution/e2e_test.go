package distribution

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/suite"
)

// The deployment is docs/scale.md's, from its example files: examples/front.yaml and
// examples/backend-prometheus.yaml with their addresses from the environment, as documented. The
// test only overrides, on top (as a second --config would), the timing - so that it runs in a
// second rather than a minute - and adds a sink beside the Prometheus exporter to read exact
// values.
const backendOverride = `
connectors:
  stormwatch:
    settle: 300ms
    tick_interval: 50ms
    emit_interval: 100ms
exporters:
  sink:
service:
  pipelines:
    metrics:
      exporters: [prometheus, sink]
    logs:
      exporters: [sink]
` + quiet

const frontOverride = `
service:
` + quiet

// backendView is what one backend has said so far: its latest metrics and every finding record.
type backendView struct {
	metrics map[string]pmetric.Metric
	records []plog.LogRecord
}

func view(c *collector) backendView {
	v := backendView{metrics: map[string]pmetric.Metric{}}
	all := c.sinks.metrics.AllMetrics()
	if len(all) > 0 {
		rms := all[len(all)-1].ResourceMetrics()
		for i := 0; i < rms.Len(); i++ {
			sms := rms.At(i).ScopeMetrics()
			for j := 0; j < sms.Len(); j++ {
				for k := 0; k < sms.At(j).Metrics().Len(); k++ {
					m := sms.At(j).Metrics().At(k)
					v.metrics[m.Name()] = m
				}
			}
		}
	}
	for _, ld := range c.sinks.logs.AllLogs() {
		rls := ld.ResourceLogs()
		for i := 0; i < rls.Len(); i++ {
			sls := rls.At(i).ScopeLogs()
			for j := 0; j < sls.Len(); j++ {
				for k := 0; k < sls.At(j).LogRecords().Len(); k++ {
					v.records = append(v.records, sls.At(j).LogRecords().At(k))
				}
			}
		}
	}
	return v
}

// int sums the metric's points whose attribute key has value (all points when key is "").
func (v backendView) int(name, key, value string) int64 {
	if key == "" {
		return v.intWhere(name)
	}
	return v.intWhere(name, key, value)
}

// intWhere sums the points of a metric whose attributes have every key=value of kv (pairs).
func (v backendView) intWhere(name string, kv ...string) int64 {
	m, ok := v.metrics[name]
	if !ok {
		return 0
	}
	var dps pmetric.NumberDataPointSlice
	if m.Type() == pmetric.MetricTypeSum {
		dps = m.Sum().DataPoints()
	} else {
		dps = m.Gauge().DataPoints()
	}
	var n int64
next:
	for i := 0; i < dps.Len(); i++ {
		for k := 0; k+1 < len(kv); k += 2 {
			if a, ok := dps.At(i).Attributes().Get(kv[k]); !ok || a.Str() != kv[k+1] {
				continue next
			}
		}
		n += dps.At(i).IntValue()
	}
	return n
}

// traceFinding is a finding about one trace, as comparable text.
func traceFinding(detector, traceID, severity, summary string, spanIDs []string) string {
	return strings.Join([]string{detector, traceID, severity, summary, strings.Join(spanIDs, ",")}, " | ")
}

func recordFinding(lr plog.LogRecord) (string, string) {
	get := func(k string) string {
		v, _ := lr.Attributes().Get(k)
		return v.AsString()
	}
	var ids []string
	if v, ok := lr.Attributes().Get("stormwatch.finding.span_ids"); ok {
		for i := 0; i < v.Slice().Len(); i++ {
			ids = append(ids, v.Slice().At(i).Str())
		}
	}
	det := get("stormwatch.finding.detector")
	return det, traceFinding(det, lr.TraceID().String(), lr.SeverityText(), lr.Body().Str(), ids)
}

// perTrace reports whether a detector judges one trace at a time; the cross-trace ones see a
// backend's share of the traffic and are not expected to match one process.
func perTrace(detector string) bool {
	d, ok := suite.ByName(detector)
	return ok && d.Scope == analyzer.ScopeTrace
}

// TestShardedByTraceIDMatchesOneProcess is the deployment of docs/scale.md in one process: a
// front collector with the loadbalancing exporter (static resolver) and two backends with the
// stormwatch connector, on loopback. Traces from the fixtures, many copies with fresh trace ids,
// go to the front through the OpenTelemetry SDK's OTLP exporter. The backends' amplification
// counters must add up to what one stormwatch process says about the same spans, and every trace
// must have been analyzed whole by exactly one backend.
func TestShardedByTraceIDMatchesOneProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three collectors")
	}
	var backends []*collector
	var endpoints, scrape []string
	override := configFile(t, "backend-override", backendOverride)
	for i := range 2 {
		otlp, prom := freePort(t), freePort(t)
		t.Setenv("STORMWATCH_OTLP", otlp)
		t.Setenv("STORMWATCH_PROMETHEUS", prom)
		backends = append(backends, startCollector(t, fmt.Sprintf("backend-%d", i), "file:../examples/backend-prometheus.yaml", override))
		endpoints = append(endpoints, otlp)
		scrape = append(scrape, "http://"+prom+"/metrics")
	}
	frontAddr := freePort(t)
	t.Setenv("STORMWATCH_FRONT_GRPC", frontAddr)
	t.Setenv("STORMWATCH_FRONT_HTTP", freePort(t))
	t.Setenv("STORMWATCH_BACKENDS", "["+strings.Join(endpoints, ", ")+"]")
	front := startCollector(t, "front", "file:../examples/front.yaml", configFile(t, "front-override", frontOverride))

	// The traffic: several fixtures, ten copies each, one export per copy.
	var batches [][]sdktrace.ReadOnlySpan
	for _, name := range []string{"amplification-27-reference", "amplification-64-stock", "fanout-stock",
		"post-deadline-stock", "multi-service-healthy", "transient-retry-healthy-ref", "split-traces-reference"} {
		td := fixtureTraces(t, name)
		for k := range uint32(10) {
			batches = append(batches, toSDK(retrace(td, k+1)))
		}
	}
	want := offlineReport(t, batches)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(frontAddr), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		if err := exp.ExportSpans(ctx, b); err != nil {
			t.Fatalf("export to the front: %v", err)
		}
	}
	if err := exp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	// Per-trace findings of the one process, to be found exactly once across the backends.
	wantTrace := map[string]bool{}
	for _, f := range want.Findings {
		if perTrace(f.Detector) {
			wantTrace[traceFinding(f.Detector, f.TraceID, f.Severity.String(), f.Summary, f.SpanIDs)] = true
		}
	}
	if len(wantTrace) == 0 {
		t.Fatal("the reference report has no per-trace finding; the test would prove nothing")
	}

	// Wait (bounded) until the backends have analyzed every trace and reported its findings.
	var views []backendView
	deadline := time.Now().Add(60 * time.Second)
	for {
		views = views[:0]
		traces, pending, found := int64(0), int64(0), 0
		for _, b := range backends {
			v := view(b)
			views = append(views, v)
			traces += v.int("stormwatch.analyzed.traces", "", "")
			pending += v.int("stormwatch.pending_traces", "", "")
			for _, lr := range v.records {
				if det, _ := recordFinding(lr); perTrace(det) {
					found++
				}
			}
		}
		// A trace split across the backends would be counted once on each: the sum equal to one
		// process's count means no trace was split (a split never reaches it: the wait fails).
		if traces == int64(want.Input.Traces) && pending == 0 && found >= len(wantTrace) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60s the backends analyzed %d of %d traces (%d pending) and sent %d of %d per-trace findings",
				traces, want.Input.Traces, pending, found, len(wantTrace))
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Both backends got a share: the front really sharded.
	t.Logf("%d traces, %d spans, %d dependencies, %d per-trace findings; backends analyzed %d and %d traces",
		want.Input.Traces, want.Input.Spans, len(want.Dependencies), len(wantTrace),
		views[0].int("stormwatch.analyzed.traces", "", ""), views[1].int("stormwatch.analyzed.traces", "", ""))
	for i, v := range views {
		if v.int("stormwatch.analyzed.traces", "", "") == 0 {
			t.Errorf("backend %d analyzed no trace: the front did not spread the load", i)
		}
	}
	// Amplification: the counters sum to the single process's figures, dependency by dependency.
	for _, d := range want.Dependencies {
		var phys, logi int64
		for _, v := range views {
			phys += v.int("stormwatch.dependency.physical_calls", "stormwatch.dependency", d.Dependency)
			logi += v.int("stormwatch.dependency.logical_operations", "stormwatch.dependency", d.Dependency)
		}
		if phys != int64(d.PhysicalCalls) || logi != int64(d.LogicalOperations) {
			t.Errorf("%s: backends sum to %d calls for %d operations, one process says %d for %d",
				d.Dependency, phys, logi, d.PhysicalCalls, d.LogicalOperations)
		} else if amp := float64(phys) / float64(logi); amp != d.Amplification {
			t.Errorf("%s: summed amplification %v, one process %v", d.Dependency, amp, d.Amplification)
		}
	}
	// The same per (caller service, dependency).
	callers := 0
	for _, d := range want.Dependencies {
		for _, c := range d.ByCaller {
			callers++
			var phys, logi int64
			for _, v := range views {
				phys += v.intWhere("stormwatch.caller.physical_calls", "stormwatch.dependency", d.Dependency, "stormwatch.caller", c.Caller)
				logi += v.intWhere("stormwatch.caller.logical_operations", "stormwatch.dependency", d.Dependency, "stormwatch.caller", c.Caller)
			}
			if phys != int64(c.PhysicalCalls) || logi != int64(c.LogicalOperations) {
				t.Errorf("%s from %s: backends sum to %d calls for %d operations, one process says %d for %d",
					d.Dependency, c.Caller, phys, logi, c.PhysicalCalls, c.LogicalOperations)
			}
		}
	}
	if callers <= len(want.Dependencies) {
		t.Errorf("%d (caller, dependency) pairs for %d dependencies: the traffic should have a dependency with two callers", callers, len(want.Dependencies))
	}
	var spansSum int64
	for _, v := range views {
		spansSum += v.int("stormwatch.analyzed.spans", "", "")
	}
	if spansSum != int64(want.Input.Spans) {
		t.Errorf("backends analyzed %d spans, one process %d", spansSum, want.Input.Spans)
	}
	// Whole traces on exactly one backend: each per-trace finding arrives once, identical to the
	// single process's (a split trace would show fewer calls, and appear on both backends).
	owner := map[string]int{}
	for i, v := range views {
		for _, lr := range v.records {
			det, key := recordFinding(lr)
			if !perTrace(det) {
				continue
			}
			if !wantTrace[key] {
				t.Errorf("backend %d reported a finding one process does not: %s", i, key)
			}
			tid := lr.TraceID().String()
			if prev, ok := owner[tid]; ok && prev != i {
				t.Errorf("trace %s was analyzed on two backends (%d and %d)", tid, prev, i)
			}
			owner[tid] = i
		}
	}
	for key := range wantTrace {
		found := false
		for _, v := range views {
			for _, lr := range v.records {
				if _, k := recordFinding(lr); k == key {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("no backend reported: %s", key)
		}
	}

	// The same figures reach Prometheus, under the names docs/scale.md gives.
	for i, url := range scrape {
		body := get(t, url)
		if os.Getenv("STORMWATCH_DUMP_PROMETHEUS") != "" {
			t.Log(body)
		}
		for _, name := range []string{"stormwatch_dependency_physical_calls_total", "stormwatch_dependency_logical_operations_total",
			"stormwatch_dependency_amplification", "stormwatch_findings_total", "stormwatch_analyzed_traces_total",
			"stormwatch_window_run_seconds", "stormwatch_window_interval_seconds"} {
			if !strings.Contains(body, name) {
				t.Errorf("backend %d's Prometheus endpoint has no %s:\n%s", i, name, firstLines(body, 40))
			}
		}
	}
	front.stop(t)
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func firstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[:min(n, len(lines))], "\n")
}
