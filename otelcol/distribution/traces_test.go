package distribution

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/fixtures"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/spans/spanstest"
)

// fixtureTraces reads a fixture (OTLP/JSON lines) into one pdata Traces holding all its spans.
func fixtureTraces(t testing.TB, name string) ptrace.Traces {
	t.Helper()
	data, err := fixtures.Read(name)
	if err != nil {
		t.Fatalf("read fixture %s: %v", name, err)
	}
	all := ptrace.NewTraces()
	var u ptrace.JSONUnmarshaler
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		td, err := u.UnmarshalTraces(line)
		if err != nil {
			t.Fatalf("fixture %s line %d: %v", name, i+1, err)
		}
		td.ResourceSpans().MoveAndAppendTo(all.ResourceSpans())
	}
	return all
}

// retrace gives every trace of td (and the links into them) a new id for copy k, so one fixture
// can stand for many requests. Span ids stay: they only need to be unique within a trace.
func retrace(td ptrace.Traces, k uint32) ptrace.Traces {
	out := ptrace.NewTraces()
	td.CopyTo(out)
	re := func(id pcommon.TraceID) pcommon.TraceID {
		if id.IsEmpty() {
			return id
		}
		binary.BigEndian.PutUint32(id[:4], binary.BigEndian.Uint32(id[:4])^(k*0x9e3779b1))
		return id
	}
	rss := out.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j).Spans()
			for n := 0; n < ss.Len(); n++ {
				s := ss.At(n)
				s.SetTraceID(re(s.TraceID()))
				for l := 0; l < s.Links().Len(); l++ {
					s.Links().At(l).SetTraceID(re(s.Links().At(l).TraceID()))
				}
			}
		}
	}
	return out
}

// toSDK turns pdata spans into the OpenTelemetry Go SDK's read-only spans, so that the test can
// send them with the SDK's own OTLP exporter, ids and timestamps as recorded.
func toSDK(td ptrace.Traces) []sdktrace.ReadOnlySpan {
	var stubs tracetest.SpanStubs
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		res := resource.NewSchemaless(attrsOf(rss.At(i).Resource().Attributes())...)
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			scope := instrumentation.Scope{Name: sss.At(j).Scope().Name(), Version: sss.At(j).Scope().Version()}
			ss := sss.At(j).Spans()
			for n := 0; n < ss.Len(); n++ {
				s := ss.At(n)
				stub := tracetest.SpanStub{
					Name:                 s.Name(),
					SpanContext:          spanContext(s.TraceID(), s.SpanID()),
					SpanKind:             trace.SpanKind(s.Kind()),
					StartTime:            s.StartTimestamp().AsTime(),
					EndTime:              s.EndTimestamp().AsTime(),
					Attributes:           attrsOf(s.Attributes()),
					Resource:             res,
					InstrumentationScope: scope,
				}
				if !s.ParentSpanID().IsEmpty() {
					stub.Parent = spanContext(s.TraceID(), s.ParentSpanID())
				}
				switch s.Status().Code() {
				case ptrace.StatusCodeError:
					stub.Status = sdktrace.Status{Code: codes.Error, Description: s.Status().Message()}
				case ptrace.StatusCodeOk:
					stub.Status = sdktrace.Status{Code: codes.Ok}
				}
				for l := 0; l < s.Links().Len(); l++ {
					link := s.Links().At(l)
					stub.Links = append(stub.Links, sdktrace.Link{
						SpanContext: spanContext(link.TraceID(), link.SpanID()),
						Attributes:  attrsOf(link.Attributes()),
					})
				}
				for e := 0; e < s.Events().Len(); e++ {
					ev := s.Events().At(e)
					stub.Events = append(stub.Events, sdktrace.Event{
						Name: ev.Name(), Time: ev.Timestamp().AsTime(), Attributes: attrsOf(ev.Attributes()),
					})
				}
				stubs = append(stubs, stub)
			}
		}
	}
	return stubs.Snapshots()
}

func spanContext(tid pcommon.TraceID, sid pcommon.SpanID) trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID(tid), SpanID: trace.SpanID(sid), TraceFlags: trace.FlagsSampled,
	})
}

func attrsOf(m pcommon.Map) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, m.Len())
	for k, v := range m.All() {
		switch v.Type() {
		case pcommon.ValueTypeStr:
			out = append(out, attribute.String(k, v.Str()))
		case pcommon.ValueTypeInt:
			out = append(out, attribute.Int64(k, v.Int()))
		case pcommon.ValueTypeDouble:
			out = append(out, attribute.Float64(k, v.Double()))
		case pcommon.ValueTypeBool:
			out = append(out, attribute.Bool(k, v.Bool()))
		default:
			out = append(out, attribute.String(k, v.AsString()))
		}
	}
	return out
}

// offlineReport is what one stormwatch process says about the spans: the wire form the SDK's
// exporter sends (spanstest.RequestFromSDK is that conversion), the wire decoder, the default
// suite, Flush - `stormwatch analyze` on a protobuf trace file.
func offlineReport(t testing.TB, batches [][]sdktrace.ReadOnlySpan) analyzer.Report {
	t.Helper()
	cfg := engine.Config{Detectors: suite.Default()}
	policy.Configure(&cfg.Detectors, &cfg.Settings, nil, policy.Offline)
	a := engine.New(cfg)
	for _, b := range batches {
		body, err := proto.Marshal(spanstest.RequestFromSDK(b))
		if err != nil {
			t.Fatal(err)
		}
		batch, err := spans.DecodeProto(body, spans.DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.ConsumeBatch(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
	}
	a.Flush()
	return a.Report()
}
