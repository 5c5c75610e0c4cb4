package reference

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	noopmetric "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	nooptrace "go.opentelemetry.io/otel/trace/noop"
)

// pipeTransport is an http.Transport whose connections are in-memory pipes to a responder that
// answers every request with a canned 200: HTTP/1.1 framing, no network.
func pipeTransport(b *testing.B) *http.Transport {
	const answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"
	return &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			client, server := net.Pipe()
			go func() {
				defer server.Close()
				br := bufio.NewReader(server)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					req.Body.Close()
					if _, err := io.WriteString(server, answer); err != nil {
						return
					}
				}
			}()
			return client, nil
		},
		MaxIdleConnsPerHost: 4,
	}
}

// everything is every policy switched on: deadline and its propagation, retries, budget, breaker,
// bulkhead, grpc-timeout propagation.
var everything = Config{
	Service:     "bench",
	Timeout:     5 * time.Second,
	Bulkhead:    BulkheadConfig{MaxConcurrent: 64},
	Propagation: PropagationConfig{GRPCTimeout: true},
}

type dropProcessor struct{}

func (dropProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (dropProcessor) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (dropProcessor) Shutdown(context.Context) error                  { return nil }
func (dropProcessor) ForceFlush(context.Context) error                { return nil }

// BenchmarkCall compares one call through the reference client with the bare transport it wraps,
// side by side, so `-count N` interleaves them. Read the medians (docs/reference.md).
func BenchmarkCall(b *testing.B) {
	bare := pipeTransport(b)
	defer bare.CloseIdleConnections()
	mk := func(cfg Config, opts ...Option) *Transport {
		t, err := New(cfg, append([]Option{WithBase(bare), WithRuntime(NewRuntime(0))}, opts...)...)
		if err != nil {
			b.Fatal(err)
		}
		return t
	}
	recording := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(dropProcessor{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	hedged := everything
	hedged.Hedge.Delay = time.Second
	cases := []struct {
		name  string
		rt    http.RoundTripper
		extra bool
	}{
		{"bare", bare, false},
		// The bare transport sending the two headers the client adds: what they cost the in-process
		// responder to parse is not the client's cost.
		{"bare+propagation-headers", bare, true},
		{"reference/noop-tracer", mk(everything, WithTracerProvider(nooptrace.NewTracerProvider()), WithMeterProvider(noopmetric.NewMeterProvider())), false},
		{"reference/noop-tracer+hedging", mk(hedged, WithTracerProvider(nooptrace.NewTracerProvider())), false},
		{"reference/recording-tracer", mk(everything, WithTracerProvider(recording)), false},
	}
	// -count repeats each sub-benchmark back to back; the rounds here interleave them, so a change in
	// the machine's load hits every variant alike. Go names the repeats bare#01, bare#02...: strip
	// the suffix to aggregate (docs/reference.md quotes medians over all rounds).
	const rounds = 3
	for round := 0; round < rounds; round++ {
		for _, c := range cases {
			benchCall(b, c.name, c.rt, c.extra)
		}
	}
}

func benchCall(b *testing.B, name string, rt http.RoundTripper, extra bool) {
	b.Run(name, func(b *testing.B) {
		req, _ := http.NewRequest(http.MethodGet, "http://stub.test:8080/item", nil)
		req.Header.Set("Accept", "text/plain")
		if extra {
			req.Header.Set(DeadlineHeader, "2026-11-30T10:00:05.000Z")
			req.Header.Set("Grpc-Timeout", "4999m")
		}
		b.ReportAllocs()
		for b.Loop() {
			resp, err := rt.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}

// BenchmarkOverhead is the client's own cost over a stub RoundTripper that answers at once: the
// absolute figure behind the ratio above.
func BenchmarkOverhead(b *testing.B) {
	stubRT := roundTripper(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
	})
	t, err := New(everything, WithBase(stubRT), WithRuntime(NewRuntime(0)))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		rt   http.RoundTripper
	}{{"stub", stubRT}, {"reference/noop-tracer", t}} {
		b.Run(c.name, func(b *testing.B) {
			req, _ := http.NewRequest(http.MethodGet, "http://stub.test:8080/item", nil)
			b.ReportAllocs()
			for b.Loop() {
				resp, err := c.rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
}
