package distribution

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/otelcol"
)

// freePort reserves a loopback port long enough to learn its number. Another process could take
// it before the collector binds it; the collector would then fail to start and say so.
func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// sinkType is a test-only exporter that keeps what it receives, so the test can read a backend's
// metrics and finding logs exactly. Everything else in the collectors is the distribution's.
var sinkType = component.MustNewType("sink")

type sinkConfig struct{}

type sinks struct {
	metrics consumertest.MetricsSink
	logs    consumertest.LogsSink
	traces  consumertest.TracesSink
}

type sinkExporter struct {
	consumer.Metrics
	consumer.Logs
	consumer.Traces
}

func (sinkExporter) Start(context.Context, component.Host) error { return nil }
func (sinkExporter) Shutdown(context.Context) error              { return nil }
func (sinkExporter) Capabilities() consumer.Capabilities         { return consumer.Capabilities{} }

func sinkFactory(s *sinks) exporter.Factory {
	return exporter.NewFactory(sinkType,
		func() component.Config { return &sinkConfig{} },
		exporter.WithMetrics(func(context.Context, exporter.Settings, component.Config) (exporter.Metrics, error) {
			return sinkExporter{Metrics: &s.metrics}, nil
		}, component.StabilityLevelDevelopment),
		exporter.WithLogs(func(context.Context, exporter.Settings, component.Config) (exporter.Logs, error) {
			return sinkExporter{Logs: &s.logs}, nil
		}, component.StabilityLevelDevelopment),
		exporter.WithTraces(func(context.Context, exporter.Settings, component.Config) (exporter.Traces, error) {
			return sinkExporter{Traces: &s.traces}, nil
		}, component.StabilityLevelDevelopment),
	)
}

// collector is one in-process collector of this distribution.
type collector struct {
	name  string
	col   *otelcol.Collector
	done  chan error
	sinks *sinks
}

// quiet keeps the collectors' own telemetry off: no metrics endpoint (several collectors in one
// process would fight over its port) and only errors in the test log.
const quiet = `
  telemetry:
    metrics:
      level: none
    logs:
      level: error
`

// configFile writes a config into t.TempDir and returns its URI.
func configFile(t testing.TB, name, config string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return "file:" + path
}

// startCollector runs a collector from the config URIs (later ones override earlier ones, as on
// the collector's command line), with the test sink exporter added to the distribution's
// components. It returns once the collector runs, and stops it when the test ends.
func startCollector(t testing.TB, name string, uris ...string) *collector {
	t.Helper()
	c := &collector{name: name, done: make(chan error, 1), sinks: &sinks{}}
	set := Settings("test", uris...)
	set.DisableGracefulShutdown = true
	set.SkipSettingGRPCLogger = true
	set.Factories = func() (otelcol.Factories, error) {
		f, err := Components()
		if err != nil {
			return f, err
		}
		f.Exporters[sinkType] = sinkFactory(c.sinks)
		return f, nil
	}
	return runCollector(t, c, set)
}

func runCollector(t testing.TB, c *collector, set otelcol.CollectorSettings) *collector {
	t.Helper()
	name := c.name
	col, err := otelcol.NewCollector(set)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	c.col = col
	go func() { c.done <- col.Run(context.Background()) }()
	deadline := time.Now().Add(30 * time.Second)
	for col.GetState() != otelcol.StateRunning {
		select {
		case err := <-c.done:
			t.Fatalf("%s did not start: %v", name, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start within 30s (state %s)", name, col.GetState())
		}
		time.Sleep(10 * time.Millisecond)
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { c.stop(t) }) })
	return c
}

func (c *collector) stop(t testing.TB) {
	t.Helper()
	if c.col.GetState() == otelcol.StateClosed {
		return
	}
	c.col.Shutdown()
	select {
	case err := <-c.done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v", c.name, err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("%s did not stop within 30s", c.name)
	}
}
