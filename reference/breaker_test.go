package reference

import (
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestBreakerTransitions(t *testing.T) {
	b := &breaker{origin: "http://h:80", threshold: 3, recovery: 500 * time.Millisecond}
	now := t0
	// Closed: failures below the threshold, a success resets the count.
	for i := 0; i < 2; i++ {
		tk, st, _, err := b.admit(now)
		if err != nil || st != StateClosed {
			t.Fatalf("admit %d: %v %v", i, st, err)
		}
		if tr := b.record(tk, true, now); tr != nil {
			t.Fatalf("opened after %d failures", i+1)
		}
	}
	tk, _, _, _ := b.admit(now)
	b.record(tk, false, now)
	for i := 0; i < 2; i++ {
		tk, _, _, _ := b.admit(now)
		b.record(tk, true, now)
	}
	if b.snapshot() != StateClosed {
		t.Fatal("a success did not reset the consecutive count")
	}
	tk, _, _, _ = b.admit(now)
	if tr := b.record(tk, true, now); tr == nil || tr.from != StateClosed || tr.to != StateOpen {
		t.Fatalf("third consecutive failure: transition %+v", tr)
	}
	// Open: refusals carry the time until the probe.
	_, st, _, err := b.admit(now.Add(10 * time.Millisecond))
	if err == nil || st != StateOpen || err.RetryIn != 490*time.Millisecond || !errors.Is(err, ErrBreakerOpen) {
		t.Fatalf("open admit: %v %v", st, err)
	}
	if got := err.Error(); got != "circuit breaker for http://h:80 refused the call: probe in 0.49s" {
		t.Fatalf("refusal text %q", got)
	}
	// After the recovery: one probe at a time.
	later := now.Add(600 * time.Millisecond)
	probe, st, tr, err := b.admit(later)
	if err != nil || !probe.probe || st != StateHalfOpen || tr == nil || tr.to != StateHalfOpen {
		t.Fatalf("probe admit: %+v %v %+v %v", probe, st, tr, err)
	}
	if _, st, _, err := b.admit(later); err == nil || st != StateHalfOpen || err.RetryIn != 0 {
		t.Fatalf("second caller during the probe: %v %v", st, err)
	}
	// A cancelled probe frees its slot without closing or opening.
	b.forget(probe)
	if b.snapshot() != StateHalfOpen {
		t.Fatalf("cancelled probe changed the state to %v", b.snapshot())
	}
	probe2, _, _, err := b.admit(later)
	if err != nil || !probe2.probe {
		t.Fatalf("slot not freed by the cancelled probe: %v", err)
	}
	// A failed probe opens again for a full recovery.
	if tr := b.record(probe2, true, later); tr == nil || tr.to != StateOpen {
		t.Fatalf("failed probe: %+v", tr)
	}
	if _, _, _, err := b.admit(later.Add(499 * time.Millisecond)); err == nil {
		t.Fatal("reopened breaker let a call through early")
	}
	// A successful probe closes it.
	probe3, _, _, _ := b.admit(later.Add(500 * time.Millisecond))
	if tr := b.record(probe3, false, later); tr == nil || tr.to != StateClosed || b.snapshot() != StateClosed {
		t.Fatalf("successful probe: %+v", tr)
	}
}

func TestBreakerLateFailureRearms(t *testing.T) {
	b := &breaker{origin: "o", threshold: 1, recovery: 5 * time.Second}
	early, _, _, _ := b.admit(t0)                      // admitted while closed
	trip, _, _, _ := b.admit(t0)                       // also admitted
	b.record(trip, true, t0)                           // opens at t0
	b.record(early, true, t0.Add(90*time.Millisecond)) // fails while open: fresh evidence
	if _, _, _, err := b.admit(t0.Add(5 * time.Second)); err == nil || err.RetryIn != 90*time.Millisecond {
		t.Fatalf("late failure did not restart the wait: %v", err)
	}
}

func TestRuntimeEvictsIdleBreakers(t *testing.T) {
	rt := NewRuntime(time.Minute)
	k1 := breakerKey{scheme: "http", host: "a", port: "80", threshold: 5, recovery: time.Second}
	k2 := breakerKey{scheme: "http", host: "b", port: "80", threshold: 5, recovery: time.Second}
	b1 := rt.breakerFor(k1, t0)
	if rt.breakerFor(k1, t0.Add(time.Second)) != b1 {
		t.Fatal("same key, different breaker")
	}
	// A probe in flight keeps its breaker even when idle.
	b2 := rt.breakerFor(k2, t0)
	b2.state, b2.openedAt = StateOpen, t0.Add(-time.Hour)
	probe, _, _, _ := b2.admit(t0)
	rt.breakerFor(breakerKey{host: "c"}, t0.Add(2*time.Minute))
	if rt.Len() != 2 {
		t.Fatalf("after the idle sweep %d breakers, want b (probing) and c", rt.Len())
	}
	b2.forget(probe)
	rt.breakerFor(breakerKey{host: "d"}, t0.Add(4*time.Minute))
	if rt.Len() != 1 {
		t.Fatalf("after the second sweep %d breakers, want only d (b's probe is gone, c is idle)", rt.Len())
	}
	if rt.breakerFor(k1, t0.Add(4*time.Minute)) == b1 {
		t.Fatal("evicted breaker came back")
	}
	//lint:ignore SA4000 two calls must return the one shared runtime
	if ProcessRuntime() != ProcessRuntime() {
		t.Fatal("the process runtime is not shared")
	}
}
