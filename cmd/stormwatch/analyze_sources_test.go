package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/tracefile"
	"github.com/stormwatch/stormwatch/tracefile/foreigntest"
)

// readAllSpans reads every span of a trace file, every attribute kept, so a conversion to another
// format carries all of it.
func readAllSpans(t *testing.T, path string) []spans.Span {
	t.Helper()
	r, err := tracefile.Open(path, tracefile.ReadOptions{Strict: true, Decode: spans.DecodeOptions{AllAttributes: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var all []spans.Span
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return all
		}
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, rec.Batch.Spans...)
	}
}

func analyzeReport(t *testing.T, path string) analyzer.Report {
	t.Helper()
	code, out, stderr := runCLI(t, "", "analyze", "--format", "json", "--fail-on", "critical", path)
	if code > 1 {
		t.Fatalf("analyze %s: exit %d\n%s", filepath.Base(path), code, stderr)
	}
	var rep analyzer.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("analyze %s: %v\n%s", filepath.Base(path), err, out)
	}
	return rep
}

// TestAnalyzeSameFindingsFromEveryFormat converts fixtures to Jaeger JSON, Zipkin JSON and Zipkin
// JSON with B3 shared spans (gzipped once, to take that path too) and analyzes each: the findings
// and the per-dependency counts must be those of the OTLP recording. For shared spans the server
// halves get derived ids, so the OTLP report's ids of those spans are translated before comparing.
func TestAnalyzeSameFindingsFromEveryFormat(t *testing.T) {
	for _, name := range []string{"amplification-27-stock", "fanout-stock", "post-deadline-stock", "untraced-proxy-stock",
		"retry-non-retryable-stock", "transient-retry-healthy-stock"} {
		t.Run(name, func(t *testing.T) {
			src := fixture(t, name)
			want := analyzeReport(t, src)
			if name != "transient-retry-healthy-stock" && len(want.Findings) == 0 {
				t.Fatalf("%s gives no finding from OTLP: the comparison would prove nothing", name)
			}
			all := readAllSpans(t, src)
			dir := t.TempDir()
			zipkin, _ := foreigntest.Zipkin(all, foreigntest.ZipkinOptions{})
			shared, renamed := foreigntest.Zipkin(all, foreigntest.ZipkinOptions{Shared: true})
			if len(renamed) == 0 {
				t.Fatalf("%s has no CLIENT-SERVER pair to write as a shared span", name)
			}
			// Server halves of one client are numbered in order of start, ties in file order.
			halves := map[spans.SpanID][]spans.Span{}
			for _, s := range all {
				if c, ok := renamed[s.SpanID]; ok {
					halves[c] = append(halves[c], s)
				}
			}
			ids := map[string]string{}
			for c, hs := range halves {
				sort.SliceStable(hs, func(a, b int) bool { return hs[a].StartUnixNano < hs[b].StartUnixNano })
				for n, s := range hs {
					ids[s.SpanID.String()] = tracefile.SharedServerSpanID(s.TraceID, c, n).String()
				}
			}
			for _, c := range []struct {
				file string
				data []byte
				ids  map[string]string
			}{
				{"jaeger.json", foreigntest.Jaeger(all), nil},
				{"zipkin.json", zipkin, nil},
				{"zipkin-shared.json.gz", gzipped(t, shared), ids},
			} {
				path := filepath.Join(dir, c.file)
				if err := os.WriteFile(path, c.data, 0o644); err != nil {
					t.Fatal(err)
				}
				got := analyzeReport(t, path)
				exp := translateIDs(want, c.ids)
				if c.ids != nil {
					// A finding lists its spans in id order, which new ids change: compare sets.
					for _, r := range []*analyzer.Report{&got, &exp} {
						for i := range r.Findings {
							sort.Strings(r.Findings[i].SpanIDs)
						}
					}
				}
				if got.Input.Spans != exp.Input.Spans || got.Input.Traces != exp.Input.Traces {
					t.Errorf("%s: input %+v, OTLP %+v", c.file, got.Input, exp.Input)
				}
				if !reflect.DeepEqual(got.Findings, exp.Findings) {
					t.Errorf("%s: findings differ from OTLP's\n got: %s\nwant: %s", c.file, mustJSON(got.Findings), mustJSON(exp.Findings))
				}
				if !reflect.DeepEqual(got.Dependencies, exp.Dependencies) {
					t.Errorf("%s: dependencies differ from OTLP's\n got: %s\nwant: %s", c.file, mustJSON(got.Dependencies), mustJSON(exp.Dependencies))
				}
			}
		})
	}
}

// translateIDs rewrites span ids in a report's findings through ids, by way of its JSON so
// evidence is translated too.
func translateIDs(rep analyzer.Report, ids map[string]string) analyzer.Report {
	if len(ids) == 0 {
		return rep
	}
	text := mustJSON(rep)
	for from, to := range ids {
		text = strings.ReplaceAll(text, from, to)
	}
	var out analyzer.Report
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		panic(err)
	}
	return out
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func gzipped(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(data)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestReplayJaegerAndZipkinFiles: replay sends the traces of a Jaeger or Zipkin JSON file as OTLP,
// every span of them, the shared spans of Zipkin split.
func TestReplayJaegerAndZipkinFiles(t *testing.T) {
	all := readAllSpans(t, fixture(t, "untraced-proxy-stock"))
	shared, _ := foreigntest.Zipkin(all, foreigntest.ZipkinOptions{Shared: true})
	dir := t.TempDir()
	for name, data := range map[string][]byte{"jaeger.json": foreigntest.Jaeger(all), "zipkin.json": shared} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			c, sink := startTestCollector(t, "")
			if stderr, err := runCmd(t, "replay", "--to", c.GRPCAddr(), "--max", path); err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			waitFor(t, sink, len(all))
		})
	}
}

// TestAnalyzeBrokenForeignFiles: a Jaeger or Zipkin document that does not decode fails the
// audit (exit 2) with the file and what is wrong, and no report.
func TestAnalyzeBrokenForeignFiles(t *testing.T) {
	all := readAllSpans(t, fixture(t, "fanout-stock"))
	jaeger := foreigntest.Jaeger(all)
	zipkin, _ := foreigntest.Zipkin(all, foreigntest.ZipkinOptions{})
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"jaeger-cut.json", jaeger[:len(jaeger)/2], "decode Jaeger JSON: the JSON ends in the middle of the document"},
		{"zipkin-cut.json.gz", gzipped(t, zipkin[:len(zipkin)/3]), "decode Zipkin v2 JSON: the JSON ends in the middle of the document"},
		{"zipkin-wrong.json", []byte(`[{"traceId": "1", "id": "2", "kind": "LEADER"}]`), `kind "LEADER": want CLIENT, SERVER, PRODUCER or CONSUMER`},
		{"jaeger-empty.json", []byte(`{"data": []}`), "no spans"},
	} {
		path := filepath.Join(dir, c.name)
		if err := os.WriteFile(path, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, stderr := runCLI(t, "", "analyze", path)
		if code != 2 || out != "" || !strings.Contains(stderr, path) || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 naming the file and saying %q", c.name, code, out, stderr, c.want)
		}
	}
}
