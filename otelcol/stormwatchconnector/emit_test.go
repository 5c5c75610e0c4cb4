package stormwatchconnector

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/stormwatch/stormwatch/analyzer"
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
