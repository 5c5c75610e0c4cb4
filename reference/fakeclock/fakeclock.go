package fakeclock

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"
)

// ErrClosed is what Sleep returns once the clock is closed: time will never move again.
var ErrClosed = errors.New("fakeclock: clock closed")

// Clock is a fake clock. The zero value is not usable; call New.
type Clock struct {
	mu       sync.Mutex
	now      time.Time
	seq      uint64
	timers   timerHeap
	busy     int
	sleepers map[*timer]struct{}
	vetoes   []func() bool
	kick     chan struct{}
	closed   bool
}

type timer struct {
	at    time.Time
	seq   uint64
	index int
	// Exactly one of ch (a sleeper) and f (an AfterFunc) is set.
	ch    chan struct{}
	ctx   context.Context
	f     func()
	fired bool
	err   error // set when the clock closed instead of firing
}

// New returns a clock reading start, in manual mode.
func New(start time.Time) *Clock {
	return &Clock{now: start, sleepers: map[*timer]struct{}{}, kick: make(chan struct{}, 1)}
}

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Since is Now().Sub(t).
func (c *Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Sleep waits until the clock has moved d, or ctx is done. In auto mode the caller must hold a
// token, which it lends to the clock while it waits.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if d <= 0 {
		return nil
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	t := &timer{at: c.now.Add(d), seq: c.seq, ch: make(chan struct{}), ctx: ctx}
	c.seq++
	heap.Push(&c.timers, t)
	c.sleepers[t] = struct{}{}
	c.busy--
	c.mu.Unlock()
	c.poke()
	select {
	case <-t.ch:
		return t.err
	case <-ctx.Done():
		c.mu.Lock()
		if t.fired {
			// The clock woke us (or closed) at the same moment and already gave the token back.
			c.mu.Unlock()
			return t.err
		}
		heap.Remove(&c.timers, t.index)
		delete(c.sleepers, t)
		c.busy++
		c.mu.Unlock()
		c.poke()
		return context.Cause(ctx)
	}
}

// AfterFunc calls f when the clock reaches now+d. f runs on the goroutine that moves the clock and
// must not block (the client and the middleware only cancel contexts there).
func (c *Clock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	if c.closed {
		// A closed clock never reaches any time: f never runs.
		c.mu.Unlock()
		return func() bool { return false }
	}
	t := &timer{at: c.now.Add(d), seq: c.seq, f: f}
	c.seq++
	heap.Push(&c.timers, t)
	c.mu.Unlock()
	c.poke()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if t.fired || t.index < 0 {
			return false
		}
		heap.Remove(&c.timers, t.index)
		t.index = -1
		return true
	}
}

// Close ends the clock: every sleeper wakes at once with [ErrClosed], later Sleeps return it
// without waiting, and pending and later AfterFuncs never run. Without it, a goroutine still
// sleeping when its owner stops moving the clock (stops Auto) would wait for good: a server
// waiting for such a handler would never finish closing. Close is idempotent.
func (c *Clock) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	for _, t := range c.timers {
		t.index = -1
		t.fired = true
		if t.ch != nil {
			t.err = ErrClosed
			c.busy++ // the sleeper's token, handed back as if it had fired
			close(t.ch)
		}
	}
	c.timers = nil
	clear(c.sleepers)
}

// Hold takes a token: someone is working and time must not move.
func (c *Clock) Hold() {
	c.mu.Lock()
	c.busy++
	c.mu.Unlock()
}

// Release gives a token back.
func (c *Clock) Release() {
	c.mu.Lock()
	c.busy--
	c.mu.Unlock()
	c.poke()
}

// Go runs f on a new goroutine that holds a token until f returns.
func (c *Clock) Go(f func()) {
	c.Hold()
	go func() {
		defer c.Release()
		f()
	}()
}

// Wait lets time move while the caller blocks in wait (typically a WaitGroup's Wait on goroutines
// started with Go).
func (c *Clock) Wait(wait func()) {
	c.Release()
	wait()
	c.Hold()
}

// AddVeto registers a check that returns true while some work is about to resume without a token.
func (c *Clock) AddVeto(v func() bool) {
	c.mu.Lock()
	c.vetoes = append(c.vetoes, v)
	c.mu.Unlock()
}

// Pending is the number of timers not yet fired.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// Advance moves the clock by d in manual mode, firing every timer due on the way in order.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		if len(c.timers) == 0 || c.timers[0].at.After(end) {
			c.now = end
			c.mu.Unlock()
			return
		}
		c.fireLocked() // unlocks
	}
}

// Auto starts moving the clock by itself whenever all participants are waiting on it; the
// returned func stops that. The goroutine that calls Auto usually holds a token (Hold) first.
func (c *Clock) Auto() (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		// The tick only re-checks vetoes, whose state changes without telling the clock.
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-c.kick:
			case <-tick.C:
			}
			for c.step() {
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		<-finished
	}
}

func (c *Clock) poke() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// step fires the next timer if the world is quiescent, and reports whether it did.
func (c *Clock) step() bool {
	c.mu.Lock()
	if c.busy > 0 || len(c.timers) == 0 {
		c.mu.Unlock()
		return false
	}
	for s := range c.sleepers {
		if s.ctx.Err() != nil {
			c.mu.Unlock()
			return false
		}
	}
	vetoes := c.vetoes
	c.mu.Unlock()
	for _, v := range vetoes {
		if v() {
			return false
		}
	}
	c.mu.Lock()
	if c.busy > 0 || len(c.timers) == 0 {
		c.mu.Unlock()
		return false
	}
	c.fireLocked()
	return true
}

// fireLocked fires the earliest timer; it is called with c.mu held and returns with it released.
func (c *Clock) fireLocked() {
	t := heap.Pop(&c.timers).(*timer)
	t.index = -1
	t.fired = true
	if t.at.After(c.now) {
		c.now = t.at
	}
	if t.f != nil {
		// The callback runs under a token so nothing moves until its effects are visible.
		c.busy++
		c.mu.Unlock()
		t.f()
		c.mu.Lock()
		c.busy--
		c.mu.Unlock()
		return
	}
	delete(c.sleepers, t)
	c.busy++ // the sleeper's token, handed back
	close(t.ch)
	c.mu.Unlock()
}

type timerHeap []*timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].at.Equal(h[j].at) {
		return h[i].seq < h[j].seq
	}
	return h[i].at.Before(h[j].at)
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *timerHeap) Push(x any) {
	t := x.(*timer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	n := len(old)
	t := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return t
}
