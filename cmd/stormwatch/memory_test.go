package main

import (
	"bufio"
	"context"
	"math"
	"net/http"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The guard raises the soft limit above the live heap, by its room (half as much again for
// analyze, as much again for a live command), when the heap has outgrown the size it was given, up
// to its ceiling (none for the live commands); analyze's never comes down, a live command's comes
// back down to its sizing once the heap has shrunk; and a nil guard (GOGC or GOMEMLIMIT set by the
// user) does nothing.
func TestMemoryGuardFollowsTheLiveHeap(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(prev)
	var nilGuard *memoryGuard
	nilGuard.check()
	nilGuard.adjust(false)
	perRecord := func(g *memoryGuard) {
		for range guardEvery {
			g.check()
		}
	}
	perTick := func(g *memoryGuard) { g.adjust(false) }
	for _, c := range []struct {
		name                 string
		ceiling, floor, room int64
		adjust               func(g *memoryGuard)
	}{
		{"analyze (checked per record)", memoryCeiling, 0, 50, perRecord},
		{"live (adjusted per settle tick)", math.MaxInt64, 2 << 20, 100, perTick},
		{"a ceiling below the live heap", 40 << 20, 0, 50, perTick},
	} {
		held := make([]byte, 32<<20) // live across the first two collections
		g := guardOf(max(1<<20, c.floor), c.ceiling, c.room)
		g.floor = c.floor
		debug.SetMemoryLimit(g.limit)
		for range 2 {
			runtime.GC()
			c.adjust(g)
		}
		want := min(c.ceiling, int64(len(held))*(100+c.room)/100)
		if g.limit < want || g.limit > c.ceiling || debug.SetMemoryLimit(-1) != g.limit {
			t.Errorf("%s: with %d MiB live, limit %d MiB (in force: %d MiB), want at least %d MiB and at most the ceiling",
				c.name, len(held)>>20, g.limit>>20, debug.SetMemoryLimit(-1)>>20, want>>20)
		}
		runtime.KeepAlive(held) // live until here
		raised := g.limit
		runtime.GC()
		c.adjust(g)
		switch {
		case c.floor == 0 && g.limit != raised:
			t.Errorf("%s: limit lowered from %d to %d MiB when the heap shrank", c.name, raised>>20, g.limit>>20)
		case c.floor > 0 && (g.limit >= raised || g.limit < c.floor || debug.SetMemoryLimit(-1) != g.limit):
			t.Errorf("%s: limit %d MiB (in force: %d MiB) once the heap shrank, want below %d MiB and at least the floor %d MiB",
				c.name, g.limit>>20, debug.SetMemoryLimit(-1)>>20, raised>>20, c.floor>>20)
		}
	}
}

// The guards raise their limit for what stays live, not for a moment: the heap peaks while the
// windowed detectors judge their window (its operations read back), and a collection landing then
// would have raised analyze's limit by half of that peak for the rest of the run, and a live
// command's to twice the peak, the heap growing to it before the next collection. A peak one
// collection finds is passed over; a live command's known moment is, however many collections
// land in it.
func TestGuardIgnoresAMomentsPeak(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(prev)
	for _, c := range []struct {
		name           string
		ceiling, floor int64
		room           int64
		// collections is how many land in the moment; moment is what the caller says of it.
		collections int
		moment      bool
	}{
		{"analyze, one collection", memoryCeiling, 0, 50, 1, false},
		{"live, one collection", math.MaxInt64, 1 << 20, 100, 1, false},
		{"live, a window judged over three collections", math.MaxInt64, 1 << 20, 100, 3, true},
	} {
		runtime.GC()
		g := guardOf(1<<20, c.ceiling, c.room)
		g.floor = c.floor
		debug.SetMemoryLimit(g.limit)
		g.adjust(false)
		// Against the limit the test binary's own live heap gave, whatever it is: followed, the
		// moment would raise it by its room over 32 MiB, 48 or 64 MiB.
		before := g.limit
		peak := make([]byte, 32<<20) // live across the moment's collections only
		for range c.collections {
			runtime.GC()
			g.adjust(c.moment)
		}
		runtime.KeepAlive(peak)
		if g.limit >= before+16<<20 || debug.SetMemoryLimit(-1) != g.limit {
			t.Errorf("%s: limit %d MiB (in force: %d MiB, before the moment %d MiB) after 32 MiB were live for a moment, want it where it was",
				c.name, g.limit>>20, debug.SetMemoryLimit(-1)>>20, before>>20)
		}
	}
}

// The live commands' limit grows with --max-spans and leaves a collector holding its default
// million spans of instrumented HTTP traffic (about 165 MB live) room below 350 MiB resident.
func TestLiveMemoryLimitSizing(t *testing.T) {
	def := liveMemoryLimit(defaultMaxSpans)
	if def < 256<<20 || def > 300<<20 {
		t.Errorf("limit at the default --max-spans %d: %d MiB, want 256-300 MiB", defaultMaxSpans, def>>20)
	}
	if more := liveMemoryLimit(4 * defaultMaxSpans); more <= def {
		t.Errorf("limit at 4x --max-spans %d MiB, not above the default's %d MiB", more>>20, def>>20)
	}
	for _, n := range []int{0, -1, math.MaxInt} {
		if got := liveMemoryLimit(n); got != math.MaxInt64 {
			t.Errorf("--max-spans %d: limit %d, want none (MaxInt64), not an overflow", n, got)
		}
	}
}

// collect runs with the soft limit sized from its --max-spans, which an operator reads in /metrics
// as go_gc_gomemlimit_bytes; a GOGC or GOMEMLIMIT of the user's wins.
func TestCollectLimitsItsMemory(t *testing.T) {
	for _, c := range []struct {
		name, env, value string
		args             []string
		want             int64
	}{
		{"default --max-spans", "GOGC", "", nil, liveMemoryLimit(defaultMaxSpans)},
		{"--max-spans 3000000", "GOGC", "", []string{"--max-spans", "3000000"}, liveMemoryLimit(3_000_000)},
		{"GOGC set", "GOGC", "100", nil, math.MaxInt64},
		{"GOMEMLIMIT set", "GOMEMLIMIT", "123MiB", nil, 123 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("GOGC", "")
			t.Setenv("GOMEMLIMIT", "")
			t.Setenv(c.env, c.value)
			k := startKillableCollect(t, c.args...)
			if got := gaugeValue(t, "http://"+k.http+"/metrics", "go_gc_gomemlimit_bytes"); got != float64(c.want) {
				t.Errorf("go_gc_gomemlimit_bytes %.0f, want %d", got, c.want)
			}
		})
	}
}

// gaugeValue reads one unlabelled gauge from a Prometheus text exposition.
func gaugeValue(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("%s not in %s (%v)", name, url, sc.Err())
	return 0
}

// Every live store's settle loop starts with the limit in force - replay's dashboard as well as
// the collector's pipeline - sized from the session's --max-spans.
func TestSettlingStartsWithTheLiveLimit(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	prev := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(prev)
	s, err := newAnalysisSession(&analysisFlags{settle: time.Second}, 50_000, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the loop ends at once; the limit stays
	s.startSettling(ctx)
	if got, want := debug.SetMemoryLimit(-1), liveMemoryLimit(50_000); got != want {
		t.Errorf("limit %d MiB once settling started, want %d MiB", got>>20, want>>20)
	}
}
