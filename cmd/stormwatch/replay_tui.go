package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/tracefile"
	"github.com/stormwatch/stormwatch/tui"
)

// runReplayTUI plays recorded trace files into the dashboard: the replay command (replay.go) calls
// it when no --to endpoint is given. Timestamps are shifted so the recording starts now; speed
// scales the pauses between records (2 plays twice as fast); loop starts again at the end, with
// trace ids varied per pass so each pass counts as new traffic. The dashboard's space key pauses
// the replay and +/- change the speed.
func runReplayTUI(ctx context.Context, io streams, files []string, speed float64, loop bool) error {
	d := dashboardFlags{settle: time.Second, refresh: tui.DefaultRefresh}
	return runReplayTUIWith(ctx, io, files, speed, loop, &d)
}

// runReplayTUIWith is runReplayTUI with the dashboard flags (--policy, --log-file, --settle,
// --refresh) that the replay command may register with registerDashboardFlags.
func runReplayTUIWith(ctx context.Context, io streams, files []string, speed float64, loop bool, d *dashboardFlags) error {
	if len(files) == 0 {
		return withExitCode(2, errors.New("replay: name at least one trace file"))
	}
	if speed <= 0 {
		return withExitCode(2, fmt.Errorf("--speed %g: must be positive", speed))
	}
	if err := requireTerminal(io); err != nil {
		return err
	}
	// Fail before the screen changes when a file cannot be opened at all.
	for _, f := range files {
		r, err := tracefile.Open(f, tracefile.ReadOptions{Stdin: io.in})
		if err != nil {
			return withExitCode(2, err)
		}
		r.Close()
	}
	log, closeLog, err := openLog(d.logFile)
	if err != nil {
		return withExitCode(2, err)
	}
	defer closeLog()
	s, err := newSession(d, defaultMaxSpans, log)
	if err != nil {
		return withExitCode(2, err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.run(runCtx)

	p := newPlayer(files, speed, loop, s, time.Now, log)
	var wg sync.WaitGroup
	wg.Add(1)
	var playErr error
	go func() {
		defer wg.Done()
		playErr = p.run(runCtx, io.in)
	}()
	opt := s.tuiOptions(d)
	opt.Replay = p
	uiErr := runDashboard(ctx, io, opt)
	cancel()
	wg.Wait()
	if errors.Is(playErr, context.Canceled) {
		playErr = nil
	}
	fmt.Fprintf(io.err, "stormwatch: logs are in %s\n", s.logPath(d))
	return errors.Join(uiErr, playErr)
}

// registerDashboardFlags adds --policy, --log-file, --settle and --refresh to a command that opens
// the dashboard (the replay command), with replay's defaults.
func registerDashboardFlags(fs interface {
	StringVar(p *string, name, value, usage string)
	DurationVar(p *time.Duration, name string, value time.Duration, usage string)
}) *dashboardFlags {
	d := &dashboardFlags{}
	d.register(fs, time.Second)
	return d
}

// player replays trace files into a consumer on a virtual clock that runs at speed times the wall
// clock and stops while paused. It implements tui.ReplayControl; its methods are safe for
// concurrent use.
type player struct {
	files []string
	loop  bool
	next  spans.Consumer
	now   func() time.Time
	log   *slog.Logger

	mu      sync.Mutex
	paused  bool
	speed   float64
	vAnchor int64     // virtual (recorded) time at the anchor
	wAnchor time.Time // wall time at the anchor
	file    string
	pass    int
	done    bool

	sent atomic.Int64 // spans handed to next
}

func newPlayer(files []string, speed float64, loop bool, next spans.Consumer, now func() time.Time, log *slog.Logger) *player {
	return &player{files: files, loop: loop, next: next, now: now, log: log, speed: speed}
}

// Paused, SetPaused, Speed, SetSpeed and Progress implement tui.ReplayControl.
func (p *player) Paused() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.paused }

func (p *player) SetPaused(v bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reanchor()
	p.paused = v
}

func (p *player) Speed() float64 { p.mu.Lock(); defer p.mu.Unlock(); return p.speed }

func (p *player) SetSpeed(v float64) {
	if v <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reanchor()
	p.speed = v
}

func (p *player) Progress() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	sent := humanCount(p.sent.Load())
	switch {
	case p.done:
		return "done · " + sent + " spans replayed"
	case p.pass > 1:
		return fmt.Sprintf("%s · %s spans · pass %d", filepath.Base(p.file), sent, p.pass)
	case p.file != "":
		return filepath.Base(p.file) + " · " + sent + " spans"
	}
	return ""
}

func humanCount(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// virtual is the recorded time the replay has reached. Call with mu held.
func (p *player) virtual() int64 {
	if p.paused || p.wAnchor.IsZero() {
		return p.vAnchor
	}
	return p.vAnchor + int64(float64(p.now().Sub(p.wAnchor))*p.speed)
}

// reanchor fixes the virtual time reached before a speed or pause change. Call with mu held.
func (p *player) reanchor() {
	p.vAnchor = p.virtual()
	p.wAnchor = p.now()
}

// run plays every file (again and again with loop) until done or ctx ends.
func (p *player) run(ctx context.Context, stdin io.Reader) error {
	defer func() {
		p.mu.Lock()
		p.done = true
		p.mu.Unlock()
	}()
	for pass := 1; ; pass++ {
		p.mu.Lock()
		p.pass = pass
		p.wAnchor = time.Time{} // re-anchored on the first record of the pass
		p.mu.Unlock()
		var shift int64
		for _, f := range p.files {
			if err := p.playFile(ctx, f, stdin, pass, &shift); err != nil {
				return err
			}
		}
		if !p.loop {
			return nil
		}
	}
}

func (p *player) playFile(ctx context.Context, file string, stdin io.Reader, pass int, shift *int64) error {
	r, err := tracefile.Open(file, tracefile.ReadOptions{
		Stdin:     stdin,
		Decode:    spans.DecodeOptions{AllAttributes: true},
		OnWarning: func(err error) { p.log.Warn("replay: skipped a record", "err", err) },
	})
	if err != nil {
		return err
	}
	defer r.Close()
	p.mu.Lock()
	p.file = file
	p.mu.Unlock()
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		b := rec.Batch
		if len(b.Spans) == 0 {
			continue
		}
		t := b.Spans[0].StartUnixNano
		for i := range b.Spans {
			t = min(t, b.Spans[i].StartUnixNano)
		}
		p.mu.Lock()
		if p.wAnchor.IsZero() {
			// The pass starts now: recorded time t is shown as the current wall time.
			p.vAnchor, p.wAnchor = t, p.now()
			*shift = p.wAnchor.UnixNano() - t
		}
		p.mu.Unlock()
		if err := p.waitUntil(ctx, t); err != nil {
			return err
		}
		shiftBatch(b, *shift, pass)
		if err := p.next.ConsumeBatch(ctx, b); err != nil {
			return fmt.Errorf("replay %s: %w", rec.Pos, err)
		}
		p.sent.Add(int64(len(b.Spans)))
	}
}

// waitUntil sleeps until the virtual clock reaches t, in short steps so a pause or a speed change
// takes effect at once.
func (p *player) waitUntil(ctx context.Context, t int64) error {
	for {
		p.mu.Lock()
		v, speed, paused := p.virtual(), p.speed, p.paused
		p.mu.Unlock()
		if !paused && v >= t {
			return nil
		}
		d := 50 * time.Millisecond
		if !paused {
			d = min(d, time.Duration(float64(t-v)/speed)+time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
}

// shiftBatch moves every timestamp (and the absolute deadlines the reference client records) by
// shift, and from the second pass on varies the trace ids so each pass is new traffic.
func shiftBatch(b *spans.Batch, shift int64, pass int) {
	for i := range b.Spans {
		s := &b.Spans[i]
		s.StartUnixNano += shift
		s.EndUnixNano += shift
		for j := range s.Events {
			s.Events[j].TimeUnixNano += shift
		}
		for j := range s.Attrs {
			if a := &s.Attrs[j]; a.Key == spans.AttrDeadline && a.Type == spans.ValueInt {
				a.Num += shift
			}
		}
		if pass > 1 {
			varyTrace(&s.TraceID, pass)
			for j := range s.Links {
				varyTrace(&s.Links[j].TraceID, pass)
			}
		}
	}
}

func varyTrace(id *spans.TraceID, pass int) {
	id[14] ^= byte(pass >> 8)
	id[15] ^= byte(pass)
}
