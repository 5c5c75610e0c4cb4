package reference

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/reference/fakeclock"
	"github.com/stormwatch/stormwatch/spans"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestHandlerCancelsAtThePropagatedDeadline: the work's context ends when the caller's deadline
// passes, even though the caller's connection is still open.
func TestHandlerCancelsAtThePropagatedDeadline(t *testing.T) {
	clk := fakeclock.New(t0)
	var deadline time.Time
	var hadDeadline bool
	working := make(chan context.Context)
	stopped := make(chan error)
	req := httptest.NewRequest(http.MethodGet, "/work", nil)
	req.Header.Set(DeadlineHeader, t0.Add(250*time.Millisecond).Format(deadlineLayout))
	wrapped := Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deadline, hadDeadline = r.Context().Deadline()
		working <- r.Context()
		<-r.Context().Done()
		stopped <- r.Context().Err()
	}), HandlerClock(clk))
	go wrapped.ServeHTTP(httptest.NewRecorder(), req)
	// The middleware has scheduled the deadline on the clock before it calls the work.
	ctx := <-working
	// Advance fires what is due synchronously: had the deadline been scheduled early, the context
	// would already be done when it returns.
	clk.Advance(249 * time.Millisecond)
	if ctx.Err() != nil {
		t.Fatalf("cancelled before the deadline: %v", ctx.Err())
	}
	clk.Advance(time.Millisecond)
	if err := <-stopped; err != context.DeadlineExceeded {
		t.Fatalf("work ended with %v", err)
	}
	if !hadDeadline || !deadline.Equal(t0.Add(250*time.Millisecond)) {
		t.Fatalf("handler saw deadline %v %v", deadline, hadDeadline)
	}
}

func TestHandlerShedsExpiredRequests(t *testing.T) {
	clk := fakeclock.New(t0)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	called := false
	h := Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }), HandlerClock(clk), HandlerTracerProvider(tp))
	req := httptest.NewRequest(http.MethodGet, "/work", nil)
	req.Header.Set(DeadlineHeader, strconv.FormatInt(t0.Add(-time.Millisecond).UnixMilli(), 10))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if called || w.Code != http.StatusGatewayTimeout {
		t.Fatalf("expired request: called %v, status %d", called, w.Code)
	}
	ended := rec.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans", len(ended))
	}
	a := attrs(ended[0])
	if a[spans.AttrTerminal].AsString() != "shed" || ended[0].SpanKind().String() != "server" {
		t.Fatalf("server span %v %v", ended[0].SpanKind(), a)
	}
}

func TestHandlerDeadlineSources(t *testing.T) {
	clk := fakeclock.New(t0)
	for _, tc := range []struct {
		name   string
		hdr    map[string]string
		want   time.Time
		wantOK bool
	}{
		{"none", nil, time.Time{}, false},
		{"garbage", map[string]string{DeadlineHeader: "tomorrow"}, time.Time{}, false},
		{"rfc3339", map[string]string{DeadlineHeader: "2026-01-01T00:00:01.500Z"}, t0.Add(1500 * time.Millisecond), true},
		{"unix ms", map[string]string{DeadlineHeader: strconv.FormatInt(t0.Add(time.Second).UnixMilli(), 10)}, t0.Add(time.Second), true},
		{"grpc-timeout", map[string]string{"Grpc-Timeout": "50m"}, t0.Add(50 * time.Millisecond), true},
		{"earlier wins", map[string]string{DeadlineHeader: "2026-01-01T00:00:01Z", "Grpc-Timeout": "2S"}, t0.Add(time.Second), true},
		{"bad grpc unit", map[string]string{"Grpc-Timeout": "5x"}, time.Time{}, false},
	} {
		var got time.Time
		var ok bool
		h := Handler(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got, ok = RequestDeadline(r.Context()) }), HandlerClock(clk))
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		for k, v := range tc.hdr {
			req.Header.Set(k, v)
		}
		h.ServeHTTP(httptest.NewRecorder(), req)
		if ok != tc.wantOK || !got.Equal(tc.want) {
			t.Errorf("%s: deadline %v %v, want %v %v", tc.name, got, ok, tc.want, tc.wantOK)
		}
	}
}
