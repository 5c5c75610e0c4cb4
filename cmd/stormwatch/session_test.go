package main

import (
	"context"
	"math"
	"runtime"
	"runtime/debug"
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

	consumeFirstRecord(t, s, stormFixture)
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

// A tick whose Settle ran the windowed detectors tells the memory guard so: a collection that
// ended since the last tick found the window's operations read back live, and is not taken for
// what stays live; one that ended in a tick without a run is.
func TestSettleTellsTheGuardOfTheWindowsRun(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(prev)
	s, err := newAnalysisSession(&analysisFlags{settle: time.Second}, 100_000, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.mem = guardOf(1<<20, math.MaxInt64, 100)
	var l settleLoop
	now := time.Now()
	s.settle(&l, now)
	consumeFirstRecord(t, s, stormFixture)
	runtime.GC()
	s.settle(&l, now.Add(settleEvery)) // the traces still settling: no run
	if runs := s.cur.Load().Stats().WindowRuns; runs != 0 {
		t.Fatalf("%d windowed runs before any trace was analyzed", runs)
	}
	base := s.mem.live
	peak := make([]byte, 64<<20)
	runtime.GC()
	s.settle(&l, now.Add(2*time.Second)) // analyzes the traces, and the window judges them
	if runs := s.cur.Load().Stats().WindowRuns; runs != 1 {
		t.Fatalf("%d windowed runs once the traces were analyzed, want 1", runs)
	}
	if s.mem.live >= base+32<<20 {
		t.Errorf("the guard took %d MiB live from a tick that ran the window (%d MiB before it)", s.mem.live>>20, base>>20)
	}
	runtime.GC()
	s.settle(&l, now.Add(2*time.Second+settleEvery))
	if s.mem.live < base+32<<20 {
		t.Errorf("the guard kept %d MiB live after a tick without a run, with 64 MiB more held (%d MiB before)", s.mem.live>>20, base>>20)
	}
	runtime.KeepAlive(peak)
}

// consumeFirstRecord gives s the first record of the trace file at path.
func consumeFirstRecord(t *testing.T, s *session, path string) {
	t.Helper()
	r, err := tracefile.Open(path, tracefile.ReadOptions{})
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
}
