package unboundedretries_test

import (
	"context"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/analyzer/passes/unboundedretries"
	"github.com/stormwatch/stormwatch/spans"
)

func TestTestdata(t *testing.T) { detectortest.Run(t, unboundedretries.Detector, "testdata") }

// A reference-client loop that failed twice and says nothing about why it stopped is reported
// (info); the same loop with resilience.stop_reason is not.
func TestMissingStopReason(t *testing.T) {
	for _, stop := range []string{"", "max_attempts"} {
		res := &spans.Resource{ServiceName: "edge"}
		id := func(n byte) spans.SpanID { return spans.SpanID{3, n, 1} }
		tr := spans.TraceID{4, 2}
		opAttrs := []spans.Attr{spans.StringAttr(spans.AttrOpID, "op-1"), spans.StringAttr(spans.AttrOpName, "catalog.read")}
		if stop != "" {
			opAttrs = append(opAttrs, spans.StringAttr(spans.AttrStopReason, stop))
		}
		attempt := func(n byte, start int64) spans.Span {
			return spans.Span{TraceID: tr, SpanID: id(10 + n), ParentID: id(2), Kind: spans.KindClient, Resource: res,
				StartUnixNano: start, EndUnixNano: start + 1e6, Status: spans.StatusError,
				Attrs: []spans.Attr{spans.StringAttr(spans.AttrHTTPMethod, "GET"), spans.StringAttr(spans.AttrURLFull, "http://catalog:80/x"),
					spans.IntAttr(spans.AttrHTTPStatus, 503), spans.StringAttr(spans.AttrOpID, "op-1"), spans.IntAttr(spans.AttrAttempt, int64(n))}}
		}
		ss := []spans.Span{
			{TraceID: tr, SpanID: id(1), Kind: spans.KindServer, Resource: res, StartUnixNano: 1, EndUnixNano: 1e9},
			{TraceID: tr, SpanID: id(2), ParentID: id(1), Kind: spans.KindInternal, Resource: res, StartUnixNano: 2, EndUnixNano: 5e8, Attrs: opAttrs},
			attempt(1, 1e6), attempt(2, 1e8),
		}
		a := engine.New(engine.Config{Detectors: []*analyzer.Detector{unboundedretries.Detector}})
		if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: ss}); err != nil {
			t.Fatal(err)
		}
		a.Flush()
		got := a.Report().Findings
		switch {
		case stop == "" && (len(got) != 1 || got[0].Severity != analyzer.SeverityInfo || !got[0].Evidence["stop_reason"].Equal(analyzer.Text(""))):
			t.Errorf("no stop reason: findings %+v, want one info finding", got)
		case stop != "" && len(got) != 0:
			t.Errorf("stop_reason %s: findings %+v, want none", stop, got)
		}
	}
}
