package reference

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stormwatch/stormwatch/spans"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// DeadlineHeader carries the absolute deadline of the caller's logical call downstream.
const DeadlineHeader = "Request-Deadline"

// deadlineLayout is RFC 3339 in UTC with milliseconds, e.g. 2026-11-30T10:00:01.000Z.
const deadlineLayout = "2006-01-02T15:04:05.000Z07:00"

// ParseDeadline reads a Request-Deadline value: RFC 3339 (what the client sends) or integer Unix
// milliseconds.
func ParseDeadline(v string) (time.Time, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, false
	}
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.UnixMilli(ms), true
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}

// parseGRPCTimeout reads a grpc-timeout value: up to 8 digits and a unit (H M S m u n).
func parseGRPCTimeout(v string) (time.Duration, bool) {
	if len(v) < 2 || len(v) > 9 {
		return 0, false
	}
	n, err := strconv.ParseInt(v[:len(v)-1], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	unit := map[byte]time.Duration{'H': time.Hour, 'M': time.Minute, 'S': time.Second,
		'm': time.Millisecond, 'u': time.Microsecond, 'n': time.Nanosecond}[v[len(v)-1]]
	if unit == 0 {
		return 0, false
	}
	return time.Duration(n) * unit, true
}

// HandlerOption injects what the middleware needs from outside.
type HandlerOption func(*handlerOptions)

type handlerOptions struct {
	clock Clock
	tp    trace.TracerProvider
}

// HandlerClock sets the middleware's clock (default [SystemClock]).
func HandlerClock(c Clock) HandlerOption { return func(o *handlerOptions) { o.clock = c } }

// HandlerTracerProvider makes the middleware open a SERVER span per request, a child of the
// caller's attempt span (W3C trace context), marked resilience.terminal=shed when it refuses work.
func HandlerTracerProvider(tp trace.TracerProvider) HandlerOption {
	return func(o *handlerOptions) { o.tp = tp }
}

// Handler is the server half of deadline propagation: it reads Request-Deadline (and grpc-timeout,
// the earlier wins), cancels the request context at that time so work stops when the caller has
// given up, and answers 504 without calling next when the deadline has already passed.
func Handler(next http.Handler, opts ...HandlerOption) http.Handler {
	o := handlerOptions{clock: SystemClock{}}
	for _, opt := range opts {
		opt(&o)
	}
	tracer := tracerFrom(o.tp)
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := o.clock.Now()
		ctx := r.Context()
		var span trace.Span
		if tracer != nil {
			ctx = prop.Extract(ctx, propagation.HeaderCarrier(r.Header))
			ctx, span = tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(now),
				trace.WithAttributes(attribute.String(spans.AttrHTTPMethod, r.Method), attribute.String(spans.AttrURLPath, r.URL.Path)))
			defer func() { span.End(trace.WithTimestamp(o.clock.Now())) }()
		}
		deadline, ok := ParseDeadline(r.Header.Get(DeadlineHeader))
		if d, gok := parseGRPCTimeout(r.Header.Get("Grpc-Timeout")); gok {
			if g := now.Add(d); !ok || g.Before(deadline) {
				deadline, ok = g, true
			}
		}
		if !ok {
			next.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		if span != nil {
			span.SetAttributes(attribute.Int64(spans.AttrDeadline, deadline.UnixNano()))
		}
		if !now.Before(deadline) {
			if span != nil {
				span.SetAttributes(attribute.String(spans.AttrTerminal, "shed"), attribute.Int(spans.AttrHTTPStatus, http.StatusGatewayTimeout))
				span.SetStatus(codes.Error, "deadline passed before the work started")
			}
			http.Error(w, "request deadline passed before the work started", http.StatusGatewayTimeout)
			return
		}
		ctx, cancel := withDeadline(ctx, o.clock, deadline)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
		if span != nil && ctx.Err() != nil {
			span.SetAttributes(attribute.String(spans.AttrOutcome, OutcomeTimeout.String()))
		}
	})
}

// RequestDeadline returns the deadline the middleware put on a request's context.
func RequestDeadline(ctx context.Context) (time.Time, bool) { return ctx.Deadline() }
