package main

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// TestRealisticTrafficIsWhatPdataWrites holds realisticTraffic to its word: every line reads back
// through pdata's JSON unmarshaler and marshals again to the same bytes (what the Collector's file
// exporter would have written), 8-12 spans a trace, trace ids unique, about 800 bytes a span, and
// the same bytes on every run.
func TestRealisticTrafficIsWhatPdataWrites(t *testing.T) {
	const n = 30_000
	var out bytes.Buffer
	g := newRealisticTraffic(&out)
	if err := g.write(n); err != nil {
		t.Fatal(err)
	}
	if g.spans < n || g.spans > n+12 {
		t.Fatalf("asked for %d spans, wrote %d", n, g.spans)
	}
	if g.bytes != int64(out.Len()) {
		t.Fatalf("counted %d bytes, wrote %d", g.bytes, out.Len())
	}
	perSpan := float64(out.Len()) / float64(g.spans)
	t.Logf("%d spans, %d traces, %d lines, %.0f bytes a span", g.spans, g.traces, bytes.Count(out.Bytes(), []byte{'\n'}), perSpan)
	if perSpan < 700 || perSpan > 900 {
		t.Errorf("%.0f bytes a span, want about 800", perSpan)
	}

	perTrace := map[[16]byte]int{}
	var total int
	sc := bufio.NewScanner(bytes.NewReader(out.Bytes()))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(line)
		if err != nil {
			t.Fatal(err)
		}
		again, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, line) {
			i := 0
			for i < min(len(again), len(line)) && again[i] == line[i] {
				i++
			}
			t.Fatalf("pdata writes the line otherwise, from byte %d:\n ours: %.300s\npdata: %.300s", i, line[i:], again[i:])
		}
		if td.ResourceSpans().Len() != 1 {
			t.Fatalf("a line holds %d resources, want one (an SDK's export)", td.ResourceSpans().Len())
		}
		total += td.SpanCount()
		ss := td.ResourceSpans().At(0).ScopeSpans()
		for i := range ss.Len() {
			sp := ss.At(i).Spans()
			for j := range sp.Len() {
				perTrace[sp.At(j).TraceID()]++
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if int64(total) != g.spans {
		t.Fatalf("pdata read %d spans, the generator counted %d", total, g.spans)
	}
	if uint64(len(perTrace)) != g.traces {
		t.Fatalf("%d distinct trace ids for %d traces", len(perTrace), g.traces)
	}
	hist := map[int]int{}
	for _, c := range perTrace {
		hist[c]++
		if c < 8 || c > 12 {
			t.Fatalf("a trace of %d spans, want 8-12", c)
		}
	}
	t.Logf("traces by spans: %v", hist)

	var again bytes.Buffer
	if err := newRealisticTraffic(&again).write(n); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), out.Bytes()) {
		t.Fatal("a second run wrote other bytes")
	}
}

// TestWriteRealisticTraffic is not a test: with STORMWATCH_REALISTIC_SPANS=N and
// STORMWATCH_REALISTIC_OUT=FILE it writes N spans of realisticTraffic to FILE, for `stormwatch
// analyze` or a profiler by hand, as BenchmarkAnalyzeAgainstPdata feeds them. FILE may be a named
// pipe, so that 10M spans need no disk (the test's own output goes to standard output, which is
// why the stream does not):
//
//	go test -c -o /tmp/sw.test ./cmd/stormwatch && mkfifo /tmp/traffic
//	STORMWATCH_REALISTIC_SPANS=10000000 STORMWATCH_REALISTIC_OUT=/tmp/traffic /tmp/sw.test -test.run '^TestWriteRealisticTraffic$' &
//	stormwatch analyze /tmp/traffic
func TestWriteRealisticTraffic(t *testing.T) {
	v, out := os.Getenv("STORMWATCH_REALISTIC_SPANS"), os.Getenv("STORMWATCH_REALISTIC_OUT")
	if v == "" || out == "" {
		t.Skip("writes a stream when STORMWATCH_REALISTIC_SPANS and STORMWATCH_REALISTIC_OUT are set")
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		t.Fatalf("STORMWATCH_REALISTIC_SPANS=%q: want a positive number of spans", v)
	}
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := newRealisticTraffic(f).write(n); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
