package reference

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stormwatch/stormwatch/spans"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Transport is the resilient http.RoundTripper. Each RoundTrip is one logical call: it may make
// several physical attempts through the base transport. It is safe for concurrent use.
//
// The zero value is ready to use and behaves as New(Config{}) with no options: the defaults of
// [Config], http.DefaultTransport, the system clock, the process-wide runtime, no spans and no
// metrics. New is how to choose anything else.
type Transport struct {
	// defaults fills in a zero Transport on first use; New leaves nothing for it to do.
	defaults sync.Once

	cfg    Config
	base   http.RoundTripper
	clock  Clock
	rnd    *randSource
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	inst   *instruments
	budget *budget
	rt     *Runtime

	bulkMu sync.Mutex
	bulk   map[originKey]chan struct{}

	stats struct {
		operations, attempts, retries, hedges, budgetRefusals, breakerRefusals, transitions, fallbacks atomic.Int64
	}
}

// Stats are a client's counters since it was built.
type Stats struct {
	Operations         int64 // logical calls
	Attempts           int64 // physical attempts, hedges included
	Retries            int64 // attempts after the first
	Hedges             int64 // hedged copies
	BudgetRefusals     int64 // retries or hedges the budget refused
	BreakerRefusals    int64 // calls refused by an open breaker
	BreakerTransitions int64 // breaker state changes this client caused
	Fallbacks          int64 // fallbacks run
}

// New builds a Transport from cfg (see [Config] for the defaults) and the injected options.
func New(cfg Config, opts ...Option) (*Transport, error) {
	c, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	inst, err := newInstruments(o.mp)
	if err != nil {
		return nil, fmt.Errorf("create reference client metrics: %w", err)
	}
	t := &Transport{}
	t.setup(c, o, inst)
	return t, nil
}

// setup fills t from a normalized configuration and the options, defaulting what they leave out.
func (t *Transport) setup(c Config, o options, inst *instruments) {
	if o.base == nil {
		o.base = http.DefaultTransport
	}
	if o.clock == nil {
		o.clock = SystemClock{}
	}
	if o.runtime == nil {
		o.runtime = ProcessRuntime()
	}
	t.cfg = c
	t.base = o.base
	t.clock = o.clock
	t.rnd = &randSource{src: o.rand}
	t.tracer = tracerFrom(o.tp)
	t.prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	t.inst = inst
	t.budget = newBudget(c.Budget)
	t.rt = o.runtime
	t.bulk = map[originKey]chan struct{}{}
}

// init makes a zero Transport usable, once. A Transport built by New already has a clock.
func (t *Transport) init() {
	t.defaults.Do(func() {
		if t.clock != nil {
			return
		}
		c, err := Config{}.normalize()
		if err != nil {
			panic("reference: the empty Config does not normalize: " + err.Error())
		}
		t.setup(c, options{}, nil)
	})
}

// Config returns the configuration in effect, defaults filled in.
func (t *Transport) Config() Config {
	t.init()
	return t.cfg
}

// Stats returns the client's counters.
func (t *Transport) Stats() Stats {
	return Stats{
		Operations:         t.stats.operations.Load(),
		Attempts:           t.stats.attempts.Load(),
		Retries:            t.stats.retries.Load(),
		Hedges:             t.stats.hedges.Load(),
		BudgetRefusals:     t.stats.budgetRefusals.Load(),
		BreakerRefusals:    t.stats.breakerRefusals.Load(),
		BreakerTransitions: t.stats.transitions.Load(),
		Fallbacks:          t.stats.fallbacks.Load(),
	}
}

// originKey is scheme://host:port without building the string.
type originKey struct{ scheme, host, port string }

func (k originKey) String() string { return k.scheme + "://" + k.host + ":" + k.port }

func originOf(req *http.Request) originKey {
	u := req.URL
	k := originKey{scheme: u.Scheme, host: u.Hostname(), port: u.Port()}
	if k.scheme == "" {
		k.scheme = "http"
	}
	if k.port == "" {
		if k.scheme == "https" {
			k.port = "443"
		} else {
			k.port = "80"
		}
	}
	return k
}

// Stop reasons (resilience.stop_reason) and terminal actions (resilience.terminal).
const (
	StopSucceeded     = "succeeded"
	StopPermanent     = "permanent"
	StopMaxAttempts   = "max_attempts"
	StopDeadline      = "deadline"
	StopBudget        = "budget"
	StopBreakerOpen   = "breaker_open"
	StopNotIdempotent = "not_idempotent"
	StopCancelled     = "cancelled"

	TerminalComplete = "complete"
	TerminalFailFast = "fail-fast"
)

// Attempt kinds (resilience.attempt.kind) and decisions (resilience.decision).
const (
	KindInitial  = "initial"
	KindRetry    = "retry"
	KindHedge    = "hedge"
	KindFallback = "fallback"

	DecisionRetry    = "retry"
	DecisionHedge    = "hedge"
	DecisionFallback = "fallback"
	DecisionStop     = "stop"
)

// call is the state of one logical call.
type call struct {
	t         *Transport
	req       *http.Request
	origin    originKey
	callerCtx context.Context
	opCtx     context.Context
	start     time.Time
	deadline  time.Time
	idemKey   string
	setIdem   bool
	opID      string
	span      trace.Span
	prevSC    trace.SpanContext
	breaker   *breaker
	brState   BreakerState
	sent      int // physical calls so far
	last      lastAttempt
	mu        sync.Mutex
	// body wraps the returned response's body; it lives here to save an allocation per call.
	body cancelOnClose
}

// RoundTrip makes one logical call. It returns the final response (the caller closes its body),
// or an error: a [*BreakerOpenError], a [*DeadlineError], or an [*AttemptError] wrapping the last
// transport error.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		return nil, errors.New("reference: request has no URL")
	}
	t.init()
	t.stats.operations.Add(1)
	c := &call{t: t, req: req, origin: originOf(req), callerCtx: req.Context(), start: t.clock.Now()}
	c.deadline = c.start.Add(t.cfg.Timeout)
	if d, ok := c.callerCtx.Deadline(); ok && d.Before(c.deadline) {
		c.deadline = d
	}
	opCtx, cancelOp := withDeadline(c.callerCtx, t.clock, c.deadline)
	c.opCtx = opCtx

	retryable := idempotentMethod(req.Method)
	if !retryable {
		c.idemKey = req.Header.Get(t.cfg.Idempotency.Header)
		if c.idemKey == "" && t.cfg.Idempotency.Generate {
			c.idemKey = t.newKey()
			c.setIdem = true
		}
		retryable = c.idemKey != ""
	}
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		retryable = false // the body cannot be sent twice
	}

	if t.tracer != nil {
		c.startSpan()
	}

	resp, stop, err := c.run(retryable)

	if stop != StopSucceeded && stop != StopPermanent && stop != StopCancelled && t.cfg.Fallback != nil {
		// The stop reason stays the dependency's story; the terminal action says a fallback answered.
		resp, err = c.fallback(resp, err)
		if resp == nil && err == nil {
			err = fmt.Errorf("fallback %s returned neither a response nor an error", t.cfg.FallbackName)
		}
		c.finish(stop, "fallback:"+t.cfg.FallbackName, resp, err)
	} else {
		terminal := TerminalFailFast
		if stop == StopSucceeded || stop == StopPermanent {
			terminal = TerminalComplete
		}
		c.finish(stop, terminal, resp, err)
	}
	if t.inst != nil {
		t.inst.add(c.callerCtx, t.inst.operations, c.origin, attribute.String(spans.AttrStopReason, stop))
	}

	if err != nil {
		cancelOp()
		if stop == StopDeadline && !errors.Is(err, ErrBreakerOpen) {
			return nil, &DeadlineError{Budget: c.deadline.Sub(c.start), Attempts: c.sent, Err: err}
		}
		var boe *BreakerOpenError
		if errors.As(err, &boe) {
			return nil, err
		}
		return nil, &AttemptError{Method: req.Method, URL: redactURL(req.URL), Attempts: c.sent, StopReason: stop, Err: err}
	}
	if resp.Body == nil {
		resp.Body = http.NoBody
	}
	c.body = cancelOnClose{ReadCloser: resp.Body, cancel: cancelOp}
	resp.Body = &c.body
	return resp, nil
}

// run is the attempt loop; it returns the final result and the stop reason.
func (c *call) run(retryable bool) (resp *http.Response, stop string, err error) {
	t := c.t
	var tk ticket
	if !t.cfg.Breaker.Disabled {
		c.breaker = t.rt.breakerFor(c.breakerKey(), c.start)
		var tr *transition
		var refusal *BreakerOpenError
		tk, c.brState, tr, refusal = c.breaker.admit(c.start)
		c.noteTransition(tr)
		if refusal != nil {
			t.stats.breakerRefusals.Add(1)
			if t.inst != nil {
				t.inst.add(c.callerCtx, t.inst.breakerRefusals, c.origin)
			}
			return nil, StopBreakerOpen, refusal
		}
	}
	t.budget.deposit()

	var cls class
	var pause time.Duration
	var end time.Time // when the call's outcome was known, for the breaker
	kind := KindInitial
	for attempt := 1; ; attempt++ {
		resp, cls, err = c.attempt(attempt, kind, pause)
		end = c.last.end
		stop, pause = c.decide(attempt, retryable, resp, cls)
		if stop != "" {
			break
		}
		drain(resp)
		t.stats.retries.Add(1)
		if t.inst != nil {
			t.inst.add(c.callerCtx, t.inst.retries, c.origin)
		}
		if perr := t.clock.Sleep(c.opCtx, pause); perr != nil {
			if c.callerCtx.Err() != nil && !errors.Is(context.Cause(c.callerCtx), context.DeadlineExceeded) {
				stop = StopCancelled
			} else {
				stop = StopDeadline
			}
			resp, err = nil, perr
			end = t.clock.Now()
			break
		}
		kind = KindRetry
	}

	if c.breaker != nil {
		if stop == StopCancelled {
			c.breaker.forget(tk)
		} else {
			// Only the dependency's own answers count: a deadline that passed during a pause (after a
			// 429, say) is not evidence that the dependency failed.
			c.noteTransition(c.breaker.record(tk, cls.trips, end))
		}
	}
	return resp, stop, err
}

func (c *call) breakerKey() breakerKey {
	k := breakerKey{scheme: c.origin.scheme, host: c.origin.host, port: c.origin.port,
		threshold: c.t.cfg.Breaker.Threshold, recovery: c.t.cfg.Breaker.Recovery}
	switch c.t.cfg.Breaker.Key {
	case KeyRoute:
		k.narrow = c.req.URL.Path
	case KeyMethod:
		k.narrow = c.req.Method
	}
	return k
}

func (c *call) noteTransition(tr *transition) {
	if tr == nil {
		return
	}
	c.t.stats.transitions.Add(1)
	c.t.inst.transition(c.callerCtx, c.origin, tr)
}

// lastAttempt is what decide needs to know about the attempt just made.
type lastAttempt struct {
	span       trace.Span
	end        time.Time
	retryAfter time.Duration
	hasRA      bool
}

// decide says whether the call stops (and why) or retries (after which pause).
func (c *call) decide(attempt int, retryable bool, resp *http.Response, cls class) (stop string, pause time.Duration) {
	t := c.t
	la := c.last
	defer func() {
		if la.span != nil {
			d := DecisionRetry
			if stop != "" {
				d = DecisionStop
				if t.cfg.Fallback != nil && stop != StopSucceeded && stop != StopPermanent && stop != StopCancelled {
					d = DecisionFallback
				}
			}
			la.span.SetAttributes(attribute.String(spans.AttrDecision, d))
			la.span.End(trace.WithTimestamp(la.end))
		}
	}()
	switch cls.outcome {
	case OutcomeOK:
		return StopSucceeded, 0
	case OutcomePermanent:
		return StopPermanent, 0
	case OutcomeCancelled:
		return StopCancelled, 0
	}
	// The attempt just ended: its end time is now, without reading the clock again.
	now := la.end
	if c.opCtx.Err() != nil || !now.Before(c.deadline) {
		return StopDeadline, 0
	}
	if !retryable {
		return StopNotIdempotent, 0
	}
	if attempt >= t.cfg.Retry.MaxAttempts {
		return StopMaxAttempts, 0
	}
	var hint time.Duration
	if la.hasRA && !t.cfg.Retry.IgnoreRetryAfter {
		hint = la.retryAfter
	}
	if now.Add(hint).Add(t.cfg.MinAttemptTime).After(c.deadline) {
		// The server asked for a wait the budget cannot afford: stop now, do not retry early.
		return StopDeadline, 0
	}
	if !t.budget.withdraw() {
		t.stats.budgetRefusals.Add(1)
		if t.inst != nil {
			t.inst.add(c.callerCtx, t.inst.budgetRefusals, c.origin)
		}
		return StopBudget, 0
	}
	pause = fullJitter(t.cfg.Retry.Base, t.cfg.Retry.Cap, attempt-1, t.rnd.float64())
	if pause < hint {
		pause = hint
	}
	if now.Add(pause).Add(t.cfg.MinAttemptTime).After(c.deadline) {
		t.budget.refund()
		return StopDeadline, 0
	}
	return "", pause
}

// attempt makes physical attempt number n (1-based), hedged when configured.
func (c *call) attempt(n int, kind string, pause time.Duration) (*http.Response, class, error) {
	t := c.t
	if t.cfg.Hedge.Delay > 0 && safeMethod(c.req.Method) {
		return c.hedged(n, kind, pause)
	}
	r := c.physical(c.opCtx, n, kind, pause, 1)
	c.last = r.la
	return r.resp, r.cls, r.err
}

// result is one physical call's outcome.
type result struct {
	resp  *http.Response
	err   error
	cls   class
	la    lastAttempt
	hedge bool // the hedged copy, not the primary
}

// physical makes one physical call under its own CLIENT span.
func (c *call) physical(parent context.Context, n int, kind string, pause time.Duration, width int) result {
	t := c.t
	now := c.start // the first attempt starts with the call: no need to read the clock
	if n > 1 || kind != KindInitial {
		now = t.clock.Now()
	}
	remaining := c.deadline.Sub(now)
	ctx, cancel := parent, context.CancelFunc(nil)
	if t.cfg.AttemptTimeout > 0 && t.cfg.AttemptTimeout < remaining {
		ctx, cancel = withDeadline(parent, t.clock, now.Add(t.cfg.AttemptTimeout))
	}
	if cancel != nil {
		defer cancel()
	}
	if waited, err := t.acquire(ctx, c.origin); err != nil {
		// No slot within the budget: nothing went on the wire, so no attempt is counted.
		cls := classify(nil, err, t.cfg.Retry.RetryOn, ctx, c.opCtx, c.callerCtx)
		return result{err: err, cls: cls, la: lastAttempt{end: t.clock.Now()}}
	} else if waited {
		now = t.clock.Now()
		remaining = c.deadline.Sub(now)
	}
	defer t.release(c.origin)
	// Hedged copies run concurrently: the call's counters and the link chain are guarded.
	c.mu.Lock()
	resend := c.sent
	c.sent++
	c.mu.Unlock()
	t.stats.attempts.Add(1)

	target := c.req.URL
	if t.cfg.Route != nil {
		if u := t.cfg.Route(n, c.req.URL); u != nil {
			target = u
		}
	}
	var span trace.Span
	if c.span != nil {
		c.mu.Lock()
		ctx, span = c.startAttemptSpan(ctx, target, now, n, kind, pause, width, resend, remaining)
		c.mu.Unlock()
	}
	areq := c.prepare(ctx, resend)
	if target != c.req.URL {
		areq.URL = target
		areq.Host = ""
	}
	resp, err := t.base.RoundTrip(areq)
	if err == nil && resp == nil {
		err = errors.New("base transport returned neither response nor error")
	}
	cls := classify(resp, err, t.cfg.Retry.RetryOn, ctx, c.opCtx, c.callerCtx)
	if err != nil && errors.Is(context.Cause(ctx), errHedgeLost) {
		// Only this copy was cancelled (a hedge lost): the dependency did nothing wrong.
		cls = class{outcome: OutcomeCancelled, errType: "cancelled"}
	}
	if t.inst != nil {
		t.inst.add(c.callerCtx, t.inst.attempts, c.origin, attribute.String(spans.AttrOutcome, cls.outcome.String()))
	}
	la := lastAttempt{span: span, end: t.clock.Now()}
	if err == nil {
		if v := resp.Header.Get("Retry-After"); v != "" {
			la.retryAfter, la.hasRA = parseRetryAfter(v, la.end)
			if span != nil {
				span.SetAttributes(attribute.String(spans.AttrResHeaderRetryAfter, v))
				if la.hasRA {
					span.SetAttributes(attribute.Int64(spans.AttrRetryAfter, la.retryAfter.Milliseconds()))
				}
			}
		}
	}
	if span != nil {
		endAttemptSpan(span, resp, err, cls)
	}
	if err != nil {
		err = fmt.Errorf("attempt %d: %w", n, err)
	}
	return result{resp: resp, err: err, cls: cls, la: la}
}

// prepare copies the request for one attempt: its own context and header map (the caller's
// request is never modified), the propagated deadline, the idempotency key, a fresh body.
func (c *call) prepare(ctx context.Context, resend int) *http.Request {
	t := c.t
	r := c.req.WithContext(ctx)
	h := make(http.Header, len(c.req.Header)+3)
	for k, v := range c.req.Header {
		h[k] = v
	}
	// The added values share one backing array: one allocation instead of one per header.
	vals := make([]string, 0, 3)
	add := func(k, v string) {
		vals = append(vals, v)
		h[k] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	// Both propagated values are formatted into one buffer and become one string.
	var buf [64]byte
	b := buf[:0]
	if !t.cfg.Propagation.NoDeadlineHeader {
		b = c.deadline.UTC().AppendFormat(b, deadlineLayout)
	}
	n := len(b)
	if t.cfg.Propagation.GRPCTimeout {
		ms := c.deadline.Sub(t.clock.Now()).Milliseconds()
		if ms < 1 {
			ms = 1
		}
		b = append(strconv.AppendInt(b, ms, 10), 'm')
	}
	if len(b) > 0 {
		both := string(b)
		if n > 0 {
			add(DeadlineHeader, both[:n])
		}
		if len(both) > n {
			add("Grpc-Timeout", both[n:])
		}
	}
	if c.setIdem {
		add(t.cfg.Idempotency.Header, c.idemKey)
	}
	r.Header = h
	if c.span != nil {
		t.prop.Inject(ctx, propagation.HeaderCarrier(h))
	}
	if resend > 0 && c.req.GetBody != nil {
		if body, err := c.req.GetBody(); err == nil {
			r.Body = body
		} else {
			r.Body = errBody{fmt.Errorf("replay request body: %w", err)}
		}
	}
	return r
}

// fallback runs the configured fallback inside the call's budget under its own span.
func (c *call) fallback(last *http.Response, cause error) (*http.Response, error) {
	t := c.t
	t.stats.fallbacks.Add(1)
	ctx := c.opCtx
	var span trace.Span
	if c.span != nil {
		ctx, span = t.tracer.Start(ctx, "fallback "+t.cfg.FallbackName,
			trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(t.clock.Now()))
		span.SetAttributes(
			attribute.String(spans.AttrOpID, c.opID),
			attribute.String(spans.AttrAttemptKind, KindFallback),
			attribute.String(spans.AttrTerminal, "fallback:"+t.cfg.FallbackName))
	}
	resp, err := t.cfg.Fallback(ctx, c.req, last, cause)
	if last != nil && resp != last {
		drain(last)
	}
	if span != nil {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End(trace.WithTimestamp(t.clock.Now()))
	}
	if err != nil {
		err = fmt.Errorf("fallback %s: %w", t.cfg.FallbackName, err)
	}
	return resp, err
}

// acquire takes a bulkhead slot for origin; waiting counts against ctx's deadline.
func (t *Transport) acquire(ctx context.Context, k originKey) (waited bool, err error) {
	if t.cfg.Bulkhead.MaxConcurrent <= 0 {
		return false, nil
	}
	t.bulkMu.Lock()
	sem := t.bulk[k]
	if sem == nil {
		sem = make(chan struct{}, t.cfg.Bulkhead.MaxConcurrent)
		t.bulk[k] = sem
	}
	t.bulkMu.Unlock()
	select {
	case sem <- struct{}{}:
		return false, nil
	default:
	}
	select {
	case sem <- struct{}{}:
		return true, nil
	case <-ctx.Done():
		return true, fmt.Errorf("wait for bulkhead slot to %s: %w", k, context.Cause(ctx))
	}
}

func (t *Transport) release(k originKey) {
	if t.cfg.Bulkhead.MaxConcurrent <= 0 {
		return
	}
	t.bulkMu.Lock()
	sem := t.bulk[k]
	t.bulkMu.Unlock()
	<-sem
}

// newKey is a random UUIDv4-shaped idempotency key from the client's random source.
func (t *Transport) newKey() string {
	a, b := t.rnd.uint64(), t.rnd.uint64()
	a = (a &^ (0xf << 12)) | (4 << 12)
	b = (b &^ (0x3 << 62)) | (0x2 << 62)
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", a>>32, (a>>16)&0xffff, a&0xffff, b>>48, b&0xffffffffffff)
}

func (t *Transport) newOpID() string {
	return fmt.Sprintf("%016x%016x", t.rnd.uint64(), t.rnd.uint64())
}

// opBaggage puts the operation id into ctx's baggage so it travels downstream.
func opBaggage(ctx context.Context, id string) context.Context {
	m, err := baggage.NewMember(spans.AttrOpID, id)
	if err != nil {
		return ctx
	}
	b, err := baggage.FromContext(ctx).SetMember(m)
	if err != nil {
		return ctx
	}
	return baggage.ContextWithBaggage(ctx, b)
}

// drain reads a little of a response that will not be returned and closes it, so its connection
// can be reused.
func drain(resp *http.Response) {
	if resp == nil || resp.Body == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
	_ = resp.Body.Close()
}

// cancelOnClose ends the call's context (and its deadline timer) when the caller closes the body.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

type errBody struct{ err error }

func (e errBody) Read([]byte) (int, error) { return 0, e.err }
func (e errBody) Close() error             { return nil }

// CloseIdleConnections closes the base transport's idle connections when it can, so
// http.Client.CloseIdleConnections works through a Transport.
func (t *Transport) CloseIdleConnections() {
	t.init()
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
