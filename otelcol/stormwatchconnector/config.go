package stormwatchconnector

import (
	"errors"
	"fmt"
	"time"

	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/suite"
)

// Defaults of the fields a user leaves out. Settle and the bounds are the single binary's, so that
// a trace is judged the same way on either.
const (
	defaultSettle       = engine.DefaultSettle
	defaultTickInterval = time.Second
	defaultEmitInterval = 10 * time.Second
)

// Config is the connector's configuration, the `stormwatch:` entry under `connectors:`. Every field
// has a default; the zero value of a field means that default.
type Config struct {
	// Settle is how long a trace must stay quiet (no new span) before it is analyzed, whole, once.
	// Spans arriving later re-analyze it while it is still held (see MaxSpans).
	Settle time.Duration `mapstructure:"settle"`
	// TickInterval is how often the connector's clock drives the analyzer: traces become due on
	// the first tick after their settle period. By default a second, or half of a shorter settle.
	TickInterval time.Duration `mapstructure:"tick_interval"`
	// EmitInterval is how often the cumulative metrics and the new finding log records are sent
	// downstream.
	EmitInterval time.Duration `mapstructure:"emit_interval"`
	// MaxSpans bounds the spans held at once across all traces; the least recently updated traces
	// are analyzed as they are and released beyond it. -1 means no bound.
	MaxSpans int `mapstructure:"max_spans"`
	// MaxTraceSpans caps one trace; spans beyond it are dropped and the trace marked truncated.
	// -1 means no cap.
	MaxTraceSpans int `mapstructure:"max_trace_spans"`
	// MaxFindings bounds the findings kept for de-duplicating finding logs. -1 means no bound.
	MaxFindings int `mapstructure:"max_findings"`
	// WindowInterval is how often the cross-trace detectors (retry budget, synchronized retries,
	// breaker key) run over the operations this instance analyzed within the policy's window.
	WindowInterval time.Duration `mapstructure:"window_interval"`
	// Policy is a retry policy file (`stormwatch policy init` writes a commented example): detector
	// switches, severities, per-class limits and the window of the cross-trace detectors. Empty
	// means the built-in defaults, as with the single binary's --policy.
	Policy string `mapstructure:"policy"`
	// AllAttributes keeps attributes outside the set the analyzer reads. The connector emits no
	// span attribute, so this only costs memory; it exists for parity with the single binary.
	AllAttributes bool `mapstructure:"all_attributes"`

	// prevent unkeyed literal initialization
	_ struct{}
}

func createDefaultConfig() *Config {
	return &Config{
		Settle:       defaultSettle,
		EmitInterval: defaultEmitInterval,
	}
}

// Validate is called by the collector at startup, before any component is created: a bad value
// stops the collector with this message instead of misbehaving later.
func (c *Config) Validate() error {
	var errs []error
	positive := func(name string, d time.Duration) {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative, got %s", name, d))
		}
	}
	positive("settle", c.Settle)
	positive("tick_interval", c.TickInterval)
	positive("emit_interval", c.EmitInterval)
	positive("window_interval", c.WindowInterval)
	if c.TickInterval > 0 && c.TickInterval < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("tick_interval must be at least 10ms, got %s", c.TickInterval))
	}
	if c.TickInterval > 0 && c.TickInterval > c.settle() {
		errs = append(errs, fmt.Errorf("tick_interval (%s) must not exceed settle (%s): traces would wait up to a whole tick past their settle period", c.TickInterval, c.settle()))
	}
	if c.EmitInterval > 0 && c.EmitInterval < c.tick() {
		errs = append(errs, fmt.Errorf("emit_interval (%s) must not be shorter than tick_interval (%s)", c.EmitInterval, c.tick()))
	}
	bound := func(name string, v int) {
		if v < -1 {
			errs = append(errs, fmt.Errorf("%s must be positive, or -1 for no bound, got %d", name, v))
		}
	}
	bound("max_spans", c.MaxSpans)
	bound("max_trace_spans", c.MaxTraceSpans)
	bound("max_findings", c.MaxFindings)
	if c.Policy != "" {
		// Loaded here as well as at creation so that a bad file stops the collector at startup,
		// with the file, line and column of every problem.
		if _, err := policy.Load(c.Policy, suite.Default()); err != nil {
			errs = append(errs, fmt.Errorf("policy %s: %w", c.Policy, err))
		}
	}
	return errors.Join(errs...)
}

func (c *Config) settle() time.Duration {
	if c.Settle > 0 {
		return c.Settle
	}
	return defaultSettle
}

// tick is the configured tick, or by default a second, shortened for a short settle period so
// that a trace is analyzed within half a settle period of becoming due.
func (c *Config) tick() time.Duration {
	if c.TickInterval > 0 {
		return c.TickInterval
	}
	return max(10*time.Millisecond, min(defaultTickInterval, c.settle()/2))
}

// emit is the configured emit interval, never shorter than a tick: metrics change only on ticks.
func (c *Config) emit() time.Duration {
	if c.EmitInterval > 0 {
		return max(c.EmitInterval, c.tick())
	}
	return max(defaultEmitInterval, c.tick())
}
