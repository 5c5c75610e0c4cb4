package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/tracefile"
)

// Clock is the time source of a Player; tests inject one to check the schedule exactly.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Options configure a Player. The zero value plays once at the recorded pace.
type Options struct {
	// Speed multiplies the recorded pace: 2 plays twice as fast. 0 (or less) plays as fast as
	// possible. Changeable while playing with SetSpeed.
	Speed float64
	// Loop starts again from the first file after the last.
	Loop bool
	// Passes, when > 0, ends a looping replay after that many passes.
	Passes int
	// Salt draws each pass's trace-id salt (Shift.Salt); nil draws them at random. Tests set it
	// to know which ids each pass gets.
	Salt func() uint64
	// Read is passed to the trace file reader (Strict, Raw, limits, decode options, stdin).
	Read tracefile.ReadOptions
	// Clock is the time source; nil means the real one.
	Clock Clock
}

// Item is one record at the moment it is due: its batch (already shifted) and, when the reader was
// asked for Raw, the original protobuf request with the shift to apply to it.
type Item struct {
	Batch *spans.Batch
	Raw   []byte
	// Shift is the pass's: every record of a pass gets the same. Pass is the loop pass (0 the
	// first).
	Shift Shift
	Pass  int
	Pos   tracefile.Position
}

// ShiftedRaw is the item's protobuf request with the same shift its batch got.
func (it *Item) ShiftedRaw() ([]byte, error) {
	if it.Raw == nil {
		return nil, errors.New("replay: the player was not asked for raw requests (Options.Read.Raw)")
	}
	return it.Shift.Request(it.Raw)
}

// Player plays trace files back in time. It is safe to call SetSpeed, Pause and Speed from other
// goroutines (the dashboard's keys) while Run is running.
type Player struct {
	files []string
	opt   Options
	clock Clock

	mu     sync.Mutex
	speed  float64
	paused bool
	// The recording time shown at anchorReal; recording time advances at speed from there.
	anchorVirt int64
	anchorReal time.Time
	anchored   bool
	changed    chan struct{} // closed and replaced on every SetSpeed/SetPaused

	played atomic.Int64 // spans delivered
	pass   atomic.Int64
	done   atomic.Bool

	// pausedWait, when set (tests), is called each time a wait blocks because playback is paused:
	// the point after which nothing is delivered until SetPaused(false).
	pausedWait func()
}

// Progress is a short phrase for the dashboard's header: spans played, the loop pass, "done".
func (p *Player) Progress() string {
	s := fmt.Sprintf("%d spans played", p.played.Load())
	if n := p.pass.Load(); n > 0 {
		s += fmt.Sprintf(", pass %d", n+1)
	}
	if p.done.Load() {
		s += ", done"
	}
	return s
}

// NewPlayer plays files (paths, "-" for stdin) in order.
func NewPlayer(files []string, opt Options) *Player {
	c := opt.Clock
	if c == nil {
		c = realClock{}
	}
	return &Player{files: files, opt: opt, clock: c, speed: opt.Speed, changed: make(chan struct{})}
}

// Speed is the current speed; 0 means as fast as possible.
func (p *Player) Speed() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.speed
}

// Paused reports whether playback is paused.
func (p *Player) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// SetSpeed changes the speed from now on (the dashboard's + and -).
func (p *Player) SetSpeed(x float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reanchor()
	p.speed = x
	p.notify()
}

// SetPaused stops (true) or resumes (false) playback; the recording's clock stops with it.
func (p *Player) SetPaused(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reanchor()
	p.paused = on
	p.notify()
}

// reanchor fixes the current recording time so a change applies from now. Caller holds mu.
func (p *Player) reanchor() {
	if p.anchored {
		p.anchorVirt = p.virtLocked(p.clock.Now())
		p.anchorReal = p.clock.Now()
	}
}

func (p *Player) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// virtLocked is the recording time at real time now. Caller holds mu.
func (p *Player) virtLocked(now time.Time) int64 {
	if p.paused || p.speed <= 0 {
		return p.anchorVirt
	}
	return p.anchorVirt + int64(float64(now.Sub(p.anchorReal))*p.speed)
}

// PlayTo plays into a consumer (the live dashboard's analyzer): each batch is handed over when due,
// shifted with its pass.
func (p *Player) PlayTo(ctx context.Context, c spans.Consumer) error {
	return p.Run(ctx, func(ctx context.Context, it *Item) error {
		return c.ConsumeBatch(ctx, it.Batch)
	})
}

// Run reads the files and calls deliver with each record when it is due, until the files end (or,
// with Loop, until ctx is done or Passes are played). A record's time is the latest end time of its
// spans; the first record is due at once, each later one when the recording's clock, running at
// the player's speed, reaches it.
//
// Each pass is shifted once, when its first record is due: by the real time then minus that
// record's time, rounded down to whole seconds, and with a fresh trace-id salt. Every record of
// the pass gets that same [Shift], so the times inside a trace, and between traces, are the
// recorded ones exactly - at any speed, paused or not, however late a record is delivered. The
// first record's spans end at most a second before they are delivered; at a speed above 1 the
// later ones end ahead of the real clock, as the recording's clock runs ahead of it. Errors from
// deliver stop playback and are returned.
func (p *Player) Run(ctx context.Context, deliver func(context.Context, *Item) error) error {
	defer p.done.Store(true)
	var offset int64 // added to recorded times on later loop passes, so the clock keeps running forward
	for pass := 0; ; pass++ {
		p.pass.Store(int64(pass))
		ps := &passState{pass: pass, offset: offset}
		for _, f := range p.files {
			if err := p.playFile(ctx, f, ps, deliver); err != nil {
				return err
			}
		}
		if !p.opt.Loop || ps.n == 0 || (p.opt.Passes > 0 && pass+1 >= p.opt.Passes) {
			return nil
		}
		// The next pass starts a second after this one ended, in recording time.
		offset += ps.last - ps.first + int64(time.Second)
	}
}

// passState is one pass's progress: its shift, once its first record is due, and the recorded
// times of its first and last records.
type passState struct {
	pass        int
	offset      int64
	shift       Shift
	shifted     bool
	first, last int64
	n           int
}

func (p *Player) playFile(ctx context.Context, path string, ps *passState, deliver func(context.Context, *Item) error) error {
	r, err := tracefile.Open(path, p.opt.Read)
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		t := recordTime(rec.Batch)
		if t == 0 {
			continue // nothing with a time to place: no spans, or spans without times
		}
		if ps.n == 0 {
			ps.first = t
		}
		ps.last = max(ps.last, t)
		ps.n++
		at, err := p.wait(ctx, t+ps.offset)
		if err != nil {
			return err
		}
		if !ps.shifted {
			ps.shift = Shift{Delta: wholeSeconds(at.UnixNano() - t), Salt: p.salt()}
			ps.shifted = true
		}
		ps.shift.Batch(rec.Batch)
		it := &Item{Batch: rec.Batch, Raw: rec.Raw, Shift: ps.shift, Pass: ps.pass, Pos: rec.Pos}
		if err := deliver(ctx, it); err != nil {
			return fmt.Errorf("%s: %w", rec.Pos, err)
		}
		p.played.Add(int64(len(it.Batch.Spans)))
	}
}

func (p *Player) salt() uint64 {
	if p.opt.Salt != nil {
		return p.opt.Salt()
	}
	return newSalt()
}

// newSalt is a random non-zero salt: zero would leave the ids as recorded.
func newSalt() uint64 {
	for {
		if v := rand.Uint64(); v != 0 {
			return v
		}
	}
}

// wait blocks until the recording's clock reaches t (recording time) and returns the real time then.
func (p *Player) wait(ctx context.Context, t int64) (time.Time, error) {
	for {
		p.mu.Lock()
		now := p.clock.Now()
		if !p.anchored {
			p.anchored, p.anchorVirt, p.anchorReal = true, t, now
		}
		v := p.virtLocked(now)
		speed, paused, changed := p.speed, p.paused, p.changed
		if !paused && (speed <= 0 || v >= t) {
			if speed <= 0 {
				// As fast as possible: the clock jumps to each record.
				p.anchorVirt, p.anchorReal = max(v, t), now
			}
			p.mu.Unlock()
			return now, nil
		}
		p.mu.Unlock()
		if paused && p.pausedWait != nil {
			p.pausedWait()
		}
		var timer <-chan time.Time
		if !paused {
			// Round up: a wait that falls short by a nanosecond would spin on zero-length timers.
			timer = p.clock.After(time.Duration(max(math.Ceil(float64(t-v)/speed), 1)))
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-changed:
		case <-timer:
		}
	}
}

// ErrNoRecords is returned when a replay finds nothing to play.
var ErrNoRecords = errors.New("no spans with timestamps in the trace files")
