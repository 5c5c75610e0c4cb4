package tracefile

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNotATraceFile: content that is none of the formats fails at open, or at its first record,
// with ErrNotTraceFile, a message naming the formats read and what was found - never as a
// recording with no traces, and never as a "record too large".
func TestNotATraceFile(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("# stormwatch\n\nFind the retry storm.\n"))
	zw.Close()
	for _, c := range []struct {
		name, content, found string
	}{
		{"README.md", "# stormwatch\n\nFind the retry storm: which dependency is being hammered.\n", `text beginning "# stormwatch"`},
		{"README.md.gz", gz.String(), `text beginning "# stormwatch"`},
		{"notes", "plain words", `text beginning "plain words"`},
		{"image.png", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary data beginning 89 50 4e 47"},
		{"traces.pb", "this is text, not protobuf", `text beginning "this is text`},
		{"numbers.json", `[1, 2, 3]`, "a JSON array of something other than spans"},
		{"config.json", `{"service": {"pipelines": {}}, "exporters": []}`, `a JSON object with the keys "service", "exporters" and no resourceSpans`},
		{"config.jsonl", "{\"level\":\"info\",\"msg\":\"started\"}\n{\"level\":\"info\"}\n", `a JSON object with the keys "level", "msg"`},
		{"pretty", "{\n  \"items\": [\n    {\"traceID\": \"abc\"}\n  ]\n}\n", `a JSON object with the keys "items"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), c.name)
			if err := os.WriteFile(path, []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
			r, err := Open(path, ReadOptions{})
			if err == nil {
				_, err = r.Next()
				r.Close()
			}
			if !errors.Is(err, ErrNotTraceFile) {
				t.Fatalf("err = %v, want ErrNotTraceFile", err)
			}
			msg := err.Error()
			for _, want := range []string{path, c.found, "OTLP/JSON lines", "length-prefixed OTLP/protobuf"} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q does not say %q", msg, want)
				}
			}
			if strings.Contains(msg, "too large") {
				t.Errorf("message %q speaks of size", msg)
			}
		})
	}
}

// TestTraceFilesStillDetected: what the formats look like at their start - a recording, an empty
// request, an empty file, a protobuf file without its extension - is still read.
func TestTraceFilesStillDetected(t *testing.T) {
	good := requestJSON(fullRequest(1))
	pb := mustMarshal(t, fullRequest(1))
	framed := binary.BigEndian.AppendUint32(nil, uint32(len(pb)))
	framed = append(framed, pb...)
	for _, c := range []struct {
		name    string
		content []byte
		records int
	}{
		{"t.jsonl", append(append([]byte{}, good...), '\n'), 1},
		{"stdin-like", append([]byte("\n  "), good...), 1},
		{"recording", framed, 1},
		{"empty.jsonl", nil, 0},
		{"empty", nil, 0},
		{"blank", []byte("\n\n"), 0},
		{"nothing.json", []byte(`{}`), 1},
		{"nothing2.json", []byte(`{"resourceSpans":[]}`), 1},
		{"zero.pb", []byte{0, 0, 0, 0}, 1},
	} {
		r, err := NewReader(bytes.NewReader(c.content), c.name, ReadOptions{})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if n := len(readAll(t, r)); n != c.records || r.Skipped() != 0 {
			t.Errorf("%s: %d records, %d skipped; want %d, 0", c.name, n, r.Skipped(), c.records)
		}
	}
}

// TestForeignLineInARecordingIsSkipped: a JSON line of another shape after good records is a bad
// record - reported and skipped - and the records around it are kept.
func TestForeignLineInARecordingIsSkipped(t *testing.T) {
	good := string(requestJSON(fullRequest(1)))
	data := good + "\n" + `{"level":"info","msg":"hello"}` + "\n" + good + "\n"
	for _, raw := range []bool{false, true} {
		r, err := NewReader(strings.NewReader(data), "traces.jsonl", ReadOptions{Raw: raw})
		if err != nil {
			t.Fatal(err)
		}
		recs := readAll(t, r)
		if len(recs) != 2 || r.Skipped() != 1 {
			t.Fatalf("raw %v: %d records, %d skipped; want 2, 1", raw, len(recs), r.Skipped())
		}
		if w := r.Warnings()[0].Error(); !strings.HasPrefix(w, "traces.jsonl:2: ") || !strings.Contains(w, `"level", "msg"`) {
			t.Errorf("warning %q", w)
		}
	}
}
