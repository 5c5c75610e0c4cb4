package collector

import (
	"context"
	"crypto/tls"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/credentials"

	"github.com/stormwatch/stormwatch/collector/collectortest"
	"github.com/stormwatch/stormwatch/spans"
)

// exporterKind builds a real OTel SDK exporter pointed at a running collector.
type exporterKind struct {
	name string
	make func(ctx context.Context, c *Collector, headers map[string]string, tlsCfg *tls.Config) (sdktrace.SpanExporter, error)
}

var fastRetryGRPC = otlptracegrpc.RetryConfig{Enabled: true, InitialInterval: 10 * time.Millisecond, MaxInterval: 200 * time.Millisecond, MaxElapsedTime: 20 * time.Second}
var fastRetryHTTP = otlptracehttp.RetryConfig{Enabled: true, InitialInterval: 10 * time.Millisecond, MaxInterval: 200 * time.Millisecond, MaxElapsedTime: 20 * time.Second}

func grpcSDKExporter(gzip bool) exporterKind {
	name := "grpc"
	if gzip {
		name += "+gzip"
	}
	return exporterKind{name, func(ctx context.Context, c *Collector, headers map[string]string, tlsCfg *tls.Config) (sdktrace.SpanExporter, error) {
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(c.GRPCAddr()), otlptracegrpc.WithRetry(fastRetryGRPC)}
		if tlsCfg != nil {
			opts = append(opts, otlptracegrpc.WithTLSCredentials(credentials.NewTLS(tlsCfg)))
		} else {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		if gzip {
			opts = append(opts, otlptracegrpc.WithCompressor("gzip"))
		}
		if headers != nil {
			opts = append(opts, otlptracegrpc.WithHeaders(headers))
		}
		return otlptracegrpc.New(ctx, opts...)
	}}
}

func httpSDKExporter(gzip bool) exporterKind {
	name := "http/protobuf"
	if gzip {
		name += "+gzip"
	}
	return exporterKind{name, func(ctx context.Context, c *Collector, headers map[string]string, tlsCfg *tls.Config) (sdktrace.SpanExporter, error) {
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(c.HTTPAddr()), otlptracehttp.WithRetry(fastRetryHTTP)}
		if tlsCfg != nil {
			opts = append(opts, otlptracehttp.WithTLSClientConfig(tlsCfg))
		} else {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		if gzip {
			opts = append(opts, otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
		}
		if headers != nil {
			opts = append(opts, otlptracehttp.WithHeaders(headers))
		}
		return otlptracehttp.New(ctx, opts...)
	}}
}

var allExporters = []exporterKind{grpcSDKExporter(false), grpcSDKExporter(true), httpSDKExporter(false), httpSDKExporter(true)}

// emit creates n spans through a real TracerProvider exporting with exp, and shuts it down, which
// flushes every span. Each span carries its index in resilience.attempt.
func emit(t *testing.T, exp sdktrace.SpanExporter, n int) {
	t.Helper()
	ctx := context.Background()
	res := resource.NewSchemaless(attribute.String("service.name", "checkout"), attribute.String("service.instance.id", "pod-7"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res),
		sdktrace.WithBatcher(exp, sdktrace.WithMaxExportBatchSize(16), sdktrace.WithBatchTimeout(time.Hour)))
	tr := tp.Tracer("stormwatch/collector-test")
	root, rootSpan := tr.Start(ctx, "GET /checkout", trace.WithSpanKind(trace.SpanKindServer))
	for i := 1; i < n; i++ {
		_, s := tr.Start(root, "GET", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			attribute.String(spans.AttrHTTPMethod, "GET"),
			attribute.String(spans.AttrServerAddress, "reviews"),
			attribute.Int(spans.AttrServerPort, 8080),
			attribute.Int(spans.AttrHTTPStatus, 503),
			attribute.Int(spans.AttrAttempt, i),
			attribute.Bool("custom.flag", true),
		))
		s.End()
	}
	rootSpan.SetAttributes(attribute.Int(spans.AttrAttempt, 0))
	rootSpan.End()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatalf("export through the SDK: %v", err)
	}
}

// emitVia emits n spans (see emit) to c through a new exporter of kind ek.
func emitVia(t *testing.T, ek exporterKind, c *Collector, n int) {
	t.Helper()
	exp, err := ek.make(context.Background(), c, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	emit(t, exp, n)
}

// checkEveryAttemptOnce asserts that the n spans emit made arrived exactly once, with attributes.
func checkEveryAttemptOnce(t *testing.T, got []spans.Span, n int, allAttributes bool) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("got %d spans, want %d", len(got), n)
	}
	seen := map[int64]bool{}
	ids := map[spans.SpanID]bool{}
	for i := range got {
		s := &got[i]
		if ids[s.SpanID] {
			t.Fatalf("span %s arrived twice", s.SpanID)
		}
		ids[s.SpanID] = true
		if s.Service() != "checkout" || s.Instance() != "pod-7" {
			t.Errorf("span %q: resource %q/%q, want checkout/pod-7", s.Name, s.Service(), s.Instance())
		}
		attempt, ok := s.Int(spans.AttrAttempt)
		if !ok {
			t.Fatalf("span %q has no %s: %+v", s.Name, spans.AttrAttempt, s.Attrs)
		}
		seen[attempt] = true
		if attempt == 0 {
			if s.Kind != spans.KindServer || !s.ParentID.IsZero() {
				t.Errorf("root span: kind %s parent %s", s.Kind, s.ParentID)
			}
			continue
		}
		if s.Kind != spans.KindClient || s.ParentID.IsZero() {
			t.Errorf("attempt %d: kind %s parent %s", attempt, s.Kind, s.ParentID)
		}
		if s.Str(spans.AttrHTTPMethod) != "GET" || s.Str(spans.AttrServerAddress) != "reviews" {
			t.Errorf("attempt %d: attributes %+v", attempt, s.Attrs)
		}
		if p, _ := s.Int(spans.AttrServerPort); p != 8080 {
			t.Errorf("attempt %d: server.port %d", attempt, p)
		}
		if code, _ := s.Int(spans.AttrHTTPStatus); code != 503 {
			t.Errorf("attempt %d: status code %d", attempt, code)
		}
		_, custom := s.Attr("custom.flag")
		if custom != allAttributes {
			t.Errorf("attempt %d: custom.flag kept=%v, want %v", attempt, custom, allAttributes)
		}
		if s.EndUnixNano < s.StartUnixNano || s.StartUnixNano == 0 {
			t.Errorf("attempt %d: times %d..%d", attempt, s.StartUnixNano, s.EndUnixNano)
		}
	}
	for i := range int64(n) {
		if !seen[i] {
			t.Errorf("span with attempt %d never arrived", i)
		}
	}
}

func TestSDKExportersDeliverEverySpanOnce(t *testing.T) {
	for _, ek := range allExporters {
		for _, all := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/all-attributes=%v", ek.name, all), func(t *testing.T) {
				s := &sink{}
				c := start(t, Config{Decode: spans.DecodeOptions{AllAttributes: all}}, s)
				const n = 40
				emitVia(t, ek, c, n)
				waitFor(t, "spans delivered", func() bool { return s.count() >= n })
				checkEveryAttemptOnce(t, s.spans(), n, all)
				if st := c.Stats(); st.AcceptedSpans != n || st.RejectedSpans != 0 {
					t.Errorf("stats: %+v", st)
				}
			})
		}
	}
}

func TestTLSOnBothTransports(t *testing.T) {
	cert, pool := collectortest.SelfSigned(t)
	for _, ek := range []exporterKind{grpcSDKExporter(false), httpSDKExporter(true)} {
		t.Run(ek.name, func(t *testing.T) {
			s := &sink{}
			c := start(t, Config{TLS: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}, s)
			exp, err := ek.make(context.Background(), c, nil, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
			if err != nil {
				t.Fatal(err)
			}
			emit(t, exp, 10)
			waitFor(t, "spans delivered over TLS", func() bool { return s.count() >= 10 })
			checkEveryAttemptOnce(t, s.spans(), 10, false)
		})
	}
	t.Run("plaintext client refused", func(t *testing.T) {
		s := &sink{}
		c := start(t, Config{TLS: &tls.Config{Certificates: []tls.Certificate{cert}}}, s)
		for _, ek := range []exporterKind{grpcSDKExporter(false), httpSDKExporter(false)} {
			exp, err := ek.make(context.Background(), c, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err = exp.ExportSpans(ctx, stubs(1, 1))
			cancel()
			if err == nil {
				t.Errorf("%s: plaintext export to a TLS collector succeeded", ek.name)
			}
		}
		if n := s.count(); n != 0 {
			t.Errorf("%d spans stored from plaintext clients", n)
		}
	})
}

// TestSDKConfiguredByEnvironment follows docs/collector.md: a stock exporter configured only by the
// standard OTEL_EXPORTER_OTLP_* variables, token header included, reaches the collector.
func TestSDKConfiguredByEnvironment(t *testing.T) {
	const token = "env-token-42"
	for _, proto := range []string{"http/protobuf", "grpc"} {
		t.Run(proto, func(t *testing.T) {
			s := &sink{}
			c := start(t, Config{Token: token}, s)
			addr := c.HTTPAddr()
			if proto == "grpc" {
				addr = c.GRPCAddr()
			}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+addr)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", proto)
			t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
			t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20"+token)
			var exp sdktrace.SpanExporter
			var err error
			if proto == "grpc" {
				exp, err = otlptracegrpc.New(context.Background())
			} else {
				exp, err = otlptracehttp.New(context.Background())
			}
			if err != nil {
				t.Fatal(err)
			}
			emit(t, exp, 5)
			waitFor(t, "spans", func() bool { return s.count() >= 5 })
			checkEveryAttemptOnce(t, s.spans(), 5, false)
		})
	}
}
