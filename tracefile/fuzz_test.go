package tracefile

import (
	"bytes"
	"io"
	"testing"

	"github.com/stormwatch/stormwatch/spans"
)

var fuzzNames = []string{"f.jsonl", "f.json", "f.pb", "-", "f.jsonl.gz"}

// FuzzReader feeds arbitrary bytes to the reader under each name (so each detection path runs):
// it must never panic and must end, every call to Next consuming input or finishing.
func FuzzReader(f *testing.F) {
	var pb, jl, gz bytes.Buffer
	w := NewWriter(&pb, FormatProto)
	w.WriteRequest(mustMarshal(f, fullRequest(1)), false)
	w.Close()
	w = NewWriter(&jl, FormatJSONLines)
	w.WriteRequest(mustMarshal(f, fullRequest(2)), false)
	w.WriteRequest(mustMarshal(f, realisticRequest(0, 2)), false)
	w.Close()
	w = NewGzipWriter(&gz, FormatJSONLines)
	w.WriteRequest(mustMarshal(f, fullRequest(3)), false)
	w.Close()
	for i, seed := range [][]byte{pb.Bytes(), jl.Bytes(), gz.Bytes(), nil, []byte("{\n"), []byte("\x00\x00\x00\x05{}{}{"), []byte(jaegerDocument), []byte(zipkinDocument)} {
		f.Add(seed, uint8(i))
	}
	f.Fuzz(func(t *testing.T, data []byte, name uint8) {
		for _, raw := range []bool{false, true} {
			r, err := NewReader(bytes.NewReader(data), fuzzNames[int(name)%len(fuzzNames)], ReadOptions{Raw: raw, MaxRecordBytes: 1 << 16})
			if err != nil {
				return // a broken gzip header
			}
			for calls := 0; ; calls++ {
				// Each record that Next returns consumed at least two bytes of the (decompressed)
				// input; deflate expands at most about 1032:1.
				if calls > 1100*(len(data)+2) {
					t.Fatalf("%d calls to Next on %d bytes: not making progress", calls, len(data))
				}
				rec, err := r.Next()
				if err != nil {
					if err != io.EOF && r.opt.Strict {
						t.Fatalf("unexpected error: %v", err)
					}
					break
				}
				if rec.Batch == nil || (raw && rec.Raw == nil) {
					t.Fatalf("record without batch or raw bytes at %s", rec.Pos)
				}
			}
		}
	})
}

// FuzzJaegerJSON feeds arbitrary documents to the Jaeger JSON reader: it must never panic, every
// span it returns has a trace id and a span id, as the analyzer needs, and whatever document the
// walk takes, encoding/json reads to the same batches (jaegerWalkAgrees).
func FuzzJaegerJSON(f *testing.F) {
	f.Add([]byte(jaegerDocument))
	f.Add([]byte(`{"data":[]}`))
	f.Add([]byte(`{"data":[{"traceID":"1","spans":[{"spanID":"2","references":[{"refType":"CHILD_OF","traceID":"1","spanID":"0"}]}]}]}`))
	for _, doc := range jaegerWalkDocuments {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		opt := spans.DecodeOptions{AllAttributes: len(data)%2 == 0}
		batches, _, err := DecodeJaegerJSON(data, opt)
		checkFuzzBatches(t, batches, err)
		jaegerWalkAgrees(t, data, opt)
	})
}

// FuzzZipkinJSON is FuzzJaegerJSON for Zipkin v2 JSON, shared spans included.
func FuzzZipkinJSON(f *testing.F) {
	f.Add([]byte(zipkinDocument))
	f.Add([]byte(`[]`))
	f.Add([]byte(`[{"traceId":"1","id":"2","kind":"SERVER","shared":true},{"traceId":"1","id":"2","kind":"SERVER","shared":true},{"traceId":"1","id":"3","parentId":"2"}]`))
	for _, doc := range zipkinWalkDocuments {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		opt := spans.DecodeOptions{AllAttributes: len(data)%2 == 0}
		batches, err := decodeZipkinJSON(data, opt)
		checkFuzzBatches(t, batches, err)
		zipkinWalkAgrees(t, data, opt)
	})
}

func checkFuzzBatches(t *testing.T, batches []*spans.Batch, err error) {
	if err != nil {
		if batches != nil {
			t.Fatalf("batches and an error: %v", err)
		}
		return
	}
	for _, b := range batches {
		for _, s := range b.Spans {
			if s.TraceID.IsZero() || s.SpanID.IsZero() {
				t.Fatalf("span without ids: %+v", s)
			}
			if s.TraceID != b.Spans[0].TraceID {
				t.Fatalf("two traces in one batch")
			}
		}
	}
}
