package spans_test

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"unicode/utf8"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/stormwatch/stormwatch/fixtures"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/spans/spanstest"
	"github.com/stormwatch/stormwatch/tracefile"
)

// maxFuzzSeed bounds a seed's size. The fuzzer mutates and minimizes inputs as a whole: one of
// hundreds of kilobytes (a request of thousands of spans) costs it tens of milliseconds an
// execution and minutes to minimize whatever it finds there, so that a run spends its time on
// that input alone (FuzzDecodeJSON made 50 executions in 30 s with one of 428 KB). The large edge
// cases are the unit tests' (TestDecodeProtoEdgeCases, TestDecodeJSONEdgeCases); the fuzzer's
// seeds are requests of a few spans.
const maxFuzzSeed = 16 << 10

// protoSeeds are the protobuf bodies every fuzz run starts from (also checked in under
// testdata/fuzz/FuzzDecodeProto, where fuzzing adds what it finds).
func protoSeeds(t testing.TB) [][]byte {
	seeds := [][]byte{marshal(t, sdkRequest(t))}
	for _, ec := range edgeCases() {
		if pb := marshal(t, ec.req); len(pb) <= maxFuzzSeed {
			seeds = append(seeds, pb)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(wireRuleBodies())) {
		seeds = append(seeds, wireRuleBodies()[name])
	}
	// Values at the nesting limit and one past it, in an attribute the decoders drop.
	for _, n := range []int{spans.MaxValueDepth, spans.MaxValueDepth + 1} {
		pb, _ := deepRequest(t, "span", "custom.unread", n, true)
		seeds = append(seeds, pb)
	}
	return seeds
}

func jsonSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, b := range protoSeeds(t) {
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, toJSON(t, &req))
	}
	// Small hand-written bodies give the mutator structure to work with.
	for _, members := range []string{
		jsonIDs + `,"kind":"SPAN_KIND_CLIENT","status":{"code":"STATUS_CODE_ERROR","message":"m"}`,
		jsonIDs + `,"startTimeUnixNano":1700000000000000001,"endTimeUnixNano":"18446744073709551615"`,
		jsonIDs + `,"attributes":[{"key":"resilience.attempt","value":{"intValue":-3}},{"value":{"stringValue":"v"},"key":"resilience.owner"}]`,
		jsonIDs + `,"attributes":[{"key":"resilience.backoff_ms","value":{"doubleValue":"NaN"}},{"key":"resilience.terminal","value":{"boolValue":true}}]`,
		jsonIDs + `,"name":"a\"b\u00e9\ud83d\ude00","attributes":[{"key":"resilience.operation.name","value":{"arrayValue":{"values":[{"stringValue":"x"},{"kvlistValue":{"values":[{"key":"k","value":{"bytesValue":"yv4="}}]}}]}}}]`,
		jsonIDs + `,"events":[{"timeUnixNano":"9","name":"e","attributes":[{"key":"exception.type","value":{"stringValue":"E"}}]}],"links":[{"traceId":"000000000000000000000000000000dd","spanId":"00000000000000ee"}]`,
	} {
		seeds = append(seeds, []byte(jsonSpan(members)))
	}
	return seeds
}

// TestWriteFuzzSeeds regenerates the checked-in seed corpora when STORMWATCH_WRITE_FUZZ_SEEDS=1.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("STORMWATCH_WRITE_FUZZ_SEEDS") != "1" {
		t.Skip("set STORMWATCH_WRITE_FUZZ_SEEDS=1 to rewrite testdata/fuzz seeds")
	}
	for target, seeds := range map[string][][]byte{"FuzzDecodeProto": protoSeeds(t), "FuzzDecodeJSON": jsonSeeds(t)} {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, s := range seeds {
			body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s)) + ")\n"
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// FuzzDecodeProto: DecodeProto never panics, and whenever the generated code accepts the bytes,
// DecodeProto accepts them too and agrees with the reference conversion, and the result survives
// an OTLP/JSON round trip.
func FuzzDecodeProto(f *testing.F) {
	for _, s := range protoSeeds(f) {
		f.Add(s)
	}
	dirty := protoSeeds(f)[0] // what a recycled batch held before
	f.Fuzz(func(t *testing.T, body []byte) {
		var req coltracepb.ExportTraceServiceRequest
		refErr := proto.Unmarshal(body, &req)
		for _, o := range bothOptions {
			got, err := spans.DecodeProto(body, o.opt)
			// Straight into the packed form: the same input accepted, whatever it is, and the
			// same refused in the same words.
			packedOpt := o.opt
			packedOpt.PackByTrace = true
			if _, perr := spans.DecodeProto(body, packedOpt); fmt.Sprint(perr) != fmt.Sprint(err) {
				t.Fatalf("%s: DecodeProto says %v, with PackByTrace %v", o.name, err, perr)
			}
			packedAsBefore(t, dirty, body, o.opt)
			if refErr != nil {
				continue // only "no panic" is asked of input the generated code rejects
			}
			if errors.Is(err, spans.ErrTooDeep) {
				continue // a documented bound the generated code does not have
			}
			if err != nil {
				t.Fatalf("%s: generated code accepts the body, DecodeProto says %v", o.name, err)
			}
			if d := spanstest.Diff(spanstest.FromProto(&req, o.opt), got); d != "" {
				t.Fatalf("%s: DecodeProto differs from FromProto:\n%s", o.name, d)
			}
			// Decoded into a batch that held another request: the same batch.
			if again, err := decodeInto(t, false, dirty, body, o.opt); err != nil {
				t.Fatalf("%s: DecodeProtoInto a recycled batch: %v", o.name, err)
			} else if d := spanstest.Diff(got, again); d != "" {
				t.Fatalf("%s: DecodeProtoInto a recycled batch differs:\n%s", o.name, d)
			}
			packedByTrace(t, false, dirty, body, o.opt, got)
			back, err := spans.DecodeJSON(encodeJSON(t, got), o.opt)
			if err != nil {
				t.Fatalf("%s: DecodeJSON of the batch as OTLP/JSON: %v", o.name, err)
			}
			if d := spanstest.Diff(exported(got), back); d != "" {
				t.Fatalf("%s: JSON round trip changed the batch:\n%s", o.name, d)
			}
			// The same request as OTLP/JSON must decode to the same batch: a differential test
			// of DecodeJSON driven by the protobuf fuzzer's requests.
			js, err := spanstest.RequestToJSON(&req)
			if err != nil {
				t.Fatal(err)
			}
			// No ErrTooDeep allowance here: one nesting limit for both decoders, so what the
			// collector accepts as protobuf the reader reads back from a .jsonl recording.
			fromJSON, err := spans.DecodeJSON(js, o.opt)
			if err != nil {
				t.Fatalf("%s: DecodeJSON of the request's OTLP/JSON: %v\n%s", o.name, err, js)
			}
			if d := spanstest.Diff(got, fromJSON); d != "" {
				t.Fatalf("%s: DecodeJSON differs from DecodeProto:\n%s\n%s", o.name, d, js)
			}
		}
	})
}

// FuzzDecodeJSON: DecodeJSON never panics, errors are ErrMalformed, and what it accepts survives
// a round trip through AppendProto and the protobuf-to-JSON writer.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range jsonSeeds(f) {
		f.Add(s)
	}
	dirty := jsonSeeds(f)[0] // what a recycled batch held before
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, o := range bothOptions {
			got, err := spans.DecodeJSON(body, o.opt)
			again, errInto := decodeInto(t, true, dirty, body, o.opt)
			if (err == nil) != (errInto == nil) {
				t.Fatalf("%s: DecodeJSON: %v; DecodeJSONInto a recycled batch: %v", o.name, err, errInto)
			}
			if err != nil {
				if !errors.Is(err, spans.ErrMalformed) {
					t.Fatalf("error without ErrMalformed: %v", err)
				}
				continue
			}
			if d := spanstest.Diff(got, again); d != "" {
				t.Fatalf("%s: DecodeJSONInto a recycled batch differs:\n%s", o.name, d)
			}
			packedByTrace(t, true, dirty, body, o.opt, got)
			// One nesting limit for both decoders: the request as protobuf (what a .pb recording
			// holds) is within it too.
			var req coltracepb.ExportTraceServiceRequest
			if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, &req); err == nil {
				if pb, err := proto.Marshal(&req); err == nil {
					if _, err := spans.DecodeProto(pb, o.opt); errors.Is(err, spans.ErrTooDeep) {
						t.Fatalf("%s: DecodeJSON accepts the body, DecodeProto of its protobuf form: %v", o.name, err)
					}
				}
			}
			if !utf8.Valid(body) {
				continue // AppendProto replaces invalid UTF-8, so the round trip cannot be exact
			}
			back, err := spans.DecodeJSON(encodeJSON(t, got), o.opt)
			if err != nil {
				t.Fatalf("%s: DecodeJSON of the batch as OTLP/JSON: %v", o.name, err)
			}
			if d := spanstest.Diff(exported(got), back); d != "" {
				t.Fatalf("%s: JSON round trip changed the batch:\n%s", o.name, d)
			}
		}
	})
}

// decodeInto decodes body into a batch that held another request first (dirty), as the collector
// decodes into the batches its consumer gave back, with DecodeProtoInto or DecodeJSONInto.
func decodeInto(t *testing.T, isJSON bool, dirty, body []byte, opt spans.DecodeOptions) (*spans.Batch, error) {
	t.Helper()
	into := spans.DecodeProtoInto
	if isJSON {
		into = spans.DecodeJSONInto
	}
	b := &spans.Batch{}
	if err := into(b, dirty, opt); err != nil {
		t.Fatalf("the dirtying request: %v", err)
	}
	return b, into(b, body, opt)
}

// A batch decoded into again - after a larger request, a smaller one, a rejected span, a body that
// failed half way - holds exactly what a fresh decode of the same body gives: nothing of the
// requests before it.
func TestDecodeIntoARecycledBatchMatchesFresh(t *testing.T) {
	for _, format := range []struct {
		name   string
		isJSON bool
		seeds  [][]byte
		fresh  func([]byte, spans.DecodeOptions) (*spans.Batch, error)
	}{
		{"protobuf", false, protoSeeds(t), spans.DecodeProto},
		{"json", true, jsonSeeds(t), spans.DecodeJSON},
	} {
		for _, o := range bothOptions {
			t.Run(format.name+"/"+o.name, func(t *testing.T) {
				order := append(slices.Clone(format.seeds), format.seeds...)
				slices.Reverse(order[len(format.seeds):])
				into := spans.DecodeProtoInto
				if format.isJSON {
					into = spans.DecodeJSONInto
				}
				b := &spans.Batch{}
				checked := 0
				for i, body := range order {
					want, werr := format.fresh(body, o.opt)
					err := into(b, body, o.opt)
					if (err == nil) != (werr == nil) {
						t.Fatalf("body %d: into a recycled batch: %v; fresh: %v", i, err, werr)
					}
					if err != nil {
						continue // b holds nothing usable; the next body reuses it
					}
					if d := spanstest.Diff(want, b); d != "" {
						t.Fatalf("body %d: decoded into a recycled batch differs from fresh:\n%s", i, d)
					}
					checked++
					// What an owner may do before releasing: shorten the spans, or swap in
					// its own. The next decode must not see the slots they hid.
					switch i % 3 {
					case 1:
						b.Spans = b.Spans[:0]
					case 2:
						b.Spans = make([]spans.Span, 1)
					}
				}
				if checked < len(format.seeds) {
					t.Fatalf("only %d of %d bodies decoded: the check checked little", checked, len(order))
				}
			})
		}
	}
}

// packedByTrace decodes body with PackByTrace into a recycled batch, and checks the packed
// traces against want, the batch decoded without it (checkPacked), rejects included.
func packedByTrace(t *testing.T, isJSON bool, dirty, body []byte, opt spans.DecodeOptions, want *spans.Batch) {
	t.Helper()
	opt.PackByTrace = true
	b, err := decodeInto(t, isJSON, dirty, body, opt)
	if err != nil {
		t.Fatalf("with PackByTrace: %v", err)
	}
	checkPacked(t, want.Spans, b.Packed)
	if b.Rejected != want.Rejected || b.RejectReason != want.RejectReason || len(b.Spans) != 0 {
		t.Fatalf("with PackByTrace: %d rejected (%q), %d spans left; want %d (%q), 0",
			b.Rejected, b.RejectReason, len(b.Spans), want.Rejected, want.RejectReason)
	}
}

// packedAsBefore decodes body packed by trace, straight from the wire and the way before the
// protobuf decoder wrote the packed form itself (spans.DecodeProtoPackedVia: span values packed),
// each into a batch that held dirty first: the same blocks byte for byte, the same facts and
// rejects, and both accept or both refuse. Both ways end in packedVerdict, which words a refusal
// as DecodeProto does, so the error texts agree by construction here; FuzzDecodeProto holds
// them to DecodeProto's own.
func packedAsBefore(t *testing.T, dirty, body []byte, opt spans.DecodeOptions) {
	t.Helper()
	opt.PackByTrace = true
	got, want := &spans.Batch{}, &spans.Batch{}
	if err := spans.DecodeProtoInto(got, dirty, opt); err != nil {
		t.Fatalf("the dirtying request: %v", err)
	}
	if err := spans.DecodeProtoPackedVia(want, dirty, opt); err != nil {
		t.Fatalf("the dirtying request, the way before: %v", err)
	}
	err := spans.DecodeProtoInto(got, body, opt)
	werr := spans.DecodeProtoPackedVia(want, body, opt)
	if fmt.Sprint(err) != fmt.Sprint(werr) {
		t.Fatalf("all=%v: packed straight from the wire: %v; the way before: %v", opt.AllAttributes, err, werr)
	}
	if err != nil {
		return
	}
	if got.Rejected != want.Rejected || got.RejectReason != want.RejectReason {
		t.Fatalf("all=%v: %d rejected (%q); the way before %d (%q)", opt.AllAttributes, got.Rejected, got.RejectReason, want.Rejected, want.RejectReason)
	}
	if len(got.Packed) != len(want.Packed) {
		t.Fatalf("all=%v: %d traces; the way before %d", opt.AllAttributes, len(got.Packed), len(want.Packed))
	}
	for k := range got.Packed {
		g, w := got.Packed[k], want.Packed[k]
		if !bytes.Equal(g.Block, w.Block) {
			at := 0
			for at < min(len(g.Block), len(w.Block)) && g.Block[at] == w.Block[at] {
				at++
			}
			t.Fatalf("all=%v: trace %d (%s): the block (%d bytes) differs from the one packed the way before (%d) from byte %d",
				opt.AllAttributes, k, g.ID, len(g.Block), len(w.Block), at)
		}
		if g.ID != w.ID || g.Spans != w.Spans || g.UnsetTimes != w.UnsetTimes || g.Latest != w.Latest || g.RootLinks != w.RootLinks {
			t.Fatalf("all=%v: trace %d: %+v; the way before %+v", opt.AllAttributes, k, g, w)
		}
	}
}

// TestDecodePackedAsBefore holds the protobuf decoder's packed form to the way before it wrote it
// straight from the wire (see packedAsBefore) on every request of every recorded fixture, as
// protobuf, and on the benchmarks' payloads (one with every span's ids after its other fields).
func TestDecodePackedAsBefore(t *testing.T) {
	bodies := [][]byte{marshal(t, benchRequest()), marshal(t, richRequest()), idsLast(t, benchRequest())}
	for _, name := range fixtures.Names() {
		records, err := fixtures.Read(name)
		if err != nil {
			t.Fatal(err)
		}
		for line := range bytes.Lines(records) {
			if line = bytes.TrimSpace(line); len(line) == 0 {
				continue
			}
			pb, err := tracefile.JSONToProto(line)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			bodies = append(bodies, pb)
		}
	}
	dirty := protoSeeds(t)[0]
	for _, body := range bodies {
		for _, o := range bothOptions {
			packedAsBefore(t, dirty, body, o.opt)
		}
	}
	if len(bodies) < 100 {
		t.Fatalf("only %d requests: the fixtures were not read", len(bodies))
	}
}
