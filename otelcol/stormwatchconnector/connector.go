package stormwatchconnector

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/spans"
)

// shared is one configured connector: one analyzer, the clock that drives it and the downstream
// consumers it emits to. The collector creates an edge per signal pair; the edges of one component
// ID share this value.
type shared struct {
	cfg    *Config
	logger *zap.Logger
	conv   *converter
	an     *engine.Engine
	emit   *emitter
	// now is the clock and newTicker its ticks; tests replace both to step time by hand.
	now       func() time.Time
	newTicker func(time.Duration) (<-chan time.Time, func())
	release   func()

	// Set while the collector builds the pipelines, before any Start.
	metrics consumer.Metrics
	logs    consumer.Logs

	mu       sync.Mutex
	started  int
	stop     context.CancelFunc
	done     chan struct{}
	ticking  bool
	nextEmit time.Time
	// sendMu keeps emissions in order: the clock's and the final one at shutdown.
	sendMu sync.Mutex
}

func realTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

func newShared(set connector.Settings, cfg *Config, release func()) (*shared, error) {
	s := &shared{
		cfg:       cfg,
		logger:    set.Logger,
		conv:      newConverter(cfg.AllAttributes),
		now:       time.Now,
		newTicker: realTicker,
		release:   release,
	}
	acfg := engine.Config{
		Settle:         cfg.settle(),
		MaxSpans:       cfg.MaxSpans,
		MaxTraceSpans:  cfg.MaxTraceSpans,
		MaxFindings:    cfg.MaxFindings,
		WindowInterval: cfg.WindowInterval,
		Detectors:      suite.Default(),
		Now:            func() time.Time { return s.now() },
	}
	// As the single binary's live mode: the policy (or the built-in one) in live mode, where the
	// cross-trace detectors see a window of recent operations.
	var p *policy.Policy
	if cfg.Policy != "" {
		var err error
		if p, err = policy.Load(cfg.Policy, acfg.Detectors); err != nil {
			return nil, fmt.Errorf("policy %s: %w", cfg.Policy, err)
		}
	}
	policy.Configure(&acfg.Detectors, &acfg.Settings, p, policy.Live)
	s.an = engine.New(acfg)
	s.emit = newEmitter(set, s.an, acfg.Detectors, s.now())
	return s, nil
}

func (s *shared) attachMetrics(next consumer.Metrics) *edge {
	s.metrics = next
	return &edge{s: s, metrics: true}
}

func (s *shared) attachLogs(next consumer.Logs) *edge {
	s.logs = next
	return &edge{s: s}
}

// edge is what the collector sees for one signal pair. Both edges of a connector receive the same
// traces (the traces pipeline fans out to each), so only one feeds the analyzer: the metrics edge,
// or the logs edge when the connector feeds no metrics pipeline.
type edge struct {
	s       *shared
	metrics bool
}

var _ connector.Traces = (*edge)(nil)

func (e *edge) Capabilities() consumer.Capabilities { return consumer.Capabilities{MutatesData: false} }

func (e *edge) feeds() bool { return e.metrics || e.s.metrics == nil }

// ConsumeTraces packs the traces' spans by trace and files them with the analyzer.
// Nothing is analyzed here: a trace is analyzed on the tick after its settle period.
func (e *edge) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if !e.feeds() {
		return nil
	}
	return e.s.consume(ctx, td)
}

func (e *edge) Start(_ context.Context, _ component.Host) error { return e.s.start() }

func (e *edge) Shutdown(ctx context.Context) error { return e.s.shutdown(ctx) }

func (s *shared) consume(ctx context.Context, td ptrace.Traces) error {
	// The spans come packed by trace; the analyzer copies the blocks it keeps, so the batch's
	// buffers are reused for the next request.
	return s.conv.withBatch(td, func(b *spans.Batch) error {
		if len(b.Packed) == 0 && b.Rejected == 0 {
			return nil
		}
		if err := s.an.ConsumeBatch(ctx, b); err != nil {
			return fmt.Errorf("stormwatch connector: file %d spans: %w", td.SpanCount()-b.Rejected, err)
		}
		return nil
	})
}

// start launches the clock on the first edge's Start; the others only count.
func (s *shared) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started++
	if s.ticking {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stop, s.done, s.ticking = cancel, make(chan struct{}), true
	now := s.now()
	s.nextEmit = now.Add(s.cfg.emit())
	s.emit.setStart(now)
	go s.run(ctx, s.done)
	return nil
}

// run is the connector's clock: the analyzer is pure and reads no clock, so this goroutine tells
// it the time every tick.
func (s *shared) run(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	ticks, stop := s.newTicker(s.cfg.tick())
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
			s.step(ctx, s.now())
		}
	}
}

// step is one tick: traces quiet for the settle period get analyzed (re-analyzed when late spans
// came), and every emit interval what changed is sent downstream.
func (s *shared) step(ctx context.Context, now time.Time) {
	s.an.Settle(now)
	s.mu.Lock()
	due := !now.Before(s.nextEmit)
	if due {
		s.nextEmit = now.Add(s.cfg.emit())
	}
	s.mu.Unlock()
	if due {
		s.send(ctx, now)
	}
}

// send emits the current figures and the new findings. A failed export is logged, not retried:
// the metrics are cumulative, so the next emission carries what this one lost, and findings not
// delivered are offered again next time.
func (s *shared) send(ctx context.Context, now time.Time) {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	out := s.emit.collect(now, s.metrics != nil, s.logs != nil)
	if s.metrics != nil {
		if err := s.metrics.ConsumeMetrics(ctx, out.metrics); err != nil {
			s.logger.Warn("stormwatch connector: sending metrics downstream failed; the next emission carries the totals", zap.Error(err))
		}
	}
	if s.logs != nil && out.logs.LogRecordCount() > 0 {
		if err := s.logs.ConsumeLogs(ctx, out.logs); err != nil {
			s.logger.Warn("stormwatch connector: sending finding logs downstream failed; they will be offered again", zap.Int("records", out.logs.LogRecordCount()), zap.Error(err))
			return
		}
		s.emit.delivered(out)
	}
}

// shutdown stops the clock on the last edge's Shutdown, analyzes what is still pending (the
// collector is stopping: those traces will get no more spans here) and sends the final figures.
// Downstream pipelines are still running: the collector shuts a connector down before the
// pipelines it feeds.
func (s *shared) shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.started > 0 {
		s.started--
	}
	if s.started > 0 {
		s.mu.Unlock()
		return nil
	}
	wasTicking := s.ticking
	if wasTicking {
		s.stop()
		s.ticking = false
	}
	done := s.done
	s.mu.Unlock()
	if s.release != nil {
		s.release()
	}
	if !wasTicking {
		return nil
	}
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("stormwatch connector: waiting for the clock to stop: %w", ctx.Err())
	}
	s.an.Flush()
	s.send(ctx, s.now())
	return nil
}
