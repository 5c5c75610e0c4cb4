package collector

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"

	"github.com/stormwatch/stormwatch/internal/cputime"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/tracefile"
)

// benchRequest is the realistic payload: 100 spans per request, each about 580 bytes on the
// wire with 10 attributes.
func benchRequest() *coltracepb.ExportTraceServiceRequest {
	str := func(k, v string) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
	}
	num := func(k string, v int64) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}}
	}
	var ps []*tracepb.Span
	for i := range 100 {
		ps = append(ps, &tracepb.Span{
			TraceId: traceID(i / 10), SpanId: spanID(i), ParentSpanId: spanID(1000 + i/10),
			Name: "GET /api/v1/catalog/items/{id}", Kind: tracepb.Span_SPAN_KIND_CLIENT,
			StartTimeUnixNano: 1_700_000_000_000_000_000 + uint64(i)*1000, EndTimeUnixNano: 1_700_000_000_050_000_000 + uint64(i)*1000,
			Attributes: []*commonpb.KeyValue{
				str(spans.AttrHTTPMethod, "GET"),
				str(spans.AttrURLFull, fmt.Sprintf("http://catalog.internal.example.com:8080/api/v1/catalog/items/%08d?include=reviews,prices", i)),
				str(spans.AttrServerAddress, "catalog.internal.example.com"),
				num(spans.AttrServerPort, 8080),
				num(spans.AttrHTTPStatus, 503),
				str(spans.AttrErrorType, "503"),
				num(spans.AttrHTTPResendCount, 2),
				str(spans.AttrNetworkPeerAddress, "10.12.34.56"),
				str("user_agent.original", "checkout-service/1.42.0 (go1.26; linux/amd64)"),
				str("thread.name", "worker-pool-7-executor-thread-12"),
			},
			Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "503 Service Unavailable"},
		})
	}
	return &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
			str(spans.AttrServiceName, "checkout"), str(spans.AttrServiceInstance, "checkout-7f9c-x2"),
		}},
		ScopeSpans: []*tracepb.ScopeSpans{{Scope: &commonpb.InstrumentationScope{Name: "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"}, Spans: ps}},
	}}}
}

// nop consumes and forgets, so the benchmark measures the collector alone.
type nop struct{}

func (nop) ConsumeBatch(context.Context, *spans.Batch) error { return nil }

func benchCollector(b *testing.B) *Collector {
	c, err := New(Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", QueueSize: 1024}, nop{})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Shutdown(context.Background()) })
	return c
}

// mark is a point in wall and process CPU time. On a shared 2-core machine wall time swings with
// the neighbours' load; the process's own CPU time per span is the steadier figure (it includes the
// client in the transport benchmarks, which run in the same process).
type mark struct {
	wall time.Time
	cpu  time.Duration
}

func now() mark {
	return mark{time.Now(), cputime.Process()}
}

func reportSpans(b *testing.B, start mark) {
	end := now()
	n := float64(b.N * 100)
	b.ReportMetric(n/end.wall.Sub(start.wall).Seconds(), "spans/s")
	b.ReportMetric(float64((end.cpu-start.cpu).Nanoseconds())/n, "cpu-ns/span")
}

// BenchmarkExportPath is the shared path alone (decode, admit), no transport: the collector's own
// overhead on top of the decoder.
func BenchmarkExportPath(b *testing.B) {
	c, err := New(Config{QueueSize: MaxQueueSize, MaxQueueBytes: 1 << 40}, nop{})
	if err != nil {
		b.Fatal(err)
	}
	c.startWorkers()
	defer c.Shutdown(context.Background())
	body := protoBody(b, benchRequest())
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	start := now()
	for b.Loop() {
		// The batch aliases the body, so each request has its own, as on the wire.
		if _, err := c.export(bytes.Clone(body), nil, encProto); err != nil {
			b.Fatal(err)
		}
	}
	reportSpans(b, start)
}

// BenchmarkHTTP sends the request over loopback HTTP from one client: a latency-bound figure
// (client and server share the 2 cores), for comparing versions of the collector, not a capacity
// number.
func BenchmarkHTTP(b *testing.B) {
	for _, enc := range []encoding{encProto, encJSON} {
		b.Run(enc.String(), func(b *testing.B) {
			c := benchCollector(b)
			body, ct := protoBody(b, benchRequest()), contentTypeProto
			if enc == encJSON {
				body, ct = otlpJSON(b, benchRequest()), contentTypeJSON
			}
			url := "http://" + c.HTTPAddr() + tracesPath
			client := &http.Client{}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			start := now()
			for b.Loop() {
				resp, err := client.Post(url, ct, bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
			reportSpans(b, start)
		})
	}
}

// BenchmarkGRPC is BenchmarkHTTP over gRPC. The request goes out as bytes encoded once
// (rawBytesCodec), as BenchmarkHTTP sends its body: marshaling the message on every call would
// put the client's encoding, which costs about as much as the collector's decoding, into the
// figure.
func BenchmarkGRPC(b *testing.B) {
	c := benchCollector(b)
	conn := dialGRPC(b, c)
	body := protoBody(b, benchRequest())
	var resp []byte
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	start := now()
	for b.Loop() {
		err := conn.Invoke(context.Background(), coltracepb.TraceService_Export_FullMethodName, &body, &resp,
			grpc.ForceCodecV2(rawBytesCodec{}))
		if err != nil {
			b.Fatal(err)
		}
	}
	reportSpans(b, start)
}

// BenchmarkRecord is what --record-sync costs against the default recording: one op is one
// 100-span request sent over loopback gRPC, answered, and recorded - the timer runs until the
// collector has shut down, so the default's recording, done after the answer, is counted too. Each
// configuration runs its two arms one after the other; `-count N` would repeat each arm N times in
// a row, so docs/performance.md runs the binary N times instead, interleaving the arms, and load
// on the machine weighs on both alike. clients=1 waits for every answer before sending the next
// request, so each sync request pays a whole fsync; with 8 clients requests queued together share
// one.
func BenchmarkRecord(b *testing.B) {
	req := benchRequest()
	for _, clients := range []int{1, 8} {
		for _, format := range []string{"pb", "jsonl"} {
			for _, sync := range []bool{false, true} {
				arm := "default"
				if sync {
					arm = "sync"
				}
				b.Run(fmt.Sprintf("clients=%d/format=%s/record=%s", clients, format, arm), func(b *testing.B) {
					w, err := tracefile.Create(filepath.Join(b.TempDir(), "rec."+format))
					if err != nil {
						b.Fatal(err)
					}
					// Room for every request: the default arm answers before it records, and must
					// not be refused while the recorder catches up.
					c, err := New(Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: Disabled, QueueSize: MaxQueueSize,
						MaxQueueBytes: 1 << 40, RecordSync: sync}, nop{}, WithRecorder(w))
					if err != nil {
						b.Fatal(err)
					}
					if err := c.Start(context.Background()); err != nil {
						b.Fatal(err)
					}
					conn := dialGRPC(b, c)
					send := func() {
						var resp coltracepb.ExportTraceServiceResponse
						if err := conn.Invoke(context.Background(), coltracepb.TraceService_Export_FullMethodName, req, &resp); err != nil {
							b.Error(err)
						}
					}
					b.ReportAllocs()
					start := now()
					b.ResetTimer()
					if clients == 1 {
						for range b.N {
							send()
						}
					} else {
						b.SetParallelism(max(clients/runtime.GOMAXPROCS(0), 1))
						b.RunParallel(func(pb *testing.PB) {
							for pb.Next() {
								send()
							}
						})
					}
					if err := c.Shutdown(context.Background()); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					if got := w.Records(); got != b.N {
						b.Fatalf("recorded %d requests of %d", got, b.N)
					}
					reportSpans(b, start)
				})
			}
		}
	}
}
