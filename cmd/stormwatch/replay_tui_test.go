package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/spans"
)

const stormFixture = "../../fixtures/amplification-27-reference.jsonl"

func quietLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestPlayerReplaysFixtureShiftedToNow: the 27-call fixture, played fast, reaches the analyzer
// whole, with its timestamps moved to the player's now.
func TestPlayerReplaysFixtureShiftedToNow(t *testing.T) {
	a := analyzer.New(analyzer.Config{Detectors: suite.Default()})
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var first int64
	sink := spans.ConsumerFunc(func(ctx context.Context, b *spans.Batch) error {
		for i := range b.Spans {
			if first == 0 || b.Spans[i].StartUnixNano < first {
				first = b.Spans[i].StartUnixNano
			}
		}
		return a.ConsumeBatch(ctx, b)
	})
	// A clock far from the recording's, advancing with the wall clock (the virtual clock needs it).
	began := time.Now()
	p := newPlayer([]string{stormFixture}, 1e6, false, sink, func() time.Time { return now.Add(time.Since(began)) }, quietLog())
	if err := p.run(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	// The first record anchors the shift; spans of later records may have started a little before.
	if d := time.Duration(first - now.UnixNano()); d < -time.Second || d > time.Second {
		t.Errorf("first span starts %v after the player's start, want about 0", d)
	}
	a.Flush()
	rep := a.Report()
	found := false
	for _, f := range rep.Findings {
		if f.Detector == "retry-amplification" && strings.Contains(f.Summary, "27 calls") {
			found = true
		}
	}
	if !found {
		t.Errorf("replayed fixture lost its 27-call finding: %+v", rep.Findings)
	}
	if got := p.Progress(); !strings.HasPrefix(got, "done · ") {
		t.Errorf("progress after the end = %q", got)
	}
}

// TestPlayerPauseAndLoop: nothing is sent while paused; a loop's second pass is new traces, not
// duplicates.
func TestPlayerPauseAndLoop(t *testing.T) {
	a := analyzer.New(analyzer.Config{})
	p := newPlayer([]string{stormFixture}, 1e6, true, a, time.Now, quietLog())
	p.SetPaused(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.run(ctx, nil) }()
	time.Sleep(100 * time.Millisecond)
	if n := p.sent.Load(); n != 0 {
		t.Fatalf("paused player sent %d spans", n)
	}
	if !strings.Contains(p.Progress(), "amplification-27-reference.jsonl") {
		t.Errorf("progress while paused = %q", p.Progress())
	}
	p.SetPaused(false)
	deadline := time.Now().Add(10 * time.Second)
	for p.Progress() == "" || !strings.Contains(p.Progress(), "pass 3") {
		if time.Now().After(deadline) {
			t.Fatalf("loop did not reach a third pass: %q", p.Progress())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("run ended with %v, want context.Canceled", err)
	}
	st := a.Stats()
	if st.DuplicateSpans != 0 {
		t.Errorf("looping produced %d duplicate spans: passes must be new traces", st.DuplicateSpans)
	}
	if st.TracesHeld < 2 {
		t.Errorf("two passes hold %d traces", st.TracesHeld)
	}
}

func TestPlayerSpeedAndBadInput(t *testing.T) {
	p := newPlayer(nil, 1, false, nil, time.Now, quietLog())
	p.SetSpeed(4)
	p.SetSpeed(-1) // ignored
	if p.Speed() != 4 {
		t.Errorf("speed = %v, want 4", p.Speed())
	}
	var out, errb bytes.Buffer
	err := runReplayTUI(context.Background(), streams{in: strings.NewReader(""), out: &out, err: &errb}, nil, 1, false)
	if err == nil || !strings.Contains(err.Error(), "name at least one trace file") {
		t.Errorf("no files: %v", err)
	}
	err = runReplayTUI(context.Background(), streams{in: strings.NewReader(""), out: &out, err: &errb}, []string{stormFixture}, 0, false)
	if err == nil || !strings.Contains(err.Error(), "--speed 0: must be positive") {
		t.Errorf("speed 0: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "nope.jsonl")
	p2 := newPlayer([]string{missing}, 1, false, analyzer.New(analyzer.Config{}), time.Now, quietLog())
	if err := p2.run(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "nope.jsonl") {
		t.Errorf("missing file: %v", err)
	}
}

// TestDashboardCommandsRefuseWithoutTerminal: piped or in CI, each dashboard command says what to
// run instead, and exits 2.
func TestDashboardCommandsRefuseWithoutTerminal(t *testing.T) {
	for _, args := range [][]string{{}, {"demo"}} {
		var out, errb bytes.Buffer
		err := run(context.Background(), args, strings.NewReader(""), &out, &errb)
		if err == nil {
			t.Fatalf("%v: started without a terminal", args)
		}
		if code := exitCode(err, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
		for _, want := range []string{"needs a terminal", "stormwatch collect", "stormwatch analyze"} {
			if !strings.Contains(errb.String(), want) {
				t.Errorf("%v: message lacks %q: %s", args, want, errb.String())
			}
		}
		if out.Len() != 0 {
			t.Errorf("%v: wrote to stdout: %q", args, out.String())
		}
	}
	var out, errb bytes.Buffer
	err := runReplayTUI(context.Background(), streams{in: strings.NewReader(""), out: &out, err: &errb}, []string{stormFixture}, 1, false)
	if err == nil || !strings.Contains(err.Error(), "needs a terminal") {
		t.Errorf("replay without a terminal: %v", err)
	}
}
