package stormwatchconnector

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormwatch/stormwatch/fixtures"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/spans/spanstest"
)

// checkAgainstWire converts td and compares it with the wire decoder's reading of the same traces
// marshalled to OTLP protobuf, packed by trace: the connector must hand the analyzer exactly what
// the single binary does - the same traces in the same order, each with the same facts and
// unpacking to the same spans (nil and empty lists apart, as the packed form keeps them). It
// returns the batch and each trace's spans unpacked.
func checkAgainstWire(t *testing.T, td ptrace.Traces, all bool) (*spans.Batch, [][]spans.Span) {
	t.Helper()
	body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	want, err := spans.DecodeProto(body, spans.DecodeOptions{AllAttributes: all, PackByTrace: true})
	if err != nil {
		t.Fatalf("DecodeProto: %v", err)
	}
	got := newConverter(all).convert(td)
	if got.Spans != nil {
		t.Fatalf("the batch carries %d span values besides the packed traces", len(got.Spans))
	}
	return got, samePacked(t, want, got)
}

// samePacked fails t unless got's packed traces are want's (see checkAgainstWire) and returns
// got's unpacked.
func samePacked(t *testing.T, want, got *spans.Batch) [][]spans.Span {
	t.Helper()
	if got.Rejected != want.Rejected || got.RejectReason != want.RejectReason {
		t.Fatalf("rejected %d (%q), want %d (%q)", got.Rejected, got.RejectReason, want.Rejected, want.RejectReason)
	}
	if len(got.Packed) != len(want.Packed) {
		t.Fatalf("%d traces packed, want %d", len(got.Packed), len(want.Packed))
	}
	var out [][]spans.Span
	for k := range want.Packed {
		w, g := &want.Packed[k], &got.Packed[k]
		if g.ID != w.ID || g.Spans != w.Spans || g.UnsetTimes != w.UnsetTimes || g.Latest != w.Latest || g.RootLinks != w.RootLinks {
			t.Fatalf("trace %d: %s with %d spans, facts %d unset, latest %d, %d root links; want %s with %d, %d, %d, %d",
				k, g.ID, g.Spans, g.UnsetTimes, g.Latest, g.RootLinks, w.ID, w.Spans, w.UnsetTimes, w.Latest, w.RootLinks)
		}
		ws, err := spans.UnpackSpans(w.Block)
		if err != nil {
			t.Fatalf("trace %s from DecodeProto: %v", w.ID, err)
		}
		gs, err := spans.UnpackSpans(g.Block)
		if err != nil {
			t.Fatalf("trace %s from pdata does not unpack: %v", g.ID, err)
		}
		if d := spanstest.Diff(&spans.Batch{Spans: ws}, &spans.Batch{Spans: gs}); d != "" {
			t.Fatalf("trace %s from pdata differs from DecodeProto's:\n%s", g.ID, d)
		}
		if !reflect.DeepEqual(ws, gs) {
			t.Fatalf("trace %s from pdata differs from DecodeProto's in a nil or empty list", g.ID)
		}
		out = append(out, gs)
	}
	return out
}

// A request with many traces interleaved (past the slice-to-map switch), spread over several
// resources, comes out as one block a trace, in order of first appearance, each trace's spans in
// request order; the span without ids is rejected.
func TestConvertGroupsSpansByTrace(t *testing.T) {
	td := ptrace.NewTraces()
	for r := range 3 {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr(spans.AttrServiceName, fmt.Sprintf("svc-%d", r))
		ss := rs.ScopeSpans().AppendEmpty().Spans()
		for tr := range 12 {
			s := ss.AppendEmpty()
			s.SetTraceID(pcommon.TraceID{byte(tr + 1)})
			s.SetSpanID(pcommon.SpanID{byte(r + 1), byte(tr + 1)})
		}
	}
	bad := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().AppendEmpty() // no ids: rejected
	bad.SetName("bad")
	for _, all := range []bool{false, true} {
		b, traces := checkAgainstWire(t, td, all)
		if len(b.Packed) != 12 || b.Rejected != 1 {
			t.Fatalf("%d traces, %d rejected; want 12 and 1", len(b.Packed), b.Rejected)
		}
		for k, tr := range traces {
			if len(tr) != 3 {
				t.Fatalf("trace %d has %d spans, want 3", k, len(tr))
			}
			for i, s := range tr {
				if s.TraceID[0] != byte(k+1) || s.SpanID[0] != byte(i+1) || s.Service() != fmt.Sprintf("svc-%d", i) {
					t.Fatalf("trace %d span %d is trace %d span %d of %s: not grouped by trace in request order",
						k, i, s.TraceID[0], s.SpanID[0], s.Service())
				}
			}
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
	b, traces := checkAgainstWire(t, td, false)
	_, all := checkAgainstWire(t, td, true)

	// Beyond agreeing with the wire decoder, pin the rules themselves.
	if len(b.Packed) != 4 || b.Rejected != 1 || b.RejectReason != spans.RejectInvalidID {
		t.Fatalf("got %d traces, %d rejected (%q); want 4 traces (of a span each) and 1 rejected", len(b.Packed), b.Rejected, b.RejectReason)
	}
	s := &traces[0][0]
	if s.Service() != "42" || s.Instance() != "i-1" {
		t.Errorf("service %q instance %q, want \"42\" and \"i-1\"", s.Service(), s.Instance())
	}
	if _, ok := s.Attr("custom.attr"); ok {
		t.Error("an attribute outside the well-known set was kept without all_attributes")
	}
	if _, ok := all[0][0].Attr("custom.attr"); !ok {
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
	if after := traces[1][0]; after.Links != nil || after.Str(spans.AttrServerAddress) != "dep" || len(after.Attrs) != 1 {
		t.Errorf("the span after the rejected one: links %v, attributes %v; want none and its own", after.Links, after.Attrs)
	}
	if traces[2][0].Service() != "" || traces[3][0].Service() != "null" {
		t.Errorf("missing and empty service.name read as %q and %q, want \"\" and \"null\"", traces[2][0].Service(), traces[3][0].Service())
	}
}

// The well-known keys reach the packer as the canonical strings, which it writes as one byte each
// and which unpack as the canonical strings again.
func TestConvertInternsWellKnownKeys(t *testing.T) {
	b := newConverter(false).convert(edgeCaseTraces())
	ss, err := spans.UnpackSpans(b.Packed[0].Block)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range ss[0].Attrs {
		if unsafeStringData(a.Key) != unsafeStringData(canonical(a.Key)) {
			t.Errorf("key %q is not the canonical string", a.Key)
		}
	}
}

func TestConvertEmpty(t *testing.T) {
	b := newConverter(false).convert(ptrace.NewTraces())
	if b.Spans != nil || b.Packed != nil || b.Rejected != 0 {
		t.Fatalf("empty traces gave %+v", b)
	}
}

// TestConvertReusedBuffersMatchFresh: a conversion into buffers that an earlier, different
// request filled (and reset cleared, as withBatch does) gives the traces a fresh conversion
// gives - the connector converts every request into pooled buffers - and reset leaves nothing of
// the request in them.
func TestConvertReusedBuffersMatchFresh(t *testing.T) {
	c := newConverter(true)
	var reqs []ptrace.Traces
	for _, fc := range fixtures.Cases {
		reqs = append(reqs, merged(t, fc.Name))
	}
	reqs = append(reqs, edgeCaseTraces(), ptrace.NewTraces())
	fresh := make([]*spans.Batch, len(reqs))
	for i, td := range reqs {
		fresh[i] = c.convert(td)
	}
	cb := &convBuf{}
	// Every request after every other, big ones before small ones and after them, in one buffer.
	for _, prev := range reqs {
		for i, td := range reqs {
			c.convertInto(prev, cb)
			cb.reset()
			if got := c.convertInto(td, cb); !sameBlocks(got, fresh[i]) && !reflect.DeepEqual(unpackAll(t, got), unpackAll(t, fresh[i])) {
				samePacked(t, c.convert(td), got) // says where
				t.Fatal("conversion into used buffers differs in a nil or empty list")
			}
			cb.reset()
			for name, n := range map[string]int{
				"span": nonZero([]spans.Span{cb.sp}), "resources": nonZero(cb.res),
				"resource attributes": nonZero(cb.resAttrs), "attributes": nonZero(cb.attrs),
				"links": nonZero(cb.links), "events": nonZero(cb.events), "display strings": nonZero(cb.shown),
			} {
				if n >= 0 {
					t.Fatalf("%s: element %d still holds the request's after reset", name, n)
				}
			}
		}
	}
}

// sameBlocks tells whether a and b hold the same packed bytes, trace by trace, and rejections.
// (Blocks may differ and still unpack alike: the packer finds strings written before by the
// address of their bytes too, and display strings are made anew on every conversion.)
func sameBlocks(a, b *spans.Batch) bool {
	if a.Rejected != b.Rejected || len(a.Packed) != len(b.Packed) {
		return false
	}
	for k := range a.Packed {
		if !bytes.Equal(a.Packed[k].Block, b.Packed[k].Block) {
			return false
		}
	}
	return true
}

// unpackAll is b's packed traces unpacked, with the rejected count as a last, empty trace's length.
func unpackAll(t *testing.T, b *spans.Batch) [][]spans.Span {
	t.Helper()
	var out [][]spans.Span
	for _, pt := range b.Packed {
		ss, err := spans.UnpackSpans(pt.Block)
		if err != nil {
			t.Fatalf("trace %s does not unpack: %v", pt.ID, err)
		}
		out = append(out, ss)
	}
	return append(out, make([]spans.Span, b.Rejected))
}

// nonZero is the index of the first element of s's array (as far as its capacity) that is not
// zero, or -1.
func nonZero[T any](s []T) int {
	for i := range s[:cap(s)] {
		if !reflect.ValueOf(&s[:cap(s)][i]).Elem().IsZero() {
			return i
		}
	}
	return -1
}
