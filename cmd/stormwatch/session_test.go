package main

import (
	"context"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/tracefile"
)

// The settle loop slows down while nothing arrives and nothing waits, and is back at its busy pace
// from the first batch on, until that batch's traces are analyzed.
func TestSettleLoopBacksOffWhileIdleAndComesBackOnTraffic(t *testing.T) {
	s, err := newAnalysisSession(&analysisFlags{settle: 2 * time.Second}, 100_000, nil)
	if err != nil {
		t.Fatal(err)
	}
	var l settleLoop
	now := time.Now()
	tick := func(d time.Duration) time.Duration {
		now = now.Add(d)
		return s.settle(&l, now)
	}
	tick(0)
	if got := tick(settleEvery); got != idleSettleEvery {
		t.Fatalf("idle with nothing held: next tick in %v, want %v", got, idleSettleEvery)
	}

	r, err := tracefile.Open(stormFixture, tracefile.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rec, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ConsumeBatch(context.Background(), rec.Batch); err != nil {
		t.Fatal(err)
	}
	if got := tick(idleSettleEvery); got != settleEvery {
		t.Fatalf("a batch arrived: next tick in %v, want %v", got, settleEvery)
	}
	if got := tick(settleEvery); got != settleEvery {
		t.Fatalf("traces wait for their settle period: next tick in %v, want %v", got, settleEvery)
	}
	// Past the settle period the traces are analyzed; then the loop goes idle again.
	for range 20 {
		if tick(time.Second) == idleSettleEvery {
			if st := s.cur.Load().Stats(); st.PendingTraces != 0 || st.TracesHeld == 0 {
				t.Fatalf("idle pace with %d traces pending, %d held", st.PendingTraces, st.TracesHeld)
			}
			return
		}
	}
	t.Fatal("the settle loop never went back to its idle pace")
}

// A --settle shorter than the idle pace bounds it: a trace is never analyzed later than that.
func TestSettleLoopIdlePaceNeverExceedsSettle(t *testing.T) {
	s, err := newAnalysisSession(&analysisFlags{settle: 500 * time.Millisecond}, 100_000, nil)
	if err != nil {
		t.Fatal(err)
	}
	var l settleLoop
	now := time.Now()
	s.settle(&l, now)
	if got := s.settle(&l, now.Add(settleEvery)); got != 500*time.Millisecond {
		t.Fatalf("idle with --settle 500ms: next tick in %v, want 500ms", got)
	}
}
