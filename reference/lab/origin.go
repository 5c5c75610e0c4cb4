package lab

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"

	"github.com/stormwatch/stormwatch/reference"
	"github.com/stormwatch/stormwatch/spans"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// reply is what an origin does with one request: wait latency (on the lab clock), then answer
// status. A zero status means 200.
type reply struct {
	status     int
	latency    time.Duration
	retryAfter string
}

// behaviour decides the reply to the n-th request (from 0) the origin has seen.
type behaviour func(r *http.Request, n int) reply

// origin is an in-process HTTP server on 127.0.0.1 with fault injection and counters.
type origin struct {
	name string
	url  string
	srv  *httptest.Server
	clk  clock

	mu        sync.Mutex
	behave    behaviour
	saw       int // requests received
	nth       int // requests given to the behaviour
	arrivals  []time.Time
	completed int // requests whose work ran to the end
	stopped   int // requests whose work was cut short by the propagated deadline
	busy      sync.WaitGroup
}

type originOptions struct {
	// middleware puts reference.Handler in front of the work, so the propagated deadline cancels it.
	middleware bool
	// handler replaces the fault-injection work (the layers scenario's services).
	handler http.Handler
}

// newOrigin starts an origin. Its work ignores the caller's disconnect, as the seed's origin did
// (the Go server would otherwise notice it): only the propagated deadline, read by the middleware,
// can stop it.
func (e *env) newOrigin(name string, b behaviour, o originOptions) *origin {
	org := &origin{name: name, clk: e.clk, behave: b}
	e.origins = append(e.origins, org)
	var work http.Handler = http.HandlerFunc(org.serve)
	if o.handler != nil {
		work = o.handler
	}
	if o.middleware {
		work = reference.Handler(work, reference.HandlerClock(e.clk))
	}
	inner := work
	work = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		org.busy.Add(1)
		defer org.busy.Done()
		org.mu.Lock()
		org.saw++
		org.arrivals = append(org.arrivals, org.clk.Now())
		org.mu.Unlock()
		inner.ServeHTTP(w, r)
	})
	h := e.serverSpans(name, work)
	h = detach(h)
	h = e.flows.handler(h)
	org.srv = httptest.NewServer(h)
	org.url = org.srv.URL
	e.closers = append(e.closers, org.srv.Close)
	return org
}

// detach cuts the request's work from its connection.
func detach(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithoutCancel(r.Context())))
	})
}

// serverSpans opens a SERVER span per request when the run is traced, as server instrumentation
// would, so recordings show the origin's side (and work that outlived its caller).
func (e *env) serverSpans(service string, next http.Handler) http.Handler {
	tp := e.tracerProvider(service)
	if tp == nil {
		return next
	}
	tracer := tp.Tracer("github.com/stormwatch/stormwatch/reference/lab")
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, r.Method+" "+r.URL.Path, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithTimestamp(e.clk.Now()), trace.WithAttributes(
				attribute.String(spans.AttrHTTPMethod, r.Method),
				attribute.String(spans.AttrURLPath, r.URL.Path),
				attribute.String(spans.AttrHTTPRoute, r.URL.Path)))
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r.WithContext(ctx))
		span.SetAttributes(attribute.Int(spans.AttrHTTPStatus, sw.status))
		if sw.status >= 500 {
			span.SetStatus(codes.Error, "")
			span.SetAttributes(attribute.String(spans.AttrErrorType, strconv.Itoa(sw.status)))
		}
		span.End(trace.WithTimestamp(e.clk.Now()))
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (o *origin) serve(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	n := o.nth
	o.nth++
	// Behaviours keep their own state (calls seen, entities created): they run under the lock.
	rep := o.behave(r, n)
	o.mu.Unlock()
	if rep.latency > 0 {
		if err := o.clk.Sleep(r.Context(), rep.latency); err != nil {
			o.mu.Lock()
			o.stopped++
			o.mu.Unlock()
			http.Error(w, "work stopped: "+err.Error(), http.StatusGatewayTimeout)
			return
		}
	}
	o.mu.Lock()
	o.completed++
	o.mu.Unlock()
	if rep.retryAfter != "" {
		w.Header().Set("Retry-After", rep.retryAfter)
	}
	status := rep.status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	fmt.Fprintf(w, "%s %d\n", o.name, status)
}

// set replaces the behaviour (an origin healing, for instance).
func (o *origin) set(b behaviour) {
	o.mu.Lock()
	o.behave = b
	o.mu.Unlock()
}

type counts struct{ saw, completed, stopped int }

func (o *origin) counts() counts {
	o.mu.Lock()
	defer o.mu.Unlock()
	return counts{o.saw, o.completed, o.stopped}
}

// countsAfter is the number of requests that arrived after t.
func (o *origin) countsAfter(t time.Time) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, a := range o.arrivals {
		if a.After(t) {
			n++
		}
	}
	return n
}

// idle waits (letting the lab clock move) until no request is being worked on.
func (o *origin) idle() { o.clk.Wait(o.busy.Wait) }

func always(status int, latency time.Duration) behaviour {
	return func(*http.Request, int) reply { return reply{status: status, latency: latency} }
}

// refusedOrigin is an address where nothing listens: a server started and closed at once.
func refusedOrigin() string {
	s := httptest.NewServer(http.NotFoundHandler())
	u := s.URL
	s.Close()
	return u
}
