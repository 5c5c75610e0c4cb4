package reference

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"time"
)

// Config is the policy of a client. Its zero value is safe: a 10 s deadline per logical call, up
// to 3 attempts of transient failures of idempotent requests with full-jitter backoff (base
// 100 ms, cap 1 s), a retry budget of 10% of requests with a reserve of 10 retries, and a circuit
// breaker per origin that opens after 5 consecutive failed calls for 30 s. Every field is
// documented in docs/reference.md.
type Config struct {
	// Service names the layer that owns this client's retries (resilience.owner). Default "client".
	Service string
	// Timeout is the budget of one logical call: every attempt, pause, bulkhead wait and the
	// fallback fit inside it. A deadline already on the request context wins when it is earlier.
	// Default 10 s.
	Timeout time.Duration
	// AttemptTimeout caps one attempt; an attempt's timeout is never more than the budget left.
	// Zero: an attempt may use the whole budget left.
	AttemptTimeout time.Duration
	// MinAttemptTime is the least budget worth starting an attempt with: a pause is not taken when
	// it would leave less than this for the attempt after it. Default 1 ms.
	MinAttemptTime time.Duration

	Retry       RetryConfig
	Budget      BudgetConfig
	Breaker     BreakerConfig
	Bulkhead    BulkheadConfig
	Hedge       HedgeConfig
	Idempotency IdempotencyConfig
	Propagation PropagationConfig

	// OperationName names the class of the logical call (resilience.operation.name), low
	// cardinality. Nil: the name given with [WithOperation] on the request context, else
	// "HTTP <method>".
	OperationName func(*http.Request) string

	// Route, when set, chooses the URL of attempt n (from 1): a retry may go to another replica,
	// but each attempt makes exactly one physical call (docs/principles.md#intents-and-attempts:
	// maxFanout 1). The circuit breaker guards the request's own origin. Nil: every attempt goes to
	// the request's URL.
	Route func(attempt int, u *url.URL) *url.URL

	// Fallback, when set, runs after the call has failed (not after a permanent answer such as a
	// 404), inside the same deadline, under an INTERNAL span marked resilience.attempt.kind=fallback;
	// its result is what the caller gets, and resilience.terminal becomes "fallback:<FallbackName>".
	// last is the final response (its body still open) or nil; cause the final error or nil.
	Fallback func(ctx context.Context, req *http.Request, last *http.Response, cause error) (*http.Response, error)
	// FallbackName names the fallback in spans. Default "fallback".
	FallbackName string
}

// RetryConfig is the retry policy of one logical call.
type RetryConfig struct {
	// MaxAttempts counts the first attempt: 1 disables retries. Default 3.
	MaxAttempts int
	// Base and Cap shape the full-jitter backoff: the pause before retry n (n from 0) is
	// uniform(0, min(Cap, Base*2^n)). Defaults 100 ms and 1 s.
	Base time.Duration
	Cap  time.Duration
	// RetryOn lists the HTTP statuses worth repeating. Default 429, 502, 503, 504. 400, 401, 403,
	// 404, 409 and 422 are refused here: repeating a wrong request cannot fix it.
	RetryOn []int
	// IgnoreRetryAfter stops honouring the server's Retry-After (seconds or HTTP-date). By default
	// the pause is at least the hint, and a hint beyond the deadline ends the call at once.
	IgnoreRetryAfter bool
}

// BudgetConfig limits retries (and hedges) to a ratio of requests across the whole client: a token
// bucket that starts full at Reserve, gains Ratio per logical call (never above Reserve) and loses 1
// per retry. It has no per-second floor, so it keeps protecting a client that sends little.
type BudgetConfig struct {
	// Disabled turns the budget off: every retry the policy allows is sent.
	Disabled bool
	// Ratio of retries to requests once the reserve is spent. Default 0.1.
	Ratio float64
	// Reserve is the burst of retries available at start and the bucket's size. Default 10.
	Reserve float64
}

// BreakerKey says how narrowly the circuit breaker's verdicts apply. Nothing wider than an origin
// exists on purpose (docs/principles.md#breakers: a per-client breaker takes healthy dependencies
// down with a sick one).
type BreakerKey uint8

const (
	// KeyOrigin: one breaker per scheme://host:port (the default).
	KeyOrigin BreakerKey = iota
	// KeyRoute: one per origin and path, so one slow endpoint does not close the fast ones.
	KeyRoute
	// KeyMethod: one per origin and method.
	KeyMethod
)

// BreakerConfig is the circuit breaker. It counts the final outcomes of logical calls (never
// attempts), trips on timeouts, connection, TLS and DNS errors and 5xx, never on 429 or other 4xx,
// forgets cancelled calls and lets one half-open probe through at a time.
type BreakerConfig struct {
	// Disabled turns the breaker off.
	Disabled bool
	// Threshold is the number of consecutive failed calls that opens it. Default 5.
	Threshold int
	// Recovery is how long it stays open before the next call becomes the probe. A failure of a
	// call admitted earlier, recorded while open, restarts the wait. Default 30 s.
	Recovery time.Duration
	// Key narrows the breaker (default [KeyOrigin]).
	Key BreakerKey
}

// BulkheadConfig limits concurrent attempts per origin. Waiting for a slot counts against the
// deadline.
type BulkheadConfig struct {
	// MaxConcurrent attempts per origin through this client; 0 means no limit.
	MaxConcurrent int
}

// HedgeConfig sends a second copy of a read whose first copy has not answered after Delay; the
// first answer wins and the other copy is cancelled. Hedges spend the retry budget.
type HedgeConfig struct {
	// Delay before the hedge; 0 disables hedging.
	Delay time.Duration
}

// IdempotencyConfig says how writes (POST, PATCH) become safe to repeat: only with a key the
// server deduplicates on, kept identical on every attempt and hedge.
type IdempotencyConfig struct {
	// Generate adds a random key to writes that have none, so they may be retried.
	Generate bool
	// Header is the key's header. Default "Idempotency-Key".
	Header string
}

// PropagationConfig says what the client sends downstream.
type PropagationConfig struct {
	// NoDeadlineHeader stops sending Request-Deadline (the absolute deadline, RFC 3339 UTC).
	NoDeadlineHeader bool
	// GRPCTimeout also sends grpc-timeout with the budget left, for gRPC-aware proxies.
	GRPCTimeout bool
}

// Defaults, exported so documentation and tests can name them.
const (
	DefaultService        = "client"
	DefaultTimeout        = 10 * time.Second
	DefaultMinAttemptTime = time.Millisecond
	DefaultMaxAttempts    = 3
	DefaultBase           = 100 * time.Millisecond
	DefaultCap            = time.Second
	DefaultBudgetRatio    = 0.1
	DefaultBudgetReserve  = 10
	DefaultThreshold      = 5
	DefaultRecovery       = 30 * time.Second
	DefaultIdemHeader     = "Idempotency-Key"
	DefaultFallbackName   = "fallback"
)

// DefaultRetryOn are the statuses retried by default.
var defaultRetryOn = []int{429, 502, 503, 504}

// neverRetry are statuses that no configuration may retry.
var neverRetry = map[int]bool{400: true, 401: true, 403: true, 404: true, 409: true, 422: true}

// ErrInvalidConfig is wrapped by every configuration error.
var ErrInvalidConfig = errors.New("invalid reference client config")

func bad(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
}

// normalize checks c and fills in the defaults.
func (c Config) normalize() (Config, error) {
	if c.Timeout < 0 {
		return c, bad("Timeout %v is negative", c.Timeout)
	}
	if c.AttemptTimeout < 0 {
		return c, bad("AttemptTimeout %v is negative", c.AttemptTimeout)
	}
	if c.MinAttemptTime < 0 {
		return c, bad("MinAttemptTime %v is negative", c.MinAttemptTime)
	}
	if c.Retry.MaxAttempts < 0 {
		return c, bad("Retry.MaxAttempts %d is negative", c.Retry.MaxAttempts)
	}
	if c.Retry.Base < 0 || c.Retry.Cap < 0 {
		return c, bad("Retry.Base %v and Retry.Cap %v must not be negative", c.Retry.Base, c.Retry.Cap)
	}
	for _, s := range c.Retry.RetryOn {
		if s < 100 || s > 599 {
			return c, bad("Retry.RetryOn holds %d, not an HTTP status", s)
		}
		if neverRetry[s] {
			return c, bad("Retry.RetryOn holds %d: a wrong request is never retried", s)
		}
	}
	if math.IsNaN(c.Budget.Ratio) || c.Budget.Ratio < 0 || c.Budget.Ratio > 1 {
		return c, bad("Budget.Ratio %v is outside [0, 1]", c.Budget.Ratio)
	}
	if math.IsNaN(c.Budget.Reserve) || c.Budget.Reserve < 0 {
		return c, bad("Budget.Reserve %v is negative", c.Budget.Reserve)
	}
	if c.Breaker.Threshold < 0 {
		return c, bad("Breaker.Threshold %d is negative", c.Breaker.Threshold)
	}
	if c.Breaker.Recovery < 0 {
		return c, bad("Breaker.Recovery %v is negative", c.Breaker.Recovery)
	}
	if c.Breaker.Key > KeyMethod {
		return c, bad("Breaker.Key %d is unknown", c.Breaker.Key)
	}
	if c.Bulkhead.MaxConcurrent < 0 {
		return c, bad("Bulkhead.MaxConcurrent %d is negative", c.Bulkhead.MaxConcurrent)
	}
	if c.Hedge.Delay < 0 {
		return c, bad("Hedge.Delay %v is negative", c.Hedge.Delay)
	}
	if c.Service == "" {
		c.Service = DefaultService
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MinAttemptTime == 0 {
		c.MinAttemptTime = DefaultMinAttemptTime
	}
	if c.Retry.MaxAttempts == 0 {
		c.Retry.MaxAttempts = DefaultMaxAttempts
	}
	if c.Retry.Base == 0 {
		c.Retry.Base = DefaultBase
	}
	if c.Retry.Cap == 0 {
		c.Retry.Cap = DefaultCap
	}
	if c.Retry.Cap < c.Retry.Base {
		return c, bad("Retry.Cap %v is below Retry.Base %v", c.Retry.Cap, c.Retry.Base)
	}
	if len(c.Retry.RetryOn) == 0 {
		c.Retry.RetryOn = defaultRetryOn
	}
	if c.Budget.Ratio == 0 {
		c.Budget.Ratio = DefaultBudgetRatio
	}
	if c.Budget.Reserve == 0 {
		c.Budget.Reserve = DefaultBudgetReserve
	}
	if c.Breaker.Threshold == 0 {
		c.Breaker.Threshold = DefaultThreshold
	}
	if c.Breaker.Recovery == 0 {
		c.Breaker.Recovery = DefaultRecovery
	}
	if c.Idempotency.Header == "" {
		c.Idempotency.Header = DefaultIdemHeader
	}
	c.Idempotency.Header = http.CanonicalHeaderKey(c.Idempotency.Header)
	if c.FallbackName == "" {
		c.FallbackName = DefaultFallbackName
	}
	return c, nil
}
