package reference

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/reference/fakeclock"
)

// seen is what the stub transport recorded of one physical call.
type seen struct {
	at       time.Time
	method   string
	header   http.Header
	body     string
	deadline time.Time
}

// stub is a base transport that answers from a script, waiting on the fake clock.
type stub struct {
	clk    *fakeclock.Clock
	mu     sync.Mutex
	calls  []seen
	answer func(n int, r *http.Request) (status int, hdr http.Header, latency time.Duration, err error)
}

func (s *stub) RoundTrip(r *http.Request) (*http.Response, error) {
	var body string
	if r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		body = string(b)
	}
	d, _ := r.Context().Deadline()
	s.mu.Lock()
	n := len(s.calls)
	s.calls = append(s.calls, seen{at: s.clk.Now(), method: r.Method, header: r.Header.Clone(), body: body, deadline: d})
	s.mu.Unlock()
	status, hdr, latency, err := s.answer(n, r)
	if latency > 0 {
		if serr := s.clk.Sleep(r.Context(), latency); serr != nil {
			return nil, serr
		}
	}
	if err != nil {
		return nil, err
	}
	if hdr == nil {
		hdr = http.Header{}
	}
	return &http.Response{StatusCode: status, Header: hdr, Body: io.NopCloser(strings.NewReader("x")), Request: r}, nil
}

func (s *stub) n() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

func statuses(codes ...int) func(int, *http.Request) (int, http.Header, time.Duration, error) {
	return func(n int, _ *http.Request) (int, http.Header, time.Duration, error) {
		if n >= len(codes) {
			n = len(codes) - 1
		}
		return codes[n], nil, 0, nil
	}
}

// harness runs a test body on an auto-advancing fake clock, holding the test goroutine's token.
type harness struct {
	t    *testing.T
	clk  *fakeclock.Clock
	stub *stub
	rt   *Runtime
}

func newHarness(t *testing.T, answer func(int, *http.Request) (int, http.Header, time.Duration, error)) *harness {
	clk := fakeclock.New(t0)
	stop := clk.Auto()
	clk.Hold()
	t.Cleanup(func() { clk.Release(); stop() })
	return &harness{t: t, clk: clk, stub: &stub{clk: clk, answer: answer}, rt: NewRuntime(0)}
}

func (h *harness) transport(cfg Config, opts ...Option) *Transport {
	h.t.Helper()
	opts = append([]Option{WithClock(h.clk), WithBase(h.stub), WithRuntime(h.rt), WithRand(rand.NewPCG(1, 2))}, opts...)
	tr, err := New(cfg, opts...)
	if err != nil {
		h.t.Fatal(err)
	}
	return tr
}

func get(t *testing.T, tr http.RoundTripper, ctx context.Context) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://dep.test:8080/item?id=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if resp != nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// TestDeadlineArithmetic: four attempts of 2 s never fit a 2 s budget. The first attempt
// uses the whole budget and nothing else starts.
func TestDeadlineArithmetic(t *testing.T) {
	h := newHarness(t, func(int, *http.Request) (int, http.Header, time.Duration, error) {
		return 503, nil, 2 * time.Second, nil
	})
	tr := h.transport(Config{Timeout: 2 * time.Second, AttemptTimeout: 2 * time.Second,
		Retry: RetryConfig{MaxAttempts: 4}, Budget: BudgetConfig{Disabled: true}, Breaker: BreakerConfig{Disabled: true}})
	_, err := get(t, tr, context.Background())
	var de *DeadlineError
	if !errors.As(err, &de) || !errors.Is(err, context.DeadlineExceeded) || de.Attempts != 1 || de.Budget != 2*time.Second {
		t.Fatalf("err = %v (%+v), want a DeadlineError after 1 attempt of a 2s budget", err, de)
	}
	if h.stub.n() != 1 {
		t.Fatalf("%d attempts started", h.stub.n())
	}
	if got := h.clk.Since(t0); got != 2*time.Second {
		t.Fatalf("the call took %v, want exactly the 2s budget", got)
	}
}

// TestAttemptsFitTheBudget: with quick failures, every attempt's timeout is at most the budget left
// and the call never outlives its deadline.
func TestAttemptsFitTheBudget(t *testing.T) {
	h := newHarness(t, func(int, *http.Request) (int, http.Header, time.Duration, error) {
		return 503, nil, 700 * time.Millisecond, nil
	})
	tr := h.transport(Config{Timeout: 2 * time.Second, AttemptTimeout: 5 * time.Second,
		Retry: RetryConfig{MaxAttempts: 4}, Budget: BudgetConfig{Disabled: true}, Breaker: BreakerConfig{Disabled: true}})
	_, err := get(t, tr, context.Background())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	end := t0.Add(2 * time.Second)
	for i, c := range h.stub.calls {
		if c.deadline.After(end) {
			t.Errorf("attempt %d had deadline %v, after the call's %v", i+1, c.deadline, end)
		}
		if !c.at.Before(end) {
			t.Errorf("attempt %d started at the deadline", i+1)
		}
		if got, ok := ParseDeadline(c.header.Get(DeadlineHeader)); !ok || !got.Equal(end) {
			t.Errorf("attempt %d propagated %q", i+1, c.header.Get(DeadlineHeader))
		}
	}
	if n := h.stub.n(); n != 3 {
		t.Fatalf("%d attempts of 0.7s in 2s, want 3 (the third cut by the deadline)", n)
	}
	if got := h.clk.Since(t0); got != 2*time.Second {
		t.Fatalf("took %v", got)
	}
}

func TestRetryClassification(t *testing.T) {
	for _, tc := range []struct {
		status   int
		attempts int
	}{
		{429, 3}, {502, 3}, {503, 3}, {504, 3},
		{400, 1}, {401, 1}, {403, 1}, {404, 1}, {409, 1}, {422, 1}, {500, 1}, {200, 1},
	} {
		h := newHarness(t, statuses(tc.status))
		tr := h.transport(Config{Breaker: BreakerConfig{Disabled: true}})
		resp, err := get(t, tr, context.Background())
		if err != nil || resp.StatusCode != tc.status {
			t.Fatalf("%d: %v %v", tc.status, resp, err)
		}
		if h.stub.n() != tc.attempts {
			t.Errorf("status %d: %d attempts, want %d", tc.status, h.stub.n(), tc.attempts)
		}
	}
}

func TestRetryAfterSecondsHonoured(t *testing.T) {
	h := newHarness(t, func(n int, _ *http.Request) (int, http.Header, time.Duration, error) {
		if n == 0 {
			return 503, http.Header{"Retry-After": {"1"}}, 0, nil
		}
		return 200, nil, 0, nil
	})
	tr := h.transport(Config{})
	if resp, err := get(t, tr, context.Background()); err != nil || resp.StatusCode != 200 {
		t.Fatal(resp, err)
	}
	if gap := h.stub.calls[1].at.Sub(h.stub.calls[0].at); gap != time.Second {
		t.Fatalf("retried after %v, want the server's 1s (the jitter is below it)", gap)
	}
}

func TestRetryAfterDateHonoured(t *testing.T) {
	h := newHarness(t, func(n int, _ *http.Request) (int, http.Header, time.Duration, error) {
		if n == 0 {
			return 429, http.Header{"Retry-After": {t0.Add(2 * time.Second).Format(http.TimeFormat)}}, 0, nil
		}
		return 200, nil, 0, nil
	})
	tr := h.transport(Config{})
	if resp, err := get(t, tr, context.Background()); err != nil || resp.StatusCode != 200 {
		t.Fatal(resp, err)
	}
	if gap := h.stub.calls[1].at.Sub(h.stub.calls[0].at); gap != 2*time.Second {
		t.Fatalf("retried after %v, want 2s", gap)
	}
}

// TestRetryAfterCappedByDeadline: a hint beyond the budget ends the call at once with the answer
// in hand; the client neither waits past its deadline nor retries early.
func TestRetryAfterCappedByDeadline(t *testing.T) {
	for _, ra := range []string{"5", t0.Add(5 * time.Second).Format(http.TimeFormat)} {
		h := newHarness(t, func(int, *http.Request) (int, http.Header, time.Duration, error) {
			return 503, http.Header{"Retry-After": {ra}}, 0, nil
		})
		tr := h.transport(Config{Timeout: 2 * time.Second})
		resp, err := get(t, tr, context.Background())
		if err != nil || resp.StatusCode != 503 {
			t.Fatal(resp, err)
		}
		if h.stub.n() != 1 || h.clk.Since(t0) != 0 {
			t.Fatalf("Retry-After %s: %d attempts after %v", ra, h.stub.n(), h.clk.Since(t0))
		}
	}
}

func TestBodyReplayedWithGetBody(t *testing.T) {
	h := newHarness(t, statuses(503, 503, 201))
	tr := h.transport(Config{})
	req, _ := http.NewRequest(http.MethodPost, "http://dep.test/shipments", bytes.NewReader([]byte(`{"order":1}`)))
	req.Header.Set("Idempotency-Key", "k-1")
	getBody := req.GetBody
	replays := 0
	req.GetBody = func() (io.ReadCloser, error) { replays++; return getBody() }
	resp, err := tr.RoundTrip(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatal(resp, err)
	}
	resp.Body.Close()
	if h.stub.n() != 3 || replays != 2 {
		t.Fatalf("%d attempts, %d replays; want 3 and 2 (the first attempt sends the original body)", h.stub.n(), replays)
	}
	for i, c := range h.stub.calls {
		if c.body != `{"order":1}` || c.header.Get("Idempotency-Key") != "k-1" {
			t.Errorf("attempt %d sent body %q key %q", i+1, c.body, c.header.Get("Idempotency-Key"))
		}
	}
}

func TestBodyWithoutGetBodyIsNotRetried(t *testing.T) {
	h := newHarness(t, statuses(503, 200))
	tr := h.transport(Config{})
	req, _ := http.NewRequest(http.MethodPut, "http://dep.test/x", io.NopCloser(strings.NewReader("data")))
	req.GetBody = nil
	resp, err := tr.RoundTrip(req)
	if err != nil || resp.StatusCode != 503 || h.stub.n() != 1 {
		t.Fatalf("%v %v after %d attempts; a body that cannot be replayed must not be sent twice", resp, err, h.stub.n())
	}
}

func TestIdempotencyKeyGeneratedAndKeptAcrossAttempts(t *testing.T) {
	h := newHarness(t, statuses(503, 503, 201))
	tr := h.transport(Config{Idempotency: IdempotencyConfig{Generate: true}})
	req, _ := http.NewRequest(http.MethodPost, "http://dep.test/shipments", strings.NewReader("x"))
	resp, err := tr.RoundTrip(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatal(resp, err)
	}
	key := h.stub.calls[0].header.Get("Idempotency-Key")
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(key) {
		t.Fatalf("generated key %q is not a UUIDv4", key)
	}
	for i, c := range h.stub.calls {
		if got := c.header.Get("Idempotency-Key"); got != key {
			t.Fatalf("attempt %d carried %q, attempt 1 %q", i+1, got, key)
		}
	}
	if req.Header.Get("Idempotency-Key") != "" || req.Header.Get(DeadlineHeader) != "" {
		t.Fatal("the caller's request was modified")
	}
}

func TestWriteWithoutKeyIsNotRetried(t *testing.T) {
	h := newHarness(t, statuses(503, 201))
	tr := h.transport(Config{})
	req, _ := http.NewRequest(http.MethodPost, "http://dep.test/shipments", strings.NewReader("x"))
	resp, err := tr.RoundTrip(req)
	if err != nil || resp.StatusCode != 503 || h.stub.n() != 1 {
		t.Fatalf("%v %v after %d attempts", resp, err, h.stub.n())
	}
	if h.stub.calls[0].header.Get("Idempotency-Key") != "" {
		t.Fatal("a key was invented without Generate")
	}
}

func TestGRPCTimeoutPropagated(t *testing.T) {
	h := newHarness(t, statuses(200))
	tr := h.transport(Config{Timeout: 1500 * time.Millisecond, Propagation: PropagationConfig{GRPCTimeout: true}})
	get(t, tr, context.Background())
	if got := h.stub.calls[0].header.Get("Grpc-Timeout"); got != "1500m" {
		t.Fatalf("grpc-timeout %q", got)
	}
	h2 := newHarness(t, statuses(200))
	tr2 := h2.transport(Config{Propagation: PropagationConfig{NoDeadlineHeader: true}})
	get(t, tr2, context.Background())
	if v := h2.stub.calls[0].header.Get(DeadlineHeader); v != "" {
		t.Fatalf("Request-Deadline %q sent although disabled", v)
	}
}

// TestBreakerStateOutlivesClients: a client made per request is still protected, because the
// breaker lives in the runtime the clients share.
func TestBreakerStateOutlivesClients(t *testing.T) {
	h := newHarness(t, statuses(503))
	cfg := Config{Retry: RetryConfig{MaxAttempts: 1}, Breaker: BreakerConfig{Threshold: 2, Recovery: 5 * time.Second}}
	for i := 0; i < 2; i++ {
		get(t, h.transport(cfg), context.Background())
	}
	_, err := get(t, h.transport(cfg), context.Background())
	var boe *BreakerOpenError
	if !errors.As(err, &boe) || boe.RetryIn != 5*time.Second || boe.Origin != "http://dep.test:8080" {
		t.Fatalf("fresh client: %v", err)
	}
	if h.stub.n() != 2 {
		t.Fatalf("%d calls reached the origin", h.stub.n())
	}
	// Another runtime is another process's view: not refused.
	other := h.transport(cfg, WithRuntime(NewRuntime(0)))
	if _, err := get(t, other, context.Background()); err != nil {
		t.Fatalf("separate runtime refused: %v", err)
	}
}

func TestBreakerForgetsCancelledCalls(t *testing.T) {
	h := newHarness(t, func(int, *http.Request) (int, http.Header, time.Duration, error) {
		return 503, nil, time.Second, nil
	})
	tr := h.transport(Config{Retry: RetryConfig{MaxAttempts: 1}, Breaker: BreakerConfig{Threshold: 1}})
	ctx, cancel := context.WithCancel(context.Background())
	h.clk.AfterFunc(100*time.Millisecond, cancel)
	if _, err := get(t, tr, ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	// Threshold 1: had the cancelled call counted, this one would be refused.
	if _, err := get(t, tr, context.Background()); errors.Is(err, ErrBreakerOpen) {
		t.Fatal("a cancelled call counted as a failure")
	}
}

func TestBudgetRefusalsCounted(t *testing.T) {
	h := newHarness(t, statuses(503))
	tr := h.transport(Config{Budget: BudgetConfig{Reserve: 1}, Breaker: BreakerConfig{Disabled: true}})
	get(t, tr, context.Background()) // 2 attempts: the reserve's one retry, then refused
	get(t, tr, context.Background()) // 1 attempt: refused at once (0.2 tokens)
	st := tr.Stats()
	if st.Attempts != 3 || st.Retries != 1 || st.BudgetRefusals != 2 || st.Operations != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestFallbackRunsInsideTheBudget(t *testing.T) {
	h := newHarness(t, statuses(503))
	var fbDeadline time.Time
	tr := h.transport(Config{Timeout: 3 * time.Second, FallbackName: "cache",
		Fallback: func(ctx context.Context, req *http.Request, last *http.Response, cause error) (*http.Response, error) {
			fbDeadline, _ = ctx.Deadline()
			if last == nil || last.StatusCode != 503 || cause != nil {
				t.Errorf("fallback got %v %v", last, cause)
			}
			return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}}, nil
		}})
	resp, err := get(t, tr, context.Background())
	if err != nil || resp.StatusCode != 200 || tr.Stats().Fallbacks != 1 {
		t.Fatal(resp, err, tr.Stats())
	}
	if !fbDeadline.Equal(t0.Add(3 * time.Second)) {
		t.Fatalf("fallback deadline %v, want the call's", fbDeadline)
	}
	// Permanent answers are answers: no fallback.
	h2 := newHarness(t, statuses(404))
	called := false
	tr2 := h2.transport(Config{Fallback: func(context.Context, *http.Request, *http.Response, error) (*http.Response, error) {
		called = true
		return nil, nil
	}})
	if resp, _ := get(t, tr2, context.Background()); resp.StatusCode != 404 || called {
		t.Fatal("fallback ran on a 404")
	}
}

// TestHedgeKeepsKeyAndCancelsLoser runs on the real clock: the hedge delay is short and nothing is
// timed, only ordered.
func TestHedgeKeepsKeyAndCancelsLoser(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	loserCancelled := make(chan struct{})
	base := roundTripper(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		n := len(keys)
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		if n == 0 {
			<-r.Context().Done() // the primary hangs until cancelled
			close(loserCancelled)
			return nil, r.Context().Err()
		}
		// The winner's body is read after RoundTrip returns: its context must still be alive.
		return &http.Response{StatusCode: 200, Body: ctxBody{r.Context(), strings.NewReader("fresh")}, Header: http.Header{}}, nil
	})
	tr, err := New(Config{Hedge: HedgeConfig{Delay: 5 * time.Millisecond}}, WithBase(base), WithRuntime(NewRuntime(0)))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://dep.test/x", nil)
	req.Header.Set("Idempotency-Key", "read-01")
	resp, err := tr.RoundTrip(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatal(resp, err)
	}
	select {
	case <-loserCancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the losing copy was not cancelled")
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "fresh" {
		t.Fatalf("winner's body %q, %v: the winner was cancelled with the loser", body, err)
	}
	resp.Body.Close()
	select {
	case <-loserCancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the losing copy was not cancelled")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 2 || keys[0] != "read-01" || keys[1] != "read-01" {
		t.Fatalf("keys %v", keys)
	}
	if st := tr.Stats(); st.Hedges != 1 || st.Attempts != 2 {
		t.Fatalf("stats %+v", st)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestBreakerIgnoresPausesAfter429: a call that ran out of budget while waiting out a 429 does not
// count against the dependency.
func TestBreakerIgnoresPausesAfter429(t *testing.T) {
	h := newHarness(t, func(int, *http.Request) (int, http.Header, time.Duration, error) {
		return 429, http.Header{"Retry-After": {"1"}}, 0, nil
	})
	tr := h.transport(Config{Timeout: 1500 * time.Millisecond, MinAttemptTime: time.Nanosecond, Breaker: BreakerConfig{Threshold: 1}})
	for i := 0; i < 3; i++ {
		if _, err := get(t, tr, context.Background()); errors.Is(err, ErrBreakerOpen) {
			t.Fatalf("call %d refused: 429s tripped the breaker", i+1)
		}
	}
}

func TestFallbackReturningNothingIsAnError(t *testing.T) {
	h := newHarness(t, statuses(503))
	tr := h.transport(Config{Fallback: func(context.Context, *http.Request, *http.Response, error) (*http.Response, error) {
		return nil, nil
	}})
	if _, err := get(t, tr, context.Background()); err == nil || !strings.Contains(err.Error(), "fallback fallback returned neither") {
		t.Fatalf("err %v", err)
	}
}

// ctxBody fails reads once its request's context is done, as a real response body does.
type ctxBody struct {
	ctx context.Context
	r   io.Reader
}

func (b ctxBody) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	return b.r.Read(p)
}
func (b ctxBody) Close() error { return nil }

// TestClientDoIsOneBudget: redirect hops share the Do's deadline instead of getting one each.
func TestClientDoIsOneBudget(t *testing.T) {
	h := newHarness(t, func(n int, _ *http.Request) (int, http.Header, time.Duration, error) {
		if n == 0 {
			return http.StatusFound, http.Header{"Location": {"/moved"}}, 600 * time.Millisecond, nil
		}
		return 200, nil, 600 * time.Millisecond, nil
	})
	c, err := NewClient(Config{Timeout: time.Second}, WithClock(h.clk), WithBase(h.stub), WithRuntime(h.rt))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://dep.test/item", nil)
	_, err = c.Do(context.Background(), req)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("two hops of 0.6s in a 1s budget: %v", err)
	}
	if got := h.clk.Since(t0); got != time.Second {
		t.Fatalf("took %v", got)
	}
	if h.stub.calls[1].deadline != t0.Add(time.Second) {
		t.Fatalf("second hop's deadline %v", h.stub.calls[1].deadline)
	}
}

// TestClientPerRequestIsProtected: clients built without WithRuntime, one per request, share the
// process runtime's breaker.
func TestClientPerRequestIsProtected(t *testing.T) {
	h := newHarness(t, statuses(503))
	cfg := Config{Retry: RetryConfig{MaxAttempts: 1}, Breaker: BreakerConfig{Threshold: 2, Recovery: time.Hour}}
	// The process runtime outlives this test (-count N): a fresh origin each run.
	url := fmt.Sprintf("http://per-request-%d.test/x", time.Now().UnixNano())
	call := func() error {
		tr, err := New(cfg, WithClock(h.clk), WithBase(h.stub)) // no WithRuntime: the process's
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		resp, err := tr.RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
		}
		return err
	}
	call()
	call()
	if err := call(); !errors.Is(err, ErrBreakerOpen) {
		t.Fatalf("third per-request client: %v, want refused by the shared breaker", err)
	}
	if h.stub.n() != 2 {
		t.Fatalf("%d calls reached the origin", h.stub.n())
	}
}

// TestBreakerKeyByRoute: with KeyRoute a failing endpoint opens its own breaker and the origin's
// other endpoints keep working; with the default KeyOrigin they share the verdict.
func TestBreakerKeyByRoute(t *testing.T) {
	for _, tc := range []struct {
		key         BreakerKey
		fastRefused bool
	}{{KeyRoute, false}, {KeyOrigin, true}} {
		h := newHarness(t, func(_ int, r *http.Request) (int, http.Header, time.Duration, error) {
			if r.URL.Path == "/slow" {
				return 503, nil, 0, nil
			}
			return 200, nil, 0, nil
		})
		tr := h.transport(Config{Retry: RetryConfig{MaxAttempts: 1}, Breaker: BreakerConfig{Threshold: 2, Key: tc.key}})
		for i := 0; i < 2; i++ {
			req, _ := http.NewRequest(http.MethodGet, "http://dep.test/slow", nil)
			if resp, err := tr.RoundTrip(req); err == nil {
				resp.Body.Close()
			}
		}
		req, _ := http.NewRequest(http.MethodGet, "http://dep.test/fast", nil)
		resp, err := tr.RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
		}
		if refused := errors.Is(err, ErrBreakerOpen); refused != tc.fastRefused {
			t.Errorf("key %d: /fast refused=%v, want %v", tc.key, refused, tc.fastRefused)
		}
	}
}
