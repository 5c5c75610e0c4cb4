package reference

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/stormwatch/stormwatch/spans"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// startSpan opens the INTERNAL span of the logical call and the operation id.
func (c *call) startSpan() {
	t := c.t
	name := ""
	if t.cfg.OperationName != nil {
		name = t.cfg.OperationName(c.req)
	}
	if name == "" {
		name = operationFrom(c.callerCtx)
	}
	if name == "" {
		name = "HTTP " + methodOf(c.req)
	}
	ctx, span := t.tracer.Start(c.opCtx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(c.start))
	c.span = span
	if !span.IsRecording() {
		c.opCtx = ctx
		return
	}
	c.opID = t.newOpID()
	c.opCtx = opBaggage(ctx, c.opID)
	port, _ := strconv.Atoi(c.origin.port)
	attrs := []attribute.KeyValue{
		attribute.String(spans.AttrOpID, c.opID),
		attribute.String(spans.AttrOpName, name),
		attribute.String(spans.AttrOwner, t.cfg.Service),
		attribute.Int64(spans.AttrDeadline, c.deadline.UnixNano()),
		attribute.String(spans.AttrHTTPMethod, methodOf(c.req)),
		attribute.String(spans.AttrServerAddress, c.origin.host),
		attribute.Int(spans.AttrServerPort, port),
	}
	if c.idemKey != "" {
		attrs = append(attrs, attribute.String(spans.AttrIdempotencyKey, hashKey(c.idemKey)))
	}
	span.SetAttributes(attrs...)
}

func methodOf(r *http.Request) string {
	if r.Method == "" {
		return http.MethodGet
	}
	return r.Method
}

// startAttemptSpan opens the CLIENT span of one physical call, linked to the previous one.
func (c *call) startAttemptSpan(ctx context.Context, target *url.URL, now time.Time, n int, kind string, pause time.Duration, width, resend int, remaining time.Duration) (context.Context, trace.Span) {
	t := c.t
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(now)}
	if c.prevSC.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: c.prevSC,
			Attributes: []attribute.KeyValue{attribute.String("resilience.link", "previous_attempt")}}))
	}
	ctx, span := t.tracer.Start(ctx, methodOf(c.req), opts...)
	c.prevSC = span.SpanContext()
	if !span.IsRecording() {
		return ctx, span
	}
	dest := c.origin
	if target != c.req.URL {
		dest = originOf(&http.Request{URL: target})
	}
	port, _ := strconv.Atoi(dest.port)
	attrs := []attribute.KeyValue{
		attribute.String(spans.AttrHTTPMethod, methodOf(c.req)),
		attribute.String(spans.AttrServerAddress, dest.host),
		attribute.Int(spans.AttrServerPort, port),
		attribute.String(spans.AttrURLFull, redactURL(target)),
		attribute.String(spans.AttrOpID, c.opID),
		attribute.Int(spans.AttrAttempt, n),
		attribute.String(spans.AttrAttemptKind, kind),
		attribute.Int64(spans.AttrDeadlineRemaining, remaining.Milliseconds()),
		attribute.Int(spans.AttrFanoutWidth, width),
	}
	if resend > 0 {
		attrs = append(attrs, attribute.Int(spans.AttrHTTPResendCount, resend))
	}
	if n > 1 || kind == KindHedge {
		attrs = append(attrs, attribute.Int64(spans.AttrBackoff, pause.Milliseconds()))
	}
	if t.budget != nil {
		attrs = append(attrs, attribute.Int64(spans.AttrBudgetRemaining, t.budget.remaining()))
	}
	if c.breaker != nil {
		attrs = append(attrs, attribute.String(spans.AttrBreakerState, c.brState.String()))
	}
	if c.idemKey != "" {
		attrs = append(attrs, attribute.String(spans.AttrIdempotencyKey, hashKey(c.idemKey)))
	}
	span.SetAttributes(attrs...)
	return ctx, span
}

// endAttemptSpan records the answer; the decision and the end come from decide.
func endAttemptSpan(span trace.Span, resp *http.Response, err error, cls class) {
	if resp != nil {
		span.SetAttributes(attribute.Int(spans.AttrHTTPStatus, resp.StatusCode))
	}
	span.SetAttributes(attribute.String(spans.AttrOutcome, cls.outcome.String()))
	if cls.errType != "" {
		span.SetAttributes(attribute.String(spans.AttrErrorType, cls.errType))
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		} else {
			span.SetStatus(codes.Error, "")
		}
	}
}

// finish closes the operation span with the stop reason and the terminal action.
func (c *call) finish(stop, terminal string, resp *http.Response, err error) {
	if c.span == nil {
		return
	}
	if c.span.IsRecording() {
		attrs := []attribute.KeyValue{
			attribute.String(spans.AttrStopReason, stop),
			attribute.String(spans.AttrTerminal, terminal),
		}
		if stop == StopBreakerOpen || stop == StopBudget {
			attrs = append(attrs, attribute.String(spans.AttrOutcome, OutcomeRefused.String()))
		}
		if c.breaker != nil {
			attrs = append(attrs, attribute.String(spans.AttrBreakerState, c.breaker.snapshot().String()))
		}
		if resp != nil {
			attrs = append(attrs, attribute.Int(spans.AttrHTTPStatus, resp.StatusCode))
		}
		c.span.SetAttributes(attrs...)
		switch {
		case err != nil:
			c.span.SetStatus(codes.Error, err.Error())
		case resp != nil && resp.StatusCode >= 400:
			c.span.SetStatus(codes.Error, "")
		}
	}
	c.span.End(trace.WithTimestamp(c.t.clock.Now()))
}
