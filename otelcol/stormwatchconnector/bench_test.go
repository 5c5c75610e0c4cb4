package stormwatchconnector

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/fixtures"
	"github.com/stormwatch/stormwatch/internal/cputime"
	"github.com/stormwatch/stormwatch/spans"
)

// BenchmarkConvert is the connector's conversion of a request from pdata into spans packed by
// trace, in its pooled buffers as ConsumeTraces does, beside the wire decoder making the same
// form from the same spans' protobuf: what the connector pays per request because the collector
// has already decoded the protobuf (the receiver's unmarshal is not counted here).
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
		cpu0 := cputime.Process()
		for b.Loop() {
			_ = c.withBatch(td, func(*spans.Batch) error { return nil })
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/span")
		b.ReportMetric(float64((cputime.Process()-cpu0).Nanoseconds())/float64(b.N*n), "cpu-ns/span")
	})
	b.Run("from=protobuf", func(b *testing.B) {
		b.ReportAllocs()
		cpu0 := cputime.Process()
		for b.Loop() {
			if _, err := spans.DecodeProto(body, spans.DecodeOptions{PackByTrace: true}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/span")
		b.ReportMetric(float64((cputime.Process()-cpu0).Nanoseconds())/float64(b.N*n), "cpu-ns/span")
	})
}

// BenchmarkEmitFindings is one emission that carries every finding of the fixtures as a new log
// record (a fresh emitter each op), with the metrics: what the connector pays per finding on top
// of the analysis.
func BenchmarkEmitFindings(b *testing.B) {
	dets := suite.Default()
	an := engine.New(engine.Config{Detectors: dets})
	conv := newConverter(false)
	for _, c := range fixtures.Cases {
		if err := an.ConsumeBatch(context.Background(), conv.convert(merged(b, c.Name))); err != nil {
			b.Fatal(err)
		}
	}
	an.Flush()
	n := len(an.Report().Findings)
	set := connectortest.NewNopSettings(NewFactory().Type())
	b.ReportAllocs()
	cpu0 := cputime.Process()
	for b.Loop() {
		em := newEmitter(set, an, dets, time.Unix(0, 0))
		if out := em.collect(time.Unix(1, 0), true, true); out.logs.LogRecordCount() != n {
			b.Fatalf("%d records, want %d", out.logs.LogRecordCount(), n)
		}
	}
	b.ReportMetric(float64((cputime.Process()-cpu0).Nanoseconds())/float64(b.N*n), "cpu-ns/finding")
}
