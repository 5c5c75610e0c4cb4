package lab

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// FixtureStart is the fake clock's reading at the start of a recording made by [Record], so that
// fixtures do not change with the day they were regenerated.
var FixtureStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Tracing hands out one SDK tracer provider per service of a run (the service.name resource is
// what tells the callers, the layers and the origins apart), all exporting to one exporter.
type Tracing struct {
	exp       sdktrace.SpanExporter
	ids       sdktrace.IDGenerator
	simple    bool
	mu        sync.Mutex
	providers map[string]*sdktrace.TracerProvider
	order     []string
}

// TracingOption tunes [NewTracing].
type TracingOption func(*Tracing)

// WithIDSeed makes trace and span ids a deterministic sequence from seed (recordings that diff
// well). Default: the SDK's random ids.
func WithIDSeed(seed uint64) TracingOption {
	return func(t *Tracing) { t.ids = &seededIDs{r: rand.New(rand.NewPCG(seed, seed^0x5eed))} }
}

// WithSyncExport exports each span as it ends (a simple span processor) instead of in batches.
func WithSyncExport() TracingOption { return func(t *Tracing) { t.simple = true } }

// NewTracing returns providers that export to exp. Shutdown flushes them; exp itself is shut down
// once, by Shutdown.
func NewTracing(exp sdktrace.SpanExporter, opts ...TracingOption) *Tracing {
	t := &Tracing{exp: exp, providers: map[string]*sdktrace.TracerProvider{}}
	for _, o := range opts {
		o(t)
	}
	return t
}

// Provider returns the tracer provider of a service, creating it on first use. It has the shape of
// Options.TracerProvider. name is the service.name, or "service/instance" for one of several
// instances of a service (the lab's replicas); the instance id defaults to "<service>-1".
func (t *Tracing) Provider(name string) trace.TracerProvider {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.providers[name]; p != nil {
		return p
	}
	service, instance, ok := strings.Cut(name, "/")
	if !ok {
		instance = service + "-1"
	}
	res := resource.NewSchemaless(attribute.String("service.name", service),
		attribute.String("service.instance.id", instance))
	exp := keepOpen{t.exp}
	var sp sdktrace.SpanProcessor
	if t.simple {
		sp = sdktrace.NewSimpleSpanProcessor(exp)
	} else {
		sp = sdktrace.NewBatchSpanProcessor(exp, sdktrace.WithMaxExportBatchSize(2048), sdktrace.WithMaxQueueSize(65536))
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res), sdktrace.WithSpanProcessor(sp),
		sdktrace.WithSampler(sdktrace.AlwaysSample())}
	if t.ids != nil {
		opts = append(opts, sdktrace.WithIDGenerator(t.ids))
	}
	p := sdktrace.NewTracerProvider(opts...)
	t.providers[name] = p
	t.order = append(t.order, name)
	return p
}

// Shutdown flushes every provider, then shuts the exporter down.
func (t *Tracing) Shutdown(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var errs []error
	for _, s := range t.order {
		if err := t.providers[s].Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("flush spans of %s: %w", s, err))
		}
	}
	if err := t.exp.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("shut down span exporter: %w", err))
	}
	return errors.Join(errs...)
}

// keepOpen lets several providers share one exporter: their shutdowns do not close it.
type keepOpen struct{ sdktrace.SpanExporter }

func (keepOpen) Shutdown(context.Context) error { return nil }

// seededIDs is a deterministic IDGenerator.
type seededIDs struct {
	mu sync.Mutex
	r  *rand.Rand
}

func (g *seededIDs) NewIDs(context.Context) (trace.TraceID, trace.SpanID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var tid trace.TraceID
	binary.BigEndian.PutUint64(tid[:8], g.r.Uint64())
	binary.BigEndian.PutUint64(tid[8:], g.r.Uint64())
	return tid, g.span()
}

func (g *seededIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.span()
}

func (g *seededIDs) span() trace.SpanID {
	var sid trace.SpanID
	for sid == (trace.SpanID{}) {
		binary.BigEndian.PutUint64(sid[:], g.r.Uint64())
	}
	return sid
}

// Record runs scenario on the fake clock, starting at [FixtureStart] with span ids from a fixed
// seed, and writes every span to exp, one span per export, in the order they ended (ties broken by
// start, then ids), so that two recordings of a scenario are the same byte for byte. It shuts exp
// down at the end (for a tracefile exporter that flushes the file; the caller still closes the
// file). This is what the
// fixture generator calls for fixtures/lab-<scenario>.jsonl:
//
//	w, _ := tracefile.Create("fixtures/lab-retry-cost.jsonl")
//	res, err := lab.Record(ctx, "retry-cost", tracefile.NewSpanExporter(w))
//	w.Close()
func Record(ctx context.Context, scenario string, exp sdktrace.SpanExporter) (*Result, error) {
	// Ids seeded by the scenario's name: stable across regenerations, distinct across fixtures.
	h := fnv.New64a()
	h.Write([]byte(scenario))
	tr := NewTracing(&ordered{next: exp}, WithIDSeed(h.Sum64()), WithSyncExport())
	res, err := Run(ctx, scenario, Options{Start: FixtureStart, TracerProvider: tr.Provider})
	if serr := tr.Shutdown(ctx); serr != nil && err == nil {
		err = serr
	}
	return res, err
}

// ordered holds the spans of a recording and hands them to next at Shutdown, sorted by end time
// (then start time, trace id, span id): spans that end at the same lab instant are otherwise
// exported in goroutine scheduling order, and a recording would differ from run to run.
type ordered struct {
	next  sdktrace.SpanExporter
	mu    sync.Mutex
	spans []sdktrace.ReadOnlySpan
}

func (o *ordered) ExportSpans(_ context.Context, ss []sdktrace.ReadOnlySpan) error {
	o.mu.Lock()
	o.spans = append(o.spans, ss...)
	o.mu.Unlock()
	return nil
}

func (o *ordered) Shutdown(ctx context.Context) error {
	o.mu.Lock()
	ss := o.spans
	o.spans = nil
	o.mu.Unlock()
	sort.SliceStable(ss, func(i, j int) bool {
		a, b := ss[i], ss[j]
		if !a.EndTime().Equal(b.EndTime()) {
			return a.EndTime().Before(b.EndTime())
		}
		if !a.StartTime().Equal(b.StartTime()) {
			return a.StartTime().Before(b.StartTime())
		}
		at, bt := a.SpanContext().TraceID(), b.SpanContext().TraceID()
		if c := bytes.Compare(at[:], bt[:]); c != 0 {
			return c < 0
		}
		as, bs := a.SpanContext().SpanID(), b.SpanContext().SpanID()
		return bytes.Compare(as[:], bs[:]) < 0
	})
	var errs []error
	for _, s := range ss {
		if err := o.next.ExportSpans(ctx, []sdktrace.ReadOnlySpan{s}); err != nil {
			errs = append(errs, fmt.Errorf("export span %s: %w", s.Name(), err))
			break
		}
	}
	if err := o.next.Shutdown(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
