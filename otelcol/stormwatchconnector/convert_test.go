package stormwatchconnector

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormwatch/stormwatch/fixtures"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/spans/spanstest"
)

// checkAgainstWire converts td directly and compares with the wire decoder's reading of the same
// traces marshalled to OTLP protobuf: the connector must see exactly what the single binary sees.
func checkAgainstWire(t *testing.T, td ptrace.Traces, all bool) *spans.Batch {
	t.Helper()
	body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	want, err := spans.DecodeProto(body, spans.DecodeOptions{AllAttributes: all})
	if err != nil {
		t.Fatalf("DecodeProto: %v", err)
	}
	got := newConverter(all).convert(td)
	// The converter groups spans by trace (first appearance first, request order within a
	// trace); the wire decoder keeps request order. Same spans, same order within each trace.
	want.Spans = groupedByTrace(want.Spans)
	if d := spanstest.Diff(want, got); d != "" {
		t.Fatalf("pdata conversion differs from DecodeProto:\n%s", d)
	}
	return got
}

func groupedByTrace(ss []spans.Span) []spans.Span {
	if ss == nil {
		return nil
	}
	var order []spans.TraceID
	by := map[spans.TraceID][]spans.Span{}
	for _, s := range ss {
		if _, ok := by[s.TraceID]; !ok {
			order = append(order, s.TraceID)
		}
		by[s.TraceID] = append(by[s.TraceID], s)
	}
	out := make([]spans.Span, 0, len(ss))
	for _, id := range order {
		out = append(out, by[id]...)
	}
	return out
}

// A request with many traces interleaved (past the slice-to-map switch) comes out grouped.
func TestConvertGroupsSpansByTrace(t *testing.T) {
	td := ptrace.NewTraces()
	for r := range 3 {
		ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
		for tr := range 12 {
			s := ss.AppendEmpty()
			s.SetTraceID(pcommon.TraceID{byte(tr + 1)})
			s.SetSpanID(pcommon.SpanID{byte(r + 1), byte(tr + 1)})
		}
	}
	bad := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().AppendEmpty() // no ids: rejected
	bad.SetName("bad")
	b := checkAgainstWire(t, td, false)
	if len(b.Spans) != 36 || b.Rejected != 1 {
		t.Fatalf("%d spans, %d rejected; want 36 and 1", len(b.Spans), b.Rejected)
	}
	for i, s := range b.Spans {
		if s.TraceID[0] != byte(i/3+1) || s.SpanID[0] != byte(i%3+1) {
			t.Fatalf("span %d is trace %d span %d: not grouped by trace in request order", i, s.TraceID[0], s.SpanID[0])
		}
	}
}

func TestConvertMatchesDecodeProtoOnFixtures(t *testing.T) {
	for _, c := range fixtures.Cases {
		t.Run(c.Name, func(t *testing.T) {
			for _, td := range fixtureTraces(t, c.Name) {
				checkAgainstWire(t, td, false)
				checkAgainstWire(t, td, true)
			}
		})
	}
}

// edgeCaseTraces has what fixtures lack: every value type, zero ids, links without ids, a
// non-string service name, attributes outside the well-known set, empty scopes.
func edgeCaseTraces() ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutInt(spans.AttrServiceName, 42)
	rs.Resource().Attributes().PutStr(spans.AttrServiceInstance, "i-1")
	rs.Resource().Attributes().PutStr("host.name", "h1")
	rs.ScopeSpans().AppendEmpty() // a scope with no spans
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("scope-a")

	s := ss.Spans().AppendEmpty()
	s.SetTraceID(pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	s.SetSpanID(pcommon.SpanID{1, 1, 1, 1, 1, 1, 1, 1})
	s.SetParentSpanID(pcommon.SpanID{2, 2, 2, 2, 2, 2, 2, 2})
	s.SetName("GET")
	s.SetKind(ptrace.SpanKindClient)
	s.SetStartTimestamp(1_000)
	s.SetEndTimestamp(900) // ends before it starts: kept as sent
	s.Status().SetCode(ptrace.StatusCodeError)
	s.Status().SetMessage("boom")
	a := s.Attributes()
	a.PutStr(spans.AttrHTTPMethod, "GET")
	a.PutInt(spans.AttrHTTPStatus, 503)
	a.PutDouble(spans.AttrBackoff, 12.5)
	a.PutBool(spans.AttrIdempotencyKey, true)
	a.PutEmpty(spans.AttrOutcome)
	a.PutEmptyBytes(spans.AttrURLPath).FromRaw([]byte{0xde, 0xad})
	arr := a.PutEmptySlice(spans.AttrURLFull)
	arr.AppendEmpty().SetStr("a\"b")
	arr.AppendEmpty().SetInt(7)
	arr.AppendEmpty() // empty value inside an array
	m := a.PutEmptyMap(spans.AttrOpName)
	m.PutStr("k", "v")
	m.PutEmptySlice("nested").AppendEmpty().SetDouble(0.25)
	a.PutStr("custom.attr", "dropped unless all")
	ev := s.Events().AppendEmpty()
	ev.SetName("exception")
	ev.SetTimestamp(950)
	ev.Attributes().PutStr("exception.type", "io")
	ev.Attributes().PutStr("not.known", "x")
	l := s.Links().AppendEmpty()
	l.SetTraceID(pcommon.TraceID{9})
	l.SetSpanID(pcommon.SpanID{9})
	l.Attributes().PutInt(spans.AttrAttempt, 1)
	s.Links().AppendEmpty() // no ids: dropped
	half := s.Links().AppendEmpty()
	half.SetTraceID(pcommon.TraceID{8}) // trace id only: dropped
	s.Links().AppendEmpty().SetSpanID(pcommon.SpanID{7})

	bad := ss.Spans().AppendEmpty() // no trace id: rejected
	bad.SetSpanID(pcommon.SpanID{3})
	bad.Attributes().PutStr(spans.AttrHTTPMethod, "POST")
	bad.Links().AppendEmpty().SetTraceID(pcommon.TraceID{4})

	ok := ss.Spans().AppendEmpty() // a root after a rejected span keeps its own attributes
	ok.SetTraceID(pcommon.TraceID{1})
	ok.SetSpanID(pcommon.SpanID{4})
	ok.Attributes().PutStr(spans.AttrServerAddress, "dep")

	rs2 := td.ResourceSpans().AppendEmpty() // no service.name at all
	s2 := rs2.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s2.SetTraceID(pcommon.TraceID{5})
	s2.SetSpanID(pcommon.SpanID{5})
	s2.SetKind(ptrace.SpanKindServer)
	rs3 := td.ResourceSpans().AppendEmpty() // an empty service.name value
	rs3.Resource().Attributes().PutEmpty(spans.AttrServiceName)
	s3 := rs3.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s3.SetTraceID(pcommon.TraceID{6})
	s3.SetSpanID(pcommon.SpanID{6})
	return td
}

func TestConvertMatchesDecodeProtoOnEdgeCases(t *testing.T) {
	td := edgeCaseTraces()
	b := checkAgainstWire(t, td, false)
	all := checkAgainstWire(t, td, true)

	// Beyond agreeing with the wire decoder, pin the rules themselves.
	if len(b.Spans) != 4 || b.Rejected != 1 || b.RejectReason != spans.RejectInvalidID {
		t.Fatalf("got %d spans, %d rejected (%q); want 4 spans and 1 rejected", len(b.Spans), b.Rejected, b.RejectReason)
	}
	s := &b.Spans[0]
	if s.Service() != "42" || s.Instance() != "i-1" {
		t.Errorf("service %q instance %q, want \"42\" and \"i-1\"", s.Service(), s.Instance())
	}
	if _, ok := s.Attr("custom.attr"); ok {
		t.Error("an attribute outside the well-known set was kept without all_attributes")
	}
	if _, ok := all.Spans[0].Attr("custom.attr"); !ok {
		t.Error("all_attributes dropped an attribute")
	}
	if got := s.Str(spans.AttrURLFull); got != `["a\"b",7,null]` {
		t.Errorf("array rendered as %s", got)
	}
	if got := s.Str(spans.AttrOpName); got != `{"k":"v","nested":[0.25]}` {
		t.Errorf("map rendered as %s", got)
	}
	if got := s.Str(spans.AttrURLPath); got != "dead" {
		t.Errorf("bytes rendered as %s", got)
	}
	if len(s.Links) != 1 || len(s.Events) != 1 || len(s.Events[0].Attrs) != 1 {
		t.Errorf("links %d events %d event attrs %v, want 1, 1 and only exception.type", len(s.Links), len(s.Events), s.Events)
	}
	if b.Spans[2].Service() != "" || b.Spans[3].Service() != "null" {
		t.Errorf("missing and empty service.name read as %q and %q, want \"\" and \"null\"", b.Spans[2].Service(), b.Spans[3].Service())
	}
}

func TestConvertInternsWellKnownKeys(t *testing.T) {
	td := edgeCaseTraces()
	b := newConverter(false).convert(td)
	for _, a := range b.Spans[0].Attrs {
		if unsafeStringData(a.Key) != unsafeStringData(canonical(a.Key)) {
			t.Errorf("key %q is not the canonical string", a.Key)
		}
	}
}

func TestConvertEmpty(t *testing.T) {
	b := newConverter(false).convert(ptrace.NewTraces())
	if b.Spans != nil || b.Rejected != 0 {
		t.Fatalf("empty traces gave %+v", b)
	}
}

// TestConvertReusedBuffersMatchFresh: a conversion into buffers that an earlier, different
// request filled (and reset cleared, as withBatch does) gives exactly the batch a fresh conversion
// gives - the connector converts every request into pooled buffers - and reset leaves nothing of
// the request in them.
func TestConvertReusedBuffersMatchFresh(t *testing.T) {
	c := newConverter(true)
	var reqs []ptrace.Traces
	for _, fc := range fixtures.Cases {
		reqs = append(reqs, merged(t, fc.Name))
	}
	reqs = append(reqs, ptrace.NewTraces())
	cb := &convBuf{}
	// Every request after every other, big ones before small ones and after them, in one buffer.
	for _, prev := range reqs {
		for _, td := range reqs {
			c.convertInto(prev, cb)
			cb.reset()
			got := c.convertInto(td, cb)
			if d := spanstest.Diff(c.convert(td), got); d != "" {
				t.Fatalf("conversion into used buffers differs:\n%s", d)
			}
			cb.reset()
			for i := range cb.spans[:cap(cb.spans)] {
				if s := cb.spans[:cap(cb.spans)][i]; s.Name != "" || s.Attrs != nil || s.Resource != nil {
					t.Fatalf("span %d still holds %q after reset", i, s.Name)
				}
			}
			for i, a := range cb.attrs[:cap(cb.attrs)] {
				if a != (spans.Attr{}) {
					t.Fatalf("attribute %d still holds %+v after reset", i, a)
				}
			}
		}
	}
}
