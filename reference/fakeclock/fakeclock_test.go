package fakeclock

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestAdvanceFiresInOrder(t *testing.T) {
	c := New(t0)
	var got []string
	c.AfterFunc(2*time.Second, func() { got = append(got, "b") })
	c.AfterFunc(time.Second, func() { got = append(got, "a") })
	stop := c.AfterFunc(1500*time.Millisecond, func() { got = append(got, "never") })
	c.AfterFunc(2*time.Second, func() { got = append(got, "c") }) // same time: registration order
	if !stop() || stop() {
		t.Fatal("stop should succeed once")
	}
	c.Advance(1999 * time.Millisecond)
	if len(got) != 1 || c.Now() != t0.Add(1999*time.Millisecond) {
		t.Fatalf("after 1.999s: %v at %v", got, c.Now())
	}
	c.Advance(time.Millisecond)
	if len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Fatalf("fired %v", got)
	}
}

func TestSleepCancelled(t *testing.T) {
	c := New(t0)
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error)
	go func() { done <- c.Sleep(ctx, time.Hour) }()
	c.BlockUntilWaiting(1)
	boom := errors.New("boom")
	cancel(boom)
	if err := <-done; err != boom {
		t.Fatalf("Sleep returned %v, want the cause", err)
	}
	if c.Pending() != 0 {
		t.Fatal("cancelled sleeper left its timer")
	}
	if err := c.Sleep(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
}

// TestStepWaitsForEveryParticipant: time moves only when every participant waits on the clock.
// Three sleepers are started while the test goroutine is registered; once all three wait, the
// clock still refuses to move until the test goroutine waits too (here: unregisters). Then each
// Step moves to the next deadline and wakes exactly the sleeper due there.
func TestStepWaitsForEveryParticipant(t *testing.T) {
	c := New(t0)
	c.Hold()
	woke := make(chan time.Duration)
	for _, d := range []time.Duration{3 * time.Second, time.Second, 2 * time.Second} {
		c.Go(func() {
			if err := c.Sleep(context.Background(), d); err != nil {
				t.Error(err)
			}
			woke <- c.Since(t0)
		})
	}
	c.BlockUntilWaiting(3)
	if c.Step() || c.Now() != t0 {
		t.Fatal("time moved while a participant was running")
	}
	c.Release()
	for _, want := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second} {
		// The sleeper woken by the previous step may still be on its way out.
		for !c.Step() {
			runtime.Gosched()
		}
		if c.Since(t0) != want {
			t.Fatalf("stepped to %v, want %v", c.Since(t0), want)
		}
		// The woken sleeper is running again (blocked sending on woke): time must not move.
		if c.Step() {
			t.Fatalf("time moved past %v while the sleeper woken there was running", want)
		}
		if got := <-woke; got != want {
			t.Fatalf("a sleeper woke at %v, want %v", got, want)
		}
	}
}

// TestGroupHandsOverAtomically: the last member of a Group to finish hands the waiter back to the
// simulation in the same step: a timer due later must not fire between the member's exit and the
// waiter reading the clock. With a plain WaitGroup (release, then wake) the clock could run ahead.
func TestGroupHandsOverAtomically(t *testing.T) {
	c := New(t0)
	c.Hold()
	c.AfterFunc(time.Hour, func() {}) // a later deadline the clock would jump to if it thought all idle
	g := c.NewGroup()
	g.Go(func() { _ = c.Sleep(context.Background(), time.Second) })
	waited := make(chan time.Time)
	c.Go(func() {
		if err := g.Wait(context.Background()); err != nil {
			t.Error(err)
		}
		waited <- c.Now()
	})
	c.BlockUntilWaiting(2)
	c.Release()
	if !c.Step() || c.Since(t0) != time.Second {
		t.Fatalf("first step reached %v, want 1s", c.Since(t0))
	}
	// The member wakes and exits, waking the waiter, which then reports the time: step as eagerly
	// as a clock in auto mode would all along; none of it may move time.
	for {
		select {
		case at := <-waited:
			if at != t0.Add(time.Second) {
				t.Fatalf("waiter resumed at %v, want 1s", at.Sub(t0))
			}
			return
		default:
		}
		if c.Step() {
			t.Fatalf("time moved to %v before the group's waiter resumed", c.Since(t0))
		}
		runtime.Gosched()
	}
}

// TestGroupWaitAbandoned: a Wait abandoned by its context returns the cause and stops counting as
// waiting, so the clock does not move for a goroutine that is about to run.
func TestGroupWaitAbandoned(t *testing.T) {
	c := New(t0)
	g := c.NewGroup()
	g.Add(1)
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error)
	c.Go(func() { done <- g.Wait(ctx) })
	c.BlockUntilWaiting(1)
	c.AfterFunc(time.Second, func() {})
	boom := errors.New("boom")
	cancel(boom)
	// The waiter's context is done: whether it still counts as waiting or has resumed, it is
	// running as far as time is concerned.
	if c.Step() {
		t.Fatal("time moved for a waiter whose context was done")
	}
	if err := <-done; err != boom {
		t.Fatalf("Wait returned %v, want the cause", err)
	}
	g.Done()
	if err := g.Wait(context.Background()); err != nil || g.Count() != 0 {
		t.Fatalf("Wait on an empty group: %v, count %d", err, g.Count())
	}
}

// TestAutoWakesEachAtItsTime: in auto mode three sleepers started through the clock wake at their
// exact times, and the waiter of their group resumes at the last of them.
func TestAutoWakesEachAtItsTime(t *testing.T) {
	c := New(t0)
	c.Hold()
	stop := c.Auto()
	defer stop()
	var mu sync.Mutex
	woke := map[time.Duration]time.Duration{}
	g := c.NewGroup()
	for _, d := range []time.Duration{3 * time.Second, time.Second, 2 * time.Second} {
		g.Go(func() {
			_ = c.Sleep(context.Background(), d)
			mu.Lock()
			woke[d] = c.Since(t0)
			mu.Unlock()
		})
	}
	if err := g.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c.Since(t0) != 3*time.Second {
		t.Errorf("the group's waiter resumed at %v, want 3s", c.Since(t0))
	}
	for d, at := range woke {
		if d != at {
			t.Errorf("sleeper of %v woke at %v", d, at)
		}
	}
	c.Release()
}

func TestVetoHoldsTime(t *testing.T) {
	c := New(t0)
	var mu sync.Mutex
	veto := true
	c.AddVeto(func() bool { mu.Lock(); defer mu.Unlock(); return veto })
	done := make(chan struct{})
	c.Go(func() { _ = c.Sleep(context.Background(), time.Second); close(done) })
	c.BlockUntilWaiting(1)
	if c.Step() || c.Now() != t0 {
		t.Fatal("time moved under a veto")
	}
	mu.Lock()
	veto = false
	mu.Unlock()
	if !c.Step() {
		t.Fatal("no step once the veto was lifted")
	}
	<-done
	if c.Now() != t0.Add(time.Second) {
		t.Fatalf("now %v", c.Now())
	}
}

// TestCloseWakesSleepers: a sleeper left behind when the clock stops moving wakes at Close with
// ErrClosed (it would otherwise wait for good), later Sleeps fail at once, AfterFuncs never run.
func TestCloseWakesSleepers(t *testing.T) {
	c := New(t0)
	stop := c.Auto()
	c.Hold()
	done := make(chan error, 1)
	c.Go(func() { done <- c.Sleep(context.Background(), time.Hour) })
	c.BlockUntilWaiting(1)
	ran := false
	c.AfterFunc(time.Minute, func() { ran = true })
	stop() // the owner stops moving the clock while the sleeper still waits
	c.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("sleeper woke with %v, want ErrClosed", err)
	}
	if err := c.Sleep(context.Background(), time.Second); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sleep after Close: %v", err)
	}
	if c.AfterFunc(0, func() { ran = true })() || ran || c.Pending() != 0 {
		t.Fatal("an AfterFunc ran or stayed pending after Close")
	}
	if c.Now() != t0 {
		t.Fatalf("Close moved the clock to %v", c.Now())
	}
	c.Close() // idempotent
}
