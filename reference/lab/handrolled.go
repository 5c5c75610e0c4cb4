package lab

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/stormwatch/stormwatch/spans"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The hand-rolled pieces below are the defects the experiments measured (docs/principles.md), built
// here on purpose to show them beside the reference client. Nothing outside the lab should copy
// them.

var errRefusedByHandRolled = errors.New("refused by breaker (hand-rolled)")

// windowBreaker is the typical home-made breaker of docs/principles.md#breakers: one window of the
// last 20 results for the whole client, open after 5 failures in it, for 30 s. Keyed on the client,
// and fed with whatever it wraps (attempts, when a retry loop sits above it).
type windowBreaker struct {
	clk       clock
	mu        sync.Mutex
	window    []bool // true = failure
	openUntil time.Time
}

func (b *windowBreaker) allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.clk.Now().Before(b.openUntil)
}

func (b *windowBreaker) record(failed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.window = append(b.window, failed)
	if len(b.window) > 20 {
		b.window = b.window[1:]
	}
	n := 0
	for _, f := range b.window {
		if f {
			n++
		}
	}
	if n >= 5 {
		b.openUntil = b.clk.Now().Add(30 * time.Second)
		b.window = b.window[:0]
	}
}

// stockClient is a plain client with stock instrumentation: one CLIENT span per request with the
// stable HTTP attributes and nothing of resilience.*, as otelhttp would emit. Its optional breaker
// and retry loop are the hand-rolled defects.
type stockClient struct {
	e        *env
	tracer   trace.Tracer
	breaker  *windowBreaker
	attempts int           // hand-rolled retry loop: attempts per call, no backoff, no budget
	timeout  time.Duration // per attempt, local only (nothing propagated)
	// noParent leaves out the caller's span: the fan-out defect makes its calls under one span of
	// its own.
	noParent bool
}

func (e *env) stockClient(service string) *stockClient {
	s := &stockClient{e: e, attempts: 1}
	if tp := e.tracerProvider(service); tp != nil {
		s.tracer = tp.Tracer("go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp")
	}
	return s
}

// Do runs the hand-rolled retry loop; every attempt asks the breaker (so it counts attempts). The
// calling code's span (as any instrumented handler has) is the parent of the attempts: stock
// instrumentation gives them nothing else in common.
func (s *stockClient) Do(ctx context.Context, req *http.Request) (*http.Response, error) {
	if s.tracer != nil && !s.noParent {
		var span trace.Span
		ctx, span = s.tracer.Start(ctx, req.Method+" "+req.URL.Path, trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithTimestamp(s.e.clk.Now()))
		defer func() { span.End(trace.WithTimestamp(s.e.clk.Now())) }()
	}
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
	}
	var resp *http.Response
	var err error
	for a := 0; a < s.attempts; a++ {
		if s.breaker != nil && !s.breaker.allow() {
			s.refusedSpan(ctx, req)
			return nil, errRefusedByHandRolled
		}
		r := req.Clone(ctx)
		if body != nil {
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		resp, err = s.once(ctx, r)
		failed := err != nil || resp.StatusCode >= 500
		if s.breaker != nil {
			s.breaker.record(failed)
		}
		if !failed || a == s.attempts-1 {
			break
		}
		if resp != nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
	}
	return resp, err
}

func (s *stockClient) once(ctx context.Context, r *http.Request) (*http.Response, error) {
	var span trace.Span
	if s.tracer != nil {
		port, _ := strconv.Atoi(r.URL.Port())
		ctx, span = s.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindClient),
			trace.WithTimestamp(s.e.clk.Now()), trace.WithAttributes(
				attribute.String(spans.AttrHTTPMethod, r.Method),
				attribute.String(spans.AttrServerAddress, r.URL.Hostname()),
				attribute.Int(spans.AttrServerPort, port),
				attribute.String(spans.AttrURLFull, r.URL.String())))
		propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(r.Header))
	}
	if s.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = withTimeout(ctx, s.e.clk, s.timeout)
		defer cancel()
	}
	resp, err := s.e.rt.RoundTrip(r.WithContext(ctx))
	if err == nil {
		// Read the body inside the attempt's time, as a caller would.
		b, rerr := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(b))
		err = rerr
	}
	if span != nil {
		switch {
		case err != nil:
			span.SetAttributes(attribute.String(spans.AttrErrorType, "timeout"))
			span.SetStatus(codes.Error, err.Error())
		default:
			span.SetAttributes(attribute.Int(spans.AttrHTTPStatus, resp.StatusCode))
			if resp.StatusCode >= 400 {
				span.SetAttributes(attribute.String(spans.AttrErrorType, strconv.Itoa(resp.StatusCode)))
				span.SetStatus(codes.Error, "")
			}
		}
		span.End(trace.WithTimestamp(s.e.clk.Now()))
	}
	if err != nil && ctx.Err() != nil {
		err = context.DeadlineExceeded
	}
	return resp, err
}

// refusedSpan records a refusal as a compliant client would, so the analyzer can see which origin
// the hand-rolled breaker refused.
func (s *stockClient) refusedSpan(ctx context.Context, r *http.Request) {
	if s.tracer == nil {
		return
	}
	port, _ := strconv.Atoi(r.URL.Port())
	now := s.e.clk.Now()
	_, span := s.tracer.Start(ctx, "HTTP "+r.Method, trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(now),
		trace.WithAttributes(
			attribute.String(spans.AttrHTTPMethod, r.Method),
			attribute.String(spans.AttrServerAddress, r.URL.Hostname()),
			attribute.Int(spans.AttrServerPort, port),
			attribute.String(spans.AttrOutcome, "refused"),
			attribute.String(spans.AttrStopReason, "breaker_open"),
			attribute.String(spans.AttrBreakerState, "open"),
			attribute.String(spans.AttrTerminal, "fail-fast")))
	span.SetStatus(codes.Error, errRefusedByHandRolled.Error())
	span.End(trace.WithTimestamp(now))
}

func isConnectError(err error) bool {
	var op *net.OpError
	return errors.Is(err, syscall.ECONNREFUSED) || (errors.As(err, &op) && op.Op == "dial")
}

func newRequest(ctx context.Context, method, url string, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	return http.NewRequestWithContext(ctx, method, url, rd)
}

// opSpan opens an INTERNAL span for a logical operation of a hand-rolled client, so its physical
// calls share a parent as they would under any instrumented caller; done ends it.
func (e *env) opSpan(service, name string) (context.Context, func()) {
	tp := e.tracerProvider(service)
	if tp == nil {
		return e.ctx, func() {}
	}
	ctx, span := tp.Tracer("github.com/stormwatch/stormwatch/reference/lab").Start(e.ctx, name,
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(e.clk.Now()))
	return ctx, func() { span.End(trace.WithTimestamp(e.clk.Now())) }
}
