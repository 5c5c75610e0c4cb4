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
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers timerHeap
	// participants counts the goroutines of the simulation (Hold, Go, Group.Go, and the clock's
	// own goroutine while it runs an AfterFunc); waiting counts those blocked on the clock.
	participants int
	waiting      int
	// waiters are the blocked goroutines, with the contexts that may wake them before the clock.
	waiters map[*waiter]struct{}
	// blocked is signalled whenever a goroutine starts waiting (BlockUntilWaiting).
	blocked *sync.Cond
	vetoes  []func() bool
	kick    chan struct{}
	closed  bool
}

// waiter is one goroutine blocked on the clock, in Sleep or Group.Wait.
type waiter struct {
	ctx   context.Context
	ch    chan struct{} // closed when woken
	woken bool
	err   error // what the wait returns: nil, or ErrClosed
}

type timer struct {
	at    time.Time
	seq   uint64
	index int
	// Exactly one of w (a sleeper) and f (an AfterFunc) is set.
	w     *waiter
	f     func()
	fired bool
}

// New returns a clock reading start, in manual mode.
func New(start time.Time) *Clock {
	c := &Clock{now: start, waiters: map[*waiter]struct{}{}, kick: make(chan struct{}, 1)}
	c.blocked = sync.NewCond(&c.mu)
	return c
}

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Since is Now().Sub(t).
func (c *Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Sleep waits until the clock has moved d, or ctx is done (then it returns context.Cause(ctx)).
// In auto mode the caller is a participant, or waits on behalf of one.
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
	t := &timer{at: c.now.Add(d), seq: c.seq, w: c.blockLocked(ctx)}
	c.seq++
	heap.Push(&c.timers, t)
	c.mu.Unlock()
	c.poke()
	select {
	case <-t.w.ch:
		return t.w.err
	case <-ctx.Done():
		c.mu.Lock()
		if t.w.woken {
			// The clock woke us (or closed) at the same moment: that answer stands.
			c.mu.Unlock()
			return t.w.err
		}
		heap.Remove(&c.timers, t.index)
		t.index = -1
		c.wakeLocked(t.w, nil)
		c.mu.Unlock()
		return context.Cause(ctx)
	}
}

// blockLocked counts the calling goroutine as waiting, until wakeLocked.
func (c *Clock) blockLocked(ctx context.Context) *waiter {
	w := &waiter{ctx: ctx, ch: make(chan struct{})}
	c.waiters[w] = struct{}{}
	c.waiting++
	c.blocked.Broadcast()
	return w
}

// wakeLocked counts w as running again and lets it go. Because this happens under the lock, no
// Step can see the clock idle between the wake-up and the goroutine resuming.
func (c *Clock) wakeLocked(w *waiter, err error) {
	if w.woken {
		return
	}
	w.woken = true
	w.err = err
	delete(c.waiters, w)
	c.waiting--
	close(w.ch)
}

// AfterFunc calls f when the clock reaches now+d. f runs on the goroutine that moves the clock, as
// a participant, and must not block (the client and the middleware only cancel contexts there).
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
// waiting for such a handler would never finish closing. Group waits are not time waits: they
// still end when their count drops to zero. Close is idempotent.
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
		if t.w != nil {
			c.wakeLocked(t.w, ErrClosed)
		}
	}
	c.timers = nil
}

// Hold registers the calling goroutine as a participant: time does not move until it waits on the
// clock or calls Release.
func (c *Clock) Hold() {
	c.mu.Lock()
	c.participants++
	c.mu.Unlock()
}

// Release unregisters a participant.
func (c *Clock) Release() {
	c.mu.Lock()
	c.participants--
	c.mu.Unlock()
	c.poke()
}

// Go runs f on a new goroutine registered as a participant until f returns. It is registered
// before Go returns, so time cannot move before the goroutine has started.
func (c *Clock) Go(f func()) {
	c.Hold()
	go func() {
		defer c.Release()
		f()
	}()
}

// AddVeto registers a check that returns true while some participant is about to resume although
// the counts say it waits (see the package documentation). Vetoes are consulted by every Step.
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

// BlockUntilWaiting returns once at least n goroutines are waiting on the clock (in Sleep or
// Group.Wait). Tests use it to know that the goroutines they started have reached the clock,
// instead of sleeping and hoping.
func (c *Clock) BlockUntilWaiting(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.waiting < n {
		c.blocked.Wait()
	}
}

// Advance moves the clock by d in manual mode, firing every timer due on the way in order,
// whoever is running.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		if len(c.timers) == 0 || c.timers[0].at.After(end) {
			if end.After(c.now) {
				c.now = end
			}
			c.mu.Unlock()
			return
		}
		c.fireLocked() // unlocks
	}
}

// Step moves the clock to the next deadline and fires what is due there, if the simulation is
// idle: every participant waits on the clock, no waiter's context is done and no veto objects. It
// reports whether it fired. Auto calls it whenever the counts change; a test may call it itself.
func (c *Clock) Step() bool {
	c.mu.Lock()
	if !c.idleLocked() {
		c.mu.Unlock()
		return false
	}
	vetoes := c.vetoes
	c.mu.Unlock()
	// Vetoes take their owners' locks: they are consulted without the clock's.
	for _, v := range vetoes {
		if v() {
			return false
		}
	}
	c.mu.Lock()
	// Nobody could have started running meanwhile (everyone waits), but a waiter's context may
	// have been cancelled from outside the simulation: check again.
	if !c.idleLocked() {
		c.mu.Unlock()
		return false
	}
	c.fireLocked()
	return true
}

func (c *Clock) idleLocked() bool {
	if c.closed || len(c.timers) == 0 || c.waiting != c.participants {
		return false
	}
	for w := range c.waiters {
		if w.ctx.Err() != nil {
			return false // about to resume on its own
		}
	}
	return true
}

// Auto starts moving the clock by itself whenever the simulation is idle (Step); the returned
// func stops that. The goroutine that calls Auto usually registers first (Hold), so that nothing
// moves before it has started its participants.
func (c *Clock) Auto() (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-done:
				return
			case <-c.kick:
			}
			for c.Step() {
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		<-finished
	}
}

// poke tells Auto the counts changed. Every change that can make the simulation idle pokes: a
// goroutine starting to wait, a participant leaving. (Changes that make it busy need not.)
func (c *Clock) poke() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
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
		// The callback runs as a participant so nothing moves until its effects are visible (a
		// context it cancels wakes its waiters, which Step then sees).
		c.participants++
		c.mu.Unlock()
		t.f()
		c.mu.Lock()
		c.participants--
		c.mu.Unlock()
		return
	}
	c.wakeLocked(t.w, nil)
	c.mu.Unlock()
}

// Group is a WaitGroup whose Wait is a wait on the clock: time may move while a participant waits
// for the group, and the member that brings the count to zero hands the waiters back to the
// simulation atomically, so time cannot move between the last member's exit and the waiter's
// resumption. Unlike a sync.WaitGroup it may be reused, and a Wait may be abandoned (ctx).
type Group struct {
	c       *Clock
	n       int
	waiters []*waiter
}

// NewGroup returns an empty group on c.
func (c *Clock) NewGroup() *Group { return &Group{c: c} }

// Add adds delta, which may be negative, to the count. Members counted with Add are not
// participants by themselves (the lab counts origin handlers that run on their callers' behalf).
func (g *Group) Add(delta int) {
	g.c.mu.Lock()
	g.addLocked(delta)
	g.c.mu.Unlock()
}

func (g *Group) addLocked(delta int) {
	g.n += delta
	if g.n < 0 {
		panic("fakeclock: negative Group count")
	}
	if g.n == 0 {
		for _, w := range g.waiters {
			g.c.wakeLocked(w, nil)
		}
		g.waiters = nil
	}
}

// Done is Add(-1).
func (g *Group) Done() { g.Add(-1) }

// Count is the number of members not yet done.
func (g *Group) Count() int {
	g.c.mu.Lock()
	defer g.c.mu.Unlock()
	return g.n
}

// Go runs f on a new participant goroutine counted in the group until f returns.
func (g *Group) Go(f func()) {
	c := g.c
	c.mu.Lock()
	c.participants++
	g.n++
	c.mu.Unlock()
	go func() {
		defer func() {
			c.mu.Lock()
			g.addLocked(-1)
			c.participants--
			c.mu.Unlock()
			c.poke()
		}()
		f()
	}()
}

// Wait blocks until the count is zero or ctx is done (then it returns context.Cause(ctx)),
// counting the caller as waiting on the clock meanwhile.
func (g *Group) Wait(ctx context.Context) error {
	c := g.c
	c.mu.Lock()
	if g.n == 0 {
		c.mu.Unlock()
		return nil
	}
	if ctx.Err() != nil {
		c.mu.Unlock()
		return context.Cause(ctx)
	}
	w := c.blockLocked(ctx)
	g.waiters = append(g.waiters, w)
	c.mu.Unlock()
	c.poke()
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		defer c.mu.Unlock()
		if w.woken {
			return nil
		}
		for i, o := range g.waiters {
			if o == w {
				g.waiters = append(g.waiters[:i], g.waiters[i+1:]...)
				break
			}
		}
		c.wakeLocked(w, nil)
		return context.Cause(ctx)
	}
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
