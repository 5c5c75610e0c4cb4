package reference

import (
	"context"
	"time"
)

// Clock is the time source of a client and of [Handler]. Tests and the lab inject a fake one so
// that a 2 s origin, a 5 s breaker recovery or a 1 s deadline run in no real time and give exact
// figures.
type Clock interface {
	Now() time.Time
	// Sleep pauses for d, or until ctx is done; then it returns context.Cause(ctx).
	Sleep(ctx context.Context, d time.Duration) error
	// AfterFunc calls f once d has passed; stop prevents that and reports whether it did.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// SystemClock is the real clock, the default.
type SystemClock struct{}

// Now is time.Now.
func (SystemClock) Now() time.Time { return time.Now() }

// Sleep waits on a timer or ctx.
func (SystemClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// AfterFunc is time.AfterFunc.
func (SystemClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// withDeadline derives a context that ends at the absolute time d on clock c. With the system
// clock it is context.WithDeadline; with another clock the cancellation is scheduled on that
// clock and Deadline reports d in the clock's time.
func withDeadline(parent context.Context, c Clock, d time.Time) (context.Context, context.CancelFunc) {
	if _, ok := c.(SystemClock); ok {
		return context.WithDeadline(parent, d)
	}
	if pd, ok := parent.Deadline(); ok && !pd.After(d) {
		// The parent ends first: it already carries the right deadline.
		ctx, cancel := context.WithCancel(parent)
		return ctx, cancel
	}
	ctx, cancel := context.WithCancelCause(parent)
	stop := c.AfterFunc(d.Sub(c.Now()), func() { cancel(context.DeadlineExceeded) })
	return &clockDeadlineCtx{Context: ctx, deadline: d}, func() {
		stop()
		cancel(context.Canceled)
	}
}

// clockDeadlineCtx reports a deadline kept by a non-system clock. It overrides only Deadline and
// Err, so children still find the embedded cancelCtx and are cancelled synchronously with it.
type clockDeadlineCtx struct {
	context.Context
	deadline time.Time
}

func (c *clockDeadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *clockDeadlineCtx) Err() error {
	err := c.Context.Err()
	if err != nil && context.Cause(c.Context) == context.DeadlineExceeded {
		return context.DeadlineExceeded
	}
	return err
}
