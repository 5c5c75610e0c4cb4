package tui

import (
	"fmt"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/internal/termsafe"
	"github.com/stormwatch/stormwatch/spans"
)

// MinWidth and MinHeight are the smallest terminal the dashboard draws in; below it says so.
const (
	MinWidth  = 80
	MinHeight = 24
)

// DefaultRefresh is how often a new snapshot is pulled: fast enough to watch a storm form, slow
// enough that taking snapshots never competes with ingestion.
const DefaultRefresh = 250 * time.Millisecond

// maxRefresh bounds how far the refresh backs off when snapshots are expensive to apply.
const maxRefresh = 2 * time.Second

// idleRefresh is the refresh while the analysis does not change: only the sparklines move then,
// once a second, and every frame drawn for nothing still costs the process CPU and garbage.
const idleRefresh = time.Second

// Source supplies snapshots. Snapshot is called from a tea.Cmd goroutine, at most once per refresh
// interval, and must neither block for long nor wait for ingestion.
type Source interface {
	Snapshot(now time.Time) *engine.Snapshot
}

// SourceFunc adapts a function to [Source].
type SourceFunc func(now time.Time) *engine.Snapshot

// Snapshot calls f.
func (f SourceFunc) Snapshot(now time.Time) *engine.Snapshot { return f(now) }

// ReplayControl steers a recording being played into the dashboard. Its methods are called from the
// UI goroutine and must return at once.
type ReplayControl interface {
	Paused() bool
	SetPaused(bool)
	Speed() float64
	SetSpeed(float64)
	// Progress is a short phrase for the header, e.g. "1,200/5,000 spans" or "done".
	Progress() string
}

// Options configure the dashboard. Only Source is required; the zero value of everything else is
// sensible.
type Options struct {
	Source Source
	// Refresh is the snapshot interval; 0 means DefaultRefresh.
	Refresh time.Duration
	// Endpoints are shown in the header and the empty state, e.g. "grpc 127.0.0.1:4317".
	Endpoints []string
	// HTTPEndpoint is the OTLP/HTTP base URL for the exporter example in the empty state.
	HTTPEndpoint string
	// Upstream, when set, says where else traces come from and whether it answers (a Jaeger the
	// dashboard polls), for the header: unhealthy is shown as a warning.
	Upstream func() (status string, healthy bool)
	// Replay is set when a recording is being played; nil means live.
	Replay ReplayControl
	// StartDemo starts built-in demo traffic and returns at once; nil hides the demo key.
	StartDemo func() error
	// Clear drops what the analyzer holds (the C key); nil makes C say it is not available.
	Clear func()
	// Dropped reports spans the collector refused (overload, bad data), for the header.
	Dropped func() int64
	// IgnoredSignals reports the metrics and logs export requests received and dropped, for the
	// status line; nil when there is no collector (a replay).
	IgnoredSignals func() int64
	// ExportDir is where `e` writes trace files; "" is the working directory.
	ExportDir string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Color false renders without colour (NO_COLOR); bold and reverse video remain.
	Color bool
	// Renderer builds the styles; nil uses lipgloss's default renderer (the program's stdout).
	Renderer *lipgloss.Renderer
}

// screen is the state the root switches on.
type screen int

const (
	screenDeps screen = iota
	screenOps
	screenFindings
	screenTrace
	screenSpan
	screenEmpty // only used to pick help keys; the empty body replaces the list screens
)

var screenNames = [...]string{"Dependencies", "Operations", "Findings", "Trace", "Span"}

// shared is the context every screen reads: the styles and the keys. It never changes after New,
// so copies of the model may share it; sizes live in each model (SetSize).
type shared struct {
	theme Theme
	keys  *KeyMap
}

// Messages. Children ask the root to navigate by returning a command that yields one of these.
type (
	// snapshotMsg carries a snapshot pulled by the tick. quietAt, when set, is when Filter last
	// held back a snapshot with the shown one's counts: no span arrived between that time and the
	// shown snapshot's, so the rate counts the time since.
	snapshotMsg struct {
		snap    *engine.Snapshot
		quietAt int64
	}
	openTraceMsg struct {
		trace spans.TraceID
		focus []spans.SpanID
	}
	traceLoadedMsg struct {
		view  *engine.TraceView
		trace spans.TraceID
		focus []spans.SpanID
	}
	openSpanMsg struct{ index int }
	showOpsMsg  struct{ filter string }
	exportedMsg struct {
		path  string
		spans int
		err   error
	}
	demoStartedMsg struct{ err error }
	clearedMsg     struct{}
	statusMsg      string
)

// Model is the root of the dashboard.
type Model struct {
	opt    Options
	ctx    *shared
	help   help.Model
	screen screen
	back   []screen

	snap    *engine.Snapshot // what is shown
	pending *engine.Snapshot // newest snapshot while the view is frozen
	frozen  bool
	refresh time.Duration // the current snapshot interval (see the snapshotMsg case)

	showHelp  bool
	input     lineInput
	cmd       textinput.Model // the `:` command line (command.go)
	cmdActive bool
	status    string
	termW     int
	termH     int
	bodyH     int // between header and footer

	// spans/s, from consecutive snapshots.
	rate      float64
	lastCount int
	lastAt    int64
	demoOn    bool
	// seen are the figures from outside the snapshot as of the last one taken (see Filter).
	seen outsideFigures

	deps     depsModel
	ops      opsModel
	findings findingsModel
	trace    traceModel
	span     spanModel
}

// New builds the dashboard. Run it with tea.NewProgram(m, tea.WithAltScreen(), tea.WithMouseCellMotion(),
// tea.WithFilter(Filter)).
func New(opt Options) Model {
	if opt.Refresh <= 0 {
		opt.Refresh = DefaultRefresh
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	r := opt.Renderer
	if r == nil {
		r = lipgloss.DefaultRenderer()
	}
	keys := DefaultKeyMap()
	m := Model{opt: opt}
	m.ctx = &shared{theme: NewTheme(r, opt.Color), keys: &keys}
	m.help = help.New()
	m.help.Styles = m.ctx.theme.Help
	m.help.ShortSeparator = "  "
	m.deps = newDepsModel(m.ctx)
	m.ops = newOpsModel(m.ctx)
	m.findings = newFindingsModel(m.ctx)
	m.trace = newTraceModel(m.ctx)
	m.span = newSpanModel(m.ctx)
	return m
}

// Init pulls the first snapshot at once; later ones come from the re-armed tick.
func (m Model) Init() tea.Cmd {
	src, now := m.opt.Source, m.opt.Now
	return func() tea.Msg { return snapshotMsg{snap: pull(src, now())} }
}

func pull(src Source, now time.Time) *engine.Snapshot {
	if src == nil {
		return nil
	}
	return src.Snapshot(now)
}

// tick re-arms the snapshot pull: one in flight at a time, so a slow snapshot can never pile up
// requests behind it.
func (m Model) tick(quietAt int64) tea.Cmd {
	src, now := m.opt.Source, m.opt.Now
	d := m.refresh
	if d <= 0 {
		d = m.opt.Refresh
	}
	return tea.Tick(d, func(time.Time) tea.Msg { return snapshotMsg{snap: pull(src, now()), quietAt: quietAt} })
}

// Filter keeps the dashboard from handing Bubble Tea a frame equal to the one on screen. Run the
// model with tea.WithFilter(Filter). Bubble Tea draws after every message the model takes, and
// its renderer (v1) keeps a frame equal to the last one in its buffer: it copies the whole frame
// to compare it again on every frame tick (tea.WithFPS) until a different frame comes.
// An idle dashboard would pay that all the time. A snapshot that changes nothing on screen (see
// unchangedBy) does not reach the model: Filter re-arms the tick as a tea.BatchMsg, which Bubble
// Tea runs without an update or a draw.
func Filter(model tea.Model, msg tea.Msg) tea.Msg {
	sm, ok := msg.(snapshotMsg)
	if !ok {
		return msg
	}
	m, ok := model.(Model)
	if !ok || !m.unchangedBy(sm.snap) {
		return msg
	}
	m.refresh = max(m.refresh, idleRefresh)
	quiet := sm.quietAt
	if !m.frozen && sm.snap != nil {
		quiet = sm.snap.AtUnixNano
	}
	return tea.BatchMsg{m.tick(quiet)}
}

// unchangedBy reports whether taking snap would leave the frame as it is: the same data, counters
// and sparklines (where the screen shows them), a rate that shows 0 and stays there, and the same
// figures from outside the snapshot. It errs towards drawing: a frame drawn for nothing costs one
// draw, a frame not drawn would show stale figures.
func (m Model) unchangedBy(snap *engine.Snapshot) bool {
	if snap == nil || snap == m.snap {
		return true
	}
	if m.frozen {
		// The frozen view shows m.snap: only new data (newer data waiting) changes it.
		return sameData(m.snap, snap)
	}
	old := m.snap
	return sameData(old, snap) && sameSlice(old.Report.Notes, snap.Report.Notes) &&
		sameSlice(old.Report.Groups, snap.Report.Groups) && old.Report.Input == snap.Report.Input &&
		sameStats(old.Stats, snap.Stats) && old.HeldOperations == snap.HeldOperations &&
		int(m.rate+0.5) == 0 && (!m.showsTrend() || m.deps.sameTrend(snap)) && m.outside() == m.seen
}

// sameStats compares the store figures the screens show. The two times that follow the clock
// (settled and judged through) move with every snapshot of an idle analyzer, and no screen shows
// them.
func sameStats(a, b engine.StoreStats) bool {
	a.SettledThroughUnixNano, a.WindowThroughUnixNano = 0, 0
	b.SettledThroughUnixNano, b.WindowThroughUnixNano = 0, 0
	return a == b
}

// showsTrend reports whether the frame shows the sparklines: only the Dependencies screen does.
// Elsewhere a snapshot whose only change is the history is held back, so a screen goes quiet as
// soon as what it shows stops changing; back on Dependencies, the sparklines catch up with the
// next snapshot, at most idleRefresh later.
func (m Model) showsTrend() bool { return m.screen == screenDeps && !m.showHelp }

// outsideFigures are what the header shows from outside the snapshot.
type outsideFigures struct {
	dropped      int64
	upstream     string
	upstreamOK   bool
	replay       string
	replayPaused bool
	replaySpeed  float64
}

func (m Model) outside() outsideFigures {
	var f outsideFigures
	if m.opt.Dropped != nil {
		f.dropped = m.opt.Dropped()
	}
	if m.opt.Upstream != nil {
		f.upstream, f.upstreamOK = m.opt.Upstream()
	}
	if r := m.opt.Replay; r != nil {
		f.replay, f.replayPaused, f.replaySpeed = r.Progress(), r.Paused(), r.Speed()
	}
	return f
}

// Update implements tea.Model. Whatever the message, a rebuild of the operations list it asked
// for runs as a command (see opsModel.takeBuild), so the update itself stays short.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	next, cmd := m.update(msg)
	mm, ok := next.(Model)
	if !ok {
		return next, cmd
	}
	if build := mm.ops.takeBuild(); build != nil {
		cmd = tea.Batch(cmd, build)
	}
	return mm, cmd
}

func (m Model) update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case opsRowsMsg:
		m.ops.setRows(msg)
		// A sort off the update loop still costs a core while it runs: the refresh backs off
		// for it as for a snapshot that is expensive to apply.
		m.refresh = min(max(m.refresh, 5*msg.took), maxRefresh)
		return m, nil

	case tea.WindowSizeMsg:
		m.setSize(msg.Width, msg.Height)
		return m, nil

	case snapshotMsg:
		m.seen = m.outside()
		if m.frozen {
			// Only data the view does not show counts as waiting; the analyzer hands out fresh
			// snapshot values that share unchanged data.
			if msg.snap != nil && msg.snap != m.snap && !sameData(m.snap, msg.snap) {
				m.pending = msg.snap
			}
		} else {
			// The refresh backs off when applying a snapshot is expensive (a re-sort of a hundred
			// thousand operations), so the dashboard never takes more than a fifth of a core
			// however much it holds. Only the duration is measured: no decision depends on the
			// time of day.
			began := time.Now()
			idle := sameData(m.snap, msg.snap)
			m.lastAt = max(m.lastAt, msg.quietAt)
			m.apply(msg.snap)
			m.refresh = min(max(m.opt.Refresh, 5*time.Since(began)), maxRefresh)
			if idle {
				m.refresh = max(m.refresh, idleRefresh)
			}
		}
		return m, m.tick(0)

	case openTraceMsg:
		snap := m.snap
		return m, func() tea.Msg {
			v, ok := snap.Trace(msg.trace)
			if !ok {
				return statusMsg(fmt.Sprintf("trace %s is no longer held (evicted or cleared)", msg.trace))
			}
			return traceLoadedMsg{view: v, trace: msg.trace, focus: msg.focus}
		}

	case traceLoadedMsg:
		m.trace.load(msg.view, m.snap, msg.focus)
		m.go2(screenTrace)
		return m, nil

	case openSpanMsg:
		if v := m.trace.view; v != nil && msg.index >= 0 && msg.index < len(v.Spans) {
			m.span.load(v, msg.index, m.trace.ann)
			m.go2(screenSpan)
		}
		return m, nil

	case showOpsMsg:
		m.go2(screenOps)
		m.ops.setFilter(msg.filter)
		return m, nil

	case exportedMsg:
		if msg.err != nil {
			m.status = "export failed: " + msg.err.Error()
		} else {
			m.status = fmt.Sprintf("exported %d spans to %s (OTLP/JSON: stormwatch analyze or replay it)", msg.spans, msg.path)
		}
		return m, nil

	case demoStartedMsg:
		if msg.err != nil {
			m.status = "demo: " + msg.err.Error()
			m.demoOn = false
		} else {
			m.status = "demo traffic started: data appears within a few seconds"
		}
		return m, nil

	case clearedMsg:
		m.status = "cleared: showing only what arrives from now on"
		m.pending = nil
		m.trace.unload()
		if m.screen == screenTrace || m.screen == screenSpan {
			m.screen, m.back = screenDeps, nil
			m.ops.release()
		}
		src, now := m.opt.Source, m.opt.Now
		return m, func() tea.Msg { return snapshotMsg{snap: pull(src, now())} }

	case statusMsg:
		m.status = string(msg)
		return m, nil

	case tea.MouseMsg:
		return m.forward(msg)

	case tea.KeyMsg:
		if msg.Type == tea.KeyRunes && len(msg.Runes) > 1 && !msg.Paste {
			return m.keys(msg)
		}
		return m.key(msg)
	}
	return m, nil
}

// keys applies every key of a batched read, in order. The terminal reader hands several runes
// that arrive in one read (keys typed or held faster than a frame, or sent at once over SSH) to
// Update as one message; matched whole against the bindings, "jjj" would be no key at all. Each
// rune is one key press - typed into the filter or the command line just the same, once a key of
// the batch has opened one. A bracketed paste stays whole.
func (m Model) keys(msg tea.KeyMsg) (tea.Model, tea.Cmd) {
	var cmds []tea.Cmd
	for _, r := range msg.Runes {
		one := msg
		one.Runes = []rune{r}
		if r == ' ' {
			one.Type = tea.KeySpace // as the reader reports a space on its own
		}
		next, cmd := m.key(one)
		m = next.(Model)
		if cmd != nil {
			cmds = append(cmds, cmd)
		}
	}
	switch len(cmds) {
	case 0:
		return m, nil
	case 1:
		return m, cmds[0]
	}
	return m, tea.Sequence(cmds...)
}

func (m *Model) setSize(w, h int) {
	m.termW, m.termH = w, h
	m.help.Width = w
	m.bodyH = max(h-headerLines-footerLines, 1)
	m.deps.SetSize(w, m.bodyH)
	m.ops.SetSize(w, m.bodyH)
	m.findings.SetSize(w, m.bodyH)
	m.trace.SetSize(w, m.bodyH)
	m.span.SetSize(w, m.bodyH)
}

// apply makes snap the shown snapshot; the children redo their sorting and filtering here, once
// per snapshot, never per frame.
func (m *Model) apply(snap *engine.Snapshot) {
	if snap == nil || snap == m.snap {
		return
	}
	if m.snap != nil && snap.AtUnixNano > m.lastAt && m.lastAt != 0 {
		count := snap.Stats.SpansHeld + snap.Stats.EvictedSpans
		dt := float64(snap.AtUnixNano-m.lastAt) / 1e9
		if d := count - m.lastCount; d >= 0 && dt > 0 {
			// Smoothed over about two seconds: exporters send in bursts, and a number that jumps
			// between 0 and thousands four times a second cannot be read.
			inst := float64(d) / dt
			alpha := min(dt/2, 1)
			m.rate += alpha * (inst - m.rate)
		}
	}
	m.lastCount = snap.Stats.SpansHeld + snap.Stats.EvictedSpans
	m.lastAt = snap.AtUnixNano
	prev := m.snap
	m.snap = snap
	m.trace.snap = snap
	if sameData(prev, snap) {
		// The analyzer hands out the same immutable report and operations while nothing changed;
		// only the counters in the header and the sparklines move.
		m.deps.setHistory(snap)
		return
	}
	m.deps.SetSnapshot(snap)
	if m.screen == screenOps {
		m.ops.SetSnapshot(snap)
	} else {
		m.ops.deferSnapshot(snap)
	}
	m.findings.SetSnapshot(snap)
}

// sameData reports whether b shares a's report and operations (same backing arrays), which is how
// the analyzer says "nothing changed" without a version number.
func sameData(a, b *engine.Snapshot) bool {
	if a == nil || b == nil {
		return false
	}
	return a.SameOperations(b) && sameSlice(a.Report.Dependencies, b.Report.Dependencies) &&
		sameSlice(a.Report.Findings, b.Report.Findings)
}

func sameSlice[T any](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	return len(a) == 0 || &a[0] == &b[0]
}

// go2 switches screens, remembering where esc goes back to.
func (m *Model) go2(s screen) {
	if s == m.screen {
		return
	}
	if s == screenTrace || s == screenSpan {
		m.back = append(m.back, m.screen)
	} else {
		m.back = nil
	}
	m.screen = s
	switch s {
	case screenOps:
		m.ops.refresh()
	case screenDeps, screenFindings:
		// The trace and span screens are opened from the list and go back to it: only another
		// list lets go of the operations.
		m.ops.release()
	}
}

func (m *Model) goBack() bool {
	if len(m.back) == 0 {
		return false
	}
	m.screen = m.back[len(m.back)-1]
	m.back = m.back[:len(m.back)-1]
	if m.screen == screenOps {
		m.ops.refresh()
	}
	return true
}

func (m Model) empty() bool {
	s := m.snap
	return s == nil || (s.Stats.SpansHeld == 0 && len(s.Report.Dependencies) == 0 && s.HeldOperations == 0 && len(s.Report.Findings) == 0)
}

// listScreen reports whether the active screen's body is replaced by the empty state.
func (m Model) showingEmpty() bool {
	return m.empty() && m.screen != screenTrace && m.screen != screenSpan
}

func (m Model) key(msg tea.KeyMsg) (tea.Model, tea.Cmd) {
	k := m.ctx.keys
	if m.cmdActive {
		return m.editCommand(msg)
	}
	if m.input.active {
		return m.editInput(msg)
	}
	if m.showHelp {
		// Any key closes help; q still quits so nobody is trapped.
		m.showHelp = false
		if key.Matches(msg, k.Quit) {
			return m, tea.Quit
		}
		return m, nil
	}
	m.status = ""
	switch {
	case key.Matches(msg, k.Quit):
		return m, tea.Quit
	case key.Matches(msg, k.Help):
		m.showHelp = true
		return m, nil
	case key.Matches(msg, k.Command):
		return m, m.openCommandLine()
	case key.Matches(msg, k.Filter):
		if m.showingEmpty() || m.screen == screenSpan {
			return m, nil
		}
		m.input = lineInput{active: true, prompt: "/", value: m.currentFilter()}
		if m.screen == screenTrace {
			m.input.prompt = "search trace: "
		}
		return m, nil
	case key.Matches(msg, k.Back):
		if m.currentFilter() != "" && m.screen != screenSpan {
			m.setCurrentFilter("")
			return m, nil
		}
		m.goBack()
		return m, nil
	case key.Matches(msg, k.NextTab):
		m.cycle(1)
		return m, nil
	case key.Matches(msg, k.PrevTab):
		m.cycle(-1)
		return m, nil
	case key.Matches(msg, k.Deps):
		m.go2(screenDeps)
		return m, nil
	case key.Matches(msg, k.Ops):
		m.go2(screenOps)
		return m, nil
	case key.Matches(msg, k.Findings):
		m.go2(screenFindings)
		return m, nil
	case key.Matches(msg, k.Trace):
		if m.trace.view != nil {
			m.go2(screenTrace)
		} else {
			m.status = "no trace open: pick one with enter on Operations or Findings"
		}
		return m, nil
	case key.Matches(msg, k.Pause):
		m.frozen = !m.frozen
		if !m.frozen && m.pending != nil {
			m.apply(m.pending)
			m.pending = nil
		}
		return m, nil
	case key.Matches(msg, k.Clear):
		if m.opt.Clear == nil {
			m.status = "clear is not available here"
			return m, nil
		}
		clear := m.opt.Clear
		return m, func() tea.Msg { clear(); return clearedMsg{} }
	case key.Matches(msg, k.Export):
		return m, m.export()
	case m.opt.Replay != nil && key.Matches(msg, k.ReplayPause):
		m.opt.Replay.SetPaused(!m.opt.Replay.Paused())
		return m, nil
	case m.opt.Replay != nil && key.Matches(msg, k.Faster):
		m.opt.Replay.SetSpeed(clampSpeed(m.opt.Replay.Speed() * 2))
		return m, nil
	case m.opt.Replay != nil && key.Matches(msg, k.Slower):
		m.opt.Replay.SetSpeed(clampSpeed(m.opt.Replay.Speed() / 2))
		return m, nil
	case key.Matches(msg, k.Demo) && m.showingEmpty() && m.opt.StartDemo != nil:
		if m.demoOn {
			return m, nil
		}
		m.demoOn = true
		m.status = "starting demo traffic..."
		start := m.opt.StartDemo
		return m, func() tea.Msg { return demoStartedMsg{err: start()} }
	}
	return m.forward(msg)
}

func clampSpeed(s float64) float64 {
	switch {
	case s < 0.125:
		return 0.125
	case s > 64:
		return 64
	}
	return s
}

func (m *Model) cycle(d int) {
	n := 3
	if m.trace.view != nil {
		n = 4
	}
	cur := int(m.screen)
	if m.screen == screenSpan {
		cur = int(screenTrace)
	}
	next := screen(((cur+d)%n + n) % n)
	m.go2(next)
}

func (m Model) currentFilter() string {
	switch m.screen {
	case screenDeps:
		return m.deps.filter.raw
	case screenOps:
		return m.ops.filter.raw
	case screenFindings:
		return m.findings.filter.raw
	case screenTrace:
		return m.trace.search.raw
	}
	return ""
}

func (m *Model) setCurrentFilter(s string) {
	switch m.screen {
	case screenDeps:
		m.deps.setFilter(s)
	case screenOps:
		m.ops.setFilter(s)
	case screenFindings:
		m.findings.setFilter(s)
	case screenTrace:
		m.trace.setSearch(s)
	}
}

func (m Model) editInput(msg tea.KeyMsg) (tea.Model, tea.Cmd) {
	if msg.Type == tea.KeyCtrlC {
		return m, tea.Quit
	}
	done, cancelled := m.input.update(msg)
	switch {
	case cancelled:
		m.setCurrentFilter("")
	case done && m.screen == screenTrace:
		m.setCurrentFilter(m.input.value)
		m.trace.nextMatch(1, true)
	default:
		// Lists filter as you type: the work is one pass over the rows per keystroke.
		if m.screen != screenTrace {
			m.setCurrentFilter(m.input.value)
		}
	}
	return m, nil
}

// forward hands msg to the active child and keeps what it returns.
func (m Model) forward(msg tea.Msg) (tea.Model, tea.Cmd) {
	var cmd tea.Cmd
	switch m.screen {
	case screenDeps:
		m.deps, cmd = m.deps.Update(msg)
	case screenOps:
		m.ops, cmd = m.ops.Update(msg)
	case screenFindings:
		m.findings, cmd = m.findings.Update(msg)
	case screenTrace:
		m.trace, cmd = m.trace.Update(msg)
	case screenSpan:
		m.span, cmd = m.span.Update(msg)
	}
	return m, cmd
}

// View implements tea.Model.
func (m Model) View() string {
	if m.termW == 0 {
		return "starting stormwatch..."
	}
	if m.termW < MinWidth || m.termH < MinHeight {
		return fmt.Sprintf("stormwatch needs a terminal of at least %dx%d; this one is %dx%d.\nEnlarge the window (or zoom out), or press q to quit.",
			MinWidth, MinHeight, m.termW, m.termH)
	}
	var body string
	switch {
	case m.showHelp:
		body = m.helpView()
	case m.showingEmpty():
		body = m.emptyView()
	default:
		switch m.screen {
		case screenDeps:
			body = m.deps.View()
		case screenOps:
			body = m.ops.View()
		case screenFindings:
			body = m.findings.View()
		case screenTrace:
			body = m.trace.View()
		case screenSpan:
			body = m.span.View()
		}
	}
	// Names, attributes and URLs in the frame come from the data: whatever escape sequence,
	// bidi override or zero-width character they carry is shown, not obeyed (the cells are made
	// safe as they are measured; this is the guarantee for the rest).
	return termsafe.Frame(m.headerView() + "\n" + body + "\n" + m.footerView())
}

func (m Model) helpKeys() screenKeys {
	s := m.screen
	if m.showingEmpty() {
		s = screenEmpty
	}
	return screenKeys{k: m.ctx.keys, s: s, replay: m.opt.Replay != nil, demo: m.opt.StartDemo != nil}
}
