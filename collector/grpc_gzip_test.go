package collector

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	sdklog "go.opentelemetry.io/otel/sdk/log"

	"github.com/stormwatch/stormwatch/collector/collectortest"
)

// TestGRPCBodyThatClaimsGzipAndIsNot: a message flagged gzip-compressed that is not gzip (or is
// cut short) is bad input - INVALID_ARGUMENT, counted malformed - as over HTTP, not INTERNAL; a
// genuine one is still read; an uncompressed message under grpc-encoding gzip is read as plain;
// the spans accepted before are kept.
func TestGRPCBodyThatClaimsGzipAndIsNot(t *testing.T) {
	s := &sink{}
	c := start(t, Config{}, s)
	good := protoBody(t, request(0, 4, 0))
	zipped := gzipped(t, good)
	for _, tc := range []struct {
		name       string
		compressed bool
		payload    []byte
		code, msg  string
	}{
		{"genuine gzip", true, zipped, "0", ""},
		{"plain protobuf flagged gzip", true, good, "3", "gzip"},
		{"gzip cut short", true, zipped[:len(zipped)/2], "3", "gzip"},
		{"unflagged under grpc-encoding gzip", false, good, "0", ""},
	} {
		code, msg := collectortest.RawGRPC(t, c.GRPCAddr(), tc.compressed, "gzip", tc.payload)
		if code != tc.code || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s: grpc-status %s %q, want %s containing %q", tc.name, code, msg, tc.code, tc.msg)
		}
	}
	waitFor(t, "the good spans", func() bool { return s.count() >= 8 })
	if n := s.count(); n != 8 {
		t.Errorf("%d spans stored, want the 8 of the two good requests", n)
	}
	m := scrape(t, c)
	for _, want := range []string{
		`stormwatch_collector_requests_total{outcome="malformed",transport="grpc"} 2`,
		`stormwatch_collector_requests_total{outcome="accepted",transport="grpc"} 2`,
		`stormwatch_collector_requests_total{outcome="internal",transport="grpc"} 0`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(m, "requests_total"))
		}
	}
}

// TestGzipLogsOverGRPCAreIgnored: a compressed request of another signal passes through the same
// decompressor as traces, and is answered and counted as ignored, its body never decompressed.
func TestGzipLogsOverGRPCAreIgnored(t *testing.T) {
	s := &sink{}
	c := start(t, Config{}, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	exp, err := otlploggrpc.New(ctx, otlploggrpc.WithEndpoint(c.GRPCAddr()), otlploggrpc.WithInsecure(),
		otlploggrpc.WithCompressor("gzip"), otlploggrpc.WithRetry(otlploggrpc.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Shutdown(ctx)
	var rec sdklog.Record
	rec.SetBody(attribute.StringValue("order placed"))
	if err := exp.Export(ctx, []sdklog.Record{rec}); err != nil {
		t.Fatalf("compressed logs: %v", err)
	}
	if st := c.Stats(); st.IgnoredLogsRequests != 1 || s.count() != 0 {
		t.Errorf("ignored logs %d, spans %d; want 1 and 0", st.IgnoredLogsRequests, s.count())
	}
}
