package engine_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/render"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/fixtures"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/tracefile"
)

// TestPackedBatchesAnswerAsSpans: a batch its producer packed by trace (the collector's and the
// trace reader's, spans.DecodeOptions.PackByTrace) is filed block by block, without the analyzer
// reading its spans. Every fixture, fed both ways, must give the same report and the same trace
// views - as recorded (one batch a line), with the lines' spans interleaved across traces in small
// batches (so the producer's grouping, not the recording's, decides each block), with a trace cap
// that truncates most traces, and with a clock a year before the spans (every span time in the
// future, counted from the blocks' facts). The cap and the clock take the paths that read a block
// back; the messaging fixtures take the one for deliveries that start a trace of their own.
func TestPackedBatchesAnswerAsSpans(t *testing.T) {
	for _, name := range fixtures.Names() {
		body, err := fixtures.Read(name)
		if err != nil {
			t.Fatal(err)
		}
		var lines [][]byte
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			lines = append(lines, slices.Clone(sc.Bytes()))
		}
		for _, c := range []struct {
			name     string
			batches  func(pack bool) []*spans.Batch
			capTrace int
			clock    bool
		}{
			{name: "as recorded", batches: func(pack bool) []*spans.Batch { return decodeLines(t, lines, pack) }},
			{name: "protobuf", batches: func(pack bool) []*spans.Batch { return decodeProtoLines(t, lines, pack) }},
			{name: "interleaved", batches: func(pack bool) []*spans.Batch { return dealt(decodeLines(t, lines, false), 7, pack) }},
			{name: "capped", capTrace: 3, batches: func(pack bool) []*spans.Batch { return dealt(decodeLines(t, lines, false), 5, pack) }},
			{name: "clock behind", clock: true, batches: func(pack bool) []*spans.Batch { return decodeLines(t, lines, pack) }},
		} {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				var out [2]string
				for k, pack := range []bool{false, true} {
					cfg := engine.Config{Detectors: suite.Default(), WindowInterval: -1, MaxTraceSpans: c.capTrace}
					if c.clock {
						cfg.Now = func() time.Time { return time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC) }
					}
					a := engine.New(cfg)
					var ids []spans.TraceID
					for _, b := range c.batches(pack) {
						if pack && b.Packed == nil {
							t.Fatal("the batch was not packed")
						}
						for _, s := range b.Spans {
							ids = append(ids, s.TraceID)
						}
						for _, pt := range b.Packed {
							ids = append(ids, pt.ID)
						}
						if err := a.ConsumeBatch(context.Background(), b); err != nil {
							t.Fatal(err)
						}
					}
					a.Flush()
					rep := a.Report()
					var buf bytes.Buffer
					if err := render.JSON(&buf, &rep); err != nil {
						t.Fatal(err)
					}
					snap := a.Snapshot(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
					slices.SortFunc(ids, func(x, y spans.TraceID) int { return bytes.Compare(x[:], y[:]) })
					for _, id := range slices.Compact(ids) {
						if v, ok := snap.Trace(id); ok {
							if err := json.NewEncoder(&buf).Encode(v); err != nil {
								t.Fatal(err)
							}
						}
					}
					out[k] = buf.String()
				}
				if out[0] != out[1] {
					t.Errorf("packed by trace, the answer differs:\n%s", firstDifference(out[0], out[1]))
				}
			})
		}
	}
}

func decodeLines(t *testing.T, lines [][]byte, pack bool) []*spans.Batch {
	t.Helper()
	var out []*spans.Batch
	for _, l := range lines {
		b, err := spans.DecodeJSON(slices.Clone(l), spans.DecodeOptions{PackByTrace: pack})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// decodeProtoLines decodes each OTLP/JSON line as the protobuf request it stands for (packed
// straight from the wire when pack is set), or as itself into span values when not.
func decodeProtoLines(t *testing.T, lines [][]byte, pack bool) []*spans.Batch {
	t.Helper()
	if !pack {
		return decodeLines(t, lines, false)
	}
	var out []*spans.Batch
	for _, l := range lines {
		body, err := tracefile.JSONToProto(l)
		if err != nil {
			t.Fatal(err)
		}
		b, err := spans.DecodeProto(body, spans.DecodeOptions{PackByTrace: true})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// dealt deals the batches' spans out one span of each trace in turn (interleave), into batches
// of n, so that a batch's traces come interleaved; packed by trace when pack is set.
func dealt(bs []*spans.Batch, n int, pack bool) []*spans.Batch {
	var all []spans.Span
	for _, b := range bs {
		all = append(all, b.Spans...)
	}
	rest := interleave(all)
	var out []*spans.Batch
	for len(rest) > 0 {
		m := min(n, len(rest))
		b := &spans.Batch{Spans: slices.Clone(rest[:m])}
		if pack {
			b.Pack()
		}
		out = append(out, b)
		rest = rest[m:]
	}
	return out
}

// firstDifference shows where two texts part.
func firstDifference(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	from := max(0, i-200)
	return "spans: ..." + a[from:min(len(a), i+200)] + "\npacked: ..." + b[from:min(len(b), i+200)]
}

// TestPackedBlockThatDoesNotRead: a block that does not unpack (only a bug in a producer's packer
// makes one) over a trace's cap loses its spans, counted as truncated, and takes nothing down -
// the ingest path runs on the collector's one consuming goroutine.
func TestPackedBlockThatDoesNotRead(t *testing.T) {
	a := engine.New(engine.Config{Detectors: suite.Default(), WindowInterval: -1, MaxTraceSpans: 1})
	bad := spans.PackedTrace{ID: spans.TraceID{1}, Block: []byte{0xff, 1, 2, 3}, Spans: 2}
	if err := a.ConsumeBatch(context.Background(), &spans.Batch{Packed: []spans.PackedTrace{bad}}); err != nil {
		t.Fatal(err)
	}
	a.Flush()
	rep := a.Report()
	if !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, "(2 spans dropped)") }) {
		t.Fatalf("the two spans are not counted as dropped: %q", rep.Notes)
	}
}
