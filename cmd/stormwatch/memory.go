package main

import (
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"

	"github.com/stormwatch/stormwatch/analyzer/engine"
)

// The garbage collector's soft memory limit. Left to its default, Go collects once the heap has
// doubled over what the last collection found live, and a busy process overshoots that: a
// collector holding a million spans has about 165 MB live and reached 500 MiB resident. A soft
// limit sized from what the command is bounded to hold stops the heap there, and costs nothing
// while little is held (the default target is lower). A memoryGuard keeps the limit above the
// live heap by a room of its own, so that traffic holding more than the sizing assumes never
// makes the collector run back to back. analyze's room is half the live heap: its rate is the
// file's, and it trades a little CPU for a peak that does not depend on the input's size. A live
// command's is the live heap (the default target's own room): with a tighter one, a collector
// taking 400,000 spans a second collected twice as often and lost a fifth to a quarter of its
// throughput. A user's GOGC or GOMEMLIMIT wins: no limit is set then.

// The soft memory limit of analyze and diff (see limitMemory): what a bounded analysis holds
// besides its window - the spans of the last --settle (about 80 MiB for a recording of 10,000
// spans a second), the analyzed traces remembered for another --settle, the window's entries,
// the interned names - with room for the garbage collector, and, per operation of the window's
// bound, what the operation costs at the window's peak: its packed frame (about 200 bytes) and,
// while its chunk is judged, its values read back (about 450 bytes), with room for the collector
// then too. (Sized to the peak alone, 720 bytes an operation, the limit left the collector no room
// while a chunk was judged: it ran back to back at every chunk, 271 collections at 10M spans
// against 231, for 15-20% more CPU.) memoryCeiling caps it, and is the limit of an analysis that
// holds what grows with the input (--settle 0, a --what-if prediction, no bound on the window).
const (
	heldBesidesWindow = 140 << 20
	memoryPerWindowOp = 900
	memoryCeiling     = 900 << 20
)

// The soft memory limit of the live commands (collect, the dashboard, demo, replay's dashboard; see
// limitLiveMemory): what a live analysis holds besides its spans - the findings it keeps, the
// window's operations, the ingest queue, the interned names - and, per span of --max-spans, what a
// held span costs with its share of its trace's state and operations (about 165 bytes for
// instrumented HTTP traffic) and some room for the garbage collector.
const (
	liveHeldBesidesSpans = 96 << 20
	liveMemoryPerSpan    = 192
)

// limitMemory gives analyze and diff a soft limit sized from what the analysis cfg holds at its
// peak (at a million realistic spans the heap peaked at 280 MB live and the process at 527 MiB
// without it). The readers call the guard's check once per record of a file and once per trace
// from a Jaeger.
func limitMemory(cfg engine.Config) *memoryGuard {
	return newMemoryGuard(softMemoryLimit(cfg), memoryCeiling, 50)
}

// limitLiveMemory gives a live command a soft limit sized from its --max-spans, without a
// ceiling (its store is bounded by the flag), which the guard raises and lowers back as the live
// heap grows and shrinks. The session's settle loop calls the guard's adjust on every tick.
func limitLiveMemory(maxSpans int) *memoryGuard {
	g := newMemoryGuard(liveMemoryLimit(maxSpans), math.MaxInt64, 100)
	if g != nil {
		g.floor = g.limit
	}
	return g
}

// liveMemoryLimit is limitLiveMemory's limit for --max-spans maxSpans.
func liveMemoryLimit(maxSpans int) int64 {
	if maxSpans <= 0 || int64(maxSpans) > (math.MaxInt64-liveHeldBesidesSpans)/liveMemoryPerSpan {
		return math.MaxInt64
	}
	return liveHeldBesidesSpans + int64(maxSpans)*liveMemoryPerSpan
}

// newMemoryGuard sets the soft limit and returns its guard, or nil (a guard that does nothing)
// when the user set GOGC or GOMEMLIMIT.
func newMemoryGuard(limit, ceiling, room int64) *memoryGuard {
	if os.Getenv("GOMEMLIMIT") != "" || os.Getenv("GOGC") != "" {
		return nil
	}
	g := guardOf(limit, ceiling, room)
	debug.SetMemoryLimit(g.limit)
	return g
}

// guardOf is a memoryGuard of the limit, ceiling and room given, which has not set the limit yet.
func guardOf(limit, ceiling, room int64) *memoryGuard {
	g := &memoryGuard{limit: limit, ceiling: ceiling, room: room}
	g.sample[0].Name = liveHeapMetric
	g.sample[1].Name = gcCyclesMetric
	return g
}

// liveHeapMetric is the heap the last garbage collection found live (runtime/metrics).
const liveHeapMetric = "/gc/heap/live:bytes"

// gcCyclesMetric counts the garbage collections so far (runtime/metrics).
const gcCyclesMetric = "/gc/cycles/total:gc-cycles"

// guardEvery is how many records a memoryGuard lets pass between two readings of the live heap:
// 16 lines of a Collector recording are about 8,000 spans, a reading a few microseconds.
const guardEvery = 16

// memoryGuard keeps the soft memory limit above the live heap by its room, up to its ceiling. A
// limit is sized for typical traffic (analyze's for about 10,000 spans a recorded second);
// traffic that holds more - a recording at several times that rate, spans with many attributes -
// under a limit at or below its live heap would make the garbage collector run back to back (the
// runtime lets it take up to half the CPU): raised, it runs as it would with GOGC set to the room.
// Either is raised from what two collections in a row found live (see adjust), never for a
// moment's peak. analyze's is only ever raised: on realistic traffic it stays where it was sized
// (the live heap saws between about 110 and 140 MB, and peaks at 175-190 MB for the moments a
// chunk of the window is judged, under a 226 MiB limit). A live command's comes back down to its
// sizing (floor) as the live heap shrinks: what it holds more than the sizing assumes - a burst
// of large traces, a slow settle - passes, and a limit left where it put it would give the room
// back to the default target for the rest of the run.
type memoryGuard struct {
	limit, ceiling int64
	// floor is the limit the guard lowers back to; 0: it never lowers the limit.
	floor int64
	// room is how far above the live heap the guard keeps the limit, in percent of it (see the
	// top of this file for each command's).
	room  int64
	reads int
	// The live heap the last counted collection left and the one before it, and the count of
	// collections when last read (see adjust).
	live, prevLive int64
	cycles         uint64
	sample         [2]metrics.Sample
}

// check adjusts the limit (see adjust) every guardEvery calls.
func (g *memoryGuard) check() {
	if g == nil {
		return
	}
	if g.reads++; g.reads%guardEvery == 0 {
		g.adjust(false)
	}
}

// adjust reads the live heap and sets the limit its room above it, up to the ceiling:
// only higher than it is, or (with a floor) no lower than the floor. moment says the caller's
// work since the last adjust held, for its length, more than stays live (a live command's
// windowed detectors judged their window): a collection that ended since is not counted.
func (g *memoryGuard) adjust(moment bool) {
	if g == nil {
		return
	}
	metrics.Read(g.sample[:])
	if g.sample[0].Value.Kind() != metrics.KindUint64 || g.sample[1].Value.Kind() != metrics.KindUint64 {
		return
	}
	cycles := g.sample[1].Value.Uint64()
	if cycles == g.cycles {
		return // no collection since the last reading
	}
	g.cycles = cycles
	if moment {
		return
	}
	g.prevLive, g.live = g.live, int64(min(g.sample[0].Value.Uint64(), math.MaxInt64/2))
	// The limit follows what stays live, not a moment: the lower of the last two counted
	// collections' live heaps. The heap peaks for the moment the windowed detectors judge their
	// window (its operations read back from their packed frames: a chunk of analyze's, about
	// 45 MB at the default bound; a live run's, about 100 MB with a million spans held at 12,000
	// spans a second, where one run in two or three has a collection land in it, and under the
	// limit a long run two in a row). Raised for that moment, analyze's limit would stay half of
	// it higher for the rest of the run, and a live command's would let the heap grow to twice
	// the moment's peak before the next collection (RSS 410-490 MiB against 320-335 between, at
	// a million spans), and coming back down after it, with the heap far over the lowered limit,
	// start another one at once. A live command's moments are known (see session.settle); the
	// lower of two readings covers analyze's and a collection that began in a moment and ended
	// after it.
	live := min(g.live, g.prevLive)
	want := min(g.ceiling, live+live/100*g.room)
	if g.floor > 0 {
		want = max(want, g.floor)
	} else if want <= g.limit {
		return
	}
	if want != g.limit {
		g.limit = want
		debug.SetMemoryLimit(want)
	}
}

// softMemoryLimit is limitMemory's limit for cfg.
func softMemoryLimit(cfg engine.Config) int64 {
	ops := cfg.WindowOps()
	if !cfg.ReleaseSpans || cfg.ForgetAfter <= 0 || ops < 0 || ops >= (memoryCeiling-heldBesidesWindow)/memoryPerWindowOp {
		return memoryCeiling // what is held grows with the input, or the bound is as large
	}
	return heldBesidesWindow + int64(ops)*memoryPerWindowOp
}
