package collector

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
)

// TestSDKMetricsAndLogsAreReceivedAndIgnored: an application pointed at stormwatch with
// OTEL_EXPORTER_OTLP_ENDPOINT exports metrics and logs too. The real SDK exporters, over gRPC and
// HTTP, get a success (no export error in the application's log), nothing reaches the span
// consumer, and each request is counted per signal and transport.
func TestSDKMetricsAndLogsAreReceivedAndIgnored(t *testing.T) {
	var s sink
	c := start(t, Config{}, &s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res := resource.NewSchemaless(semconv.ServiceName("checkout"))

	// Metrics: a counter through a MeterProvider.
	metricExporters := map[string]func() (sdkmetric.Exporter, error){
		"grpc": func() (sdkmetric.Exporter, error) {
			return otlpmetricgrpc.New(ctx, otlpmetricgrpc.WithEndpoint(c.GRPCAddr()), otlpmetricgrpc.WithInsecure(),
				otlpmetricgrpc.WithRetry(otlpmetricgrpc.RetryConfig{Enabled: false}))
		},
		"http": func() (sdkmetric.Exporter, error) {
			return otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpoint(c.HTTPAddr()), otlpmetrichttp.WithInsecure(),
				otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig{Enabled: false}))
		},
	}
	for name, mk := range metricExporters {
		exp, err := mk()
		if err != nil {
			t.Fatal(err)
		}
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res),
			sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(time.Hour))))
		counter, err := mp.Meter("shop").Int64Counter("orders")
		if err != nil {
			t.Fatal(err)
		}
		counter.Add(ctx, 3)
		// Shutdown collects and exports once more, returning the export's error.
		if err := mp.Shutdown(ctx); err != nil {
			t.Errorf("metrics over %s: the exporter failed: %v", name, err)
		}
	}

	// Logs: one record straight through each exporter, whose Export returns the answer's error.
	logExporters := map[string]func() (sdklog.Exporter, error){
		"grpc": func() (sdklog.Exporter, error) {
			return otlploggrpc.New(ctx, otlploggrpc.WithEndpoint(c.GRPCAddr()), otlploggrpc.WithInsecure(),
				otlploggrpc.WithRetry(otlploggrpc.RetryConfig{Enabled: false}))
		},
		"http": func() (sdklog.Exporter, error) {
			return otlploghttp.New(ctx, otlploghttp.WithEndpoint(c.HTTPAddr()), otlploghttp.WithInsecure(),
				otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: false}))
		},
	}
	for name, mk := range logExporters {
		exp, err := mk()
		if err != nil {
			t.Fatal(err)
		}
		var rec sdklog.Record
		rec.SetBody(attribute.StringValue("order placed"))
		rec.SetTimestamp(time.Now())
		if err := exp.Export(ctx, []sdklog.Record{rec}); err != nil {
			t.Errorf("logs over %s: the exporter failed: %v", name, err)
		}
		if err := exp.Shutdown(ctx); err != nil {
			t.Errorf("logs over %s: shutdown: %v", name, err)
		}
	}

	st := c.Stats()
	if st.IgnoredMetricsRequests != 2 || st.IgnoredLogsRequests != 2 {
		t.Errorf("ignored requests: metrics %d, logs %d; want 2 and 2", st.IgnoredMetricsRequests, st.IgnoredLogsRequests)
	}
	if st.AcceptedSpans != 0 || s.count() != 0 {
		t.Errorf("metrics and logs reached the span path: %d accepted, %d consumed", st.AcceptedSpans, s.count())
	}
	line := StatusLine(st, st, time.Second)
	if !strings.Contains(line, "metrics and logs are received and ignored (4 requests)") {
		t.Errorf("status line does not say metrics and logs are ignored: %s", line)
	}
	m := scrape(t, c)
	for _, want := range []string{
		`stormwatch_collector_ignored_requests_total{signal="metrics",transport="grpc"} 1`,
		`stormwatch_collector_ignored_requests_total{signal="metrics",transport="http"} 1`,
		`stormwatch_collector_ignored_requests_total{signal="logs",transport="grpc"} 1`,
		`stormwatch_collector_ignored_requests_total{signal="logs",transport="http"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grepLines(m, "ignored"))
		}
	}
}

// TestIgnoredSignalsOverHTTPJSON: OTLP/JSON is answered in JSON, and the traces path's checks
// (method, content type) apply to the other signals too.
func TestIgnoredSignalsOverHTTPJSON(t *testing.T) {
	c := start(t, Config{}, &sink{})
	for _, c2 := range []struct {
		method, path, ctype string
		code                int
		body                string
	}{
		{"POST", "/v1/logs", contentTypeJSON, 200, "{}"},
		{"POST", "/v1/metrics", contentTypeJSON, 200, "{}"},
		{"GET", "/v1/metrics", contentTypeJSON, 405, "use POST"},
		{"POST", "/v1/logs", "text/plain", 415, "Content-Type"},
	} {
		req, err := http.NewRequest(c2.method, "http://"+c.HTTPAddr()+c2.path, strings.NewReader(`{"resourceLogs":[]}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", c2.ctype)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c2.code || !strings.Contains(string(b), c2.body) {
			t.Errorf("%s %s (%s): %d %s; want %d with %q", c2.method, c2.path, c2.ctype, resp.StatusCode, b, c2.code, c2.body)
		}
	}
	if st := c.Stats(); st.IgnoredMetricsRequests != 1 || st.IgnoredLogsRequests != 1 {
		t.Errorf("ignored: metrics %d, logs %d; want 1 and 1", st.IgnoredMetricsRequests, st.IgnoredLogsRequests)
	}
}
