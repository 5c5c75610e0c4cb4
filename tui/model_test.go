package tui

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/muesli/termenv"

	"github.com/stormwatch/stormwatch/analyzer/engine"
)

const (
	testW = 100
	testH = 30
)

// asciiRenderer renders without any escape sequence, so goldens are plain text.
func asciiRenderer() *lipgloss.Renderer {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.Ascii)
	return r
}

// switchSource hands out whatever snapshot the test last set.
type switchSource struct {
	mu   sync.Mutex
	snap *engine.Snapshot
}

func (s *switchSource) Snapshot(time.Time) *engine.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snap
}

func (s *switchSource) set(snap *engine.Snapshot) {
	s.mu.Lock()
	s.snap = snap
	s.mu.Unlock()
}

func testOptions(src Source) Options {
	return Options{
		Source:       src,
		Refresh:      20 * time.Millisecond,
		Endpoints:    []string{"grpc 127.0.0.1:4317", "http 127.0.0.1:4318"},
		HTTPEndpoint: "http://127.0.0.1:4318",
		Now:          func() time.Time { return time.Unix(0, base) },
		Color:        true,
		Renderer:     asciiRenderer(),
	}
}

func fixedSource(s *engine.Snapshot) Source {
	return SourceFunc(func(time.Time) *engine.Snapshot { return s })
}

// startTUI runs m in a teatest program of the test size and waits for the first frame that shows
// want.
func startTUI(t *testing.T, m Model, want string) *teatest.TestModel {
	t.Helper()
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(testW, testH))
	waitFor(t, tm, want)
	return tm
}

func waitFor(t *testing.T, tm *teatest.TestModel, want string) {
	t.Helper()
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte(want)) },
		teatest.WithDuration(5*time.Second), teatest.WithCheckInterval(10*time.Millisecond))
}

func press(s string) tea.KeyMsg {
	switch s {
	case "enter":
		return tea.KeyMsg{Type: tea.KeyEnter}
	case "esc":
		return tea.KeyMsg{Type: tea.KeyEsc}
	case "tab":
		return tea.KeyMsg{Type: tea.KeyTab}
	case "shift+tab":
		return tea.KeyMsg{Type: tea.KeyShiftTab}
	case "space":
		return tea.KeyMsg{Type: tea.KeySpace, Runes: []rune{' '}}
	case "down":
		return tea.KeyMsg{Type: tea.KeyDown}
	case "pgdown":
		return tea.KeyMsg{Type: tea.KeyPgDown}
	case "backspace":
		return tea.KeyMsg{Type: tea.KeyBackspace}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)}
}

// finalView quits the program and returns its last screen.
func finalView(t *testing.T, tm *teatest.TestModel) string {
	t.Helper()
	if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
	fm := tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second))
	return fm.View()
}

func requireGolden(t *testing.T, view string) {
	t.Helper()
	for i, l := range strings.Split(view, "\n") {
		if w := lipgloss.Width(l); w > testW {
			t.Errorf("line %d is %d cells wide, more than the terminal's %d: %q", i, w, testW, l)
		}
	}
	// Trailing spaces are kept: they are part of the fixed-size frame.
	golden.RequireEqual(t, []byte(view+"\n"))
}

func TestDependenciesScreenGolden(t *testing.T) {
	tm := startTUI(t, New(testOptions(fixedSource(fakeSnapshot(0)))), "WORST")
	view := finalView(t, tm)
	for _, want := range []string{"▲ WORST http://dep:8080", "27.00x", "100% 503", "[1 Dependencies]"} {
		if !strings.Contains(view, want) {
			t.Errorf("dependencies screen lacks %q:\n%s", want, view)
		}
	}
	requireGolden(t, view)
}

func TestOperationsScreenGolden(t *testing.T) {
	tm := startTUI(t, New(testOptions(fixedSource(fakeSnapshot(0)))), "WORST")
	tm.Send(press("tab"))
	waitFor(t, tm, "[2 Operations")
	view := finalView(t, tm)
	if !strings.Contains(view, "503 503 503") {
		t.Errorf("operations screen shows no attempt outcomes:\n%s", view)
	}
	requireGolden(t, view)
}

func TestFindingsScreenGolden(t *testing.T) {
	tm := startTUI(t, New(testOptions(fixedSource(fakeSnapshot(0)))), "WORST")
	tm.Send(press("3"))
	waitFor(t, tm, "evidence")
	view := finalView(t, tm)
	for _, want := range []string{">‼  retry-amplification     edge → api → adapter → http://dep:8080", " !  post-deadline-work      edge → http://api:8080", " ·  no-backoff              web → http://pricing:8080",
		"layers=edge x3 -> api x3 -> adapter x3", "action    let one layer own retries"} {
		if !strings.Contains(view, want) {
			t.Errorf("findings screen lacks %q:\n%s", want, view)
		}
	}
	requireGolden(t, view)
}

// TestDrillIntoTraceGolden is the path a user takes mid-incident: findings, enter on the
// amplification finding, the waterfall with the 27 and its three layers.
func TestDrillIntoTraceGolden(t *testing.T) {
	tm := startTUI(t, New(testOptions(fixedSource(fakeSnapshot(0)))), "WORST")
	tm.Send(press("3"))
	waitFor(t, tm, "evidence")
	tm.Send(press("enter"))
	waitFor(t, tm, "27 calls to http://dep:8080")
	view := finalView(t, tm)
	for _, want := range []string{"3 x 3 x 3 = 27 calls to http://dep:8080", "layers: edge x3 -> api x3 -> adapter x3",
		"#1/3 initial 503", "#3/3 retry 503", "deadline at +1.00s", "42 late", "[4 Trace]"} {
		if !strings.Contains(view, want) {
			t.Errorf("trace screen lacks %q:\n%s", want, view)
		}
	}
	// The cursor lands on the first span the finding names: a call to the dependency.
	sel := selectedLine(view)
	if !strings.Contains(sel, "◆") || !strings.Contains(sel, "#1/3") {
		t.Errorf("cursor is not on the first offending span: %q", sel)
	}
	requireGolden(t, view)
}

func selectedLine(view string) string {
	for _, l := range strings.Split(view, "\n") {
		if strings.HasPrefix(l, ">") {
			return l
		}
	}
	return ""
}

// TestDrillInAndBack walks findings → trace → span and back with esc.
func TestDrillInAndBack(t *testing.T) {
	tm := startTUI(t, New(testOptions(fixedSource(fakeSnapshot(0)))), "WORST")
	tm.Send(press("3"))
	waitFor(t, tm, "evidence")
	tm.Send(press("enter"))
	waitFor(t, tm, "27 calls to")
	tm.Send(press("enter"))
	waitFor(t, tm, "attributes (")
	tm.Send(press("esc"))
	tm.Send(press("esc"))
	view := finalView(t, tm)
	if !strings.Contains(view, "[3 Findings") || !strings.Contains(view, "evidence") {
		t.Errorf("two esc from the span detail did not return to findings:\n%s", view)
	}
}

func TestSpanDetailGolden(t *testing.T) {
	m := drive(t, New(testOptions(fixedSource(fakeSnapshot(0)))), tea.WindowSizeMsg{Width: testW, Height: 45},
		press("3"), press("enter"), press("enter"))
	view := m.View()
	for _, want := range []string{"span_id     ", "attempt     #1 of 3 (initial)", "http.response.status_code = 503",
		"resource", "service.instance.id = adapter-0", "links (0)", "findings naming this span (1)"} {
		if !strings.Contains(view, want) {
			t.Errorf("span detail lacks %q:\n%s", want, view)
		}
	}
	requireGolden(t, view)
}

func TestEmptyStateGolden(t *testing.T) {
	opt := testOptions(fixedSource(&engine.Snapshot{}))
	started := make(chan struct{}, 1)
	opt.StartDemo = func() error { started <- struct{}{}; return nil }
	tm := startTUI(t, New(opt), "No traces yet")
	view := ""
	tm.Send(press("d"))
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("d did not start the demo")
	}
	waitFor(t, tm, "Demo traffic is starting")
	view = finalView(t, tm)
	for _, want := range []string{"grpc 127.0.0.1:4317", "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318"} {
		if !strings.Contains(view, want) {
			t.Errorf("empty state lacks %q:\n%s", want, view)
		}
	}
	requireGolden(t, view)
}

func TestHelpOverlayGolden(t *testing.T) {
	tm := startTUI(t, New(testOptions(fixedSource(fakeSnapshot(0)))), "WORST")
	tm.Send(press("?"))
	waitFor(t, tm, "Keys on Dependencies")
	view := finalView(t, tm)
	for _, want := range []string{"freeze view", "export trace", "sort column", "filter", "quit"} {
		if !strings.Contains(view, want) {
			t.Errorf("help lacks %q:\n%s", want, view)
		}
	}
	requireGolden(t, view)
}

func TestFilterFlowGolden(t *testing.T) {
	tm := startTUI(t, New(testOptions(fixedSource(fakeSnapshot(0)))), "WORST")
	tm.Send(press("/"))
	tm.Type("dep=pricing")
	tm.Send(press("enter"))
	waitFor(t, tm, "filter: dep=pricing")
	view := finalView(t, tm)
	if strings.Contains(view, "http://reviews:8080") || !strings.Contains(view, "http://pricing:8080") {
		t.Errorf("filter dep=pricing did not keep only pricing:\n%s", view)
	}
	requireGolden(t, view)
}

func TestTooSmallTerminal(t *testing.T) {
	tm := startTUI(t, New(testOptions(fixedSource(fakeSnapshot(0)))), "WORST")
	tm.Send(tea.WindowSizeMsg{Width: 60, Height: 20})
	waitFor(t, tm, "at least 80x24")
	tm.Send(tea.WindowSizeMsg{Width: 80, Height: 24})
	waitFor(t, tm, "WORST")
	view := finalView(t, tm)
	lines := strings.Split(view, "\n")
	if len(lines) != 24 {
		t.Errorf("80x24 frame has %d lines", len(lines))
	}
	for i, l := range lines {
		if w := lipgloss.Width(l); w > 80 {
			t.Errorf("line %d is %d wide: %q", i, w, l)
		}
	}
	requireGolden(t, view)
}
