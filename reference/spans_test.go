package reference

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/spans"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	nooptrace "go.opentelemetry.io/otel/trace/noop"
)

func attrs(s sdktrace.ReadOnlySpan) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

// TestSpansOfARetriedWrite checks every attribute of the operation span and of each attempt span
// for a POST with an idempotency key that fails twice with 503 and then succeeds.
func TestSpansOfARetriedWrite(t *testing.T) {
	var baggageSeen []string
	h := newHarness(t, func(n int, r *http.Request) (int, http.Header, time.Duration, error) {
		baggageSeen = append(baggageSeen, r.Header.Get("Baggage"))
		if n < 2 {
			return 503, nil, 10 * time.Millisecond, nil
		}
		return 201, nil, 10 * time.Millisecond, nil
	})
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tr := h.transport(Config{Service: "orders", Timeout: 5 * time.Second}, WithTracerProvider(tp))

	ctx := WithOperation(context.Background(), "shipments.create")
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://user:pw@ship.test:8443/shipments?token=s3cr3t&x=1", strings.NewReader("{}"))
	req.Header.Set("Idempotency-Key", "secret-key-1")
	req.Header.Set("Authorization", "Bearer top-secret")
	resp, err := tr.RoundTrip(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatal(resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	ended := rec.Ended()
	if len(ended) != 4 {
		t.Fatalf("%d spans, want 1 operation + 3 attempts", len(ended))
	}
	var op sdktrace.ReadOnlySpan
	var atts []sdktrace.ReadOnlySpan
	for _, s := range ended {
		switch s.SpanKind() {
		case trace.SpanKindInternal:
			op = s
		case trace.SpanKindClient:
			atts = append(atts, s)
		}
	}
	if op == nil || len(atts) != 3 {
		t.Fatalf("kinds wrong: op %v, %d client spans", op, len(atts))
	}
	oa := attrs(op)
	opID := oa[spans.AttrOpID].AsString()
	keyHash := HashIdempotencyKey("secret-key-1")
	for k, want := range map[string]any{
		spans.AttrOpName:         "shipments.create",
		spans.AttrOwner:          "orders",
		spans.AttrDeadline:       t0.Add(5 * time.Second).UnixNano(),
		spans.AttrStopReason:     StopSucceeded,
		spans.AttrTerminal:       TerminalComplete,
		spans.AttrIdempotencyKey: keyHash,
		spans.AttrHTTPMethod:     "POST",
		spans.AttrServerAddress:  "ship.test",
		spans.AttrServerPort:     int64(8443),
		spans.AttrHTTPStatus:     int64(201),
		spans.AttrBreakerState:   "closed",
	} {
		if got := oa[k].AsInterface(); got != want {
			t.Errorf("operation %s = %v, want %v", k, got, want)
		}
	}
	if len(opID) != 32 || op.Name() != "shipments.create" || op.Parent().IsValid() {
		t.Errorf("operation id %q name %q parent %v", opID, op.Name(), op.Parent())
	}
	if op.StartTime() != t0 || op.EndTime().Sub(op.StartTime()) < 30*time.Millisecond {
		t.Errorf("operation span times %v - %v are not the fake clock's", op.StartTime(), op.EndTime())
	}

	wantOutcome := []string{"retryable", "retryable", "ok"}
	wantDecision := []string{"retry", "retry", "stop"}
	wantKind := []string{"initial", "retry", "retry"}
	for i, s := range atts {
		a := attrs(s)
		if s.Parent().SpanID() != op.SpanContext().SpanID() || s.Name() != "POST" {
			t.Errorf("attempt %d: parent %v name %q", i+1, s.Parent().SpanID(), s.Name())
		}
		for k, want := range map[string]any{
			spans.AttrHTTPMethod:     "POST",
			spans.AttrServerAddress:  "ship.test",
			spans.AttrServerPort:     int64(8443),
			spans.AttrURLFull:        "https://ship.test:8443/shipments?token=REDACTED&x=1",
			spans.AttrOpID:           opID,
			spans.AttrAttempt:        int64(i + 1),
			spans.AttrAttemptKind:    wantKind[i],
			spans.AttrOutcome:        wantOutcome[i],
			spans.AttrDecision:       wantDecision[i],
			spans.AttrIdempotencyKey: keyHash,
			spans.AttrBreakerState:   "closed",
			spans.AttrFanoutWidth:    int64(1),
		} {
			if got := a[k].AsInterface(); got != want {
				t.Errorf("attempt %d %s = %v, want %v", i+1, k, got, want)
			}
		}
		status := int64(503)
		if i == 2 {
			status = 201
		}
		if a[spans.AttrHTTPStatus].AsInt64() != status {
			t.Errorf("attempt %d status %v", i+1, a[spans.AttrHTTPStatus])
		}
		if i < 2 {
			if a[spans.AttrErrorType].AsString() != "503" || s.Status().Code != codes.Error {
				t.Errorf("attempt %d error.type %v status %v", i+1, a[spans.AttrErrorType], s.Status())
			}
		} else if _, ok := a[spans.AttrErrorType]; ok {
			t.Errorf("the successful attempt has error.type")
		}
		if i == 0 {
			if _, ok := a[spans.AttrHTTPResendCount]; ok {
				t.Error("the first attempt has http.request.resend_count")
			}
			if _, ok := a[spans.AttrBackoff]; ok {
				t.Error("the first attempt has a backoff")
			}
			if len(s.Links()) != 0 {
				t.Error("the first attempt links to something")
			}
		} else {
			if a[spans.AttrHTTPResendCount].AsInt64() != int64(i) {
				t.Errorf("attempt %d resend_count %v", i+1, a[spans.AttrHTTPResendCount])
			}
			b, ok := a[spans.AttrBackoff]
			if !ok || b.AsInt64() < 0 || b.AsInt64() > 100<<uint(i-1) {
				t.Errorf("attempt %d backoff %v", i+1, b)
			}
			if len(s.Links()) != 1 || s.Links()[0].SpanContext.SpanID() != atts[i-1].SpanContext().SpanID() {
				t.Errorf("attempt %d does not link to attempt %d", i+1, i)
			}
			// The pause shows as the gap between the attempts.
			if gap := s.StartTime().Sub(atts[i-1].EndTime()); gap.Milliseconds() != b.AsInt64() {
				t.Errorf("attempt %d: gap %v, backoff_ms %d", i+1, gap, b.AsInt64())
			}
		}
		if r := a[spans.AttrDeadlineRemaining].AsInt64(); r <= 0 || r > 5000 {
			t.Errorf("attempt %d remaining %d ms", i+1, r)
		}
		if _, ok := a[spans.AttrBudgetRemaining]; !ok {
			t.Errorf("attempt %d lacks the budget", i+1)
		}
		for _, kv := range s.Attributes() {
			v := kv.Value.String()
			if strings.Contains(v, "secret-key-1") || strings.Contains(v, "top-secret") || strings.Contains(v, "s3cr3t") || strings.Contains(v, "pw@") {
				t.Errorf("attempt %d leaks a secret in %s=%s", i+1, kv.Key, v)
			}
		}
	}
	// Budget tokens go down with each retry.
	if b1, b3 := attrs(atts[0])[spans.AttrBudgetRemaining].AsInt64(), attrs(atts[2])[spans.AttrBudgetRemaining].AsInt64(); b3 != b1-2 {
		t.Errorf("budget %d then %d, want two retries spent", b1, b3)
	}
	// The operation id travels downstream in baggage, the same on every attempt.
	for i, raw := range baggageSeen {
		b, err := baggage.Parse(raw)
		if err != nil || b.Member(spans.AttrOpID).Value() != opID {
			t.Errorf("attempt %d baggage %q", i+1, raw)
		}
	}
}

func TestSpansOfRefusalAndDeadline(t *testing.T) {
	h := newHarness(t, func(int, *http.Request) (int, http.Header, time.Duration, error) {
		return 200, nil, 3 * time.Second, nil
	})
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tr := h.transport(Config{Timeout: time.Second, Breaker: BreakerConfig{Threshold: 1}}, WithTracerProvider(tp))
	get(t, tr, context.Background()) // deadline: trips the breaker (threshold 1)
	get(t, tr, context.Background()) // refused
	ended := rec.Ended()
	if len(ended) != 3 {
		t.Fatalf("%d spans, want op+attempt, then a lone op", len(ended))
	}
	att, op1, op2 := attrs(ended[0]), attrs(ended[1]), attrs(ended[2])
	if att[spans.AttrOutcome].AsString() != "timeout" || att[spans.AttrErrorType].AsString() != "timeout" || att[spans.AttrDecision].AsString() != "stop" {
		t.Errorf("deadline attempt %v", att)
	}
	if op1[spans.AttrStopReason].AsString() != StopDeadline || op1[spans.AttrTerminal].AsString() != TerminalFailFast || op1[spans.AttrBreakerState].AsString() != "open" {
		t.Errorf("deadline operation %v", op1)
	}
	if op2[spans.AttrStopReason].AsString() != StopBreakerOpen || op2[spans.AttrOutcome].AsString() != "refused" || ended[2].Status().Code != codes.Error {
		t.Errorf("refused operation %v", op2)
	}
}

func TestNoopTracerEmitsNothingAndSkipsWork(t *testing.T) {
	if tracerFrom(nil) != nil || tracerFrom(nooptrace.NewTracerProvider()) != nil {
		t.Fatal("a no-op provider is not short-circuited")
	}
}

func TestSpansOfAHedge(t *testing.T) {
	base := roundTripper(func(r *http.Request) (*http.Response, error) {
		// The primary hangs until the hedge wins. It is told by its span, not by arriving first: its
		// goroutine may be scheduled only after the hedge delay has passed and the hedge was sent.
		s, ok := trace.SpanFromContext(r.Context()).(sdktrace.ReadOnlySpan)
		if !ok {
			t.Error("the attempt's request carries no recording span")
			return nil, errors.New("no span")
		}
		if attrs(s)[spans.AttrAttemptKind].AsString() != KindHedge {
			<-r.Context().Done()
			return nil, r.Context().Err()
		}
		return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}}, nil
	})
	rec := tracetest.NewSpanRecorder()
	ended := make(chan struct{}, 16)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(notifyOnEnd{rec, ended}))
	tr, err := New(Config{Hedge: HedgeConfig{Delay: 5 * time.Millisecond}}, WithBase(base), WithRuntime(NewRuntime(0)), WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := get(t, tr, context.Background())
	if err != nil || resp.StatusCode != 200 {
		t.Fatal(resp, err)
	}
	// The loser's span ends on its own goroutine after the call returned: wait for the three
	// (operation, primary, hedge) to end.
	for i := 0; i < 3; i++ {
		select {
		case <-ended:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of 3 spans ended: %v", i, rec.Ended())
		}
	}
	var primary, hedge sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.SpanKind() != trace.SpanKindClient {
			continue
		}
		if attrs(s)[spans.AttrAttemptKind].AsString() == KindHedge {
			hedge = s
		} else {
			primary = s
		}
	}
	if primary == nil || hedge == nil {
		t.Fatalf("spans %v", rec.Ended())
	}
	p, h := attrs(primary), attrs(hedge)
	if p[spans.AttrAttempt].AsInt64() != 1 || h[spans.AttrAttempt].AsInt64() != 1 {
		t.Errorf("a hedge is a copy of attempt 1: %v %v", p[spans.AttrAttempt], h[spans.AttrAttempt])
	}
	if p[spans.AttrOutcome].AsString() != "cancelled" || p[spans.AttrDecision].AsString() != "stop" || p[spans.AttrFanoutWidth].AsInt64() != 1 {
		t.Errorf("losing primary: %v", p)
	}
	if h[spans.AttrOutcome].AsString() != "ok" || h[spans.AttrHTTPResendCount].AsInt64() != 1 || h[spans.AttrFanoutWidth].AsInt64() != 2 || h[spans.AttrBackoff].AsInt64() != 5 {
		t.Errorf("winning hedge: %v", h)
	}
	if len(hedge.Links()) != 1 || hedge.Links()[0].SpanContext.SpanID() != primary.SpanContext().SpanID() {
		t.Errorf("the hedge does not link to the primary")
	}
}

// notifyOnEnd tells a test each time a span has ended (after the wrapped processor saw it).
type notifyOnEnd struct {
	*tracetest.SpanRecorder
	ended chan<- struct{}
}

func (n notifyOnEnd) OnEnd(s sdktrace.ReadOnlySpan) {
	n.SpanRecorder.OnEnd(s)
	n.ended <- struct{}{}
}
