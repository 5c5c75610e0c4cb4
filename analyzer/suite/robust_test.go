package suite_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/spans"
)

// Broken data must not make any detector panic or fail: every detector of the suite runs over
// parent cycles, self-parents, orphans, negative and zero durations, spans with no attributes,
// refusals and fallback spans without a parent, 10,000 sibling attempts, and hedges that end
// before they start. A detector that panics shows up in the report's notes ("detector X ...").
func TestSuiteSurvivesBrokenTraces(t *testing.T) {
	res := func(s string) *spans.Resource { return &spans.Resource{ServiceName: s} }
	id := func(n int) spans.SpanID { return spans.SpanID{7, byte(n >> 16), byte(n >> 8), byte(n), 1} }
	tr := func(n int) spans.TraceID { return spans.TraceID{9, byte(n), 1} }
	get := func(url string, status int64) []spans.Attr {
		return []spans.Attr{spans.StringAttr(spans.AttrHTTPMethod, "POST"), spans.StringAttr(spans.AttrURLFull, url),
			spans.IntAttr(spans.AttrHTTPStatus, status)}
	}
	span := func(trace, n, parent int, kind spans.Kind, svc string, start, end int64, attrs ...spans.Attr) spans.Span {
		s := spans.Span{TraceID: tr(trace), SpanID: id(n), Kind: kind, Resource: res(svc), StartUnixNano: start, EndUnixNano: end, Attrs: attrs}
		if parent >= 0 {
			s.ParentID = id(parent)
		}
		return s
	}
	const ms = int64(time.Millisecond)
	var ss []spans.Span
	// 1: a cycle and a self-parent among retried calls.
	ss = append(ss, span(1, 1, 2, spans.KindServer, "a", 0, 10*ms), span(1, 2, 1, spans.KindClient, "a", 1, 5*ms, get("http://b:80/x", 503)...),
		span(1, 3, 3, spans.KindClient, "a", 6*ms, 4*ms, get("http://b:80/x", 404)...))
	// 2: orphans, zero and negative durations, no attributes at all.
	ss = append(ss, span(2, 10, 99, spans.KindClient, "a", 0, 0), span(2, 11, 99, spans.KindClient, "a", 5, 1),
		span(2, 12, 99, spans.KindClient, "", 0, 0, spans.StringAttr(spans.AttrAttemptKind, "hedge")))
	// 3: refusal and fallback spans with no parent, and a fallback span under nothing useful.
	ss = append(ss, span(3, 20, -1, spans.KindInternal, "o", 0, 1, spans.StringAttr(spans.AttrOutcome, "refused"),
		spans.StringAttr(spans.AttrStopReason, "breaker_open")),
		span(3, 21, -1, spans.KindInternal, "o", 0, 1, spans.StringAttr(spans.AttrAttemptKind, "fallback")),
		span(3, 22, 21, spans.KindClient, "o", 2, 3, get("http://c:80/", 200)...))
	// 4: 10,000 immediate sibling retries of one POST without a key, with Retry-After garbage.
	ss = append(ss, span(4, 30, -1, spans.KindServer, "edge", 0, 40_000*ms))
	for i := range 10_000 {
		a := append(get("http://dep:80/pay", 503), spans.StringAttr(spans.AttrResHeaderRetryAfter, "soon"),
			spans.IntAttr(spans.AttrDeadline, 1))
		ss = append(ss, span(4, 100+i, 30, spans.KindClient, "edge", int64(i)*3*ms, int64(i)*3*ms+2*ms, a...))
	}
	a := engine.New(engine.Config{Detectors: suite.Default()})
	if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: ss}); err != nil {
		t.Fatal(err)
	}
	a.Flush()
	r := a.Report()
	for _, n := range r.Notes {
		if strings.HasPrefix(n, "detector ") { // runDetector's "detector X panicked: ..." / "detector X: ..."
			t.Errorf("note: %s", n)
		}
	}
	got := map[string]int{}
	for _, f := range r.Findings {
		got[f.Detector]++
	}
	// The 10,000 sends are unbounded, immediate and an unsafe write.
	for _, d := range []string{"unbounded-retries", "no-backoff", "unsafe-write-retry"} {
		if got[d] == 0 {
			t.Errorf("no %s finding on 10,000 immediate POST retries; got %v", d, got)
		}
	}
}
