package distribution

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/internal/cputime"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
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

func newPayloads(b testing.TB, fixture string) *payloads {
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

// benchFixture is what every request of the throughput benchmark carries.
const benchFixture = "amplification-27-reference"

// The client of BenchmarkConnectorThroughput runs in a child process (this test binary again, as
// TestBenchClient), so that the CPU time and the allocations measured are the collector's alone:
// in one process the client's gRPC work and payload copies (about a tenth of the pass-through's
// CPU) would be counted in both arms and flatter the ratio between them. The child says "ready"
// once connected, waits for a line on stdin, sends, and says "sent".
const (
	envBenchAddr     = "STORMWATCH_BENCH_CLIENT_ADDR"
	envBenchRequests = "STORMWATCH_BENCH_CLIENT_REQUESTS"
)

// BenchmarkConnectorThroughput: one op is one export request of the amplification-27 fixture
// (184 spans, 2 traces) through one collector; spans per CPU-second of the collector is the
// figure to compare between the stormwatch connector and the pass-through. Run the arms
// interleaved (one process per arm and round, as `make bench-otelcol` does) and compare medians.
func BenchmarkConnectorThroughput(b *testing.B) {
	p := newPayloads(b, benchFixture)
	for _, arm := range []struct{ name, conf string }{
		{"connector=forward", benchForward},
		{"connector=stormwatch", benchStormwatch},
	} {
		b.Run(arm.name, func(b *testing.B) {
			addr := freePort(b)
			c := startBenchCollector(b, arm.name, fmt.Sprintf(arm.conf, addr))
			client := startBenchClient(b, addr, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cputime.Process()
			start := time.Now()
			client.send(b)
			c.stop(b)
			elapsed := time.Since(start)
			cpu := cputime.Process() - cpu0
			b.StopTimer()
			client.wait(b)
			if arm.name == "connector=stormwatch" {
				if got, want := view(c).int("stormwatch.analyzed.traces", "", ""), int64(b.N*p.traces()); got != want {
					b.Fatalf("the connector analyzed %d traces, want %d", got, want)
				}
			}
			b.ReportMetric(float64(b.N*p.spans)/elapsed.Seconds(), "spans/s")
			// Spans per CPU-second of the collector: unlike spans/s it hardly moves when other
			// work shares the machine.
			b.ReportMetric(float64(b.N*p.spans)/cpu.Seconds(), "spans/cpu-s")
			b.ReportMetric(float64(client.cpu.Nanoseconds())/float64(b.N), "client-cpu-ns/op")
		})
	}
}

// benchClient is the child process that sends the requests.
type benchClient struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Scanner
	lines []string // what the child printed, for the error message when it fails
	cpu   time.Duration
}

func startBenchClient(b *testing.B, addr string, n int) *benchClient {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchClient$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envBenchAddr+"="+addr, envBenchRequests+"="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("start the benchmark client: %v", err)
	}
	c := &benchClient{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	b.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
		}
	})
	c.await(b, "ready")
	return c
}

// await reads the child's output up to a line that is exactly word.
func (c *benchClient) await(b *testing.B, word string) {
	b.Helper()
	for c.out.Scan() {
		line := c.out.Text()
		if line == word {
			return
		}
		c.lines = append(c.lines, line)
	}
	b.Fatalf("the benchmark client ended before saying %q:\n%s", word, strings.Join(c.lines, "\n"))
}

func (c *benchClient) send(b *testing.B) {
	b.Helper()
	if _, err := io.WriteString(c.in, "go\n"); err != nil {
		b.Fatalf("start the benchmark client's requests: %v", err)
	}
	c.await(b, "sent")
}

func (c *benchClient) wait(b *testing.B) {
	b.Helper()
	c.in.Close()
	for c.out.Scan() {
		c.lines = append(c.lines, c.out.Text())
	}
	if err := c.cmd.Wait(); err != nil {
		b.Fatalf("the benchmark client: %v\n%s", err, strings.Join(c.lines, "\n"))
	}
	c.cpu = c.cmd.ProcessState.UserTime() + c.cmd.ProcessState.SystemTime()
}

// TestBenchClient is BenchmarkConnectorThroughput's client; it does nothing unless run by it.
func TestBenchClient(t *testing.T) {
	addr := os.Getenv(envBenchAddr)
	if addr == "" {
		t.Skip("run by BenchmarkConnectorThroughput as its client process")
	}
	n, err := strconv.Atoi(os.Getenv(envBenchRequests))
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number of requests", envBenchRequests, os.Getenv(envBenchRequests))
	}
	p := newPayloads(t, benchFixture)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn.Connect()
	for s := conn.GetState(); s != connectivity.Ready; s = conn.GetState() {
		if !conn.WaitForStateChange(ctx, s) {
			t.Fatalf("connect to %s: %v (state %s)", addr, ctx.Err(), s)
		}
	}
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatalf("wait for the benchmark to start: %v", err)
	}
	reqs := make(chan int, 64)
	go func() {
		defer close(reqs)
		for i := range n {
			reqs <- i
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for i := range reqs {
				body := p.make(i)
				var reply []byte
				if err := conn.Invoke(context.Background(), exportMethod, &body, &reply, grpc.ForceCodec(rawCodec{})); err != nil {
					errs <- fmt.Errorf("request %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	fmt.Println("sent")
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
