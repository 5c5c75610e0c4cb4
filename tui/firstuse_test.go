package tui

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
)

// What a person opening the dashboard for the first time meets: an 80x24 terminal, NO_COLOR, the
// words on every screen, a `:` command line, grouped findings, and a quiet screen that explains
// itself.

// screenViews are every screen of the 27-call fixture at w x h, by name.
func screenViews(t *testing.T, w, h int) map[string]string {
	t.Helper()
	snap := fixtureSnapshot(t, "amplification-27-reference")
	base := drive(t, New(testOptions(fixedSource(snap))), size(w, h))
	out := map[string]string{}
	for name, keys := range map[string][]tea.Msg{
		"dependencies":    nil,
		"operations":      {press("2")},
		"operations-dep":  {press("enter")},
		"findings":        {press("3")},
		"findings-listed": {press("3"), press("l"), press("down")},
		"trace":           {press("3"), press("enter")},
		"span":            {press("3"), press("enter"), press("enter")},
		"help":            {press("?")},
	} {
		out[name] = drive(t, base, keys...).View()
	}
	return out
}

// TestSmallTerminalNothingCut: at 80x24 the header, the dependencies' banner and legend, the
// operations legend and the footer fit whole on every screen: a cut line ends in "…".
func TestSmallTerminalNothingCut(t *testing.T) {
	for name, v := range screenViews(t, 80, 24) {
		lines := strings.Split(v, "\n")
		if len(lines) != 24 {
			t.Errorf("%s: %d lines, want 24", name, len(lines))
		}
		check := []int{0, 1, 2, len(lines) - 2, len(lines) - 1}
		switch name {
		case "dependencies":
			check = append(check, 3, len(lines)-4, len(lines)-3) // banner, legend
		case "operations", "operations-dep":
			check = append(check, len(lines)-3, len(lines)-4) // legend, the selected row in full
		case "trace":
			check = append(check, 3, 4) // what the trace is, the layers that multiplied
		}
		for _, i := range check {
			if strings.Contains(lines[i], "…") {
				t.Errorf("%s: line %d is cut: %q", name, i, lines[i])
			}
		}
	}
}

// TestSmallTerminalGolden: the landing screen and the findings at 80x24 in a real program.
func TestSmallTerminalGolden(t *testing.T) {
	snap := fixtureSnapshot(t, "amplification-27-reference")
	tm := teatest.NewTestModel(t, New(testOptions(fixedSource(snap))), teatest.WithInitialTermSize(80, 24))
	waitFor(t, tm, "WORST")
	tm.Send(press("3"))
	waitFor(t, tm, "COUNT")
	requireGolden(t, finalView(t, tm))
}

// TestCursorKeepsMarker: the cursor has a cell of its own; on a row over 1.5x it does not hide
// the "!" that says so.
func TestCursorKeepsMarker(t *testing.T) {
	m := drive(t, New(testOptions(fixedSource(fakeSnapshot(0)))), size(80, 24), press("j"))
	if sel := selectedLine(m.View()); !strings.HasPrefix(sel, ">!") || !strings.Contains(sel, "adapter:8080") {
		t.Errorf("the selected row over 1.5x lost its marker: %q", sel)
	}
	m = drive(t, m, press("k"))
	if sel := selectedLine(m.View()); !strings.HasPrefix(sel, ">▲") {
		t.Errorf("the selected worst row lost its marker: %q", sel)
	}
}

// TestOwnerReadableWhenCut: a long owner is cut in its column at 80 columns; the selected row is
// shown in full under the table.
func TestOwnerReadableWhenCut(t *testing.T) {
	snap := fakeSnapshot(0)
	ops := healthyOps(5000, 1, "checkout", "http://inventory:8080", "200")
	ops[0].Owner = "checkout-orchestrator-v2"
	snap.SetOperations(append(snap.Operations(), ops...))
	m := typeFilter(t, drive(t, New(testOptions(fixedSource(snap))), size(80, 24), press("2")), "caller=checkout")
	v := m.View()
	if sel := selectedLine(v); !strings.Contains(sel, "checkou") || strings.Contains(sel, "orchestrator") {
		t.Fatalf("test premise: the owner column should cut the name:\n%s", v)
	}
	if !strings.Contains(v, "▸ checkout → http://inventory:8080 · owner checkout-orchestrator-v2") {
		t.Errorf("the full owner is nowhere on screen:\n%s", v)
	}
}

// TestSpanDetailWrapsAtWords: a long detail line breaks between words and continues under its
// value, not mid-word at the edge.
func TestSpanDetailWrapsAtWords(t *testing.T) {
	v := screenViews(t, 80, 24)["span"]
	if !strings.Contains(v, "attempt     #1 of 3 (initial) of operation") || !strings.Contains(v, "\n            retryable, status 503") {
		t.Errorf("the attempt line does not wrap at a word under its value:\n%s", v)
	}
}

// TestNoColorKeepsBoldAndReverse: under NO_COLOR the renderer the dashboard is built with keeps
// bold (the worst row, the active tab) and reverse video (the cursor), and prints no colour.
func TestNoColorKeepsBoldAndReverse(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	var out bytes.Buffer
	opt := testOptions(fixedSource(fakeSnapshot(0)))
	opt.Color = false
	opt.Renderer = NewRenderer(&out, opt.Color)
	tm := teatest.NewTestModel(t, New(opt), teatest.WithInitialTermSize(80, 24))
	waitFor(t, tm, "WORST")
	v := finalView(t, tm)
	if !strings.Contains(v, "\x1b[7m") || !strings.Contains(v, "\x1b[1m") {
		t.Errorf("bold or reverse video is missing under NO_COLOR:\n%q", v)
	}
	if strings.Contains(v, "\x1b[38;") || strings.Contains(v, "\x1b[48;") || regexp.MustCompile(`\x1b\[(3|4|9|10)[0-7]m`).MatchString(v) {
		t.Errorf("colour under NO_COLOR:\n%q", v)
	}
	requireGolden(t, v)
}

// TestWordsOnEveryScreen: one word per count (intents on the dependencies screen, operations on
// the operations screen), defined where the number is, and the two reconcile when the operations
// are one dependency's; counts of one are singular.
func TestWordsOnEveryScreen(t *testing.T) {
	views := screenViews(t, 100, 30)
	small := screenViews(t, 80, 24)
	for name, v := range small {
		views[name+"@80"] = v
	}
	singularWrong := regexp.MustCompile(`(^|[^0-9,.])1 (findings|attempts|operations|intents|calls|requests|traces|spans|layers)\b`)
	for name, v := range views {
		if strings.Contains(strings.ToLower(v), "logical") {
			t.Errorf("%s still says 'logical':\n%s", name, v)
		}
		if m := singularWrong.FindString(v); m != "" {
			t.Errorf("%s says %q:\n%s", name, m, v)
		}
	}
	for name, want := range map[string][]string{
		"dependencies":      {"INTENTS", "saw 54 calls for 2 intents (27.00x)", "INTENTS what the top layer asked, once however many layers retried", "AMPLIF = CALLS / INTENTS"},
		"dependencies@80":   {"INTENTS asked by the top layer", "AMPLIF = CALLS/INTENTS"},
		"operations":        {"26 of 26 operations: retry loops at every layer"},
		"operations-dep":    {"18 of 26 operations to dep, for 2 intents: one per attempt of the layers above"},
		"operations-dep@80": {"18 operations to dep for 2 intents"},
		"trace":             {"92 spans · 13 operations · 1 finding "},
	} {
		for _, w := range want {
			if !strings.Contains(views[name], w) {
				t.Errorf("%s lacks %q:\n%s", name, w, views[name])
			}
		}
	}
}

// stormFindings is a storm's findings as a detector makes them: one per request, n of them at one
// place, and one at another.
func stormFindings(n int) *engine.Snapshot {
	snap := fakeSnapshot(0)
	storm := snap.Report.Findings[0]
	var fs []analyzer.Finding
	for i := range n {
		f := storm
		if i > 0 { // the first is the storm trace the snapshot holds
			f.TraceID = fmt.Sprintf("%032x", i+1)
		}
		f.TimeUnixNano = base + int64(i)*int64(time.Second)
		fs = append(fs, f)
	}
	fs = append(fs, snap.Report.Findings[1:]...)
	snap.Report.Findings = fs
	return snap
}

// TestFindingsGrouped: 500 identical findings are one row with their count and last time; l
// lists them, enter opens the group's first trace.
func TestFindingsGrouped(t *testing.T) {
	m := drive(t, New(testOptions(fixedSource(stormFindings(500)))), size(80, 24), press("3"))
	v := m.View()
	for _, want := range []string{
		">‼  retry-amplification     edge → api → adapter → dep:8080         500 10:08:19", // the chain, nearest layer last
		"count     500 findings · 2026-",
	} {
		if !strings.Contains(v, want) {
			t.Errorf("findings screen lacks %q:\n%s", want, v)
		}
	}
	if n := strings.Count(v, "retry-amplification"); n != 2 { // the row and the detail pane
		t.Errorf("retry-amplification appears %d times, want one row and the detail:\n%s", n, v)
	}
	if !strings.Contains(v, "3 Findings (502)") {
		t.Errorf("the tab does not count every finding:\n%s", v)
	}
	m = drive(t, m, press("l"))
	if n := strings.Count(m.View(), "└ trace"); n < 5 {
		t.Errorf("l did not list the group's findings (%d shown):\n%s", n, m.View())
	}
	m = drive(t, m, press("h"), press("enter"))
	if m.screen != screenTrace {
		t.Errorf("enter on a group did not open its first trace: screen %v, status %q", m.screen, m.status)
	}
}

// TestQuietScreenExplainsItself: traffic analyzed, nothing wrong: the landing screen says what is
// watched and what would count as a storm, instead of a bare table.
func TestQuietScreenExplainsItself(t *testing.T) {
	snap := fakeSnapshot(0)
	snap.Report.Findings = nil
	snap.Report.Input.Traces = 48
	snap.Stats.PendingTraces = 2
	v := drive(t, New(testOptions(fixedSource(snap))), size(80, 24)).View()
	for _, want := range []string{
		"No storm so far. Watching 5 dependencies called by 4 services:",
		"48 traces analyzed, 2 settling (a trace is analyzed after --settle of quiet).",
		"A storm: a dependency getting many calls per intent. Findings (screen 3) for:",
		"retry-amplification    2+ layers retry one request: 3 x 3 x 3 = 27 calls",
		"retry-budget-exceeded  retries over 10% of first attempts",
	} {
		if !strings.Contains(v, want) {
			t.Errorf("quiet screen lacks %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, "…") {
		t.Errorf("the quiet screen is cut at 80 columns:\n%s", v)
	}
	requireGolden(t, v)

	// With a finding the table speaks for itself.
	if v := drive(t, New(testOptions(fixedSource(fakeSnapshot(0)))), size(80, 24)).View(); strings.Contains(v, "No storm so far") {
		t.Errorf("the explanation stays with findings on screen:\n%s", v)
	}
}

// TestCommandLine: k9s's `:` prompt switches screens, completes with tab, opens a trace by a
// prefix of its id and quits.
func TestCommandLine(t *testing.T) {
	snap := fakeSnapshot(0)
	typeIn := func(m Model, s string) Model {
		m = drive(t, m, press(":"))
		for _, r := range s {
			m = drive(t, m, press(string(r)))
		}
		return m
	}
	m := drive(t, New(testOptions(fixedSource(snap))), size(80, 24))
	m = typeIn(m, "fi")
	if v := m.View(); !strings.Contains(v, ":findings") {
		t.Errorf("the prompt does not offer the completion:\n%s", v)
	}
	m = drive(t, m, press("tab"), press("enter"))
	if m.screen != screenFindings {
		t.Errorf(":fi<tab> did not open the findings: screen %v", m.screen)
	}
	m = drive(t, typeIn(m, "ops"), press("enter"))
	if m.screen != screenOps {
		t.Errorf(":ops: screen %v", m.screen)
	}
	m = drive(t, typeIn(m, "deps"), press("enter"))
	if m.screen != screenDeps {
		t.Errorf(":deps: screen %v", m.screen)
	}
	storm := snap.Report.Findings[0].TraceID
	m = drive(t, typeIn(m, "trace "+storm[:6]), press("enter"))
	if m.screen != screenTrace || m.trace.view == nil || m.trace.view.TraceID.String() != storm {
		t.Errorf(":trace %s did not open the trace: screen %v, status %q", storm[:6], m.screen, m.status)
	}
	m = drive(t, typeIn(m, "nosuch"), press("enter"))
	if !strings.Contains(m.View(), "unknown command :nosuch (try :deps :ops :findings :trace ID :q)") {
		t.Errorf("an unknown command is not named:\n%s", m.View())
	}
	m = typeIn(m, "q")
	if _, cmd := m.Update(press("enter")); cmd == nil || cmd() != tea.Quit() {
		t.Errorf(":q does not quit")
	}
}

// TestCommandLineGolden: the prompt with its completion, in a real program.
func TestCommandLineGolden(t *testing.T) {
	tm := teatest.NewTestModel(t, New(testOptions(fixedSource(fakeSnapshot(0)))), teatest.WithInitialTermSize(80, 24))
	waitFor(t, tm, "WORST")
	tm.Send(press(":"))
	tm.Send(press("t"))
	waitFor(t, tm, ":trace 4b")
	requireGolden(t, finalView(t, tm))
}

// TestIgnoredSignalsSaid: the start screen says what happens to metrics and logs, and the status
// line counts them once some arrived.
func TestIgnoredSignalsSaid(t *testing.T) {
	opt := testOptions(fixedSource(nil))
	if v := drive(t, New(opt), size(80, 24)).View(); !strings.Contains(v, "Only traces are analyzed: metrics and logs are received and ignored.") {
		t.Errorf("start screen:\n%s", v)
	}
	opt = testOptions(fixedSource(fakeSnapshot(0)))
	opt.IgnoredSignals = func() int64 { return 1 }
	if v := drive(t, New(opt), size(80, 24)).View(); !strings.Contains(v, "metrics and logs are received and ignored (1 request)") {
		t.Errorf("status line:\n%s", v)
	}
}
