package reference

import (
	"math"
	"sync"
)

// budget is the client-wide retry budget: a token bucket that starts full at reserve, gains ratio
// per logical call up to reserve, and loses one token per retry or hedge. The reserve lets a client
// that sends little still retry an isolated failure; once spent, only the ratio refills it, so a
// mass failure cannot multiply the load by more than 1+ratio (docs/principles.md#retry-cost: 40
// failing calls at ratio 0.1 and reserve 10 send 50 requests and have 40 retries refused).
type budget struct {
	mu      sync.Mutex
	tokens  float64
	ratio   float64
	reserve float64
}

func newBudget(c BudgetConfig) *budget {
	if c.Disabled {
		return nil
	}
	return &budget{tokens: c.Reserve, ratio: c.Ratio, reserve: c.Reserve}
}

// deposit credits one logical call.
func (b *budget) deposit() {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.tokens = math.Min(b.reserve, b.tokens+b.ratio)
	b.mu.Unlock()
}

// withdraw takes one token for a retry or hedge and reports whether it was granted.
func (b *budget) withdraw() bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	// Ten deposits of 0.1 add up to 0.9999999999999999: compare with a tolerance.
	if b.tokens < 1-1e-9 {
		return false
	}
	b.tokens--
	return true
}

// remaining is the whole retries still grantable now (resilience.budget.remaining); -1 without a
// budget.
func (b *budget) remaining() int64 {
	if b == nil {
		return -1
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return int64(math.Floor(b.tokens + 1e-9))
}

// refund returns a token withdrawn for a retry that was then not sent.
func (b *budget) refund() {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.tokens = math.Min(b.reserve, b.tokens+1)
	b.mu.Unlock()
}
