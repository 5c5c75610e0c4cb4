package spans_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stormwatch/stormwatch/fixtures"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/spans/spanstest"
)

// corpusJSON is every OTLP/JSON body the repository holds: the seeds, the fuzzers' corpora (the
// decoder's and the trace-file transcoder's) and every request of every recorded fixture.
func corpusJSON(t testing.TB) [][]byte {
	bodies := jsonSeeds(t)
	_, bench, _ := benchBodies(t)
	bodies = append(bodies, bench, toJSON(t, richRequest()))
	for _, dir := range []string{"testdata/fuzz/FuzzDecodeJSON", "testdata/fuzz/FuzzDecodeJSONAsBefore", "../tracefile/testdata/fuzz/FuzzJSONToProto"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			// go test fuzz v1, then one []byte("...") line.
			for line := range strings.Lines(string(raw)) {
				line = strings.TrimSpace(line)
				if q, ok := strings.CutPrefix(line, "[]byte("); ok {
					if s, err := strconv.Unquote(strings.TrimSuffix(q, ")")); err == nil {
						bodies = append(bodies, []byte(s))
					}
				}
			}
		}
	}
	// The decoder's rules where protobuf's differ: repeated members, null, ids, dropped values.
	a := func(kv string) string { return `{"key":"resilience.owner","value":` + kv + `}` }
	for _, members := range []string{
		jsonIDs + `,"name":"a","name":null,"kind":2,"kind":null,"traceState":"ot=th:8","traceState":"x"`,
		jsonIDs + `,"attributes":[` + a(`{"stringValue":"a"}`) + `],"name":"n","attributes":null,"events":[{"name":"e"}],"events":[],"links":[{}],"links":null`,
		jsonIDs + `,"status":{"code":2,"message":"m"},"status":{"code":null,"message":null},"status":null`,
		jsonIDs + `,"parentSpanId":"00000000000000cc","parentSpanId":"zz","startTimeUnixNano":"5","startTimeUnixNano":null`,
		jsonIDs + `,"traceId":"000000000000000000000000000000aa0","spanId":null,"spanId":"00000000000000bb"`,
		`"traceId":"00000000000000000000000000000000","spanId":"00000000000000bb"`,
		jsonIDs + `,"links":[{"traceId":"00000000000000000000000000000000","spanId":"0000000000000000"},{"traceId":"ab","spanId":"00000000000000bb"},null]`,
		jsonIDs + `,"attributes":[{"value":{"stringValue":"v"},"key":"not.known","value":{"intValue":"zz"},"key":"resilience.owner"},{"key":"not.known","value":{"intValue":"zz"},"key":"resilience.owner"}]`,
		jsonIDs + `,"attributes":[{"key":"resilience.owner","value":{"stringValue":"a"},"value":{}},{"key":"resilience.owner","value":{"stringValue":"a"},"value":null},null,{}]`,
		jsonIDs + `,"attributes":[` + a(`{"foo":1,"stringValue":"a"}`) + `,` + a(`{"stringValue":null,"intValue":"7"}`) + `,` + a(`{"arrayValue":null}`) + `,` + a(`{"kvlistValue":{"values":[null,{"key":"k"},{"value":{"boolValue":true},"key":"x","value":{}}],"values":[{"key":"y","value":null}]}}`) + `]`,
		jsonIDs + `,"attributes":[` + a(`{"arrayValue":{"values":[null,{},{"bytesValue":"-_8"},{"doubleValue":"-Infinity"},{"intValue":1e3}]}}`) + `]`,
		jsonIDs + `,"attributes":[{"key":"not.known","value":{"stringValue":"a","intValue":1}}]`,
		jsonIDs + `,"attributes":[` + a(`{"stringValue":"a","foo":1}`) + `]`,
	} {
		bodies = append(bodies, []byte(jsonSpan(members)))
	}
	for _, rs := range []string{
		`{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"s"}},{"key":"host.name","value":{"stringValue":"h"}}]},"resource":{"attributes":[{"key":"url.scheme","value":{"stringValue":"u"}}]},"scopeSpans":[{"spans":[{` + jsonIDs + `}]}]}`,
		`{"scopeSpans":[{"spans":[{` + jsonIDs + `}]}],"resource":{"attributes":[{"key":"host.name","value":{"stringValue":"h"}}],"attributes":null},"resource":{}}`,
		`{"resource":{"attributes":[{"key":"service.name","value":{"intValue":"3"}},{"value":{"stringValue":"i"},"key":"service.instance.id"}]},"resource":null,"scopeSpans":[{"scope":{"name":"a"},"scope":{"name":null},"spans":[{` + jsonIDs + `}]},{"scope":{"name":"b","attributes":[{"key":"x","value":{"intValue":"q"}}]},"spans":[{` + jsonIDs + `}],"spans":[{` + jsonIDs + `}]},null]}`,
	} {
		bodies = append(bodies, []byte(`{"resourceSpans":[`+rs+`],"resourceSpans":[`+rs+`,null]}`))
	}
	for _, name := range fixtures.Names() {
		records, err := fixtures.Read(name)
		if err != nil {
			t.Fatal(err)
		}
		for line := range bytes.Lines(records) {
			if line = bytes.TrimSpace(line); len(line) > 0 {
				bodies = append(bodies, line)
			}
		}
	}
	return bodies
}

// errClass is what the callers of the decoders tell apart: accepted, too deep, malformed.
func errClass(err error) string {
	switch {
	case err == nil:
		return "accepted"
	case !errors.Is(err, spans.ErrMalformed) || !spans.IsPermanent(err):
		return "not a permanent ErrMalformed: " + err.Error()
	case errors.Is(err, spans.ErrTooDeep):
		return "too deep"
	}
	return "malformed"
}

// decodedAsBefore holds DecodeJSON to the decoder it replaced (spans.DecodeJSONOld): on body, the
// same verdict, the same batch, fresh and into a recycled batch, and with PackByTrace the same
// packed blocks byte for byte.
func decodedAsBefore(t *testing.T, dirty, body []byte) {
	t.Helper()
	for _, o := range bothOptions {
		want, werr := spans.DecodeJSONOld(body, o.opt)
		got, err := spans.DecodeJSON(body, o.opt)
		if errClass(err) != errClass(werr) {
			t.Fatalf("%s: DecodeJSON: %v; as before: %v\n%q", o.name, err, werr, body)
		}
		if err != nil {
			continue
		}
		if d := spanstest.Diff(want, got); d != "" {
			t.Fatalf("%s: DecodeJSON differs from before:\n%s\n%q", o.name, d, body)
		}
		again, err := decodeInto(t, true, dirty, body, o.opt)
		if err != nil {
			t.Fatalf("%s: into a recycled batch: %v", o.name, err)
		}
		if d := spanstest.Diff(want, again); d != "" {
			t.Fatalf("%s: DecodeJSONInto a recycled batch differs from before:\n%s\n%q", o.name, d, body)
		}
		packed := o.opt
		packed.PackByTrace = true
		wantP := &spans.Batch{}
		if err := spans.DecodeJSONIntoOld(wantP, dirty, packed); err != nil {
			t.Fatal(err)
		}
		if err := spans.DecodeJSONIntoOld(wantP, body, packed); err != nil {
			t.Fatalf("%s: packed, as before: %v", o.name, err)
		}
		gotP, err := decodeInto(t, true, dirty, body, packed)
		if err != nil {
			t.Fatalf("%s: packed: %v", o.name, err)
		}
		if gotP.Rejected != wantP.Rejected || gotP.RejectReason != wantP.RejectReason || len(gotP.Packed) != len(wantP.Packed) || len(gotP.Spans) != 0 {
			t.Fatalf("%s: packed: %d rejected, %d traces, %d spans; as before %d, %d, 0\n%q", o.name,
				gotP.Rejected, len(gotP.Packed), len(gotP.Spans), wantP.Rejected, len(wantP.Packed), body)
		}
		for k := range gotP.Packed {
			g, w := gotP.Packed[k], wantP.Packed[k]
			if g.ID != w.ID || g.Spans != w.Spans || g.UnsetTimes != w.UnsetTimes || g.Latest != w.Latest || g.RootLinks != w.RootLinks {
				t.Fatalf("%s: packed trace %d: %+v; as before %+v\n%q", o.name, k, g, w, body)
			}
			// Not byte for byte: the packer finds a string again by the address of its bytes as
			// well as by its text, so which repeats it writes inline depends on where the strings
			// lie - in the JSON before, in its protobuf form now. What the blocks hold must agree.
			gs, err := spans.UnpackSpans(g.Block)
			if err != nil {
				t.Fatal(err)
			}
			ws, err := spans.UnpackSpans(w.Block)
			if err != nil {
				t.Fatal(err)
			}
			if d := spanstest.Diff(&spans.Batch{Spans: ws}, &spans.Batch{Spans: gs}); d != "" {
				t.Fatalf("%s: packed trace %d unpacks to other spans than before:\n%s\n%q", o.name, k, d, body)
			}
		}
	}
}

// TestDecodeJSONAsBefore runs the comparison on every OTLP/JSON body the repository holds.
func TestDecodeJSONAsBefore(t *testing.T) {
	bodies := corpusJSON(t)
	dirty := jsonSeeds(t)[0]
	for _, body := range bodies {
		decodedAsBefore(t, dirty, body)
	}
	if len(bodies) < 100 {
		t.Fatalf("only %d bodies: the corpora were not read", len(bodies))
	}
}

// FuzzDecodeJSONAsBefore: DecodeJSON decides and decodes every input as the decoder it replaced.
func FuzzDecodeJSONAsBefore(f *testing.F) {
	for _, body := range corpusJSON(f) {
		f.Add(body)
	}
	dirty := jsonSeeds(f)[0]
	f.Fuzz(func(t *testing.T, body []byte) {
		decodedAsBefore(t, dirty, body)
	})
}
