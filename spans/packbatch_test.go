package spans_test

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/spans/spanstest"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
)

// checkPacked fails t unless packed is ss packed by trace: the traces in the order each first
// appears, each block the bytes AppendPacked writes for that trace's spans in the order they
// came (so it unpacks to them), and each trace's facts those of its spans.
func checkPacked(t *testing.T, ss []spans.Span, packed []spans.PackedTrace) {
	t.Helper()
	var ids []spans.TraceID
	byTrace := map[spans.TraceID][]spans.Span{}
	for _, s := range ss {
		if _, ok := byTrace[s.TraceID]; !ok {
			ids = append(ids, s.TraceID)
		}
		byTrace[s.TraceID] = append(byTrace[s.TraceID], s)
	}
	if len(packed) != len(ids) {
		t.Fatalf("%d traces packed, the spans have %d", len(packed), len(ids))
	}
	for k, pt := range packed {
		want := byTrace[ids[k]]
		if pt.ID != ids[k] || pt.Spans != len(want) {
			t.Fatalf("packed trace %d: %s with %d spans, want %s with %d", k, pt.ID, pt.Spans, ids[k], len(want))
		}
		if w := spans.AppendPacked(nil, want); !bytes.Equal(pt.Block, w) {
			t.Fatalf("trace %s: the block differs from AppendPacked of its spans", pt.ID)
		}
		got, err := spans.UnpackSpans(pt.Block)
		if err != nil {
			t.Fatalf("trace %s: %v", pt.ID, err)
		}
		if d := spanstest.Diff(&spans.Batch{Spans: want}, &spans.Batch{Spans: got}); d != "" {
			t.Fatalf("trace %s unpacks to other spans:\n%s", pt.ID, d)
		}
		var unset, roots int
		var latest int64
		for _, s := range want {
			if s.StartUnixNano <= 0 || s.EndUnixNano <= 0 {
				unset++
			} else {
				latest = max(latest, s.StartUnixNano, s.EndUnixNano)
			}
			if s.Kind == spans.KindConsumer && s.ParentID.IsZero() && len(s.Links) == 1 {
				roots++
			}
		}
		if pt.UnsetTimes != unset || pt.Latest != latest || pt.RootLinks != roots {
			t.Fatalf("trace %s: facts %d unset, latest %d, %d root links; want %d, %d, %d",
				pt.ID, pt.UnsetTimes, pt.Latest, pt.RootLinks, unset, latest, roots)
		}
	}
}

// TestPackByTrace: every fixture's spans packed by trace, as recorded (each trace's spans mostly
// one run) and dealt out one span of each trace in turn (every batch interleaved), in batches of
// several sizes, one batch packed after another in the same memory: each trace's block is what
// AppendPacked makes of its spans, and its facts are theirs.
func TestPackByTrace(t *testing.T) {
	for _, f := range spanstest.FixtureTraces(t, spans.DecodeOptions{AllAttributes: true}) {
		var grouped, dealt []spans.Span
		for _, tr := range f.Traces {
			grouped = append(grouped, tr...)
		}
		for i := 0; len(dealt) < len(grouped); i++ {
			for _, tr := range f.Traces {
				if i < len(tr) {
					dealt = append(dealt, tr[i])
				}
			}
		}
		for _, order := range []struct {
			name string
			ss   []spans.Span
		}{{"grouped", grouped}, {"dealt", dealt}} {
			for _, n := range []int{1, 7, 100, len(grouped)} {
				t.Run(fmt.Sprintf("%s/%s/%d", f.Name, order.name, n), func(t *testing.T) {
					b := &spans.Batch{}
					for ss := order.ss; len(ss) > 0; ss = ss[min(n, len(ss)):] {
						b.Spans = slices.Clone(ss[:min(n, len(ss))])
						b.Pack()
						checkPacked(t, b.Spans, b.Packed)
					}
				})
			}
		}
	}
}

// TestDecodePackByTrace: both decoders hand the spans over packed by trace when asked - the
// protobuf one straight from the wire - into a batch decoded into before (the collector's
// recycled batches) as into a new one: the spans they decode without it, packed, with Spans left
// empty and Len counting them; without it, span values and Packed nil.
func TestDecodePackByTrace(t *testing.T) {
	opt := spans.DecodeOptions{PackByTrace: true}
	for _, c := range []struct {
		name   string
		body   []byte
		decode func([]byte, spans.DecodeOptions) (*spans.Batch, error)
		into   func(*spans.Batch, []byte, spans.DecodeOptions) error
	}{
		{"protobuf", protoSeeds(t)[0], spans.DecodeProto, spans.DecodeProtoInto},
		{"json", jsonSeeds(t)[0], spans.DecodeJSON, spans.DecodeJSONInto},
	} {
		t.Run(c.name, func(t *testing.T) {
			want, err := c.decode(slices.Clone(c.body), spans.DecodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			fresh, err := c.decode(slices.Clone(c.body), opt)
			if err != nil {
				t.Fatal(err)
			}
			checkPacked(t, want.Spans, fresh.Packed)
			b := &spans.Batch{}
			for range 3 {
				if err := c.into(b, slices.Clone(c.body), opt); err != nil {
					t.Fatal(err)
				}
				if len(b.Spans) != 0 || b.Packed == nil || b.Len() != len(want.Spans) {
					t.Fatalf("%d spans, packed %v, Len %d; want 0, true, %d", len(b.Spans), b.Packed != nil, b.Len(), len(want.Spans))
				}
				checkPacked(t, want.Spans, b.Packed)
			}
			if err := c.into(b, slices.Clone(c.body), spans.DecodeOptions{}); err != nil {
				t.Fatal(err)
			}
			if b.Packed != nil || len(b.Spans) != len(want.Spans) {
				t.Fatal("packed without PackByTrace")
			}
		})
	}
}

// TestPackFromOneSpanAtATime: spans made one at a time when their turn comes, each in the memory
// of the one before (as the connector converts pdata), from every fixture dealt out one span of
// each trace in turn, pack as Pack packs the same spans as values, with one Packing used batch
// after batch.
func TestPackFromOneSpanAtATime(t *testing.T) {
	var p spans.Packing
	for _, f := range spanstest.FixtureTraces(t, spans.DecodeOptions{AllAttributes: true}) {
		var dealt []spans.Span
		for i := 0; ; i++ {
			n := len(dealt)
			for _, tr := range f.Traces {
				if i < len(tr) {
					dealt = append(dealt, tr[i])
				}
			}
			if len(dealt) == n {
				break
			}
		}
		var scratch spans.Span
		var attrs []spans.Attr
		made := 0
		got := p.PackFrom(len(dealt), func(i int) spans.TraceID { return dealt[i].TraceID }, func(i int) *spans.Span {
			// The memory the last span was made in, cleared and used again.
			clear(attrs)
			scratch = dealt[i]
			if dealt[i].Attrs != nil { // nil and empty pack apart
				attrs = append(attrs[:0], dealt[i].Attrs...)
				scratch.Attrs = attrs
			}
			made++
			return &scratch
		})
		if made != len(dealt) {
			t.Fatalf("%s: %d spans made for %d", f.Name, made, len(dealt))
		}
		checkPacked(t, dealt, got)
	}
}

// TestDecodePackByTraceRenderedValues: values the decoder renders into text (arrays, maps) of
// one length, on spans of one trace, each packed as its own. The packer knows a string it wrote
// by its address: had the decoder rendered each span's values into the same bytes, every span
// after the first would have been packed with the first one's value.
func TestDecodePackByTraceRenderedValues(t *testing.T) {
	// One rendered value a span: two would share a slot of the packer's address cache and hide
	// the fault.
	var ss []*tracepb.Span
	for i, v := range []*commonpb.AnyValue{arr(str("a")), arr(str("b")), kvlist(kv("k", str("c"))), kvlist(kv("k", str("d")))} {
		sp := okSpan(byte(i + 1))
		sp.Attributes = []*commonpb.KeyValue{kv("x", v)}
		ss = append(ss, sp)
	}
	body := marshal(t, request(&tracepb.ResourceSpans{ScopeSpans: []*tracepb.ScopeSpans{{Spans: ss}}}))
	opt := spans.DecodeOptions{AllAttributes: true}
	want, err := spans.DecodeProto(body, opt)
	if err != nil {
		t.Fatal(err)
	}
	opt.PackByTrace = true
	got, err := spans.DecodeProto(body, opt)
	if err != nil {
		t.Fatal(err)
	}
	checkPacked(t, want.Spans, got.Packed)
}

// TestDecodePackByTraceIDsNotFirst: the protobuf decoder groups spans by the trace id in their
// first field, as every SDK writes it, and must still answer as DecodeProto where the rest of a
// span says otherwise: a second trace id (the last wins), an invalid span id after a valid trace
// id, a zero trace id first and a valid one after it, the ids last.
func TestDecodePackByTraceIDsNotFirst(t *testing.T) {
	field := func(b []byte, num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
	}
	span := func(fields ...[]byte) []byte {
		var b []byte
		for i := 0; i < len(fields); i += 2 {
			b = field(b, protowire.Number(fields[i][0]), fields[i+1])
		}
		return field(b, 5, []byte("name"))
	}
	one := []byte{1}
	two := []byte{2}
	cases := map[string][][]byte{
		"second trace id":      {span(one, id16(1), two, id8(1), one, id16(2)), span(one, id16(1), two, id8(2))},
		"invalid span id":      {span(one, id16(1), two, id8(0)), span(one, id16(1), two, id8(2))},
		"zero trace id first":  {span(one, id16(0), two, id8(1), one, id16(3)), span(one, id16(3), two, id8(2))},
		"ids last":             {span(two, id8(1), one, id16(4)), span(one, id16(4), two, id8(2))},
		"short span id, valid": {span(one, id16(5), two, []byte{1}), span(one, id16(5), two, id8(3))},
	}
	for name, ss := range cases {
		t.Run(name, func(t *testing.T) {
			var scope []byte
			for _, s := range ss {
				scope = field(scope, 2, s) // ScopeSpans.spans
			}
			body := field(nil, 1, field(nil, 2, scope)) // request.resource_spans.scope_spans
			want, err := spans.DecodeProto(body, spans.DecodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, reuse := range []bool{false, true} {
				got := &spans.Batch{}
				if reuse {
					if err := spans.DecodeProtoInto(got, protoSeeds(t)[0], spans.DecodeOptions{PackByTrace: true}); err != nil {
						t.Fatal(err)
					}
					err = spans.DecodeProtoInto(got, body, spans.DecodeOptions{PackByTrace: true})
				} else {
					got, err = spans.DecodeProto(body, spans.DecodeOptions{PackByTrace: true})
				}
				if err != nil {
					t.Fatal(err)
				}
				checkPacked(t, want.Spans, got.Packed)
				if got.Rejected != want.Rejected || len(got.Spans) != 0 {
					t.Fatalf("%d rejected, %d span values; want %d, 0", got.Rejected, len(got.Spans), want.Rejected)
				}
			}
		})
	}
}

// TestDecodePackByTraceAfterFallback: a request the protobuf decoder packs from span values (a
// span's ids not what its first field said) leaves nothing behind for the next request decoded
// into the same batch, whose body may be the same buffer holding other bytes, as the
// collector's pooled bodies do.
func TestDecodePackByTraceAfterFallback(t *testing.T) {
	field := func(b []byte, num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
	}
	// A zero span id after a valid trace id: the fallback.
	odd := field(nil, 1, field(nil, 2, field(nil, 2, field(field(nil, 1, id16(7)), 2, id8(0)))))
	good := protoSeeds(t)[0]
	want, err := spans.DecodeProto(slices.Clone(good), spans.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	opt := spans.DecodeOptions{PackByTrace: true}
	b := &spans.Batch{}
	body := make([]byte, 0, max(len(odd), len(good)))
	for range 3 {
		body = append(body[:0], odd...)
		if err := spans.DecodeProtoInto(b, body, opt); err != nil || b.Rejected != 1 || b.Len() != 0 {
			t.Fatalf("the odd request: err %v, %d rejected, %d spans", err, b.Rejected, b.Len())
		}
		body = append(body[:0], good...) // the same memory, other bytes
		if err := spans.DecodeProtoInto(b, body, opt); err != nil {
			t.Fatalf("the next request: %v", err)
		}
		checkPacked(t, want.Spans, b.Packed)
		if b.Rejected != want.Rejected {
			t.Fatalf("%d rejected, want %d", b.Rejected, want.Rejected)
		}
	}
}

// TestDecodePackByTraceBoundedMemory: a body of tiny spans - rejects all, or kept spans as small
// as they come - costs the protobuf decoder packing straight from the wire no more memory than
// decoding it into span values (25 times the body, for the smallest spans), and
// at most twice the body's size where that holds less: a reject is not remembered.
func TestDecodePackByTraceBoundedMemory(t *testing.T) {
	field := func(b []byte, num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
	}
	for name, sp := range map[string][]byte{
		"empty spans": {},
		"kept spans":  field(field(nil, 1, id16(9)), 2, id8(1)),
	} {
		t.Run(name, func(t *testing.T) {
			var scope []byte
			for len(scope) < 1<<20 {
				scope = field(scope, 2, sp)
			}
			body := field(nil, 1, field(nil, 2, scope))
			allocated := func(opt spans.DecodeOptions) (uint64, *spans.Batch) {
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				b, err := spans.DecodeProto(body, opt)
				runtime.ReadMemStats(&after)
				if err != nil {
					t.Fatal(err)
				}
				return after.TotalAlloc - before.TotalAlloc, b
			}
			values, _ := allocated(spans.DecodeOptions{})
			packed, b := allocated(spans.DecodeOptions{PackByTrace: true})
			t.Logf("%d spans, %d rejected: %d bytes allocated for a body of %d, %d as span values", b.Len(), b.Rejected, packed, len(body), values)
			if packed > max(values, 2*uint64(len(body))) {
				t.Errorf("%d bytes allocated for a body of %d, more than the span values' %d", packed, len(body), values)
			}
		})
	}
}
