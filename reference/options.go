package reference

import (
	"math/rand/v2"
	"net/http"
	"sync"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Option injects one of the things a test, the lab or an application provides from outside.
type Option func(*options)

type options struct {
	tp      trace.TracerProvider
	mp      metric.MeterProvider
	clock   Clock
	rand    rand.Source
	base    http.RoundTripper
	runtime *Runtime
}

// WithTracerProvider sets where spans go. Default: no spans (a no-op provider is treated the same,
// at no cost).
func WithTracerProvider(tp trace.TracerProvider) Option { return func(o *options) { o.tp = tp } }

// WithMeterProvider sets where metrics go. Default: none.
func WithMeterProvider(mp metric.MeterProvider) Option { return func(o *options) { o.mp = mp } }

// WithClock sets the time source. Default [SystemClock].
func WithClock(c Clock) Option { return func(o *options) { o.clock = c } }

// WithRand sets the random source of jitter, operation ids and generated idempotency keys; the
// client serialises access to it. Default: the runtime's per-goroutine generator. Give every
// production client its own seed: identical seeds synchronise retries again.
func WithRand(src rand.Source) Option { return func(o *options) { o.rand = src } }

// WithBase sets the transport that makes the physical calls. Default http.DefaultTransport.
func WithBase(rt http.RoundTripper) Option { return func(o *options) { o.base = rt } }

// WithRuntime sets the breaker state this client shares. Default: the process-wide runtime.
func WithRuntime(r *Runtime) Option { return func(o *options) { o.runtime = r } }

// randSource gives uniform numbers from an injected source (locked) or the runtime's generator.
type randSource struct {
	mu  sync.Mutex
	src rand.Source
}

func (r *randSource) uint64() uint64 {
	if r.src == nil {
		return rand.Uint64()
	}
	r.mu.Lock()
	v := r.src.Uint64()
	r.mu.Unlock()
	return v
}

// float64 is uniform in [0, 1).
func (r *randSource) float64() float64 { return float64(r.uint64()>>11) / (1 << 53) }
