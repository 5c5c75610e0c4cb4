package lab

import (
	"context"
	"time"

	"github.com/stormwatch/stormwatch/reference"
	"github.com/stormwatch/stormwatch/reference/fakeclock"
)

// clock is what the lab needs of time: the reference client's clock plus the token accounting of
// the fake clock (no-ops on the wall clock).
type clock interface {
	reference.Clock
	Hold()
	Release()
	Go(func())
	Wait(func())
	fake() *fakeclock.Clock
}

type wallClock struct{ reference.SystemClock }

func (wallClock) Hold()                  {}
func (wallClock) Release()               {}
func (wallClock) Go(f func())            { go f() }
func (wallClock) Wait(w func())          { w() }
func (wallClock) fake() *fakeclock.Clock { return nil }

type fakeClock struct{ *fakeclock.Clock }

func (f fakeClock) fake() *fakeclock.Clock { return f.Clock }

// withTimeout is a context ending d from now on clk (the hand-rolled clients of the lab need one too).
func withTimeout(parent context.Context, clk reference.Clock, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	stop := clk.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return ctx, func() { stop(); cancel(context.Canceled) }
}
