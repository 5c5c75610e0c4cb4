package deadlinenotpropagated_test

import (
	"context"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/passes/deadlinenotpropagated"
	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/spans"
)

func TestTestdata(t *testing.T) { detectortest.Run(t, deadlinenotpropagated.Detector, "testdata") }

// edge's operation has a deadline; api, called inside it, runs its own operation (reference
// attributes) with no deadline at all: the deadline stopped at api. With the deadline passed
// down, nothing is reported.
func TestDeadlineStoppedAtAService(t *testing.T) {
	const deadline = int64(2e9)
	for _, propagated := range []bool{false, true} {
		edge, api := &spans.Resource{ServiceName: "edge"}, &spans.Resource{ServiceName: "api"}
		id := func(n byte) spans.SpanID { return spans.SpanID{6, n, 1} }
		tr := spans.TraceID{5, 1}
		call := func(n, parent byte, r *spans.Resource, url, op string, start, end int64) spans.Span {
			return spans.Span{TraceID: tr, SpanID: id(n), ParentID: id(parent), Kind: spans.KindClient, Resource: r,
				StartUnixNano: start, EndUnixNano: end, Attrs: []spans.Attr{spans.StringAttr(spans.AttrHTTPMethod, "GET"),
					spans.StringAttr(spans.AttrURLFull, url), spans.IntAttr(spans.AttrHTTPStatus, 200),
					spans.StringAttr(spans.AttrOpID, op), spans.IntAttr(spans.AttrAttempt, 1)}}
		}
		apiOp := []spans.Attr{spans.StringAttr(spans.AttrOpID, "api-1"), spans.StringAttr(spans.AttrOpName, "catalog.read")}
		if propagated {
			apiOp = append(apiOp, spans.IntAttr(spans.AttrDeadline, deadline))
		}
		ss := []spans.Span{
			{TraceID: tr, SpanID: id(1), Kind: spans.KindServer, Resource: edge, StartUnixNano: 1e6, EndUnixNano: 9e8},
			{TraceID: tr, SpanID: id(2), ParentID: id(1), Kind: spans.KindInternal, Resource: edge, StartUnixNano: 2e6, EndUnixNano: 8e8,
				Attrs: []spans.Attr{spans.StringAttr(spans.AttrOpID, "edge-1"), spans.IntAttr(spans.AttrDeadline, deadline)}},
			call(3, 2, edge, "http://api:80/items", "edge-1", 3e6, 7e8),
			{TraceID: tr, SpanID: id(4), ParentID: id(3), Kind: spans.KindServer, Resource: api, StartUnixNano: 4e6, EndUnixNano: 6e8},
			{TraceID: tr, SpanID: id(5), ParentID: id(4), Kind: spans.KindInternal, Resource: api, StartUnixNano: 5e6, EndUnixNano: 5e8, Attrs: apiOp},
			call(6, 5, api, "http://catalog:80/x", "api-1", 6e6, 4e8),
		}
		a := engine.New(engine.Config{Detectors: []*analyzer.Detector{deadlinenotpropagated.Detector}})
		if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: ss}); err != nil {
			t.Fatal(err)
		}
		a.Flush()
		got := a.Report().Findings
		if propagated {
			if len(got) != 0 {
				t.Errorf("propagated deadline reported: %+v", got)
			}
			continue
		}
		if len(got) != 1 || got[0].Evidence["kind"].String() != "not-propagated" || got[0].Service != "api" {
			t.Errorf("findings %+v, want one not-propagated finding for api", got)
		}
	}
}
