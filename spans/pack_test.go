package spans_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/stormwatch/stormwatch/analyzer/workload"
	"github.com/stormwatch/stormwatch/internal/cputime"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/spans/spanstest"
)

func roundTrip(t *testing.T, ss []spans.Span) []byte {
	t.Helper()
	b := spans.AppendPacked(nil, ss)
	got, err := spans.UnpackSpans(b)
	if err != nil {
		t.Fatalf("UnpackSpans: %v", err)
	}
	if len(ss) == 0 && len(got) == 0 {
		return b
	}
	if !reflect.DeepEqual(ss, got) {
		t.Fatalf("round trip differs:\n%s", spanstest.Diff(&spans.Batch{Spans: ss}, &spans.Batch{Spans: got}))
	}
	if n, err := spans.PackedLen(b); err != nil || n != len(ss) {
		t.Fatalf("PackedLen = %d, %v; want %d", n, err, len(ss))
	}
	return b
}

func TestPackRoundTripFixtures(t *testing.T) {
	var nSpans, nBytes int
	// All attributes kept, so the packed form meets the attribute types the well-known set drops.
	for _, f := range spanstest.FixtureTraces(t, spans.DecodeOptions{AllAttributes: true}) {
		t.Run(f.Name, func(t *testing.T) {
			for _, ss := range f.Traces {
				b := roundTrip(t, ss)
				nSpans += len(ss)
				nBytes += len(b)
			}
		})
	}
	t.Logf("%d spans packed in %d bytes (%.0f B/span, strings written inline at every occurrence: decoded, not interned)",
		nSpans, nBytes, float64(nBytes)/float64(nSpans))
}

// TestPackRoundTripEdgeCases covers every field and value type, nil and empty lists, ids that
// differ from the first span's trace, and times at the ends of the int64 range.
func TestPackRoundTripEdgeCases(t *testing.T) {
	tid := spans.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	other := spans.TraceID{0xff}
	res := &spans.Resource{ServiceName: "api", ServiceInstance: "api-1",
		Attrs: []spans.Attr{spans.StringAttr("deployment.environment.name", "prod"), spans.IntAttr("n", -7)}}
	sameValue := &spans.Resource{ServiceName: "api", ServiceInstance: "api-1",
		Attrs: []spans.Attr{spans.StringAttr("deployment.environment.name", "prod"), spans.IntAttr("n", -7)}}
	emptyAttrs := &spans.Resource{ServiceName: "db", Attrs: []spans.Attr{}}
	allTypes := []spans.Attr{
		{Key: "empty", Type: spans.ValueEmpty},
		spans.StringAttr("s", "value"),
		spans.StringAttr("s-empty", ""),
		spans.IntAttr("i", math.MinInt64),
		spans.IntAttr("i-max", math.MaxInt64),
		spans.DoubleAttr("d", -0.5),
		spans.DoubleAttr("nan", math.NaN()),
		spans.DoubleAttr("zero", 0),
		spans.BoolAttr("t", true),
		spans.BoolAttr("f", false),
		{Key: "other", Str: `["a",1]`, Type: spans.ValueOther},
		{Key: "odd", Str: "both", Num: 42, Type: spans.ValueString}, // not what a decoder makes, kept anyway
		{Key: "type-beyond", Num: 3, Type: 200},
		{Key: "type-63", Str: "x", Type: 63},
		{Key: "", Str: "no key", Type: spans.ValueString},
		{Key: "unicode é😀", Str: "\x00\xff", Type: spans.ValueString},
	}
	long := strings.Repeat("x", 70_000) // a length varint of three bytes
	// Strings that start at the same address but differ in length: found again by address and
	// length, never by address alone.
	shared := strings.Repeat("abcdefgh", 4)
	prefixes := []spans.Attr{spans.StringAttr(shared[:3], shared[:5]), spans.StringAttr(shared[:5], shared[:3]),
		spans.StringAttr(shared, shared[:3]), spans.StringAttr(shared[:3], shared)}
	cases := map[string][]spans.Span{
		"shared prefixes": {{TraceID: tid, Attrs: prefixes}, {TraceID: tid, Name: shared[:5], Attrs: prefixes[1:]}},
		"nil":             nil,
		"empty":           {},
		"zero span":       {{}},
		"every field": {{
			TraceID: tid, SpanID: spans.SpanID{1}, ParentID: spans.SpanID{2},
			StartUnixNano: 1_700_000_000_000_000_000, EndUnixNano: 1_700_000_000_250_000_000,
			Kind: spans.KindClient, Status: spans.StatusError, Name: "GET", StatusMessage: "boom",
			Resource: res, Scope: "otelhttp", Attrs: allTypes,
			Links: []spans.Link{{TraceID: other, SpanID: spans.SpanID{9}, Attrs: allTypes[:3]},
				{TraceID: tid, SpanID: spans.SpanID{8}}, {Attrs: []spans.Attr{}}},
			Events: []spans.Event{{TimeUnixNano: 5, Name: "exception", Attrs: allTypes[3:]},
				{TimeUnixNano: math.MaxInt64}, {Name: "e", Attrs: []spans.Attr{}}},
		}},
		"nil and empty lists": {
			{TraceID: tid, SpanID: spans.SpanID{1}, Attrs: []spans.Attr{}, Links: []spans.Link{}, Events: []spans.Event{}},
			{TraceID: tid, SpanID: spans.SpanID{2}},
			{TraceID: tid, SpanID: spans.SpanID{3}, Resource: emptyAttrs},
			{TraceID: tid, SpanID: spans.SpanID{4}, Resource: &spans.Resource{}},
		},
		"resources shared, equal, distinct and nil": {
			{TraceID: tid, SpanID: spans.SpanID{1}, Resource: res},
			{TraceID: tid, SpanID: spans.SpanID{2}, Resource: sameValue},
			{TraceID: tid, SpanID: spans.SpanID{3}},
			{TraceID: tid, SpanID: spans.SpanID{4}, Resource: emptyAttrs},
			{TraceID: tid, SpanID: spans.SpanID{5}, Resource: res},
		},
		"times at the ends of int64 and in any order": {
			{SpanID: spans.SpanID{1}, StartUnixNano: math.MaxInt64, EndUnixNano: math.MinInt64},
			{SpanID: spans.SpanID{2}, StartUnixNano: math.MinInt64, EndUnixNano: math.MaxInt64},
			{SpanID: spans.SpanID{3}, StartUnixNano: -1, EndUnixNano: -2,
				Events: []spans.Event{{TimeUnixNano: math.MinInt64}}},
		},
		"trace ids differ": {
			{TraceID: tid, SpanID: spans.SpanID{1}},
			{TraceID: other, SpanID: spans.SpanID{2}},
			{SpanID: spans.SpanID{3}},
		},
		"kinds and statuses beyond the enums": {{Kind: 250, Status: 9}},
		"long and repeated strings": {
			{Name: long, Scope: long, Attrs: []spans.Attr{spans.StringAttr(long, long)}},
			{Name: long[:10], StatusMessage: long[1:]},
		},
	}
	// Many resources: past the packer's linear search.
	var many []spans.Span
	for i := range 40 {
		many = append(many, spans.Span{TraceID: tid, SpanID: spans.SpanID{byte(i)},
			Resource: &spans.Resource{ServiceName: "svc-" + strconv.Itoa(i%20)}})
	}
	cases["many resources"] = many
	for name, ss := range cases {
		t.Run(name, func(t *testing.T) { roundTrip(t, ss) })
	}
}

// TestPackSharesResourcesAndStrings: spans of one resource point at one unpacked resource, equal
// resources are packed once, and repeated strings are written once, whether they share their
// bytes (interned) or not (a per-span copy of the operation id).
func TestPackSharesResourcesAndStrings(t *testing.T) {
	key := "http.request.method"
	opID := "4f1c2a9e-7d3c-4b1a-9e2f-00000001d3a7"
	mk := func(r *spans.Resource) []spans.Span {
		var ss []spans.Span
		for i := range 100 {
			ss = append(ss, spans.Span{SpanID: spans.SpanID{byte(i)}, Resource: r, Name: key,
				Attrs: []spans.Attr{spans.StringAttr(key, "GET"), spans.StringAttr(spans.AttrOpID, strings.Clone(opID))}})
		}
		return ss
	}
	r1 := &spans.Resource{ServiceName: "api"}
	ss := mk(r1)
	ss[50].Resource = &spans.Resource{ServiceName: "api"} // equal value, other pointer
	b := spans.AppendPacked(nil, ss)
	got, err := spans.UnpackSpans(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i].Resource != got[0].Resource {
			t.Fatalf("span %d has a resource of its own", i)
		}
	}
	for _, str := range []string{key, opID} {
		if n := bytes.Count(b, []byte(str)); n != 1 {
			t.Errorf("%q packed %d times, want once", str, n)
		}
	}
	if per := len(b) / len(ss); per > 28 {
		t.Errorf("%d bytes per span, want <= 28 for spans that differ only in their id", per)
	}
}

// TestUnpackAllocations: a handful of allocations per trace, however many spans and strings.
func TestUnpackAllocations(t *testing.T) {
	w := workload.NewWorkload(1_700_000_000_000_000_000)
	batch := &spans.Batch{}
	w.Fill(batch, 200)
	b := spans.AppendPacked(nil, batch.Spans)
	dst := make([]spans.Span, 0, len(batch.Spans))
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := spans.AppendUnpacked(dst[:0], b); err != nil {
			t.Fatal(err)
		}
	})
	// The string copy, the string table, the attributes, the resources; no links or events here.
	if allocs > 4 {
		t.Errorf("%v allocations to unpack %d spans, want <= 4", allocs, len(batch.Spans))
	}
}

func TestUnpackRejectsCorruptInput(t *testing.T) {
	ss := []spans.Span{{TraceID: spans.TraceID{1}, SpanID: spans.SpanID{1}, Name: "n",
		Resource: &spans.Resource{ServiceName: "s"}, Attrs: []spans.Attr{spans.StringAttr("k", "v")},
		Links: []spans.Link{{SpanID: spans.SpanID{2}}}, Events: []spans.Event{{Name: "e"}}},
		{TraceID: spans.TraceID{1}, SpanID: spans.SpanID{2}, Name: "n"}}
	good := spans.AppendPacked(nil, ss)
	header := func(i int, v uint32) []byte {
		b := slices.Clone(good)
		b[1+4*i], b[2+4*i], b[3+4*i], b[4+4*i] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
		return b
	}
	bad := map[string][]byte{
		"nil":                   nil,
		"version":               append([]byte{good[0] + 1}, good[1:]...),
		"trailing byte":         append(slices.Clone(good), 0),
		"spans claimed huge":    header(0, math.MaxUint32),
		"attrs claimed huge":    header(2, 1<<30),
		"strings claimed huge":  header(5, 1<<30),
		"spans count too small": header(0, 1),
		"spans count too large": header(0, 3),
		"resources count off":   header(1, 0),
		"attrs count off":       header(2, 0),
		"links count off":       header(3, 0),
		"events count off":      header(4, 0),
		"strings count off":     header(5, 1),
	}
	for n := range len(good) {
		bad[fmt.Sprintf("truncated to %d bytes", n)] = good[:n]
	}
	for name, b := range bad {
		got, err := spans.AppendUnpacked([]spans.Span{{Name: "kept"}}, b)
		if !errors.Is(err, spans.ErrPackCorrupt) {
			t.Errorf("%s: err = %v, want ErrPackCorrupt", name, err)
		}
		if len(got) != 1 || got[0].Name != "kept" {
			t.Errorf("%s: dst changed on error: %d spans", name, len(got))
		}
	}
	if _, err := spans.PackedLen(good[:10]); !errors.Is(err, spans.ErrPackCorrupt) {
		t.Errorf("PackedLen of a short header: %v", err)
	}
}

// TestUnpackBoundsHostileCounts: a header claiming 2^32 spans in a few bytes is refused before
// anything is sized by it.
func TestUnpackBoundsHostileCounts(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are the race detector's too")
	}
	b := make([]byte, 41)
	b[0] = 1
	for i := 1; i < 25; i++ {
		b[i] = 0xff
	}
	allocs := testing.AllocsPerRun(10, func() { _, _ = spans.UnpackSpans(b) })
	if allocs > 3 { // the error and its wrapping
		t.Errorf("%v allocations for a hostile header", allocs)
	}
}

// packSeeds are FuzzUnpack's starting points (also checked in under testdata/fuzz/FuzzUnpack).
func packSeeds(t testing.TB) [][]byte {
	w := workload.NewWorkload(1_700_000_000_000_000_000)
	batch := &spans.Batch{}
	w.Fill(batch, 20)
	seeds := [][]byte{spans.AppendPacked(nil, nil), spans.AppendPacked(nil, batch.Spans[:3])}
	ss := []spans.Span{{TraceID: spans.TraceID{1}, SpanID: spans.SpanID{1}, ParentID: spans.SpanID{2},
		StartUnixNano: 10, EndUnixNano: 5, Name: "n", Resource: &spans.Resource{ServiceName: "s", Attrs: []spans.Attr{}},
		Attrs: []spans.Attr{spans.StringAttr("k", "v"), spans.DoubleAttr("d", 1.5), spans.BoolAttr("b", true),
			{Key: "o", Str: "[1]", Type: spans.ValueOther}, {Key: "x", Num: 1, Type: 99}},
		Links:  []spans.Link{{TraceID: spans.TraceID{3}, SpanID: spans.SpanID{2}, Attrs: []spans.Attr{spans.IntAttr("i", -1)}}},
		Events: []spans.Event{{TimeUnixNano: 12, Name: "e", Attrs: []spans.Attr{spans.StringAttr("k", "w")}}}},
		{TraceID: spans.TraceID{2}, SpanID: spans.SpanID{2}, Name: "n"}}
	seeds = append(seeds, spans.AppendPacked(nil, ss))
	return seeds
}

// TestWritePackFuzzSeeds regenerates testdata/fuzz/FuzzUnpack when STORMWATCH_WRITE_FUZZ_SEEDS=1.
func TestWritePackFuzzSeeds(t *testing.T) {
	if os.Getenv("STORMWATCH_WRITE_FUZZ_SEEDS") != "1" {
		t.Skip("set STORMWATCH_WRITE_FUZZ_SEEDS=1 to rewrite testdata/fuzz seeds")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzUnpack")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, s := range packSeeds(t) {
		body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s)) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzUnpack: AppendUnpacked never panics, refuses with ErrPackCorrupt what it cannot read, and
// what it accepts packs and unpacks again to the same spans.
func FuzzUnpack(f *testing.F) {
	for _, s := range packSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := spans.UnpackSpans(b)
		// The reusing Unpacker reads the same bytes the same way.
		var u spans.Unpacker
		if again, err2 := u.Append(nil, b); (err == nil) != (err2 == nil) {
			t.Fatalf("AppendUnpacked: %v; Unpacker: %v", err, err2)
		} else if err == nil && !reflect.DeepEqual(got, again) {
			t.Fatalf("Unpacker differs from AppendUnpacked:\n%s", spanstest.Diff(&spans.Batch{Spans: got}, &spans.Batch{Spans: again}))
		}
		if err != nil {
			if !errors.Is(err, spans.ErrPackCorrupt) {
				t.Fatalf("error without ErrPackCorrupt: %v", err)
			}
			return
		}
		again, err := spans.UnpackSpans(spans.AppendPacked(nil, got))
		if err != nil {
			t.Fatalf("repacked spans do not unpack: %v", err)
		}
		if len(got) != 0 && !reflect.DeepEqual(got, again) {
			t.Fatalf("repacking changed the spans:\n%s", spanstest.Diff(&spans.Batch{Spans: got}, &spans.Batch{Spans: again}))
		}
	})
}

// BenchmarkPack is the store's cost per span: packing a trace once it is analyzed, and unpacking
// it when late spans or the trace view need it back. traces=synthetic: the analyzer benchmarks'
// workload (1.6 attributes a span), its strings shared like the analyzer's interned strings;
// traces=payload: the end-to-end benchmark's payload shape (10 attributes a span, a unique URL or path on each, the
// operation id copied onto every span, as the analyzer's interner copies it).
func BenchmarkPack(b *testing.B) {
	w := workload.NewWorkload(1_700_000_000_000_000_000)
	var synthetic, payload [][]spans.Span
	for range 100 {
		batch := &spans.Batch{}
		n := w.Fill(batch, 1)
		synthetic = append(synthetic, batch.Spans[:n])
	}
	for n := range 100 {
		payload = append(payload, workload.PayloadTrace(n, 1_700_000_000_000_000_000))
	}
	for _, c := range []struct {
		name   string
		traces [][]spans.Span
	}{{"synthetic", synthetic}, {"payload", payload}} {
		benchPack(b, c.name, c.traces)
	}
}

func benchPack(b *testing.B, name string, traces [][]spans.Span) {
	total := 0
	var packed [][]byte
	size := 0
	for _, ss := range traces {
		total += len(ss)
		p := spans.AppendPacked(nil, ss)
		packed = append(packed, p)
		size += len(p)
	}
	b.Run("traces="+name+"/pack", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		cpu0 := cputime.Process()
		for range b.N {
			for _, ss := range traces {
				buf = spans.AppendPacked(buf[:0], ss)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*total), "ns/span")
		b.ReportMetric(float64((cputime.Process()-cpu0).Nanoseconds())/float64(b.N*total), "cpu-ns/span")
		b.ReportMetric(float64(size)/float64(total), "packed-B/span")
	})
	b.Run("traces="+name+"/unpack", func(b *testing.B) {
		b.ReportAllocs()
		var dst []spans.Span
		cpu0 := cputime.Process()
		for range b.N {
			for _, p := range packed {
				var err error
				if dst, err = spans.AppendUnpacked(dst[:0], p); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*total), "ns/span")
		b.ReportMetric(float64((cputime.Process()-cpu0).Nanoseconds())/float64(b.N*total), "cpu-ns/span")
	})
	// What the analyzer pays to read a trace back for one analysis: an Unpacker reused from
	// trace to trace, strings aliasing the packed bytes.
	b.Run("traces="+name+"/unpack-reused", func(b *testing.B) {
		b.ReportAllocs()
		var u spans.Unpacker
		var dst []spans.Span
		cpu0 := cputime.Process()
		for range b.N {
			for _, p := range packed {
				u.Reset()
				var err error
				if dst, err = u.Append(dst[:0], p); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*total), "ns/span")
		b.ReportMetric(float64((cputime.Process()-cpu0).Nanoseconds())/float64(b.N*total), "cpu-ns/span")
	})
}

// Well-known keys, as the decoders intern them, are packed as one byte each and read back as the
// same canonical strings; an equal key made elsewhere is packed as a string and reads back equal.
// A key byte beyond the well-known keys is a corrupt form.
func TestWellKnownKeysArePackedAsOneByte(t *testing.T) {
	canonical := []spans.Span{{TraceID: spans.TraceID{1}, SpanID: spans.SpanID{1}, Attrs: []spans.Attr{
		spans.StringAttr(spans.AttrHTTPMethod, "GET"), spans.IntAttr(spans.AttrHTTPStatus, 503),
		spans.StringAttr("custom.key", "v")}}}
	copied := []spans.Span{canonical[0]}
	copied[0].Attrs = slices.Clone(canonical[0].Attrs)
	for i := range copied[0].Attrs {
		copied[0].Attrs[i].Key = strings.Clone(copied[0].Attrs[i].Key)
	}
	short, long := spans.AppendPacked(nil, canonical), spans.AppendPacked(nil, copied)
	if saved := len(long) - len(short); saved < len(spans.AttrHTTPMethod)+len(spans.AttrHTTPStatus) {
		t.Errorf("canonical keys packed in %d bytes, copies in %d: want the keys' text saved", len(short), len(long))
	}
	for i, b := range [][]byte{short, long} {
		got, err := spans.UnpackSpans(b)
		if err != nil || !reflect.DeepEqual(got[0].Attrs, canonical[0].Attrs) {
			t.Fatalf("read back: %v, %+v", err, got)
		}
		if k := got[0].Attrs[0].Key; i == 0 && unsafe.StringData(k) != unsafe.StringData(spans.AttrHTTPMethod) {
			t.Errorf("key %q read back as a copy, not the canonical string", k)
		}
	}
	// The method's key byte, followed by its tag (a string follows): made out of range.
	code := byte(slices.Index(spans.WellKnown, spans.AttrHTTPMethod) + 1)
	at := bytes.Index(short, []byte{code, 0x80 | byte(spans.ValueString)})
	if at < 0 {
		t.Fatal("the method's key byte is not in the packed form")
	}
	bad := slices.Clone(short)
	bad[at] = 0xff
	if _, err := spans.UnpackSpans(bad); !errors.Is(err, spans.ErrPackCorrupt) {
		t.Errorf("key byte 255: err = %v, want ErrPackCorrupt", err)
	}
}
