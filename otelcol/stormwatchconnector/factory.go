package stormwatchconnector

import (
	"context"
	"fmt"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
)

// typeStr is the name of the component in a collector configuration (`connectors: stormwatch:`).
const typeStr = "stormwatch"

// Stability of each signal pair, as declared in metadata.yaml.
const (
	tracesToMetricsStability = component.StabilityLevelAlpha
	tracesToLogsStability    = component.StabilityLevelAlpha
)

// NewFactory returns the factory of the stormwatch connector: traces in, amplification metrics
// and finding logs out.
//
// One configured connector (one component ID) is one analyzer, however many pipelines it feeds:
// the collector creates one connector instance per pair of signals (traces to metrics, traces to
// logs), each of which receives the same traces, so the factory shares the analyzer between the
// instances of one ID and only one of them feeds it. The table of shared analyzers lives in the
// factory value, not in a package variable, so two collectors in one process stay apart.
func NewFactory() connector.Factory {
	f := &factory{instances: map[component.ID]*shared{}}
	return connector.NewFactory(
		component.MustNewType(typeStr),
		func() component.Config { return createDefaultConfig() },
		connector.WithTracesToMetrics(f.createTracesToMetrics, tracesToMetricsStability),
		connector.WithTracesToLogs(f.createTracesToLogs, tracesToLogsStability),
	)
}

type factory struct {
	mu        sync.Mutex
	instances map[component.ID]*shared
}

func (f *factory) get(set connector.Settings, cfg component.Config) (*shared, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, fmt.Errorf("create stormwatch connector %s: config is %T, want *Config", set.ID, cfg)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.instances[set.ID]; ok {
		return s, nil
	}
	s, err := newShared(set, c, func() {
		f.mu.Lock()
		delete(f.instances, set.ID)
		f.mu.Unlock()
	})
	if err != nil {
		return nil, fmt.Errorf("create stormwatch connector %s: %w", set.ID, err)
	}
	f.instances[set.ID] = s
	return s, nil
}

func (f *factory) createTracesToMetrics(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Traces, error) {
	s, err := f.get(set, cfg)
	if err != nil {
		return nil, err
	}
	return s.attachMetrics(next), nil
}

func (f *factory) createTracesToLogs(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Logs) (connector.Traces, error) {
	s, err := f.get(set, cfg)
	if err != nil {
		return nil, err
	}
	return s.attachLogs(next), nil
}
