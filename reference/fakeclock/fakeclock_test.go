package fakeclock

import (
	"context"
	"errors"
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
	for c.Pending() == 0 {
		time.Sleep(time.Millisecond)
	}
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

// TestAutoMovesOnlyWhenAllWait: three sleepers wake at their exact times, and time does not move
// while a participant holds a token.
func TestAutoMovesOnlyWhenAllWait(t *testing.T) {
	c := New(t0)
	stop := c.Auto()
	defer stop()
	c.Hold()
	var mu sync.Mutex
	woke := map[time.Duration]time.Duration{}
	var wg sync.WaitGroup
	wg.Add(3)
	for _, d := range []time.Duration{3 * time.Second, time.Second, 2 * time.Second} {
		c.Go(func() {
			defer wg.Done()
			c.Sleep(context.Background(), d)
			mu.Lock()
			woke[d] = c.Now().Sub(t0)
			mu.Unlock()
		})
	}
	time.Sleep(20 * time.Millisecond)
	if c.Now() != t0 {
		t.Fatal("time moved while the test goroutine held its token")
	}
	c.Wait(wg.Wait)
	for d, at := range woke {
		if d != at {
			t.Errorf("sleeper of %v woke at %v", d, at)
		}
	}
	c.Release()
}

func TestVetoHoldsTime(t *testing.T) {
	c := New(t0)
	stop := c.Auto()
	defer stop()
	var mu sync.Mutex
	veto := true
	c.AddVeto(func() bool { mu.Lock(); defer mu.Unlock(); return veto })
	done := make(chan struct{})
	c.Go(func() { c.Sleep(context.Background(), time.Second); close(done) })
	time.Sleep(20 * time.Millisecond)
	if c.Now() != t0 {
		t.Fatal("time moved under a veto")
	}
	mu.Lock()
	veto = false
	mu.Unlock()
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
	for c.Pending() == 0 {
		time.Sleep(time.Millisecond)
	}
	ran := false
	c.AfterFunc(time.Minute, func() { ran = true })
	stop() // the owner stops moving the clock while the sleeper still waits
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("sleeper woke with %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("sleeper still waiting after Close")
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
