package tracefile

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/spans/spanstest"
)

var allAttrs = spans.DecodeOptions{AllAttributes: true}

func readAll(t *testing.T, r *Reader) []*Record {
	t.Helper()
	out, err := readRecords(r)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return out
}

// readRecords reads r to its end: the records read, and the error that stopped it if not the end.
func readRecords(r *Reader) ([]*Record, error) {
	var out []*Record
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, rec)
	}
}

// spansOf is the spans of recs, in order.
func spansOf(recs []*Record) []spans.Span {
	var all []spans.Span
	for _, rec := range recs {
		all = append(all, rec.Batch.Spans...)
	}
	return all
}

func merge(reqs ...*coltracepb.ExportTraceServiceRequest) *coltracepb.ExportTraceServiceRequest {
	m := &coltracepb.ExportTraceServiceRequest{}
	for _, r := range reqs {
		m.ResourceSpans = append(m.ResourceSpans, r.ResourceSpans...)
	}
	return m
}

func TestRoundTripEveryFormat(t *testing.T) {
	reqs := []*coltracepb.ExportTraceServiceRequest{fullRequest(0), realisticRequest(1, 100), fullRequest(2), {}, realisticRequest(3, 7)}
	for _, name := range []string{"t.jsonl", "t.json", "t.pb", "t.jsonl.gz", "t.json.gz", "t.pb.gz"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), name)
			w, err := Create(path)
			if err != nil {
				t.Fatal(err)
			}
			for i, req := range reqs {
				// Alternate the encodings the requests arrive in, as the collector would see them.
				body, isJSON := mustMarshal(t, req), i%2 == 1
				if isJSON {
					body = requestJSON(req)
				}
				if err := w.WriteRequest(body, isJSON); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			r, err := Open(path, ReadOptions{Raw: true, Decode: allAttrs, Strict: true})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			recs := readAll(t, r)
			want := reqs
			if strings.HasPrefix(name, "t.json.") || name == "t.json" {
				want = []*coltracepb.ExportTraceServiceRequest{merge(reqs...)}
			}
			if len(recs) != len(want) {
				t.Fatalf("%d records, want %d", len(recs), len(want))
			}
			for i, rec := range recs {
				if d := spanstest.Diff(spanstest.FromProto(want[i], allAttrs), rec.Batch); d != "" {
					t.Errorf("record %d (%s):\n%s", i, rec.Pos, d)
				}
				got := &coltracepb.ExportTraceServiceRequest{}
				if err := proto.Unmarshal(rec.Raw, got); err != nil {
					t.Fatal(err)
				}
				if d := protoDiff(want[i], got); d != "" {
					t.Errorf("record %d raw request differs:\n%s", i, d)
				}
				if strings.Contains(name, "jsonl") && rec.Pos.Line != i+1 {
					t.Errorf("record %d at line %d", i, rec.Pos.Line)
				}
				if strings.Contains(name, ".pb") && rec.Pos.Record != i+1 {
					t.Errorf("record %d numbered %d", i, rec.Pos.Record)
				}
			}
			if len(r.Warnings()) != 0 {
				t.Errorf("warnings: %v", r.Warnings())
			}
		})
	}
}

func TestReadsPrettyPrintedJSONAndContentDetection(t *testing.T) {
	req := fullRequest(4)
	var pretty bytes.Buffer
	if err := jsonIndent(&pretty, requestJSON(req)); err != nil {
		t.Fatal(err)
	}
	pb := &bytes.Buffer{}
	w := NewWriter(pb, FormatProto)
	w.WriteRequest(mustMarshal(t, req), false)
	w.Close()
	gz := &bytes.Buffer{}
	w = NewGzipWriter(gz, FormatJSONLines)
	w.WriteRequest(mustMarshal(t, req), false)
	w.WriteRequest(mustMarshal(t, req), false)
	w.Close()
	cases := []struct {
		name, file string
		data       []byte
		want       Format
		records    int
	}{
		{"pretty .json", "t.json", pretty.Bytes(), FormatJSON, 1},
		{"pretty, two documents, on stdin", "-", []byte("\n\n" + pretty.String() + "\n" + pretty.String()), FormatJSON, 2},
		{"protobuf without extension", "-", pb.Bytes(), FormatProto, 1},
		{"gzip detected by magic bytes", "recording", gz.Bytes(), FormatJSONLines, 2},
		{"empty", "-", nil, FormatJSONLines, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := NewReader(bytes.NewReader(c.data), c.file, ReadOptions{Strict: true})
			if err != nil {
				t.Fatal(err)
			}
			recs := readAll(t, r)
			if len(recs) != c.records {
				t.Fatalf("%d records, want %d", len(recs), c.records)
			}
			for _, rec := range recs {
				if d := spanstest.Diff(spanstest.FromProto(req, spans.DecodeOptions{}), rec.Batch); d != "" {
					t.Error(d)
				}
			}
			if c.records > 0 && r.Format() != c.want && !(c.want == FormatJSONLines && r.Format() == FormatJSON) {
				t.Errorf("format %v, want %v", r.Format(), c.want)
			}
		})
	}
}

func TestOpenStdin(t *testing.T) {
	line := requestJSON(fullRequest(1))
	r, err := Open("-", ReadOptions{Stdin: bytes.NewReader(append(line, '\n'))})
	if err != nil {
		t.Fatal(err)
	}
	recs := readAll(t, r)
	if len(recs) != 1 || len(recs[0].Batch.Spans) != 2 || recs[0].Pos.String() != "-:1" {
		t.Fatalf("records = %d, pos %v", len(recs), recs[0].Pos)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "nope.jsonl"), ReadOptions{}); err == nil || !strings.Contains(err.Error(), "open trace file") || !strings.Contains(err.Error(), "nope.jsonl") {
		t.Fatalf("missing file: err = %v", err)
	}
}

func TestCrashCutRecordingReadsToLastCompleteRecord(t *testing.T) {
	for _, name := range []string{"t.jsonl", "t.pb", "t.jsonl.gz", "t.pb.gz"} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			format, gz := FormatFromPath(name)
			w := newWriter(&buf, format, gz)
			for i := 0; i < 3; i++ {
				if err := w.WriteRequest(mustMarshal(t, fullRequest(i)), false); err != nil {
					t.Fatal(err)
				}
			}
			// What the file holds when the recorder is killed: flushed records, no gzip trailer,
			// and half of the next record.
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			whole := buf.Len()
			if err := w.WriteRequest(mustMarshal(t, fullRequest(3)), false); err != nil {
				t.Fatal(err)
			}
			w.Flush()
			cut := buf.Bytes()[:whole+(buf.Len()-whole)/2]
			var warned []error
			r, err := NewReader(bytes.NewReader(cut), name, ReadOptions{Strict: true, OnWarning: func(err error) { warned = append(warned, err) }})
			if err != nil {
				t.Fatal(err)
			}
			recs := readAll(t, r)
			if len(recs) != 3 {
				t.Fatalf("%d records, want the 3 complete ones", len(recs))
			}
			if len(warned) != 1 || !errors.Is(warned[0], ErrTruncated) {
				t.Fatalf("warnings = %v, want one truncated record", warned)
			}
			t.Log(warned[0])
		})
	}
}

func TestMalformedLinesAreReportedAndSkipped(t *testing.T) {
	good := string(requestJSON(fullRequest(1)))
	data := strings.Join([]string{
		good,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":5}]}]}]}`,
		``,
		`not json at all`,
		good,
		`{"resourceSpans":[`,
		good,
	}, "\n") + "\n"
	r, err := NewReader(strings.NewReader(data), "traces.jsonl", ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	recs := readAll(t, r)
	if len(recs) != 3 {
		t.Fatalf("%d good records, want 3", len(recs))
	}
	if got := []int{recs[0].Pos.Line, recs[1].Pos.Line, recs[2].Pos.Line}; fmt.Sprint(got) != "[1 5 7]" {
		t.Errorf("good records at lines %v", got)
	}
	ws := r.Warnings()
	if len(ws) != 3 || r.Skipped() != 3 {
		t.Fatalf("warnings = %v", ws)
	}
	for i, prefix := range []string{"traces.jsonl:2: decode OTLP/JSON request: ", "traces.jsonl:4: decode OTLP/JSON request: ", "traces.jsonl:6: decode OTLP/JSON request: "} {
		if !strings.HasPrefix(ws[i].Error(), prefix) {
			t.Errorf("warning %d = %q, want prefix %q", i, ws[i], prefix)
		}
		var re *RecordError
		if !errors.As(ws[i], &re) {
			t.Errorf("warning %d is not a *RecordError", i)
		}
	}

	// Strict stops at the first, and keeps saying so.
	r, _ = NewReader(strings.NewReader(data), "traces.jsonl", ReadOptions{Strict: true})
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	_, err = r.Next()
	if err == nil || !strings.HasPrefix(err.Error(), "traces.jsonl:2: decode OTLP/JSON") {
		t.Fatalf("strict: err = %v", err)
	}
	if _, err2 := r.Next(); err2 != err {
		t.Fatalf("after a strict stop Next returned %v", err2)
	}
}

func TestMalformedProtobufRecords(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, FormatProto)
	w.WriteRequest(mustMarshal(t, fullRequest(1)), false)
	w.Flush()
	buf.Write([]byte{0, 0, 0, 3, 0xff, 0xff, 0xff}) // a record that is not protobuf
	w.WriteRequest(mustMarshal(t, fullRequest(2)), false)
	w.Flush()
	buf.Write([]byte{0x7f, 0, 0, 0}) // a length over the limit, then the end of the file
	w.Close()
	r, _ := NewReader(bytes.NewReader(buf.Bytes()), "t.pb", ReadOptions{MaxRecordBytes: 1 << 20})
	recs := readAll(t, r)
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2; warnings %v", len(recs), r.Warnings())
	}
	ws := r.Warnings()
	if len(ws) != 2 {
		t.Fatalf("warnings = %v", ws)
	}
	if !strings.HasPrefix(ws[0].Error(), "t.pb: record 2 (byte ") || !strings.Contains(ws[0].Error(), "decode OTLP protobuf request") {
		t.Errorf("warning 0 = %v", ws[0])
	}
	if !errors.Is(ws[1], ErrTooLarge) || !strings.Contains(ws[1].Error(), "record 4") {
		t.Errorf("warning 1 = %v", ws[1])
	}
}

func TestLineOverTheLimitIsSkipped(t *testing.T) {
	good := string(requestJSON(fullRequest(1)))
	huge := `{"resourceSpans":[` + strings.Repeat(" ", 300<<10) + `]}`
	data := good + "\n" + huge + "\n" + good + "\n"
	r, _ := NewReader(strings.NewReader(data), "t.jsonl", ReadOptions{MaxRecordBytes: 100 << 10})
	recs := readAll(t, r)
	if len(recs) != 2 || recs[1].Pos.Line != 3 {
		t.Fatalf("%d records", len(recs))
	}
	if ws := r.Warnings(); len(ws) != 1 || !errors.Is(ws[0], ErrTooLarge) || !strings.HasPrefix(ws[0].Error(), "t.jsonl:2: record too large") {
		t.Fatalf("warnings = %v", ws)
	}
}

// repeatReader yields a prefix-free stream of n copies of rec without ever holding more than one.
type repeatReader struct {
	rec  []byte
	n    int
	left []byte
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if len(r.left) == 0 {
		if r.n == 0 {
			return 0, io.EOF
		}
		r.n--
		r.left = r.rec
	}
	k := copy(p, r.left)
	r.left = r.left[k:]
	return k, nil
}

// TestStreamingMemoryIsBounded reads a stream far larger than the heap bound it checks, generated
// on the fly, so only the reader's own buffering can explain the heap it uses.
func TestStreamingMemoryIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 256 MiB")
	}
	for _, c := range []struct {
		format Format
		total  int
	}{{FormatProto, 256 << 20}, {FormatJSONLines, 24 << 20}} {
		t.Run(c.format.String(), func(t *testing.T) {
			var one bytes.Buffer
			w := NewWriter(&one, c.format)
			w.WriteRequest(mustMarshal(t, realisticRequest(0, 100)), false)
			w.Close()
			n := c.total / one.Len()
			r, err := NewReader(&repeatReader{rec: one.Bytes(), n: n}, "", ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// A collection first, so that the heap's goal is set by what is live now, not by what
			// the tests before this one held: the garbage let grow to that goal would count here.
			runtime.GC()
			var ms runtime.MemStats
			var peak uint64
			count := 0
			for {
				_, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				count++
				if count%64 == 0 {
					runtime.ReadMemStats(&ms)
					peak = max(peak, ms.HeapInuse)
				}
			}
			if count != n {
				t.Fatalf("read %d records, want %d", count, n)
			}
			const bound = 64 << 20
			t.Logf("%d MiB streamed, peak heap in use %d MiB", c.total>>20, peak>>20)
			if peak > bound {
				t.Fatalf("peak heap %d MiB reading a %d MiB stream: over the %d MiB bound", peak>>20, c.total>>20, bound>>20)
			}
		})
	}
}

func jsonIndent(dst *bytes.Buffer, src []byte) error { return json.Indent(dst, src, "", "  ") }

// TestSpanExporterMatchesTheOTLPExporter records real SDK spans with NewSpanExporter and, from the
// same tracer provider, sends them with the SDK's own OTLP/HTTP exporter to a test server: what the
// file reads back must be what the OTLP exporter sent.
func TestSpanExporterMatchesTheOTLPExporter(t *testing.T) {
	ctx := context.Background()
	url, received := spanstest.OTLPHTTPReceiver(t)
	otlp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(url), otlptracehttp.WithCompression(otlptracehttp.NoCompression))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "sdk.jsonl")
	fw, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "edge"), attribute.String("service.instance.id", "edge-1"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res),
		sdktrace.WithSyncer(NewSpanExporter(fw)), sdktrace.WithSyncer(otlp))
	tr := tp.Tracer("stormwatch/test", trace.WithInstrumentationVersion("1.2.3"))
	ctx, root := tr.Start(ctx, "GET /checkout", trace.WithSpanKind(trace.SpanKindServer))
	var prev trace.SpanContext
	for attempt := 1; attempt <= 3; attempt++ {
		opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			attribute.String("http.request.method", "GET"), attribute.Int("resilience.attempt", attempt),
			attribute.Bool("retry", attempt > 1), attribute.Float64("ratio", 0.5),
			attribute.StringSlice("tags", []string{"a", "b"}), attribute.Int64Slice("ints", []int64{1, 2}),
			attribute.BoolSlice("bools", []bool{true}), attribute.Float64Slice("floats", []float64{1.5}),
			attribute.ByteSlice("bytes", []byte{0, 0xff}),
			attribute.Slice("mixed", attribute.IntValue(1), attribute.StringValue("two")),
			attribute.Map("map", attribute.String("inner", "v"), attribute.Bool("ok", true)),
			attribute.KeyValue{Key: "empty"},
		)}
		if prev.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: prev, Attributes: []attribute.KeyValue{attribute.String("link.kind", "previous-attempt")}}))
		}
		_, s := tr.Start(ctx, "GET", opts...)
		s.AddEvent("exception", trace.WithAttributes(attribute.String("exception.type", "timeout")))
		s.SetStatus(codes.Error, "503")
		s.End()
		prev = s.SpanContext()
	}
	root.SetStatus(codes.Ok, "")
	root.End()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}

	r, err := Open(path, ReadOptions{Strict: true, Decode: allAttrs, Raw: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []spans.Span
	var raw []*coltracepb.ExportTraceServiceRequest
	for _, rec := range readAll(t, r) {
		got = append(got, rec.Batch.Spans...)
		req := &coltracepb.ExportTraceServiceRequest{}
		proto.Unmarshal(rec.Raw, req)
		raw = append(raw, req)
	}
	sent := received()
	want := spanstest.FromProto(merge(sent...), allAttrs).Spans
	sentSpans := protoSpans(sent)
	if len(want) != 4 {
		t.Fatalf("the OTLP exporter sent %d spans, want 4", len(want))
	}
	bySpanID := func(s []spans.Span) {
		sort.Slice(s, func(i, j int) bool { return bytes.Compare(s[i].SpanID[:], s[j].SpanID[:]) < 0 })
	}
	bySpanID(got)
	bySpanID(want)
	if d := spanstest.Diff(&spans.Batch{Spans: want}, &spans.Batch{Spans: got}); d != "" {
		t.Fatalf("recorded spans differ from what the OTLP exporter sent:\n%s", d)
	}
	// Full fidelity, beyond the compact form: every protobuf field equal, span by span.
	for id, w := range sentSpans {
		g, ok := protoSpans(raw)[id]
		if !ok {
			t.Fatalf("span %x not recorded", id)
		}
		if d := protoDiff(w, g); d != "" {
			t.Errorf("span %x:\n%s", id, d)
		}
	}
}

func protoSpans(reqs []*coltracepb.ExportTraceServiceRequest) map[string]*tracepb.Span {
	m := map[string]*tracepb.Span{}
	for _, r := range reqs {
		for _, rs := range r.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					m[string(s.SpanId)] = s
				}
			}
		}
	}
	return m
}

func TestGzipFileWrittenByOthers(t *testing.T) {
	// A .jsonl.gz made by gzip(1) rather than by us, with two members (appended sessions).
	line := append(requestJSON(fullRequest(1)), '\n')
	var buf bytes.Buffer
	for i := 0; i < 2; i++ {
		zw := gzip.NewWriter(&buf)
		zw.Write(line)
		zw.Close()
	}
	path := filepath.Join(t.TempDir(), "t.jsonl.gz")
	os.WriteFile(path, buf.Bytes(), 0o644)
	r, err := Open(path, ReadOptions{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	if recs := readAll(t, r); len(recs) != 2 || recs[1].Pos.Line != 2 {
		t.Fatalf("%d records", len(recs))
	}
}

// Lines longer than the reader's buffer are read whole, each into memory of its own: a record
// read earlier keeps its spans however long or short the lines after it are.
func TestLongLinesKeepTheirOwnMemory(t *testing.T) {
	sizes := []int{200 << 10, 10, 500 << 10, 100 << 10, 700 << 10}
	var data strings.Builder
	for i, n := range sizes {
		fmt.Fprintf(&data, `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f%02x","spanId":"01020304050607%02x","name":"%s","startTimeUnixNano":"1","endTimeUnixNano":"2"}]}]}]}`+"\n",
			i+1, i+1, strings.Repeat(string(rune('a'+i)), n))
	}
	r, err := NewReader(strings.NewReader(data.String()), "long.jsonl", ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	recs := readAll(t, r)
	if len(recs) != len(sizes) {
		t.Fatalf("%d records, want %d", len(recs), len(sizes))
	}
	for i, n := range sizes {
		ss := recs[i].Batch.Spans
		if len(ss) != 1 || ss[0].Name != strings.Repeat(string(rune('a'+i)), n) {
			t.Errorf("record %d: %d spans, name of %d bytes, want one span named with %d %q", i+1, len(ss), len(ss[0].Name), n, rune('a'+i))
		}
	}
}

// A record its consumer released (spans.Batch.Release) lends its memory to the next line - the
// same batch, decoded again - while one not released keeps its spans whatever is read after it.
func TestReleasedRecordsLendTheirMemory(t *testing.T) {
	var data strings.Builder
	names := []string{strings.Repeat("a", 100<<10), "b", strings.Repeat("c", 300<<10), "d"}
	for i, name := range names {
		fmt.Fprintf(&data, `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f%02x","spanId":"01020304050607%02x","name":"%s","startTimeUnixNano":"1","endTimeUnixNano":"2"}]}]}]}`+"\n",
			i+1, i+1, name)
	}
	r, err := NewReader(strings.NewReader(data.String()), "lend.jsonl", ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next := func(i int) *spans.Batch {
		t.Helper()
		rec, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ss := rec.Batch.Spans; len(ss) != 1 || ss[0].Name != names[i] {
			t.Fatalf("record %d: %d spans, not the one named %.10q...", i+1, len(ss), names[i])
		}
		return rec.Batch
	}
	first := next(0) // kept: never released
	second := next(1)
	second.Release()
	third := next(2)
	if third != second {
		t.Error("the released record's batch was not decoded into again")
	}
	if first.Spans[0].Name != names[0] {
		t.Error("a record not released lost its spans to the lines after it")
	}
	third.Release()
	if fourth := next(3); fourth != third {
		t.Error("the released record's batch was not decoded into again")
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the last record: %v", err)
	}
}
