package distribution

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
)

// The benchmark pipelines: one collector, OTLP/gRPC in, then either the stormwatch connector
// (metrics and logs out) or the forward connector (a pass-through: traces out), and exporters
// that drop everything. Only the connector differs, so the ratio of their throughputs is the cost
// of the analysis.
const benchForward = `
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
connectors:
  forward:
exporters:
  nop:
service:
  pipelines:
    traces/in:
      receivers: [otlp]
      exporters: [forward]
    traces/out:
      receivers: [forward]
      exporters: [nop]
` + quiet

// The stormwatch arm settles fast, so that traces are analyzed while later ones arrive, as in a
// steady state; it emits at its default interval. The measured time ends when the collector has
// shut down: the connector's shutdown analyzes what is still pending and sends the final figures,
// so spans count as through once analyzed, not merely received.
const benchStormwatch = `
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
connectors:
  stormwatch:
    settle: 100ms
    tick_interval: 50ms
exporters:
  nop:
  sink:
service:
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [stormwatch]
    metrics:
      receivers: [stormwatch]
      exporters: [sink]
    logs:
      receivers: [stormwatch]
      exporters: [nop]
` + quiet

// rawCodec sends pre-marshalled protobuf as it is, so the client spends no CPU encoding: on two
// cores every cycle the client uses is taken from the collector under test.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	if b, ok := v.(*[]byte); ok {
		return *b, nil
	}
	return nil, fmt.Errorf("rawCodec: %T", v)
}
func (rawCodec) Unmarshal(data []byte, v any) error {
	if b, ok := v.(*[]byte); ok {
		*b = append((*b)[:0], data...)
		return nil
	}
	return fmt.Errorf("rawCodec: %T", v)
}
func (rawCodec) Name() string { return "proto" }

var _ encoding.Codec = rawCodec{}

const exportMethod = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

// payloads makes request i from one marshalled fixture by rewriting its trace ids in place, so
// every request carries new traces (the analyzer would drop repeats as duplicates). The offsets of
// the ids are found once; a request costs one copy, so the client takes little CPU from the
// collector it measures.
type payloads struct {
	base  []byte
	at    []idAt // where each trace id occurs in base
	spans int
	n     int // distinct trace ids
}

type idAt struct{ off, id int }

func newPayloads(b *testing.B, fixture string) *payloads {
	td := fixtureTraces(b, fixture)
	body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		b.Fatal(err)
	}
	p := &payloads{base: body, spans: td.SpanCount()}
	seen := map[pcommon.TraceID]bool{}
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		for j := 0; j < rss.At(i).ScopeSpans().Len(); j++ {
			ss := rss.At(i).ScopeSpans().At(j).Spans()
			for k := 0; k < ss.Len(); k++ {
				id := ss.At(k).TraceID()
				if seen[id] {
					continue
				}
				seen[id] = true
				for off := 0; ; {
					n := bytes.Index(body[off:], id[:])
					if n < 0 {
						break
					}
					p.at = append(p.at, idAt{off + n, p.n})
					off += n + len(id)
				}
				p.n++
			}
		}
	}
	return p
}

func (p *payloads) traces() int { return p.n }

func (p *payloads) make(i int) []byte {
	out := append([]byte(nil), p.base...)
	for _, a := range p.at {
		tail := out[a.off+8 : a.off+16]
		binary.BigEndian.PutUint64(tail, binary.BigEndian.Uint64(tail)^uint64(i+1)*0x9e3779b97f4a7c15)
	}
	return out
}

// BenchmarkConnectorThroughput: one op is one export request of the amplification-27 fixture
// (184 spans, 2 traces) through one collector; spans/s is the figure to compare between the
// stormwatch connector and the pass-through. Run the arms interleaved (-count) and compare medians.
func BenchmarkConnectorThroughput(b *testing.B) {
	p := newPayloads(b, "amplification-27-reference")
	for _, arm := range []struct{ name, conf string }{
		{"connector=forward", benchForward},
		{"connector=stormwatch", benchStormwatch},
	} {
		b.Run(arm.name, func(b *testing.B) {
			addr := freePort(b)
			c := startBenchCollector(b, arm.name, fmt.Sprintf(arm.conf, addr))
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithDefaultCallOptions(grpc.ForceCodecV2(encoding.GetCodecV2("proto"))))
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			reqs := make(chan int, 64)
			go func() {
				defer close(reqs)
				for i := 0; i < b.N; i++ {
					reqs <- i
				}
			}()
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime(b)
			start := time.Now()
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range reqs {
						body := p.make(i)
						var reply []byte
						if err := conn.Invoke(context.Background(), exportMethod, &body, &reply, grpc.ForceCodec(rawCodec{})); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			c.stop(b)
			elapsed := time.Since(start)
			cpu := cpuTime(b) - cpu0
			b.StopTimer()
			if arm.name == "connector=stormwatch" {
				if got, want := view(c).int("stormwatch.analyzed.traces", "", ""), int64(b.N*p.traces()); got != want {
					b.Fatalf("the connector analyzed %d traces, want %d", got, want)
				}
			}
			b.ReportMetric(float64(b.N*p.spans)/elapsed.Seconds(), "spans/s")
			// Spans per CPU-second of the process (collector and client): unlike spans/s it hardly
			// moves when other work shares the machine.
			b.ReportMetric(float64(b.N*p.spans)/cpu.Seconds(), "spans/cpu-s")
		})
	}
}

func startBenchCollector(b *testing.B, name, conf string) *collector {
	b.Helper()
	c := &collector{name: name, done: make(chan error, 1), sinks: &sinks{}}
	set := Settings("bench", configFile(b, "bench", conf))
	set.DisableGracefulShutdown = true
	set.SkipSettingGRPCLogger = true
	set.Factories = func() (otelcol.Factories, error) {
		f, err := Components()
		if err != nil {
			return f, err
		}
		f.Exporters[sinkType] = sinkFactory(c.sinks)
		nop := exportertest.NewNopFactory()
		f.Exporters[nop.Type()] = nop
		return f, nil
	}
	return runCollector(b, c, set)
}

// cpuTime is the process's user + system time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
