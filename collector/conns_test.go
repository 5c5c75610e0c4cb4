package collector

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// connSeries reads the collector's connection series for transport tr from its registry - not
// over HTTP, whose scrape would take a connection of the ones counted.
func connSeries(t *testing.T, c *Collector, tr string) (open, refused float64) {
	t.Helper()
	mfs, err := c.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != 1 || m.GetLabel()[0].GetValue() != tr {
				continue
			}
			switch mf.GetName() {
			case "stormwatch_collector_open_connections":
				open = m.GetGauge().GetValue()
			case "stormwatch_collector_refused_connections_total":
				refused = m.GetCounter().GetValue()
			}
		}
	}
	return open, refused
}

// TestConnectionCapHTTP: over real sockets, with --max-connections 2 held by an SDK exporter's
// kept-alive connection and a half-open one that never sends a byte, a third client's connection
// is closed at once and counted, its export fails (the exporter keeps the spans to retry); the
// connections already open go on working; once the half-open one goes, the third gets in. Every
// span acknowledged arrives.
func TestConnectionCapHTTP(t *testing.T) {
	s := &sink{}
	c := start(t, Config{MaxConnections: 2, GRPCAddr: Disabled}, s)
	ctx := context.Background()
	newExporter := func() *otlptrace.Exporter {
		// A transport of its own: the exporters' default one is shared, and would carry the
		// third exporter's request over the first one's kept-alive connection.
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(c.HTTPAddr()), otlptracehttp.WithInsecure(),
			otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}),
			otlptracehttp.WithHTTPClient(&http.Client{Transport: tr}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { exp.Shutdown(context.Background()) })
		return exp
	}
	first := newExporter()
	if err := first.ExportSpans(ctx, stubs(0, 3)); err != nil {
		t.Fatal(err)
	}
	halfOpen, err := net.Dial("tcp", c.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer halfOpen.Close()
	waitFor(t, "two open connections", func() bool { open, _ := connSeries(t, c, "http"); return open == 2 })

	third := newExporter()
	if err := third.ExportSpans(ctx, stubs(3, 2)); err == nil {
		t.Fatal("a third connection was served with --max-connections 2")
	}
	if open, refused := connSeries(t, c, "http"); open != 2 || refused < 1 {
		t.Errorf("open %v, refused %v; want 2 open and the third counted", open, refused)
	}
	if err := first.ExportSpans(ctx, stubs(5, 1)); err != nil {
		t.Errorf("the connection already open: %v", err)
	}

	halfOpen.Close()
	waitFor(t, "the half-open connection's slot", func() bool { open, _ := connSeries(t, c, "http"); return open == 1 })
	if err := third.ExportSpans(ctx, stubs(3, 2)); err != nil {
		t.Fatalf("with a slot free: %v", err)
	}
	waitFor(t, "every span acknowledged", func() bool { return s.count() >= 6 })
	if n := s.count(); n != 6 {
		t.Errorf("%d spans, want the 6 acknowledged", n)
	}
}

// TestConnectionCapGRPC: the same over gRPC with --max-connections 1: a second exporter's
// connection is closed at once and counted while the first one's keeps working; once the first
// goes away the second gets in, and every span acknowledged arrives.
func TestConnectionCapGRPC(t *testing.T) {
	s := &sink{}
	c := start(t, Config{MaxConnections: 1, HTTPAddr: Disabled}, s)
	ctx := context.Background()
	newExporter := func() *otlptrace.Exporter {
		exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(c.GRPCAddr()), otlptracegrpc.WithInsecure(),
			otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}),
			// Reconnect quickly once refused, so that the test does not wait out the default backoff.
			// MinConnectTimeout is grpc-go's default, which ConnectParams replaces: left at zero, an
			// attempt gets only the backoff's delay (10 ms at first) to connect and read the server's
			// preface, and on a loaded machine the client gave up on its first connection itself.
			otlptracegrpc.WithDialOption(grpc.WithConnectParams(grpc.ConnectParams{
				Backoff:           backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, MaxDelay: 100 * time.Millisecond},
				MinConnectTimeout: 20 * time.Second})))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { exp.Shutdown(context.Background()) })
		return exp
	}
	first := newExporter()
	if err := first.ExportSpans(ctx, stubs(0, 3)); err != nil {
		t.Fatal(err)
	}
	second := newExporter()
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := second.ExportSpans(short, stubs(3, 2))
	cancel()
	if err == nil {
		t.Fatal("a second connection was served with --max-connections 1")
	}
	if open, refused := connSeries(t, c, "grpc"); open != 1 || refused < 1 {
		t.Errorf("open %v, refused %v; want 1 open and the second counted", open, refused)
	}
	if err := first.ExportSpans(ctx, stubs(5, 1)); err != nil {
		t.Errorf("the connection already open: %v", err)
	}

	if err := first.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	// Its slot frees and the second exporter's connection, reconnecting meanwhile, takes it. The
	// exporter does not retry (so that the refusal above was seen): try until its connection is
	// in, as its retry would.
	waitFor(t, "the second exporter's export", func() bool { return second.ExportSpans(ctx, stubs(3, 2)) == nil })
	waitFor(t, "every span acknowledged", func() bool { return s.count() >= 6 })
	if n := s.count(); n != 6 {
		t.Errorf("%d spans, want the 6 acknowledged", n)
	}
}
