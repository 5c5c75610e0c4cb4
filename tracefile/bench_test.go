package tracefile

import (
	"bytes"
	"io"
	"testing"

	"github.com/stormwatch/stormwatch/internal/cputime"
	"github.com/stormwatch/stormwatch/tracefile/foreigntest"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
)

// BenchmarkRead reads 100 requests of 100 realistic spans from memory in each layout: the reader's
// throughput with decoding, what analyze pays per file.
func BenchmarkRead(b *testing.B) {
	for _, c := range []struct {
		name string
		raw  bool
	}{{"t.pb", false}, {"t.jsonl", false}, {"t.pb.gz", false}, {"t.jsonl.gz", false}, {"t.pb", true}, {"t.jsonl", true}} {
		name := c.name
		format, gz := FormatFromPath(name)
		var buf bytes.Buffer
		w := newWriter(&buf, format, gz)
		for i := 0; i < 100; i++ {
			w.WriteRequest(mustMarshal(b, realisticRequest(i, 100)), false)
		}
		w.Close()
		data := buf.Bytes()
		label := name
		if c.raw {
			label += "/raw" // what replay reads: the protobuf request too
		}
		b.Run(label, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			cpu0 := cputime.Process()
			spans := 0
			for b.Loop() {
				spans += readSpans(b, data, name, ReadOptions{Raw: c.raw})
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(spans), "ns/span")
			b.ReportMetric(float64(cputime.Process()-cpu0)/float64(spans), "cpu-ns/span")
		})
	}
}

// BenchmarkReadForeignRaw reads a Jaeger document, and the same spans as a Zipkin one, of 100
// traces of 100 realistic spans with Raw, as replay reads a Jaeger or Zipkin file: each trace's
// batch encoded as an OTLP protobuf request.
func BenchmarkReadForeignRaw(b *testing.B) {
	all := realisticSpans(b, 100, 100)
	zipkin, _ := foreigntest.Zipkin(all, foreigntest.ZipkinOptions{})
	for _, doc := range []struct {
		name string
		data []byte
	}{{"jaeger", foreigntest.Jaeger(all)}, {"zipkin", zipkin}} {
		b.Run(doc.name, func(b *testing.B) {
			b.SetBytes(int64(len(doc.data)))
			b.ReportAllocs()
			cpu0 := cputime.Process()
			n := 0
			for b.Loop() {
				n += readSpans(b, doc.data, "t.json", ReadOptions{Raw: true})
			}
			b.ReportMetric(float64(cputime.Process()-cpu0)/float64(n), "cpu-ns/span")
		})
	}
}

// BenchmarkProtoToJSON compares, on one 100-span request (the recorder's cost per request for a
// .jsonl file): the wire transcoder ProtoToJSON uses, the re-encoding it falls back to,
// and protojson (which also gets the ids wrong).
func BenchmarkProtoToJSON(b *testing.B) {
	body := mustMarshal(b, realisticRequest(0, 100))
	b.Run("ours", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			if _, err := ProtoToJSON(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("generated-types", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			if _, err := viaGenerated(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("protojson", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		opt := protojson.MarshalOptions{UseEnumNumbers: true}
		for b.Loop() {
			req := &coltracepb.ExportTraceServiceRequest{}
			if err := proto.Unmarshal(body, req); err != nil {
				b.Fatal(err)
			}
			if _, err := opt.Marshal(req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkJSONToProto is the other direction on the same request: what replay pays per request
// of a .jsonl recording, and the recorder per OTLP/JSON request it writes to .pb.
func BenchmarkJSONToProto(b *testing.B) {
	body := requestJSON(realisticRequest(0, 100))
	b.ReportAllocs()
	defer reportCPU(b)()
	var dst []byte
	for b.Loop() {
		var err error
		if dst, err = appendJSONToProto(dst[:0], body); err != nil {
			b.Fatal(err)
		}
	}
}

// reportCPU reports the process's CPU time per operation (GC included): on a shared machine wall
// time per operation mostly measures the neighbours.
func reportCPU(b *testing.B) func() {
	start := cputime.Process()
	return func() { b.ReportMetric(float64(cputime.Process()-start)/float64(b.N), "cpu-ns/op") }
}

// readSpans reads data, a file named name, to its end with opts, and counts its spans.
func readSpans(b *testing.B, data []byte, name string, opts ReadOptions) int {
	r, err := NewReader(bytes.NewReader(data), name, opts)
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return n
		}
		if err != nil {
			b.Fatal(err)
		}
		n += len(rec.Batch.Spans)
	}
}
