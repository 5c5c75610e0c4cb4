package reference

import (
	"fmt"
	"sync"
	"time"
)

// BreakerState is a breaker's state (resilience.breaker.state).
type BreakerState uint8

const (
	StateClosed BreakerState = iota
	StateHalfOpen
	StateOpen
)

func (s BreakerState) String() string {
	switch s {
	case StateClosed:
		return "closed"
	case StateHalfOpen:
		return "half_open"
	case StateOpen:
		return "open"
	}
	return "unknown"
}

// BreakerOpenError is the typed refusal of a call by an open (or probing) breaker. RetryIn is the
// time until the next probe may go, zero while a probe is in flight: a caller can serve from a
// cache for that long.
type BreakerOpenError struct {
	Origin  string
	State   BreakerState
	RetryIn time.Duration
}

func (e *BreakerOpenError) Error() string {
	if e.State == StateHalfOpen {
		return fmt.Sprintf("circuit breaker for %s refused the call: a probe is in flight", e.Origin)
	}
	return fmt.Sprintf("circuit breaker for %s refused the call: probe in %.2fs", e.Origin, e.RetryIn.Seconds())
}

// Is makes errors.Is(err, ErrBreakerOpen) true.
func (e *BreakerOpenError) Is(target error) bool { return target == ErrBreakerOpen }

// Runtime holds the circuit breakers shared by every client that uses it. Breaker state must
// outlive a client: a service that builds a client per request is still protected because the
// clients meet here. Without [WithRuntime] clients share the process-wide runtime; tests and the
// lab give each run its own. Idle breakers are evicted.
//
// The zero value is an empty runtime with [DefaultIdleTTL], like NewRuntime(0).
type Runtime struct {
	mu        sync.Mutex
	breakers  map[breakerKey]*breaker
	idleTTL   time.Duration // 0 means DefaultIdleTTL
	lastSweep time.Time
}

// DefaultIdleTTL is how long an untouched breaker is kept.
const DefaultIdleTTL = 10 * time.Minute

// NewRuntime returns an empty runtime whose breakers are evicted after idleTTL without calls
// (0 means [DefaultIdleTTL]).
func NewRuntime(idleTTL time.Duration) *Runtime {
	return &Runtime{idleTTL: idleTTL}
}

var (
	processRuntimeOnce sync.Once
	processRuntime     *Runtime
)

// ProcessRuntime is the runtime shared by clients built without [WithRuntime]. It is the one piece
// of process-wide state in the package, on purpose: breaker verdicts about an origin belong to the
// process, not to a client object.
func ProcessRuntime() *Runtime {
	processRuntimeOnce.Do(func() { processRuntime = NewRuntime(0) })
	return processRuntime
}

// breakerKey identifies one breaker: the origin, an optional narrowing, and the settings (clients
// with different settings get different breakers instead of silently sharing one's thresholds).
type breakerKey struct {
	scheme, host, port string
	narrow             string
	threshold          int
	recovery           time.Duration
}

// Len is the number of breakers held, for tests and diagnostics.
func (r *Runtime) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.breakers)
}

// ttl is how long an untouched breaker is kept.
func (r *Runtime) ttl() time.Duration {
	if r.idleTTL <= 0 {
		return DefaultIdleTTL
	}
	return r.idleTTL
}

// breakerFor returns the breaker for k, creating it, and marks it used at now.
func (r *Runtime) breakerFor(k breakerKey, now time.Time) *breaker {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.Sub(r.lastSweep) >= r.ttl()/2 {
		r.sweepLocked(now)
	}
	b := r.breakers[k]
	if b == nil {
		if r.breakers == nil {
			r.breakers = map[breakerKey]*breaker{}
		}
		b = &breaker{threshold: k.threshold, recovery: k.recovery, origin: k.scheme + "://" + k.host + ":" + k.port}
		r.breakers[k] = b
	}
	b.lastUsed = now
	return b
}

// sweepLocked evicts breakers untouched for idleTTL that have no probe in flight.
func (r *Runtime) sweepLocked(now time.Time) {
	r.lastSweep = now
	for k, b := range r.breakers {
		b.mu.Lock()
		idle := now.Sub(b.lastUsed) >= r.ttl() && !b.probing && b.inflight == 0
		b.mu.Unlock()
		if idle {
			delete(r.breakers, k)
		}
	}
}

// breaker is one circuit breaker: a state machine over the final outcomes of logical calls.
type breaker struct {
	origin    string
	threshold int
	recovery  time.Duration

	mu       sync.Mutex
	state    BreakerState
	failures int       // consecutive failed calls while closed
	openedAt time.Time // when it (re)opened
	probing  bool      // a half-open probe is in flight
	inflight int       // admitted calls not yet recorded
	lastUsed time.Time // guarded by Runtime.mu
}

// ticket is an admitted call; record or forget must follow exactly once.
type ticket struct {
	probe bool
}

// transition is a state change to report in metrics and stats.
type transition struct {
	from, to BreakerState
}

// admit lets a call through or refuses it. state is the state the call saw.
func (b *breaker) admit(now time.Time) (t ticket, state BreakerState, tr *transition, err *BreakerOpenError) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == StateOpen {
		wait := b.openedAt.Add(b.recovery).Sub(now)
		if wait > 0 {
			return ticket{}, StateOpen, nil, &BreakerOpenError{Origin: b.origin, State: StateOpen, RetryIn: wait}
		}
		b.state = StateHalfOpen
		tr = &transition{StateOpen, StateHalfOpen}
	}
	if b.state == StateHalfOpen {
		if b.probing {
			return ticket{}, StateHalfOpen, tr, &BreakerOpenError{Origin: b.origin, State: StateHalfOpen}
		}
		b.probing = true
		b.inflight++
		return ticket{probe: true}, StateHalfOpen, tr, nil
	}
	b.inflight++
	return ticket{}, StateClosed, tr, nil
}

// record counts the final outcome of an admitted call: failed says the dependency could not serve.
func (b *breaker) record(t ticket, failed bool, now time.Time) *transition {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inflight--
	if t.probe {
		b.probing = false
		if failed {
			b.state = StateOpen
			b.openedAt = now
			return &transition{StateHalfOpen, StateOpen}
		}
		b.state = StateClosed
		b.failures = 0
		return &transition{StateHalfOpen, StateClosed}
	}
	switch b.state {
	case StateClosed:
		if !failed {
			b.failures = 0
			return nil
		}
		b.failures++
		if b.failures >= b.threshold {
			b.state = StateOpen
			b.openedAt = now
			b.failures = 0
			return &transition{StateClosed, StateOpen}
		}
	case StateOpen:
		// A call admitted before the breaker opened has failed too: fresh evidence that the
		// dependency is down restarts the wait.
		if failed && now.After(b.openedAt) {
			b.openedAt = now
		}
	}
	return nil
}

// forget drops a cancelled call: it proved nothing. A cancelled probe frees the probe slot.
func (b *breaker) forget(t ticket) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inflight--
	if t.probe {
		b.probing = false
	}
}

// snapshot returns the state as of now without changing it.
func (b *breaker) snapshot() BreakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}
