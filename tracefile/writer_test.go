package tracefile

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

func TestProtoToJSONRoundTripsEveryField(t *testing.T) {
	orig := fullRequest(7)
	js, err := ProtoToJSON(mustMarshal(t, orig))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.ContainsRune(js, '\n') {
		t.Fatalf("OTLP/JSON line contains a newline: %s", js)
	}
	if !json.Valid(js) {
		t.Fatalf("not valid JSON: %s", js)
	}
	back, err := JSONToProto(js)
	if err != nil {
		t.Fatal(err)
	}
	got := &coltracepb.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(back, got); err != nil {
		t.Fatal(err)
	}
	if diff := protoDiff(orig, got); diff != "" {
		t.Fatalf("JSON round trip changed the request (-orig +got):\n%s", diff)
	}
	// Ids are hex in OTLP/JSON, never base64.
	for _, want := range []string{`"traceId":"a1000000000000000000000000000008"`, `"spanId":"b100000000000008"`, `"kind":3`, `"code":2`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("OTLP/JSON lacks %s:\n%s", want, js)
		}
	}
}

// The OpenTelemetry Collector (pdata) must read what we write as the same request, and we must read
// what it writes: that is what "the file exporter's format" means.
func TestOTLPJSONCompatibleWithCollectorPdata(t *testing.T) {
	orig := fullRequest(3)
	// pdata does not know entity refs yet in every version; compare on what both support.
	orig.ResourceSpans[0].Resource.EntityRefs = nil
	// pdata gives a key without a value an empty value ({}): the same thing in OTLP.
	for _, kv := range orig.ResourceSpans[0].ScopeSpans[0].Spans[0].Attributes {
		if kv.Value == nil {
			kv.Value = &commonpb.AnyValue{}
		}
	}
	js, err := ProtoToJSON(mustMarshal(t, orig))
	if err != nil {
		t.Fatal(err)
	}
	td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(js)
	if err != nil {
		t.Fatalf("pdata cannot read our OTLP/JSON: %v\n%s", err, js)
	}
	pb, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	got := &coltracepb.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(pb, got); err != nil {
		t.Fatal(err)
	}
	if diff := protoDiff(orig, got); diff != "" {
		t.Fatalf("pdata read a different request (-orig +pdata):\n%s", diff)
	}

	// And the other way: pdata's own JSON reads back through JSONToProto.
	pjs, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	back, err := JSONToProto(pjs)
	if err != nil {
		t.Fatalf("JSONToProto cannot read pdata's JSON: %v\n%s", err, pjs)
	}
	got2 := &coltracepb.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(back, got2); err != nil {
		t.Fatal(err)
	}
	if diff := protoDiff(orig, got2); diff != "" {
		t.Fatalf("pdata's JSON read back differently (-orig +got):\n%s", diff)
	}
}

func TestJSONToProtoLenientInputs(t *testing.T) {
	// Numbers as strings or numbers, enum names, unknown fields, uppercase hex: all OTLP/JSON.
	in := `{"resourceSpans":[{"future":1,"scopeSpans":[{"spans":[{"traceId":"0AF7651916CD43DD8448EB211C80319C",
	"spanId":"b7ad6b7169203331","parentSpanId":"not hex!","name":"x","kind":"SPAN_KIND_SERVER",
	"startTimeUnixNano":1700000000000000000,"endTimeUnixNano":"1700000000000000001",
	"attributes":[{"key":"n","value":{"intValue":5}},{"key":"spanId","value":{"stringValue":"abcd"}}]}]}]}]}`
	pb, err := JSONToProto([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	req := &coltracepb.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(pb, req); err != nil {
		t.Fatal(err)
	}
	s := req.ResourceSpans[0].ScopeSpans[0].Spans[0]
	if got := s.TraceId; !bytes.Equal(got, []byte{0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c}) {
		t.Errorf("trace id = %x", got)
	}
	if len(s.ParentSpanId) != 0 {
		t.Errorf("a parent id that is not hex must become empty (invalid), got %x", s.ParentSpanId)
	}
	if v := s.Attributes[1].GetValue().GetStringValue(); v != "abcd" {
		t.Errorf("an attribute named spanId was rewritten to %q", v)
	}
	if s.Kind != 2 || s.StartTimeUnixNano != 1700000000000000000 || s.EndTimeUnixNano != 1700000000000000001 {
		t.Errorf("kind/times = %v %d %d", s.Kind, s.StartTimeUnixNano, s.EndTimeUnixNano)
	}
	if _, err := JSONToProto([]byte(`{"resourceSpans":[`)); err == nil || !strings.Contains(err.Error(), "decode OTLP/JSON") {
		t.Errorf("truncated JSON: err = %v, want a decode OTLP/JSON error", err)
	}
}

func TestWriterProtoFramingIsTheBytesAsReceived(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, FormatProto)
	body1 := mustMarshal(t, fullRequest(1))
	body2 := mustMarshal(t, fullRequest(2))
	if err := w.WriteRequest(body1, false); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteRequest(body2, false); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	for i, body := range [][]byte{body1, body2} {
		n := binary.BigEndian.Uint32(b)
		if int(n) != len(body) || !bytes.Equal(b[4:4+n], body) {
			t.Fatalf("record %d: length %d, want %d and the body unchanged", i, n, len(body))
		}
		b = b[4+n:]
	}
	if len(b) != 0 {
		t.Fatalf("%d trailing bytes", len(b))
	}
}

func TestWriterJSONLinesOneRequestPerLine(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, FormatJSONLines)
	if err := w.WriteRequest(mustMarshal(t, fullRequest(1)), false); err != nil {
		t.Fatal(err)
	}
	// A pretty-printed JSON body is kept as sent, made one line.
	pretty := "{\n  \"resourceSpans\": [\n  ]\n}\n"
	if err := w.WriteRequest([]byte(pretty), true); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteRequest([]byte(`{"resourceSpans":`), true); err == nil {
		t.Fatal("a JSON body that is not JSON must be refused")
	}
	if err := w.WriteRequest([]byte{0xff, 0xff}, false); err == nil || !strings.Contains(err.Error(), "decode OTLP/protobuf") {
		t.Fatalf("bad protobuf body: err = %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], `{"resourceSpans":[{"resource":`) || lines[1] != `{"resourceSpans":[]}` {
		t.Fatalf("lines = %q", lines)
	}
	if err := w.WriteRequest(nil, false); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}
}

func TestWriterSingleJSONMergesRequests(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, FormatJSON)
	// Requests without resource spans in between add nothing, not even a comma; every way in
	// (protobuf, OTLP/JSON, the generated type) adds its resource spans.
	if err := w.WriteRequest(nil, false); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := w.WriteRequest(mustMarshal(t, fullRequest(i)), false); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteRequest([]byte(`{"resourceSpans":[]}`), true); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteRequest(requestJSON(fullRequest(3)), true); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteProto(fullRequest(4)); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteRequest([]byte(`{"resourceSpans":[`), true); err == nil || !strings.Contains(err.Error(), "decode OTLP/JSON") {
		t.Fatalf("bad OTLP/JSON body: err = %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	req, err := UnmarshalJSON(buf.Bytes())
	if err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if n := len(req.ResourceSpans); n != 5 {
		t.Fatalf("%d resource spans, want 5", n)
	}
	for i, rs := range req.ResourceSpans {
		if got, want := rs.GetResource().GetAttributes()[0].GetValue().GetStringValue(), fmt.Sprintf("svc-%d", i); got != want {
			t.Errorf("resource spans %d: service %q, want %q", i, got, want)
		}
	}
	var empty bytes.Buffer
	w = NewWriter(&empty, FormatJSON)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := UnmarshalJSON(empty.Bytes()); err != nil {
		t.Fatalf("an empty .json file must still be a request: %v (%q)", err, empty.String())
	}
}

// A request the OTLP exporters could not send - a string that is not UTF-8 - is refused in every
// format alike, with the reason.
func TestWriteProtoRefusesInvalidUTF8(t *testing.T) {
	for _, f := range []Format{FormatProto, FormatJSONLines, FormatJSON} {
		req := fullRequest(1)
		req.ResourceSpans[0].ScopeSpans[0].Spans[0].Name = "bad \xff"
		var buf bytes.Buffer
		err := NewWriter(&buf, f).WriteProto(req)
		if err == nil || !strings.Contains(err.Error(), "record request: encode OTLP/protobuf") || !strings.Contains(err.Error(), "UTF-8") {
			t.Errorf("format %d: err = %v", f, err)
		}
	}
}

func TestCreateChoosesFormatByExtension(t *testing.T) {
	dir := t.TempDir()
	body := mustMarshal(t, fullRequest(1))
	for _, name := range []string{"t.jsonl", "t.json", "t.pb", "t.jsonl.gz", "t.pb.gz", "t.json.gz"} {
		path := filepath.Join(dir, name)
		w, err := Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteRequest(body, false); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, ".gz") {
			zr, err := gzip.NewReader(bytes.NewReader(raw))
			if err != nil {
				t.Fatalf("%s: not gzip: %v", name, err)
			}
			if raw, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		if strings.Contains(name, ".pb") {
			if raw[0] != 0 || !bytes.Equal(raw[4:], body) {
				t.Errorf("%s: not the length-prefixed body", name)
			}
		} else if raw[0] != '{' || raw[len(raw)-1] != '\n' {
			t.Errorf("%s: not OTLP/JSON: %.40q", name, raw)
		}
	}
	if _, err := Create(filepath.Join(dir, "t.txt")); err == nil || !strings.Contains(err.Error(), "unknown extension") {
		t.Errorf("t.txt: err = %v", err)
	}
	if _, err := Create(filepath.Join(dir, "missing", "t.jsonl")); err == nil || !strings.Contains(err.Error(), "open trace file") {
		t.Errorf("missing dir: err = %v", err)
	}
	if _, err := Append(filepath.Join(dir, "t.json")); err == nil {
		t.Error("appending to a .json file must be refused")
	}
}

func TestAppendAddsToARecordingAcrossRestarts(t *testing.T) {
	for _, name := range []string{"t.jsonl", "t.pb.gz"} {
		path := filepath.Join(t.TempDir(), name)
		for session := 0; session < 2; session++ {
			w, err := Append(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.WriteRequest(mustMarshal(t, fullRequest(session)), false); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		}
		r, err := Open(path, ReadOptions{Strict: true})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(readAll(t, r)); n != 2 {
			t.Fatalf("%s: %d records after two sessions, want 2", name, n)
		}
	}
}

// Sync puts every record written so far in the file, readable while the writer stays open - for
// gzip as a sync flush the reader decompresses up to - where a plain write leaves it buffered.
func TestWriterSyncMakesRecordsReadableWhileOpen(t *testing.T) {
	for _, name := range []string{"t.jsonl", "t.pb", "t.pb.gz"} {
		path := filepath.Join(t.TempDir(), name)
		w, err := Append(path)
		if err != nil {
			t.Fatal(err)
		}
		count := func() int {
			r, err := Open(path, ReadOptions{Strict: true})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			return len(readAll(t, r))
		}
		for i := range 3 {
			if err := w.WriteRequest(mustMarshal(t, fullRequest(i)), false); err != nil {
				t.Fatal(err)
			}
			if n := count(); n != i {
				t.Fatalf("%s: %d records in the file before Sync, want %d (still buffered)", name, n, i)
			}
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
			if n := count(); n != i+1 {
				t.Fatalf("%s: %d records in the file after Sync, want %d", name, n, i+1)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := w.Sync(); !errors.Is(err, ErrClosed) {
			t.Fatalf("Sync after Close: %v", err)
		}
	}
}

// The collector records from every receiver goroutine at once: records must never interleave.
func TestWriterConcurrentWritesStayWhole(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, FormatJSONLines)
	body := mustMarshal(t, realisticRequest(0, 20))
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if err := w.WriteRequest(body, false); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, _ := NewReader(&buf, "t.jsonl", ReadOptions{Strict: true})
	if n := len(readAll(t, r)); n != 400 || w.Records() != 400 {
		t.Fatalf("read %d records, wrote %d, want 400", n, w.Records())
	}
}
