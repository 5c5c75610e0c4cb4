package stormwatchconnector

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormwatch/stormwatch/spans"
)

// BenchmarkConvert is the connector's pdata -> span form conversion beside the wire decoder on
// the same spans: what the connector pays per request because the collector has already decoded
// the protobuf (the receiver's unmarshal is not counted here).
func BenchmarkConvert(b *testing.B) {
	td := merged(b, "amplification-27-reference")
	body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		b.Fatal(err)
	}
	n := td.SpanCount()
	b.Run("from=pdata", func(b *testing.B) {
		c := newConverter(false)
		b.ReportAllocs()
		for b.Loop() {
			c.convert(td)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/span")
	})
	b.Run("from=protobuf", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := spans.DecodeProto(body, spans.DecodeOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/span")
	})
}
