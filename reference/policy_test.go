package reference

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestZeroConfigIsSafe(t *testing.T) {
	c, err := Config{}.normalize()
	if err != nil {
		t.Fatal(err)
	}
	if c.Timeout != 10*time.Second || c.Retry.MaxAttempts != 3 || c.Retry.Base != 100*time.Millisecond ||
		c.Retry.Cap != time.Second || c.Budget.Ratio != 0.1 || c.Budget.Reserve != 10 ||
		c.Breaker.Threshold != 5 || c.Breaker.Recovery != 30*time.Second || c.Breaker.Disabled || c.Budget.Disabled ||
		c.Idempotency.Header != "Idempotency-Key" || c.Service != "client" || c.MinAttemptTime != time.Millisecond {
		t.Fatalf("zero config normalised to %+v", c)
	}
	if fmt.Sprint(c.Retry.RetryOn) != "[429 502 503 504]" {
		t.Fatalf("RetryOn = %v", c.Retry.RetryOn)
	}
}

func TestInvalidConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"negative timeout", Config{Timeout: -1}, "Timeout -1ns is negative"},
		{"negative attempt timeout", Config{AttemptTimeout: -1}, "AttemptTimeout"},
		{"negative min attempt", Config{MinAttemptTime: -1}, "MinAttemptTime"},
		{"negative attempts", Config{Retry: RetryConfig{MaxAttempts: -1}}, "MaxAttempts -1"},
		{"negative base", Config{Retry: RetryConfig{Base: -1}}, "Retry.Base"},
		{"cap below base", Config{Retry: RetryConfig{Base: time.Second, Cap: time.Millisecond}}, "below Retry.Base"},
		{"retry a 404", Config{Retry: RetryConfig{RetryOn: []int{503, 404}}}, "holds 404: a wrong request is never retried"},
		{"not a status", Config{Retry: RetryConfig{RetryOn: []int{42}}}, "holds 42, not an HTTP status"},
		{"ratio above one", Config{Budget: BudgetConfig{Ratio: 1.5}}, "Budget.Ratio 1.5 is outside [0, 1]"},
		{"negative reserve", Config{Budget: BudgetConfig{Reserve: -1}}, "Budget.Reserve"},
		{"negative threshold", Config{Breaker: BreakerConfig{Threshold: -1}}, "Breaker.Threshold"},
		{"negative recovery", Config{Breaker: BreakerConfig{Recovery: -1}}, "Breaker.Recovery"},
		{"unknown key", Config{Breaker: BreakerConfig{Key: 9}}, "Breaker.Key 9 is unknown"},
		{"negative bulkhead", Config{Bulkhead: BulkheadConfig{MaxConcurrent: -1}}, "Bulkhead.MaxConcurrent"},
		{"negative hedge", Config{Hedge: HedgeConfig{Delay: -1}}, "Hedge.Delay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New(%s) = %v, want an ErrInvalidConfig naming %q", tc.name, err, tc.want)
			}
		})
	}
}

func TestClassifyStatuses(t *testing.T) {
	bg := context.Background()
	for _, tc := range []struct {
		status  int
		outcome Outcome
		trips   bool
	}{
		{200, OutcomeOK, false}, {204, OutcomeOK, false}, {304, OutcomeOK, false},
		{429, OutcomeRetryable, false},
		{502, OutcomeRetryable, true}, {503, OutcomeRetryable, true}, {504, OutcomeRetryable, true},
		{500, OutcomePermanent, true}, {501, OutcomePermanent, true},
		{400, OutcomePermanent, false}, {401, OutcomePermanent, false}, {403, OutcomePermanent, false},
		{404, OutcomePermanent, false}, {409, OutcomePermanent, false}, {422, OutcomePermanent, false},
	} {
		got := classify(&http.Response{StatusCode: tc.status}, nil, defaultRetryOn, bg, bg, bg)
		if got.outcome != tc.outcome || got.trips != tc.trips {
			t.Errorf("status %d: outcome %v trips %v, want %v %v", tc.status, got.outcome, got.trips, tc.outcome, tc.trips)
		}
		if tc.status >= 400 && got.errType != fmt.Sprint(tc.status) {
			t.Errorf("status %d: error.type %q", tc.status, got.errType)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string { return "i/o timeout" }
func (timeoutErr) Timeout() bool { return true }

func TestClassifyErrors(t *testing.T) {
	bg := context.Background()
	for _, tc := range []struct {
		name    string
		err     error
		outcome Outcome
		errType string
	}{
		{"connection refused", &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, OutcomeRetryable, "connect_error"},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), OutcomeRetryable, "connection_reset"},
		{"unexpected eof", io.ErrUnexpectedEOF, OutcomeRetryable, "connection_reset"},
		{"dns not found", &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}, OutcomePermanent, "dns_error"},
		{"dns temporary", &net.DNSError{Err: "server misbehaving", Name: "x", IsTemporary: true}, OutcomeRetryable, "dns_error"},
		{"timeout", timeoutErr{}, OutcomeTimeout, "timeout"},
		{"other", errors.New("weird"), OutcomePermanent, "_OTHER"},
	} {
		got := classify(nil, tc.err, defaultRetryOn, bg, bg, bg)
		if got.outcome != tc.outcome || got.errType != tc.errType || !got.trips {
			t.Errorf("%s: %+v, want %v %q trips", tc.name, got, tc.outcome, tc.errType)
		}
	}
	// The caller cancelling is neither a failure nor retryable.
	caller, cancel := context.WithCancel(bg)
	cancel()
	if got := classify(nil, context.Canceled, defaultRetryOn, caller, caller, caller); got.outcome != OutcomeCancelled || got.trips {
		t.Errorf("cancelled: %+v", got)
	}
	// The operation's deadline passing is a timeout that trips.
	op, cancelOp := context.WithDeadline(bg, time.Now().Add(-time.Second))
	defer cancelOp()
	if got := classify(nil, context.DeadlineExceeded, defaultRetryOn, op, op, bg); got.outcome != OutcomeTimeout || !got.trips {
		t.Errorf("deadline: %+v", got)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"3", 3 * time.Second, true},
		{"0", 0, true},
		{"-1", 0, false},
		{"soon", 0, false},
		{"Mon, 30 Nov 2026 10:00:05 GMT", 5 * time.Second, true},
		{"Mon, 30 Nov 2026 09:59:00 GMT", 0, true}, // in the past: no wait
		{"999999999", 24 * time.Hour, true},        // absurd hints are bounded; the deadline caps them anyway
	} {
		got, ok := parseRetryAfter(tc.v, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseRetryAfter(%q) = %v %v, want %v %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
}

// TestBackoffBoundsOneBudget is the example of docs/principles.md#one-budget-one-owner: 4 attempts,
// base 0.1 s, cap 0.8 s give 3 pauses within 0.1, 0.2 and 0.4 s.
func TestBackoffBoundsOneBudget(t *testing.T) {
	base, maxPause := 100*time.Millisecond, 800*time.Millisecond
	limits := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
	r := rand.New(rand.NewPCG(7, 7))
	for trial := 0; trial < 1000; trial++ {
		var pauses []time.Duration
		for n := 0; n < 4-1; n++ {
			pauses = append(pauses, fullJitter(base, maxPause, n, r.Float64()))
		}
		if len(pauses) != 3 {
			t.Fatalf("%d pauses", len(pauses))
		}
		for i, p := range pauses {
			if p < 0 || p > limits[i] {
				t.Fatalf("trial %d: pause %d = %v outside [0, %v]", trial, i, p, limits[i])
			}
		}
	}
	for n, want := range []time.Duration{100, 200, 400, 800, 800, 800} {
		if got := backoffCeiling(base, maxPause, n); got != want*time.Millisecond {
			t.Errorf("ceiling(%d) = %v, want %v", n, got, want*time.Millisecond)
		}
	}
	if got := backoffCeiling(time.Second, time.Hour, 200); got != time.Hour {
		t.Errorf("ceiling does not saturate: %v", got)
	}
	// Full jitter spans the whole range: the pauses are not all near the ceiling.
	lo, hi := time.Hour, time.Duration(0)
	for i := 0; i < 1000; i++ {
		p := fullJitter(base, maxPause, 2, r.Float64())
		lo, hi = min(lo, p), max(hi, p)
	}
	if lo > 20*time.Millisecond || hi < 380*time.Millisecond {
		t.Errorf("jitter range [%v, %v] does not cover [0, 400ms]", lo, hi)
	}
}

// TestBudgetArithmetic is the arithmetic of docs/principles.md#retry-cost: 40 failing calls at
// ratio 0.1 with a reserve of 10 get 10 retries; each call that asks again is refused.
func TestBudgetArithmetic(t *testing.T) {
	b := newBudget(BudgetConfig{Ratio: 0.1, Reserve: 10})
	for i := 0; i < 40; i++ {
		b.deposit()
	}
	granted, refused := 0, 0
	for i := 0; i < 40; i++ { // the first retry of each call
		if b.withdraw() {
			granted++
		} else {
			refused++
		}
	}
	for i := 0; i < granted; i++ { // the second retry of those that got one
		if b.withdraw() {
			granted++
		} else {
			refused++
		}
	}
	if granted != 10 || refused != 40 {
		t.Fatalf("granted %d refused %d, want 10 and 40", granted, refused)
	}
	// Spent: only the ratio refills it, one retry per ten calls.
	for i := 0; i < 9; i++ {
		b.deposit()
	}
	if b.withdraw() {
		t.Fatal("9 calls at ratio 0.1 bought a retry")
	}
	b.deposit()
	if !b.withdraw() {
		t.Fatal("10 calls at ratio 0.1 did not buy a retry")
	}
	// Never above the reserve, however many calls.
	for i := 0; i < 10000; i++ {
		b.deposit()
	}
	if got := b.remaining(); got != 10 {
		t.Fatalf("remaining %d after many calls, want the reserve 10", got)
	}
	// A client that sends little still gets its retries: there is no time-based floor to switch off.
	quiet := newBudget(BudgetConfig{Ratio: 0.1, Reserve: 10})
	quiet.deposit()
	if !quiet.withdraw() {
		t.Fatal("a low-rate client's isolated failure got no retry")
	}
	if newBudget(BudgetConfig{Disabled: true}) != nil {
		t.Fatal("a disabled budget exists")
	}
	var none *budget
	if !none.withdraw() || none.remaining() != -1 {
		t.Fatal("no budget must grant everything")
	}
}
