package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
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
	// url is the origin's stable address, http://<name>:8080, which the lab's clients dial through
	// the run's names; addr is where it really listens (127.0.0.1:<random port>).
	url  string
	addr string
	srv  *http.Server // nil when it could not listen (the run then fails)
	clk  clock

	mu       sync.Mutex
	behave   behaviour
	saw      int // requests received
	nth      int // requests given to the behaviour
	arrivals []time.Time
	// arrived is closed when the first request reaches the work (its SERVER span started): the
	// fan-out sends to its replicas in a fixed order through it (see fanout).
	arrived   chan struct{}
	completed int // requests whose work ran to the end
	stopped   int // requests whose work was cut short by the propagated deadline
	// busy counts the handlers at work. Waiting for it lets the fake clock move, and the last
	// handler to finish hands the waiter back to the simulation before anything else can happen.
	busy group
}

type originOptions struct {
	// middleware puts reference.Handler in front of the work, so the propagated deadline cancels it.
	middleware bool
	// handler replaces the fault-injection work (the layers scenario's services).
	handler http.Handler
}

// newOrigin starts an origin. Its work ignores the caller's disconnect, as the experiments' origin
// did (the Go server would otherwise notice it): only the propagated deadline, read by the
// middleware, can stop it - and the end (or cancellation) of the run, so that nothing outlives it.
func (e *env) newOrigin(name string, b behaviour, o originOptions) *origin {
	org := &origin{name: name, clk: e.clk, behave: b, arrived: make(chan struct{}), busy: e.clk.newGroup()}
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
		org.mu.Lock()
		org.saw++
		if org.saw == 1 {
			close(org.arrived)
		}
		org.arrivals = append(org.arrivals, org.clk.Now())
		org.mu.Unlock()
		inner.ServeHTTP(w, r)
	})
	h := e.serverSpans(name, work)
	h = e.detach(h)
	// busy covers everything the handler does but the hand-over of its caller's participation, which
	// wraps it: a handler is counted done before it gives back a participation it took over, so
	// the clock cannot move between the two and overtake whoever waits for the origin to be idle.
	counted := h
	h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		org.busy.Add(1)
		defer org.busy.Done()
		counted.ServeHTTP(w, r)
	})
	h = e.flows.handler(h)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.fail(fmt.Errorf("start origin %s: %w", name, err))
		org.addr = "127.0.0.1:1" // nothing listens there: its callers fail at once
		org.url = "http://" + e.names.add(name, org.addr)
		return org
	}
	org.srv = &http.Server{
		Handler: h,
		// The server's own complaints go to the caller's logger, never to the process's stderr.
		ErrorLog:          e.errorLog,
		ReadHeaderTimeout: 10 * time.Second,
	}
	org.addr = ln.Addr().String()
	org.url = "http://" + e.names.add(name, org.addr)
	go func() { _ = org.srv.Serve(ln) }()
	return org
}

// originCloseWait bounds how long closing an origin waits for its handlers once the run has told
// them to stop. They stop at once; this is a guard against a lab bug, not a pause.
const originCloseWait = 2 * time.Second

// close stops the origin's server once its handlers, which the end of the run has already told to
// stop, have returned; after originCloseWait it closes anyway and reports the handlers it left
// behind instead of waiting for them for good. (http.Server.Shutdown would also wait, up to its
// bound, for connections a transport dialled but never used: nothing is lost by not waiting.)
func (o *origin) close(wait time.Duration) error {
	if o.srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	_ = o.busy.Wait(ctx)
	cancel()
	running := o.busy.Count()
	cerr := o.srv.Close()
	switch {
	case running > 0:
		return fmt.Errorf("origin %s: %d handler(s) still running %s after the run ended", o.name, running, wait)
	case cerr != nil:
		return fmt.Errorf("close origin %s: %w", o.name, cerr)
	}
	return nil
}

// detach cuts the request's work from its connection, so a caller hanging up does not stop it (as
// the experiments' origin did not notice), but keeps it bound to the run: when the run ends or is
// cancelled, every origin's work and its downstream calls stop.
func (e *env) detach(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
		defer cancel(nil)
		stop := context.AfterFunc(e.ctx, func() { cancel(context.Cause(e.ctx)) })
		defer stop()
		next.ServeHTTP(w, r.WithContext(ctx))
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

// idle waits (letting the lab clock move) until no request is being worked on, or the run is
// cancelled (the work then stops by itself, and the end of the run waits for it).
func (o *origin) idle(ctx context.Context) { _ = o.busy.Wait(ctx) }

func always(status int, latency time.Duration) behaviour {
	return func(*http.Request, int) reply { return reply{status: status, latency: latency} }
}

// refusedOrigin is the stable address of an origin called name where nothing listens: its name
// maps to a loopback port opened and closed at once, so dialling it is refused by the system, as a
// real stopped service would be.
func (e *env) refusedOrigin(name string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.fail(fmt.Errorf("reserve a refused port: %w", err))
		return "http://" + e.names.add(name, "127.0.0.1:1")
	}
	real := ln.Addr().String()
	if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		e.fail(fmt.Errorf("close the refused port: %w", err))
	}
	return "http://" + e.names.add(name, real)
}
