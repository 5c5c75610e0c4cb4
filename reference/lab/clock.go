package lab

import (
	"context"
	"sync"
	"time"

	"github.com/stormwatch/stormwatch/reference"
	"github.com/stormwatch/stormwatch/reference/fakeclock"
)

// clock is what the lab needs of time: the reference client's clock plus the participant
// accounting of the fake clock (no-ops on the wall clock).
type clock interface {
	reference.Clock
	Hold()
	Release()
	Go(func())
	// newGroup returns a wait group whose Wait lets the clock move (see fakeclock.Group).
	newGroup() group
	fake() *fakeclock.Clock
}

// group is a reusable wait group with an abandonable Wait: fakeclock.Group, or wallGroup.
type group interface {
	Add(int)
	Done()
	Count() int
	Go(func())
	Wait(context.Context) error
}

type wallClock struct{ reference.SystemClock }

func (wallClock) Hold()                  {}
func (wallClock) Release()               {}
func (wallClock) Go(f func())            { go f() }
func (wallClock) newGroup() group        { return &wallGroup{} }
func (wallClock) fake() *fakeclock.Clock { return nil }

type fakeClock struct{ *fakeclock.Clock }

func (f fakeClock) newGroup() group        { return f.NewGroup() }
func (f fakeClock) fake() *fakeclock.Clock { return f.Clock }

// wallGroup is the wall clock's group. (A sync.WaitGroup would not do: waits are abandoned when
// the run is cancelled, and a WaitGroup must not be reused while a Wait is still pending.)
type wallGroup struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed when n drops to 0; nil while n is 0
}

func (g *wallGroup) Add(delta int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n == 0 && delta > 0 {
		g.zero = make(chan struct{})
	}
	g.n += delta
	if g.n < 0 {
		panic("lab: negative group count")
	}
	if g.n == 0 && g.zero != nil {
		close(g.zero)
		g.zero = nil
	}
}

func (g *wallGroup) Done() { g.Add(-1) }

func (g *wallGroup) Count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n
}

func (g *wallGroup) Go(f func()) {
	g.Add(1)
	go func() {
		defer g.Done()
		f()
	}()
}

func (g *wallGroup) Wait(ctx context.Context) error {
	g.mu.Lock()
	zero := g.zero
	g.mu.Unlock()
	if zero == nil {
		return nil
	}
	select {
	case <-zero:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// withTimeout is a context ending d from now on clk (the hand-rolled clients of the lab need one too).
func withTimeout(parent context.Context, clk reference.Clock, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	stop := clk.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return ctx, func() { stop(); cancel(context.Canceled) }
}
